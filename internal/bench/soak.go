package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sim"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// SoakOptions sizes the soak: Jobs jobs submitted, placed and ended
// through the API of one server whose clock runs Speedup times faster
// than real time, so that the retention policy's ages (days) pass within
// minutes.
type SoakOptions struct {
	Jobs    int // default 1,000,000
	Samples int // sample points over the run (default 20), each with a restart
	// Tenants share the load (default 2): retention counts per tenant.
	Tenants int
	// Clients submit concurrently (default 32); Reporters report ends
	// concurrently (default 32).
	Clients, Reporters int
	// GPUs is the cluster's size (default 512: 64 servers x 8); every job
	// asks for one GPU and at most GPUs jobs are live at a time.
	GPUs int
	// Speedup is how much faster the server's clock runs (default 86,400:
	// a day a second).
	Speedup float64
	// Retention is the server's policy (default: the server's defaults,
	// 30 days and 10,000 ended jobs a tenant, events 90 days and 100,000
	// a tenant, usage 400 days); RetainEvery how often it runs, in real
	// time (default 2s).
	Retention   state.Retention
	RetainEvery time.Duration
	Dir         string // data directory (default: a temporary one)
	// Progress, when set, is called with each sample as it is taken.
	Progress func(SoakSample)
}

// SoakSample is the server's size after Done jobs ended.
type SoakSample struct {
	Done        int     `json:"done"`
	Seconds     float64 `json:"seconds"`     // real time since the start
	ClockDays   float64 `json:"clockDays"`   // the server's clock since the start
	JobsPerSec  float64 `json:"jobsPerSec"`  // since the previous sample
	RSSMiB      float64 `json:"rssMiB"`      // the process's resident set (server and load)
	HeapMiB     float64 `json:"heapMiB"`     // live Go heap after a GC
	RaftDBMiB   float64 `json:"raftDBMiB"`   // the raft log: raft/wal/ (segments preallocated 64 MiB) or raft/raft.db
	SnapshotMiB float64 `json:"snapshotMiB"` // the newest raft snapshot (0: none yet)
	RestartMs   float64 `json:"restartMs"`   // stop, start, leader, first answer
	// Restart splits RestartMs into phases and gives its CPU time.
	Restart RestartPhases `json:"restart"`
	state.Sizes
}

// SoakResult is the run.
type SoakResult struct {
	Jobs     int          `json:"jobs"`
	Seconds  float64      `json:"seconds"`
	Samples  []SoakSample `json:"samples"`
	Errors   int          `json:"errors"`
	FirstErr string       `json:"firstError,omitempty"`
}

// fastClock is the server's clock running factor times faster than real
// time from origin; its timers and tickers wait real time, so the
// server's loops keep their real pace while its ages pass quickly.
type fastClock struct {
	tstime.Std
	origin time.Time
	factor float64
}

func (c fastClock) Now() time.Time {
	return c.origin.Add(time.Duration(float64(time.Since(c.origin)) * c.factor))
}

// Soak runs the soak. The load is closed: Clients submit while fewer than
// GPUs jobs are live; a runtime lists the Ready jobs and reports each
// succeeded (Reporters at a time), which frees its GPU.
func Soak(ctx context.Context, o SoakOptions) (*SoakResult, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Jobs, 1_000_000)
	def(&o.Samples, 20)
	def(&o.Tenants, 2)
	def(&o.Clients, 32)
	def(&o.Reporters, 32)
	def(&o.GPUs, 512)
	if o.Speedup == 0 {
		o.Speedup = 86_400
	}
	if o.Retention == (state.Retention{}) {
		const day = 24 * time.Hour
		o.Retention = state.Retention{EndedJobs: 30 * day, EndedJobsPerTenant: 10_000, Events: 90 * day, EventsPerTenant: 100_000, Usage: 400 * day}
	}
	if o.RetainEvery == 0 {
		o.RetainEvery = 2 * time.Second
	}
	switch {
	case o.Jobs < o.Samples:
		return nil, domain.Invalid("jobs", "jobs %d must be at least samples %d", o.Jobs, o.Samples)
	case o.GPUs%8 != 0 || o.GPUs < 8:
		return nil, domain.Invalid("gpus", "gpus %d must be a positive multiple of 8", o.GPUs)
	case o.Speedup < 1:
		return nil, domain.Invalid("speedup", "speedup %g must be at least 1", o.Speedup)
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "jobfabric-soak-")
		if err != nil {
			return nil, fmt.Errorf("temp dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	start := time.Now()
	clk := fastClock{origin: start, factor: o.Speedup}
	// The server's log: errors to stderr, and the restarts' phases timed.
	plog := newPhaseLog(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := devcluster.Start(ctx, dir, 1, devcluster.Options{Clock: clk, FabricDriver: "none", Retention: o.Retention, RetainEvery: o.RetainEvery, Logger: slog.New(plog)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.WaitLeader(ctx); err != nil {
		return nil, err
	}
	if err := soakSeed(ctx, c.Client(0), o); err != nil {
		return nil, err
	}

	res := &SoakResult{Jobs: o.Jobs}
	var cl atomic.Pointer[client.Client]
	cl.Store(c.Client(0))
	// paused holds the load while the server restarts (write lock).
	var paused sync.RWMutex
	var errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	live := make(chan struct{}, o.GPUs) // a slot per live job
	var submitted, ended atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < o.Clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := submitted.Add(1); n <= int64(o.Jobs); n = submitted.Add(1) {
				select {
				case live <- struct{}{}:
				case <-lctx.Done():
					return
				}
				spec := domain.JobSpec{Tenant: fmt.Sprintf("t%d", n%int64(o.Tenants)), Workspace: "w", GPUs: 1}
				for lctx.Err() == nil {
					paused.RLock()
					_, err := cl.Load().SubmitJob(lctx, spec)
					paused.RUnlock()
					if err == nil {
						break
					}
					fail(err)
				}
			}
		}()
	}
	// The runtime: list Ready jobs, report each succeeded once.
	reports := make(chan uint64, o.GPUs)
	var inflight sync.Map
	for i := 0; i < o.Reporters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range reports {
				for lctx.Err() == nil {
					paused.RLock()
					_, err := cl.Load().Report(lctx, id, "succeeded", "")
					paused.RUnlock()
					var de *domain.Error
					if err == nil || (errors.As(err, &de) && (de.Code == domain.CodeFailedPrecondition || de.Code == domain.CodeNotFound)) {
						break // (or ended already: a report retried across a restart)
					}
					fail(err)
				}
				ended.Add(1)
				select {
				case <-live:
				default: // a submit retried across a restart made one job more
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(reports)
		for lctx.Err() == nil && ended.Load() < int64(o.Jobs) {
			paused.RLock()
			jobs, err := cl.Load().Jobs(lctx, client.JobQuery{States: []domain.JobState{domain.JobReady}, Limit: o.GPUs, PageSize: o.GPUs})
			paused.RUnlock()
			if err != nil {
				fail(err)
			}
			fresh := 0
			for _, j := range jobs {
				if _, seen := inflight.LoadOrStore(j.ID, true); !seen {
					fresh++
					select {
					case reports <- j.ID:
					case <-lctx.Done():
						return
					}
				}
			}
			if fresh == 0 {
				time.Sleep(5 * time.Millisecond) // nothing new placed yet
			}
			// Let the reporters take what was listed first: until their
			// reports commit those jobs are still Ready, and listing them
			// again and again (up to GPUs jobs every 5 ms) took a third of
			// the process's CPU, server and load, for nothing.
			for len(reports) > 0 && lctx.Err() == nil {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()

	// Sample every Jobs/Samples ended jobs.
	dataDir := filepath.Join(dir, "node1")
	lastT, lastDone := start, 0
	for k := 1; k <= o.Samples; k++ {
		target := o.Jobs * k / o.Samples
		for ended.Load() < int64(target) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		now := time.Now()
		done := int(ended.Load())
		s := SoakSample{Done: done, Seconds: now.Sub(start).Seconds(), ClockDays: clk.Now().Sub(start).Hours() / 24,
			JobsPerSec: float64(done-lastDone) / now.Sub(lastT).Seconds()}
		lastT, lastDone = now, done
		// Forget reported jobs: retention removed them long ago.
		inflight.Range(func(k, _ any) bool {
			if _, ok := c.Servers[0].State().Job(k.(uint64)); !ok {
				inflight.Delete(k)
			}
			return true
		})
		paused.Lock()
		s.Sizes = c.Servers[0].State().Sizes()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.HeapMiB = mib(int64(ms.HeapAlloc))
		s.RSSMiB = rssMiB()
		s.RaftDBMiB = mib(logBytes(dataDir))
		s.SnapshotMiB = mib(newestSnapshot(filepath.Join(dataDir, "raft", "snapshots")))
		s.Restart, err = restart(ctx, c, filepath.Join(dataDir, "raft"), plog)
		s.RestartMs = s.Restart.AnswerMs
		if err != nil {
			paused.Unlock()
			return nil, fmt.Errorf("restart after %d jobs: %w", done, err)
		}
		cl.Store(c.Client(0))
		paused.Unlock()
		res.Samples = append(res.Samples, s)
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	stop()
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Errors = int(errs.Load())
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErr = e
	}
	return res, nil
}

func soakSeed(ctx context.Context, cl *client.Client, o SoakOptions) error {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: o.GPUs / 8, GPUsPerServer: 8})
	if err != nil {
		return err
	}
	raw, err := json.Marshal(topo)
	if err != nil {
		return err
	}
	if _, err := cl.ApplyTopology(ctx, raw, false); err != nil {
		return fmt.Errorf("apply topology: %w", err)
	}
	for i := 0; i < o.Tenants; i++ {
		name := fmt.Sprintf("t%d", i)
		if _, err := cl.CreateTenant(ctx, api.TenantCreateRequest{Name: name, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
			return fmt.Errorf("create tenant: %w", err)
		}
		if _, err := cl.CreateWorkspace(ctx, name, api.WorkspaceCreateRequest{Name: "w", Guaranteed: o.GPUs / o.Tenants, BorrowLimit: o.GPUs}); err != nil {
			return fmt.Errorf("create workspace: %w", err)
		}
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// logBytes is the size of a server's raft log store, read while it runs
// (InspectLog's range needs the store's lock; its size does not).
func logBytes(dataDir string) int64 {
	if n := fileSize(filepath.Join(dataDir, "raft", "raft.db")); n > 0 {
		return n
	}
	var n int64
	entries, _ := os.ReadDir(filepath.Join(dataDir, "raft", "wal"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// newestSnapshot is the size of the newest raft snapshot's state under
// dir (hashicorp/raft: one directory per snapshot, named term-index-ms).
func newestSnapshot(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	newest, at := "", time.Time{}
	for _, e := range ents {
		fi, err := e.Info()
		if err == nil && e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") && fi.ModTime().After(at) {
			newest, at = e.Name(), fi.ModTime()
		}
	}
	if newest == "" {
		return 0
	}
	return fileSize(filepath.Join(dir, newest, "state.bin"))
}

// rssMiB is the process's resident set now (Linux /proc; 0 elsewhere).
func rssMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// WriteSoak writes the samples as prefix.csv and plots them (PlotSoak).
func WriteSoak(prefix string, r *SoakResult) error {
	var b strings.Builder
	b.WriteString("done,seconds,clock_days,jobs_per_sec,rss_mib,heap_mib,raft_db_mib,snapshot_mib,restart_ms,live_jobs,ended_jobs,events,usage_records," +
		"stop_ms,restore_ms,open_ms,leader_ms,started_ms,restart_cpu_ms,log_entries,replay_entries,load1\n")
	for _, s := range r.Samples {
		p := s.Restart
		fmt.Fprintf(&b, "%d,%.1f,%.1f,%.0f,%.1f,%.1f,%.1f,%.1f,%.0f,%d,%d,%d,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%d,%d,%.1f\n", s.Done, s.Seconds, s.ClockDays, s.JobsPerSec,
			s.RSSMiB, s.HeapMiB, s.RaftDBMiB, s.SnapshotMiB, s.RestartMs, s.LiveJobs, s.EndedJobs, s.Events, s.UsageRecords,
			p.StopMs, p.RestoreMs, p.OpenMs, p.LeaderMs, p.StartedMs, p.CPUMs, p.LogEntries, p.ReplayEntries, p.Load1)
	}
	if err := os.WriteFile(prefix+".csv", []byte(b.String()), 0o644); err != nil {
		return err
	}
	return PlotSoak(prefix, r)
}

// PlotSoak draws the samples: sizes (prefix.svg), restart times by jobs
// ended (prefix-restart.svg) and by log entries replayed
// (prefix-replay.svg).
func PlotSoak(prefix string, r *SoakResult) error {
	series := func(name string, y func(SoakSample) float64) sim.Series {
		s := sim.Series{Name: name}
		for _, x := range r.Samples {
			s.X = append(s.X, float64(x.Done)/1000)
			s.Y = append(s.Y, y(x))
		}
		return s
	}
	sizes := []sim.Series{
		series("RSS (MiB)", func(s SoakSample) float64 { return s.RSSMiB }),
		series("live heap (MiB)", func(s SoakSample) float64 { return s.HeapMiB }),
		series("raft.db (MiB)", func(s SoakSample) float64 { return s.RaftDBMiB }),
		series("snapshot (MiB)", func(s SoakSample) float64 { return s.SnapshotMiB }),
	}
	title := fmt.Sprintf("Soak: %d jobs through the API of one server", r.Jobs)
	if err := os.WriteFile(prefix+".svg", []byte(sim.LineChart(title, "jobs ended (thousands)", "MiB", sizes, 0, math.NaN())), 0o644); err != nil {
		return err
	}
	restart := []sim.Series{
		series("restart, wall (ms)", func(s SoakSample) float64 { return s.RestartMs }),
		series("restart, CPU (ms)", func(s SoakSample) float64 { return s.Restart.CPUMs }),
		series("stop (ms)", func(s SoakSample) float64 { return s.Restart.StopMs }),
		series("snapshot restore (ms)", func(s SoakSample) float64 { return s.Restart.RestoreMs }),
		series("log applied (ms)", func(s SoakSample) float64 { return s.Restart.StartedMs }),
	}
	if err := os.WriteFile(prefix+"-restart.svg", []byte(sim.LineChart(title+": restart to first answer", "jobs ended (thousands)", "ms", restart, 0, math.NaN())), 0o644); err != nil {
		return err
	}
	// The same restarts by the log entries they replayed: what their
	// spread follows.
	byReplay := slices.Clone(r.Samples)
	slices.SortFunc(byReplay, func(a, b SoakSample) int { return cmp.Compare(a.Restart.ReplayEntries, b.Restart.ReplayEntries) })
	replay := func(name string, y func(SoakSample) float64) sim.Series {
		s := sim.Series{Name: name}
		for _, x := range byReplay {
			s.X = append(s.X, float64(x.Restart.ReplayEntries)/1000)
			s.Y = append(s.Y, y(x))
		}
		return s
	}
	vs := []sim.Series{
		replay("restart, wall (ms)", func(s SoakSample) float64 { return s.RestartMs }),
		replay("restart, CPU (ms)", func(s SoakSample) float64 { return s.Restart.CPUMs }),
		replay("snapshot restore (ms)", func(s SoakSample) float64 { return s.Restart.RestoreMs }),
	}
	return os.WriteFile(prefix+"-replay.svg", []byte(sim.LineChart(title+": restart by log replayed", "log entries replayed (thousands)", "ms", vs, 0, math.NaN())), 0o644)
}

// ReadSoakCSV reads the samples WriteSoak wrote to path (the CSV), so that
// a run's plots can be drawn again, or drawn from a run stopped halfway.
func ReadSoakCSV(path string) (*SoakResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) < 2 {
		return nil, domain.Invalid("csv", "%s holds no sample", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	r := &SoakResult{}
	for n, rec := range recs[1:] {
		var bad error
		num := func(name string) float64 {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return 0 // a column an older bench did not write
			}
			v, err := strconv.ParseFloat(rec[i], 64)
			if err != nil && bad == nil {
				bad = domain.Invalid("csv", "%s line %d: column %s: %q is not a number", path, n+2, name, rec[i])
			}
			return v
		}
		s := SoakSample{Done: int(num("done")), Seconds: num("seconds"), ClockDays: num("clock_days"), JobsPerSec: num("jobs_per_sec"),
			RSSMiB: num("rss_mib"), HeapMiB: num("heap_mib"), RaftDBMiB: num("raft_db_mib"), SnapshotMiB: num("snapshot_mib"), RestartMs: num("restart_ms"),
			Restart: RestartPhases{StopMs: num("stop_ms"), RestoreMs: num("restore_ms"), OpenMs: num("open_ms"), LeaderMs: num("leader_ms"),
				StartedMs: num("started_ms"), CPUMs: num("restart_cpu_ms"), LogEntries: uint64(num("log_entries")), ReplayEntries: uint64(num("replay_entries")),
				Load1: num("load1"), AnswerMs: num("restart_ms")}}
		s.LiveJobs, s.EndedJobs, s.Events, s.UsageRecords = int(num("live_jobs")), int(num("ended_jobs")), int(num("events")), int(num("usage_records"))
		if bad != nil {
			return nil, bad
		}
		r.Samples = append(r.Samples, s)
		r.Jobs, r.Seconds = s.Done, s.Seconds
	}
	return r, nil
}
