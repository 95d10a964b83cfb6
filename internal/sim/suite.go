package sim

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Trace is one openb pod list to replay.
type Trace struct {
	Workload string
	Pods     []Pod
}

// OpenbSuite is every (trace, policy, seed) run of `sim openb`.
type OpenbSuite struct {
	Nodes     []Node
	Traces    []Trace
	Policies  []string
	Seeds     []int64
	Tune      float64
	Replicate int
	// Workers run in parallel (0: one per CPU); results do not depend on it.
	Workers int
}

// Run replays every run; progress (may be nil) hears of each finished run.
func (s OpenbSuite) Run(progress func(done, total int, r *OpenbResult)) ([]*OpenbResult, error) {
	for _, p := range s.Policies {
		if err := CheckPolicy(p); err != nil {
			return nil, err
		}
	}
	type job struct {
		i     int
		trace *Trace
		pol   string
		seed  int64
	}
	var jobs []job
	for ti := range s.Traces {
		for _, p := range s.Policies {
			for _, seed := range s.Seeds {
				jobs = append(jobs, job{len(jobs), &s.Traces[ti], p, seed})
			}
		}
	}
	out := make([]*OpenbResult, len(jobs))
	errs := make([]error, len(jobs))
	workers := s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ch := make(chan job)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				r, err := RunOpenb(OpenbRun{Workload: j.trace.Workload, Nodes: s.Nodes, Pods: j.trace.Pods, Policy: j.pol, Seed: j.seed, Tune: s.Tune, Replicate: s.Replicate}, nil)
				out[j.i], errs[j.i] = r, err
				mu.Lock()
				done++
				if progress != nil && err == nil {
					progress(done, len(jobs), r)
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseSeeds reads "42-51", "42,43" or "42".
func ParseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, bad("seeds", "seed-list", "seeds %q: %q is not a seed or a range such as 42-51", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a || b-a > 10000 {
				return nil, bad("seeds", "seed-list", "seeds %q: %q is not a range such as 42-51", s, part)
			}
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil, bad("seeds", "seed-list", "no seeds in %q", s)
	}
	return out, nil
}

// WorkloadName is a pod file's workload name: its base name without .csv.
func WorkloadName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		path = path[i+1:]
	}
	return strings.TrimSuffix(path, ".csv")
}

// String summarises a run on one line (progress).
func (r *OpenbResult) String() string {
	return fmt.Sprintf("%s %s seed %d: %d pods, %.2f%% allocated at 130%%, %.2f s", r.Workload, r.Policy, r.Seed, r.Pods, r.Alloc[130], r.Seconds)
}
