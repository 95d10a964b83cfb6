package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/state"
)

// TestSubmitSmoke runs the benchmark briefly in both modes so the code that
// produces docs/benchmarks.md is exercised by `make test`; it asserts
// correctness (every submit answered, figures consistent), never speed.
func TestSubmitSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, o := range map[string]SubmitOptions{
		"closed loop":  {Servers: 1, Concurrency: 4, Duration: 300 * time.Millisecond},
		"open loop":    {Servers: 1, Concurrency: 4, Duration: 300 * time.Millisecond, Rate: 100},
		"via follower": {Servers: 3, Concurrency: 2, Duration: 300 * time.Millisecond, ViaFollower: true},
		"bolt":         {Servers: 1, Concurrency: 2, Duration: 300 * time.Millisecond, LogStore: "bolt"},
	} {
		t.Run(name, func(t *testing.T) {
			o.Dir = t.TempDir()
			r, err := Submit(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Submits == 0 || r.Errors != 0 {
				t.Fatalf("result %+v: want submits and no errors", r)
			}
			// The store the leader reports, not the one asked for.
			if want := cmp.Or(o.LogStore, "wal"); r.LogStore != want {
				t.Errorf("the leader ran log store %q, want %q", r.LogStore, want)
			}
			if !(r.P50ms <= r.P90ms && r.P90ms <= r.P99ms && r.P99ms <= r.Maxms) {
				t.Fatalf("percentiles out of order: %+v", r)
			}
			if o.Rate > 0 && (r.Submits < 25 || r.Submits > 35) {
				t.Fatalf("open loop at %g/s for %v made %d submits, want about 30", o.Rate, o.Duration, r.Submits)
			}
		})
	}
	// --trace: an execution trace of the measured window.
	var tr bytes.Buffer
	if _, err := Submit(ctx, SubmitOptions{Servers: 1, Concurrency: 2, Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Rate: 100, Dir: t.TempDir(), Trace: &tr}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(tr.Bytes(), []byte("go 1.")) || !bytes.Contains(tr.Bytes()[:16], []byte(" trace")) {
		t.Fatalf("the trace (%d bytes) has no Go execution trace header: %q", tr.Len(), tr.Bytes()[:min(tr.Len(), 16)])
	}
	if _, err := Submit(ctx, SubmitOptions{Servers: 1, Concurrency: 1, Duration: time.Second, ViaFollower: true}); err == nil {
		t.Fatal("a follower of a 1-server cluster was accepted")
	}
}

// TestSubmitReaders runs the benchmark with readers polling every route
// (a tenant's pages, queue, pools and usage as its admin, the metrics as
// the admin): each is read, answered 200, and timed; a route the
// benchmark does not know is refused by name.
func TestSubmitReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	routes := slices.Sorted(maps.Keys(ReadRoutes))
	r, err := Submit(ctx, SubmitOptions{Servers: 1, Concurrency: 2, Duration: 500 * time.Millisecond, Rate: 50, Preload: 20,
		Readers: 2, ReadRoutes: routes, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Readers != 2 || r.Preload != 20 || len(r.Reads) != len(routes) {
		t.Fatalf("result %+v: want 2 readers, a preload of 20 and a row per route %v", r, routes)
	}
	for i, f := range r.Reads {
		if f.Route != routes[i] || f.Reads == 0 || f.Errors != 0 || !(f.P50ms <= f.P99ms && f.P99ms <= f.Maxms) {
			t.Errorf("route %s: %+v: want reads, no errors, ordered percentiles", routes[i], f)
		}
	}
	for _, o := range []SubmitOptions{
		{Servers: 1, Concurrency: 1, Duration: time.Second, Readers: 1, ReadRoutes: []string{"jobs-everyone"}},
		{Servers: 1, Concurrency: 1, Duration: time.Second, Readers: 1},
		{Servers: 1, Concurrency: 1, Duration: time.Second, Readers: -1},
	} {
		if _, err := Submit(ctx, o); err == nil || !strings.Contains(err.Error(), "read") {
			t.Errorf("readers %d routes %v: err %v, want a refusal naming the readers or routes", o.Readers, o.ReadRoutes, err)
		}
	}
}

func TestSchedSmall(t *testing.T) {
	r, err := Sched(SchedOptions{Stripes: 2, ServersPerStripe: 8, Tenants: 4, Workspaces: 8, Jobs: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 128-GPU servers cannot hold the 256- and 512-GPU jobs: about 1 in 40.
	if r.Placements+r.Unplaced < 300 || r.Unplaced > 20 || r.Gang64Trials == 0 || r.PlacementsPerSecond <= 0 {
		t.Fatalf("result %+v: the queue must drain but for jobs larger than the cluster", r)
	}
	// The per-cycle list is every cycle, its placements and preemptions
	// sum to the run's, and the last cycle's pending jobs are those left.
	if len(r.PerCycle) != r.Cycles {
		t.Fatalf("%d cycles listed, %d run", len(r.PerCycle), r.Cycles)
	}
	placed, preempted := 0, 0
	for _, c := range r.PerCycle {
		placed += c.Placements
		preempted += c.Preemptions
		if c.Wallms < 0 || c.CPUms < 0 {
			t.Fatalf("cycle %+v: negative time", c)
		}
	}
	if placed != r.Placements || preempted != r.Preemptions || r.PerCycle[len(r.PerCycle)-1].Pending != r.Unplaced || r.PerCycle[0].Placements == 0 {
		t.Fatalf("per cycle %d placements, %d preemptions, last pending %d; run %d, %d, %d", placed, preempted, r.PerCycle[len(r.PerCycle)-1].Pending, r.Placements, r.Preemptions, r.Unplaced)
	}
}

// TestSchedTrace: --trace writes a Go execution trace of the cycles, and
// names each cycle in it (a region "cycle N"), so a reader can tell where
// a cycle's wall time went.
func TestSchedTrace(t *testing.T) {
	var buf bytes.Buffer
	r, err := Sched(SchedOptions{Stripes: 1, ServersPerStripe: 4, Tenants: 2, Workspaces: 2, Jobs: 40, Seed: 1, MaxCycles: 3, Trace: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("go 1.")) {
		t.Fatalf("the trace starts %q, want a Go execution trace (\"go 1.N trace\")", buf.Bytes()[:min(16, buf.Len())])
	}
	for c := range r.Cycles {
		if name := fmt.Sprintf("cycle %d", c); !bytes.Contains(buf.Bytes(), []byte(name)) {
			t.Errorf("the trace does not name region %q", name)
		}
	}
}

// TestSoakSmall runs the soak briefly: every job submitted is placed,
// reported and counted, the server restarts at every sample and answers
// again, retention runs (the clock passes days a second), and the CSV and
// plots are written. It asserts correctness, never speed.
func TestSoakSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	r, err := Soak(ctx, SoakOptions{Jobs: 600, Samples: 2, GPUs: 64, Clients: 8, Reporters: 8, Dir: t.TempDir(),
		// Ended jobs go an hour after they end, but the fair share's
		// history horizon (8 half-lives: 8 h, a third of a second here)
		// keeps them longer; a pass every 100 ms so that the restarts at
		// each sample (seconds under load) still leave passes to run.
		Retention: state.Retention{EndedJobs: time.Hour, Usage: 48 * time.Hour}, RetainEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) != 2 || r.Samples[1].Done < 600 || r.Errors != 0 {
		t.Fatalf("result %+v: want 2 samples, 600 jobs ended, no errors", r)
	}
	last := r.Samples[1]
	if last.RestartMs <= 0 || last.RaftDBMiB <= 0 || last.RSSMiB <= 0 || last.ClockDays < 1 {
		t.Fatalf("sample %+v: a restart, a raft.db, a resident set and at least a day of the server's clock", last)
	}
	// The restart's phases come from the server's own log, in order.
	if p := last.Restart; p.CPUMs <= 0 || p.LeaderMs <= 0 || p.LeaderMs > p.StartedMs || p.OpenMs > p.LeaderMs ||
		p.StopMs+p.StartedMs > last.RestartMs || p.LogEntries == 0 || p.ReplayEntries > p.LogEntries {
		t.Fatalf("restart phases %+v (restart %.0f ms): want CPU time, the store open before the leader, the leader before the start's end, replayed entries within the log", p, last.RestartMs)
	}
	if last.LiveJobs+last.EndedJobs >= 600 {
		t.Fatalf("sample %+v: days passed on the server's clock but retention removed no ended job", last)
	}
	prefix := filepath.Join(t.TempDir(), "soak")
	if err := WriteSoak(prefix, r); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(prefix + ".csv")
	if err != nil || strings.Count(string(csv), "\n") != 3 {
		t.Fatalf("csv %q (%v): want a header and 2 rows", csv, err)
	}
	for _, f := range []string{prefix + ".svg", prefix + "-restart.svg", prefix + "-replay.svg"} {
		if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), "<svg") {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// The CSV reads back (soak-plot draws a stopped run's curve from it).
	back, err := ReadSoakCSV(prefix + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Samples) != 2 || back.Samples[1].Done != last.Done || back.Samples[1].Restart.ReplayEntries != last.Restart.ReplayEntries ||
		back.Samples[1].EndedJobs != last.EndedJobs || math.Abs(back.Samples[1].Restart.CPUMs-last.Restart.CPUMs) > 1 {
		t.Fatalf("read back %+v, wrote %+v", back.Samples, r.Samples)
	}
}

func TestReadSoakCSVRefusesBadNumbers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "soak.csv")
	if err := os.WriteFile(path, []byte("done,restart_ms\n1000,12x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSoakCSV(path)
	if err == nil || !strings.Contains(err.Error(), "restart_ms") || !strings.Contains(err.Error(), "12x") {
		t.Fatalf("ReadSoakCSV of a bad number = %v, want an error naming the column and the value", err)
	}
}

// TestCompareLogStores: medians per store, the p99 range, and each
// round's p99 over the first store's of the same round.
func TestCompareLogStores(t *testing.T) {
	r := func(p50, p90, p99 float64) *SubmitResult { return &SubmitResult{P50ms: p50, P90ms: p90, P99ms: p99} }
	got := CompareLogStores([]string{"wal", "bolt"}, [][]*SubmitResult{
		{r(1, 2, 10), r(2, 4, 30)},
		{r(3, 4, 20), r(1, 2, 10)},
		{r(2, 3, 5), r(4, 5, 20)},
	})
	if len(got) != 2 {
		t.Fatalf("%d stores, want 2", len(got))
	}
	w, b := got[0], got[1]
	if w.LogStore != "wal" || w.Runs != 3 || w.P50ms != 2 || w.P90ms != 3 || w.P99ms != 10 || w.P99Minms != 5 || w.P99Maxms != 20 || w.P99Ratios != nil {
		t.Errorf("wal: %+v", w)
	}
	if b.LogStore != "bolt" || b.P50ms != 2 || b.P99ms != 20 || b.P99Minms != 10 || b.P99Maxms != 30 {
		t.Errorf("bolt: %+v", b)
	}
	if want := []float64{3, 0.5, 4}; !slices.Equal(b.P99Ratios, want) || b.RatioMedian != 3 {
		t.Errorf("bolt ratios %v median %g, want %v median 3", b.P99Ratios, b.RatioMedian, want)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %g, want 2.5", m)
	}
}
