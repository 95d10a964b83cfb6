// Command traceread reads a Go execution trace (`bench submit
// --leader-trace`, `bench sched --trace`) and prints where time went, as
// docs/benchmarks.md quotes it for issue 18:
//
//	traceread bins [-bin 20ms] [-from S] [-to S] TRACE
//	    per bin: the time goroutines waited runnable for a processor
//	    (rq=) and ran, by kind of goroutine (the collector's mark
//	    workers, net/http, raft, jobfabric's own), and the marks.
//	traceread cycles TRACE
//	    per region "cycle N" (bench sched): wall time, and the cycle
//	    goroutine's time running, runnable and waiting, and the mark
//	    workers' running time beside it.
//
// A module of its own: golang.org/x/exp/trace is no dependency of the
// product.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: traceread bins|cycles [flags] TRACE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "bins":
		err = bins(os.Args[2:])
	case "cycles":
		err = cycles(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: bins or cycles", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "traceread:", err)
		os.Exit(1)
	}
}

// events calls fn with every event of the trace at path.
func events(path string, fn func(trace.Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := trace.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fn(ev)
	}
}

// entry is the function a goroutine started in: its stack's last frame.
func entry(st trace.Stack) string {
	var last string
	for f := range st.Frames() {
		last = f.Func
	}
	return last
}

// kind groups goroutines by what started them.
func kind(fn string) string {
	switch {
	case strings.Contains(fn, "gcBgMarkWorker"):
		return "gcmark"
	case strings.Contains(fn, "bgsweep"), strings.Contains(fn, "bgscavenge"):
		return "sweep"
	case strings.Contains(fn, "net/http"):
		return "http"
	case strings.Contains(fn, "hashicorp/raft"):
		return "raft"
	case strings.Contains(fn, "jobfabric"):
		return "jf:" + fn[strings.LastIndex(fn, "/")+1:]
	}
	return "other"
}

const markPhase = "GC concurrent mark phase"

func bins(args []string) error {
	fs := flag.NewFlagSet("bins", flag.ExitOnError)
	width := fs.Duration("bin", 20*time.Millisecond, "bin width")
	from := fs.Float64("from", 0, "first bin shown, seconds after the trace's start")
	to := fs.Float64("to", 1e9, "last bin shown, seconds after the trace's start")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("bins: one trace file, got %d arguments", fs.NArg())
	}
	type key struct {
		bin  int
		kind string
	}
	type gstate struct {
		kind  string
		state trace.GoState
		since trace.Time
	}
	w := float64(*width)
	var t0, markStart trace.Time
	ran, waited := map[key]float64{}, map[int]float64{}
	gs := map[trace.GoID]*gstate{}
	var marks []string
	last := 0
	// spread adds [a, b) to the bins it covers, in ms.
	spread := func(a, b trace.Time, add func(bin int, ms float64)) {
		for a < b {
			bin := int(float64(a-t0) / w)
			end := min(b, t0+trace.Time(float64(bin+1)*w))
			add(bin, float64(end-a)/1e6)
			a = end
		}
	}
	err := events(fs.Arg(0), func(ev trace.Event) {
		now := ev.Time()
		if t0 == 0 {
			t0 = now
		}
		last = max(last, int(float64(now-t0)/w))
		switch ev.Kind() {
		case trace.EventRangeBegin:
			if ev.Range().Name == markPhase {
				markStart = now
			}
		case trace.EventRangeEnd:
			if ev.Range().Name == markPhase && markStart != 0 {
				marks = append(marks, fmt.Sprintf("mark %.3f-%.3f s (%.0f ms)", float64(markStart-t0)/1e9, float64(now-t0)/1e9, float64(now-markStart)/1e6))
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				return
			}
			id := st.Resource.Goroutine()
			g := gs[id]
			if g == nil {
				g = &gstate{since: now}
				gs[id] = g
			}
			if g.kind == "" {
				if fn := entry(st.Stack); fn != "" {
					g.kind = kind(fn)
				} else if ev.Goroutine() == id {
					if fn := entry(ev.Stack()); fn != "" {
						g.kind = kind(fn)
					}
				}
			}
			switch g.state {
			case trace.GoRunning:
				k := g.kind
				spread(g.since, now, func(bin int, ms float64) { ran[key{bin, k}] += ms })
			case trace.GoRunnable:
				spread(g.since, now, func(bin int, ms float64) { waited[bin] += ms })
			}
			_, g.state = st.Goroutine()
			g.since = now
		}
	})
	if err != nil {
		return err
	}
	for _, m := range marks {
		fmt.Println(m)
	}
	kinds := map[string]bool{}
	for k := range ran {
		kinds[k.kind] = true
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	for bin := 0; bin <= last; bin++ {
		at := float64(bin) * w / 1e9
		if at < *from || at > *to {
			continue
		}
		line := fmt.Sprintf("%7.3f rq=%5.1f", at, waited[bin])
		for _, k := range names {
			if ms := ran[key{bin, k}]; ms >= 0.5 {
				line += fmt.Sprintf(" %s=%.1f", k, ms)
			}
		}
		fmt.Println(line)
	}
	return nil
}

func cycles(args []string) error {
	fs := flag.NewFlagSet("cycles", flag.ExitOnError)
	fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("cycles: one trace file, got %d arguments", fs.NArg())
	}
	type cycle struct {
		name                              string
		start                             trace.Time
		running, runnable, waiting, marks float64
	}
	var cur *cycle
	var g trace.GoID = -1
	var state trace.GoState
	var since trace.Time
	isMark := map[trace.GoID]bool{}
	markRunning := map[trace.GoID]trace.Time{}
	err := events(fs.Arg(0), func(ev trace.Event) {
		now := ev.Time()
		switch ev.Kind() {
		case trace.EventRegionBegin:
			if strings.HasPrefix(ev.Region().Type, "cycle ") {
				g, cur = ev.Goroutine(), &cycle{name: ev.Region().Type, start: now}
				state, since = trace.GoRunning, now
			}
		case trace.EventRegionEnd:
			if cur != nil && ev.Region().Type == cur.name {
				cur.running += float64(now-since) / 1e6
				fmt.Printf("%-9s wall %6.1f ms: running %6.1f, runnable %5.1f, waiting %5.1f; mark workers running beside it %6.1f\n",
					cur.name, float64(now-cur.start)/1e6, cur.running, cur.runnable, cur.waiting, cur.marks)
				cur = nil
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				return
			}
			id := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if !isMark[id] && (strings.Contains(entry(st.Stack), "gcBgMarkWorker") || (ev.Goroutine() == id && strings.Contains(entry(ev.Stack()), "gcBgMarkWorker"))) {
				isMark[id] = true
			}
			if isMark[id] {
				if to == trace.GoRunning {
					markRunning[id] = now
				} else if from == trace.GoRunning && markRunning[id] != 0 {
					if cur != nil && now > max(markRunning[id], cur.start) {
						cur.marks += float64(now-max(markRunning[id], cur.start)) / 1e6
					}
					markRunning[id] = 0
				}
			}
			if id != g || cur == nil {
				return
			}
			d := float64(now-since) / 1e6
			switch state {
			case trace.GoRunning:
				cur.running += d
			case trace.GoRunnable:
				cur.runnable += d
			case trace.GoWaiting:
				cur.waiting += d
			}
			state, since = to, now
		}
	})
	return err
}
