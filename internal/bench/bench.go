// Package bench measures the control plane end to end: real servers
// (devcluster), real HTTP on loopback, real Raft with fsync. Figures in
// docs/benchmarks.md come from `jobfabric bench`, which calls this package.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/trace"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// SubmitOptions configures a job-submit benchmark.
type SubmitOptions struct {
	Servers     int           // 1, 3 or 5
	Concurrency int           // concurrent clients
	Duration    time.Duration // measured time
	Warmup      time.Duration // unmeasured time first
	// Rate, when > 0, paces submits open-loop at this many per second:
	// submit i is due at start + i/Rate and its latency is counted from
	// then, so a slow answer delays (and is charged to) the ones behind it
	// instead of hiding them (no coordinated omission).
	Rate float64
	// ViaFollower sends requests to a follower (forwarded to the leader).
	ViaFollower bool
	// Preload submits this many jobs before the run (64 at a time, not
	// measured): the state then holds them, pending behind the 4 placed.
	Preload int
	Dir     string // data directory (default: a temporary one)
	// LogStore is every server's raft log store, "wal" or "bolt" (empty:
	// the server's default).
	LogStore string
	// Readers, when > 0, poll ReadRoutes (names of bench.ReadRoutes)
	// on the leader during the run, each reader closed-loop, round-robin
	// over the routes: what clients reading cost the submits (issue 18).
	Readers    int
	ReadRoutes []string
	// Trace, when set, receives a Go execution trace of the measured
	// window (runtime/trace: where each request waited, for a P, a lock,
	// the disk or the network; `go tool trace`) of this process: with
	// Processes, the load generator's only.
	Trace io.Writer
	// Processes runs each member as a `jobfabric server` process of its
	// own (devcluster.StartProcs), as production does, instead of all of
	// them in this process beside the load generator, where one collector
	// marks every member's heap and every goroutine pays its assists.
	Processes bool
	// Binary is the jobfabric binary the members run with Processes
	// (default: this one).
	Binary string
	// LeaderCPUProfile, LeaderAllocs and LeaderTrace, when set, receive
	// the leader's CPU profile, allocations (a heap profile's difference
	// over the window) and Go execution trace of the measured window, read
	// from its /debug/pprof (with Processes the leader's process alone;
	// without, the process of every member and the load).
	LeaderCPUProfile io.Writer
	LeaderAllocs     io.Writer
	LeaderTrace      io.Writer
	// LeaderHeap, when set, receives the leader's live heap at the end of
	// the measured window (a heap profile after a collection: what the
	// state holds, which every mark walks).
	LeaderHeap io.Writer
}

// SubmitResult is one run's figures.
type SubmitResult struct {
	Servers int `json:"servers"`
	// LogStore is the raft log store the leader ran, as it reports in
	// GET /v1/cluster.
	LogStore    string  `json:"logStore"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	ViaFollower bool    `json:"viaFollower"`
	Submits     int     `json:"submits"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"submitsPerSecond"`
	P50ms       float64 `json:"p50ms"`
	P90ms       float64 `json:"p90ms"`
	P99ms       float64 `json:"p99ms"`
	Maxms       float64 `json:"maxms"`
	// Cycles is how many scheduling cycles the leader ran in the measured
	// window and CycleShare the fraction of the window they took (its
	// jobfabric_scheduler_cycle_duration_seconds, scraped at both ends):
	// whether the scheduler kept pace while submits were answered.
	Cycles     int     `json:"cycles"`
	CycleShare float64 `json:"cycleShare"`
	// Processes says the members ran as processes of their own; LeaderPID
	// is the leader's process. That process, from its /metrics: its
	// collections (GCs), CPU seconds and bytes allocated in the measured
	// window, its heap in use and resident set at the window's end, and
	// its peak resident set (Linux). Without Processes that process holds
	// every member and the load generator.
	Processes        bool    `json:"processes"`
	LeaderPID        int     `json:"leaderPid"`
	GCs              int     `json:"gcs"`
	LeaderCPUSec     float64 `json:"leaderCpuSeconds"`
	LeaderAllocMiB   float64 `json:"leaderAllocMiB"`
	LeaderHeapMiB    float64 `json:"leaderHeapMiB"`
	LeaderRSSMiB     float64 `json:"leaderRssMiB"`
	LeaderPeakRSSMiB float64 `json:"leaderPeakRssMiB,omitempty"`
	// Preload is how many jobs the state held before the run; Readers
	// and Reads the readers polling meanwhile and their latency by route.
	Preload int           `json:"preload,omitempty"`
	Readers int           `json:"readers,omitempty"`
	Reads   []ReadFigures `json:"reads,omitempty"`
	// Members is every member's window (its collector, CPU, raft's
	// snapshots and timers) and SlowBursts when the submits at or over
	// the p99 were due: what the slowest 1 % waited for (issue 18).
	// WindowStart is when the measured window began (the zero of
	// SlowBursts and SnapshotsAtMs), to line them up with the members'
	// logs.
	WindowStart time.Time       `json:"windowStart"`
	Members     []MemberFigures `json:"members,omitempty"`
	SlowBursts  []SlowBurst     `json:"slowBursts,omitempty"`
}

// Submit runs the benchmark: a fresh cluster, one tenant and workspace, and
// Concurrency clients submitting jobs as fast as they are answered.
func Submit(ctx context.Context, o SubmitOptions) (_ *SubmitResult, err error) {
	if o.Servers < 1 || o.Servers > 7 {
		return nil, domain.Invalid("servers", "servers %d must be between 1 and 7", o.Servers)
	}
	if o.Concurrency < 1 || o.Concurrency > 1024 {
		return nil, domain.Invalid("concurrency", "concurrency %d must be between 1 and 1024", o.Concurrency)
	}
	if o.Rate < 0 || o.Rate > 1e6 {
		return nil, domain.Invalid("rate", "rate %g must be between 0 (closed loop) and 1000000", o.Rate)
	}
	if o.Duration <= 0 {
		return nil, domain.Invalid("duration", "duration must be positive")
	}
	if err := checkReaders(&o); err != nil {
		return nil, err
	}
	if o.ViaFollower && o.Servers < 2 {
		return nil, domain.Invalid("via-follower", "a follower needs at least 2 servers")
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "jobfabric-bench-")
		if err != nil {
			return nil, fmt.Errorf("temp dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	c, err := startMembers(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A member that died during the run is an error of the run.
		if cerr := c.close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop the servers: %w", cerr)
		}
	}()
	leaderAt, err := c.waitLeader(ctx)
	if err != nil {
		return nil, err
	}
	target := leaderAt
	if o.ViaFollower {
		target = (target + 1) % o.Servers
	}
	leaderURL := c.urls[leaderAt]
	cl := c.client(target)
	if err := seed(ctx, cl); err != nil {
		return nil, err
	}
	view, err := c.client(leaderAt).Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster view: %w", err)
	}
	var watchTok string
	if o.Readers > 0 {
		if watchTok, err = seedWatch(ctx, cl); err != nil {
			return nil, err
		}
	}
	spec := domain.JobSpec{Tenant: "bench", Workspace: "load", GPUs: 8, GPUsPerNode: 8}
	if err := preload(ctx, cl, spec, o.Preload); err != nil {
		return nil, err
	}

	var mu sync.Mutex
	var lat []time.Duration
	var subs []timed
	errs := 0
	var firstErr error
	start := time.Now()
	measureFrom := start.Add(o.Warmup)
	end := measureFrom.Add(o.Duration)
	var next atomic.Int64
	var wg sync.WaitGroup
	var scrapes sync.WaitGroup
	var profErr atomic.Pointer[error]
	membersBefore, membersAfter := make([]memberStats, o.Servers), make([]memberStats, o.Servers)
	for at, into := range map[time.Time][]memberStats{measureFrom: membersBefore, end: membersAfter} {
		for i := range o.Servers {
			scrapes.Add(1)
			go func() {
				defer scrapes.Done()
				time.Sleep(time.Until(at))
				into[i] = scrapeMember(ctx, c.urls[i], c.token)
			}()
		}
	}
	if o.Trace != nil {
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			time.Sleep(time.Until(measureFrom))
			if err := trace.Start(o.Trace); err != nil {
				return // another trace runs: the figures stand without it
			}
			time.Sleep(time.Until(end))
			trace.Stop()
		}()
	}
	for _, w := range []struct {
		to   io.Writer
		path string
	}{{o.LeaderCPUProfile, "profile"}, {o.LeaderAllocs, "allocs"}, {o.LeaderTrace, "trace"}} {
		if w.to == nil {
			continue
		}
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			time.Sleep(time.Until(measureFrom))
			secs := max(1, int(o.Duration.Round(time.Second)/time.Second))
			if err := fetchProfile(ctx, leaderURL, c.token, w.path, secs, w.to); err != nil {
				profErr.Store(&err)
			}
		}()
	}
	if o.LeaderHeap != nil {
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			time.Sleep(time.Until(end))
			if err := fetchProfile(ctx, leaderURL, c.token, "heap?gc=1", 0, o.LeaderHeap); err != nil {
				profErr.Store(&err)
			}
		}()
	}
	reads := &readLoop{base: leaderURL, adminTok: c.token, tenantTok: watchTok, routes: o.ReadRoutes,
		http: readClient(), lat: map[string][]time.Duration{}, errs: map[string]int{}}
	for i := range o.Readers {
		scrapes.Add(1)
		go func() {
			defer scrapes.Done()
			reads.run(ctx, i, measureFrom, end)
		}()
	}
	for i := 0; i < o.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]timed, 0, 4096)
			lerr := 0
			var lfirst error
			for {
				t0 := time.Now()
				if o.Rate > 0 {
					t0 = start.Add(time.Duration(float64(next.Add(1)-1) / o.Rate * float64(time.Second)))
					time.Sleep(time.Until(t0))
				}
				if t0.After(end) || ctx.Err() != nil {
					break
				}
				_, err := cl.SubmitJob(ctx, spec)
				d := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					lerr++
					if lfirst == nil {
						lfirst = err
					}
					continue
				}
				local = append(local, timed{at: t0.Sub(measureFrom), took: d})
			}
			mu.Lock()
			subs = append(subs, local...)
			errs += lerr
			if firstErr == nil {
				firstErr = lfirst
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	scrapes.Wait()
	for _, s := range subs {
		lat = append(lat, s.took)
	}
	if len(lat) == 0 {
		return nil, errors.Join(errors.New("no submit succeeded"), firstErr)
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	secs := o.Duration.Seconds()
	ms := func(q float64) float64 {
		i := int(q * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	if err := profErr.Load(); err != nil {
		return nil, *err
	}
	const mib = 1 << 20
	_, peak := procRSS(c.pids[leaderAt])
	before, after := membersBefore[leaderAt], membersAfter[leaderAt]
	return &SubmitResult{
		Servers: o.Servers, LogStore: view.LogStore, Concurrency: o.Concurrency, Rate: o.Rate, ViaFollower: o.ViaFollower,
		Submits: len(lat), Errors: errs, Seconds: secs, PerSecond: float64(len(lat)) / secs,
		P50ms: ms(0.50), P90ms: ms(0.90), P99ms: ms(0.99), Maxms: ms(1),
		Cycles: int(after.count - before.count), CycleShare: (after.sum - before.sum) / secs,
		Processes: o.Processes, LeaderPID: c.pids[leaderAt], GCs: int(after.gcs - before.gcs), LeaderCPUSec: after.cpu - before.cpu,
		LeaderAllocMiB: (after.alloc - before.alloc) / mib,
		LeaderHeapMiB:  after.heap / mib, LeaderRSSMiB: after.rss / mib, LeaderPeakRSSMiB: float64(peak) / mib,
		Preload: o.Preload, Readers: o.Readers, Reads: readsIf(o.Readers, reads),
		WindowStart: measureFrom,
		Members:     memberFigures(dir, c.pids, leaderAt, membersBefore, membersAfter, measureFrom, end),
		SlowBursts:  slowBursts(subs, lat[int(0.99*float64(len(lat)-1))]),
	}, firstErrIf(errs, firstErr)
}

func readsIf(n int, l *readLoop) []ReadFigures {
	if n == 0 {
		return nil
	}
	return l.figures()
}

// scrapeMetrics hands each sample of a server's /metrics (its name with
// its labels, as the text format writes them, and its value) to each; a
// failed scrape hands none.
func scrapeMetrics(ctx context.Context, url, token string, each func(name string, v float64)) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			each(name, v)
		}
	}
}

func firstErrIf(n int, err error) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d submits failed; first: %w", n, err)
}

// preload submits n jobs, 64 at a time.
func preload(ctx context.Context, cl *client.Client, spec domain.JobSpec, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := cl.SubmitJob(ctx, spec); err != nil {
					errs <- fmt.Errorf("preload: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// seed applies a small topology and creates the tenant and workspace the
// load submits to.
func seed(ctx context.Context, c *client.Client) error {
	t, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		return err
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := c.ApplyTopology(ctx, raw, false); err != nil {
		return fmt.Errorf("apply topology: %w", err)
	}
	if _, err := c.CreateTenant(ctx, api.TenantCreateRequest{Name: "bench", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	if _, err := c.CreateWorkspace(ctx, "bench", api.WorkspaceCreateRequest{Name: "load", Guaranteed: 32}); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	return nil
}

// LogStoreFigures sums up the runs of one log store in a side-by-side
// comparison: the median of each run's percentiles, and their range.
type LogStoreFigures struct {
	LogStore string  `json:"logStore"`
	Runs     int     `json:"runs"`
	P50ms    float64 `json:"p50ms"`
	P90ms    float64 `json:"p90ms"`
	P99ms    float64 `json:"p99ms"`
	P99Minms float64 `json:"p99MinMs"`
	P99Maxms float64 `json:"p99MaxMs"`
	// P99Ratios is, run by run, this store's p99 over the first store's
	// in the same round (the runs of a round follow each other, so the
	// machine's load hits them alike); RatioMedian is their median.
	P99Ratios   []float64 `json:"p99Ratios,omitempty"`
	RatioMedian float64   `json:"p99RatioMedian,omitempty"`
}

// CompareLogStores sums up rounds of runs, one run of each store in
// stores a round (rounds[i][j] is store j's run in round i).
func CompareLogStores(stores []string, rounds [][]*SubmitResult) []LogStoreFigures {
	out := make([]LogStoreFigures, len(stores))
	for j, kind := range stores {
		var p50, p90, p99, ratios []float64
		for _, round := range rounds {
			r := round[j]
			p50, p90, p99 = append(p50, r.P50ms), append(p90, r.P90ms), append(p99, r.P99ms)
			if j > 0 && round[0].P99ms > 0 {
				ratios = append(ratios, r.P99ms/round[0].P99ms)
			}
		}
		f := LogStoreFigures{LogStore: kind, Runs: len(p99), P50ms: median(p50), P90ms: median(p90), P99ms: median(p99), P99Ratios: ratios}
		if len(p99) > 0 {
			f.P99Minms, f.P99Maxms = slices.Min(p99), slices.Max(p99)
		}
		if len(ratios) > 0 {
			f.RatioMedian = median(ratios)
		}
		out[j] = f
	}
	return out
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
