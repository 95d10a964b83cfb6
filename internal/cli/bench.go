package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/bench"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/store"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure the control plane (figures of docs/benchmarks.md)"}
	var o bench.SubmitOptions
	var runs int
	var logStores []string
	var cpuprofile, tracePath, leaderProfile, leaderAllocs, leaderTrace, leaderHeap, keepDir string
	submit := &cobra.Command{
		Use:   "submit",
		Short: "Job submits over the API against fresh servers, in this process or (--processes) each a process of its own (Raft with fsync, HTTP on loopback)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return domain.Invalid("cpuprofile", "cannot create %s: %v", cpuprofile, err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("start CPU profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if tracePath != "" {
				f, err := os.Create(tracePath)
				if err != nil {
					return domain.Invalid("trace", "cannot create %s: %v", tracePath, err)
				}
				defer f.Close()
				o.Trace = f
			}
			for _, l := range []struct {
				flag, path string
				to         *io.Writer
			}{{"leader-cpuprofile", leaderProfile, &o.LeaderCPUProfile}, {"leader-memprofile", leaderAllocs, &o.LeaderAllocs}, {"leader-trace", leaderTrace, &o.LeaderTrace}, {"leader-heapprofile", leaderHeap, &o.LeaderHeap}} {
				if l.path == "" {
					continue
				}
				f, err := os.Create(l.path)
				if err != nil {
					return domain.Invalid(l.flag, "cannot create %s: %v", l.path, err)
				}
				defer f.Close()
				*l.to = f
			}
			kinds, err := logStoreList(logStores)
			if err != nil {
				return err
			}
			// Rounds of one run per store, the order reversed every other
			// round (A B B A ...): a drift of the machine's load hits the
			// stores alike.
			var results []*bench.SubmitResult
			rounds := make([][]*bench.SubmitResult, runs)
			for i := 0; i < runs; i++ {
				rounds[i] = make([]*bench.SubmitResult, len(kinds))
				for k := range kinds {
					j := k
					if i%2 == 1 {
						j = len(kinds) - 1 - k
					}
					o.LogStore = kinds[j]
					if keepDir != "" {
						// One directory a run: the members' data and, with
						// --processes, their logs (GODEBUG=gctrace=1's lines).
						o.Dir = filepath.Join(keepDir, fmt.Sprintf("run%d", len(results)+1))
						if err := os.MkdirAll(o.Dir, 0o700); err != nil {
							return domain.Invalid("dir", "cannot create %s: %v", o.Dir, err)
						}
					}
					r, err := bench.Submit(cmd.Context(), o)
					o.Trace, o.LeaderCPUProfile, o.LeaderAllocs, o.LeaderTrace, o.LeaderHeap = nil, nil, nil, nil, nil // the first run's only: one a file
					if err != nil {
						return err
					}
					rounds[i][j] = r
					results = append(results, r)
				}
			}
			table := func(w io.Writer) {
				header(w, "RUN", "SERVERS", "PROCESSES", "LOG-STORE", "VIA", "CONCURRENCY", "RATE", "SUBMITS", "SUBMITS/S", "P50-MS", "P90-MS", "P99-MS", "MAX-MS", "CYCLES", "CYCLE-SHARE", "GCS", "LEADER-CPU-S", "LEADER-ALLOC-MIB", "LEADER-HEAP-MIB", "LEADER-RSS-MIB")
				for i, r := range results {
					via := "leader"
					if r.ViaFollower {
						via = "follower"
					}
					procs := "one"
					if r.Processes {
						procs = "each"
					}
					row(w, i+1, r.Servers, procs, r.LogStore, via, r.Concurrency, rate(r.Rate), r.Submits, fmt.Sprintf("%.0f", r.PerSecond),
						fmt.Sprintf("%.2f", r.P50ms), fmt.Sprintf("%.2f", r.P90ms), fmt.Sprintf("%.2f", r.P99ms), fmt.Sprintf("%.2f", r.Maxms), r.Cycles, fmt.Sprintf("%.2f", r.CycleShare),
						r.GCs, fmt.Sprintf("%.1f", r.LeaderCPUSec), fmt.Sprintf("%.0f", r.LeaderAllocMiB), fmt.Sprintf("%.0f", r.LeaderHeapMiB), fmt.Sprintf("%.0f", r.LeaderRSSMiB))
				}
			}
			if len(kinds) == 1 {
				return g.emit(results, func(w io.Writer) {
					table(w)
					readsTable(w, results)
					membersTable(w, results)
				})
			}
			cmp := bench.CompareLogStores(kinds, rounds)
			return g.emit(logStoreReport{Runs: results, Compare: cmp}, func(w io.Writer) {
				table(w)
				fmt.Fprintln(w)
				header(w, "LOG-STORE", "RUNS", "P50-MS", "P90-MS", "P99-MS", "P99-RANGE", "P99/"+strings.ToUpper(kinds[0]), "PER-ROUND")
				for _, f := range cmp {
					ratio, per := "-", "-"
					if len(f.P99Ratios) > 0 {
						ratio = fmt.Sprintf("%.2f", f.RatioMedian)
						var ps []string
						for _, x := range f.P99Ratios {
							ps = append(ps, fmt.Sprintf("%.2f", x))
						}
						per = strings.Join(ps, " ")
					}
					row(w, f.LogStore, f.Runs, fmt.Sprintf("%.2f", f.P50ms), fmt.Sprintf("%.2f", f.P90ms), fmt.Sprintf("%.2f", f.P99ms),
						fmt.Sprintf("%.2f-%.2f", f.P99Minms, f.P99Maxms), ratio, per)
				}
			})
		},
	}
	f := submit.Flags()
	f.IntVar(&o.Servers, "servers", 1, "servers in the cluster (1, 3, 5)")
	f.IntVar(&o.Concurrency, "concurrency", 16, "concurrent clients")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per run")
	f.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured time before each run")
	f.Float64Var(&o.Rate, "rate", 0, "open loop: submits per second, latency counted from each one's due time (0: closed loop, as fast as answered)")
	f.BoolVar(&o.ViaFollower, "via-follower", false, "send to a follower (forwarded to the leader)")
	f.IntVar(&o.Preload, "preload", 0, "submit this many jobs before each run (not measured): the state holds them, pending")
	f.IntVar(&o.Readers, "readers", 0, "clients polling the leader during each run, closed loop, round-robin over --read-routes (their latency is reported by route)")
	f.StringSliceVar(&o.ReadRoutes, "read-routes", []string{"jobs-tenant", "queue", "metrics"}, "what the readers poll: "+strings.Join(slices.Sorted(maps.Keys(bench.ReadRoutes)), ", ")+" (jobs-admin, queue-admin, usage-jobs and metrics as the admin; the others as a second tenant's admin token)")
	f.BoolVar(&o.Processes, "processes", false, "run each server as a `jobfabric server` process of its own (this binary; GOGC, GOMEMLIMIT and GODEBUG reach them), as production does; default: every server in this process, beside the load, under one garbage collector")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run of this process (the servers and the load; with --processes the load only) to this file")
	f.StringVar(&tracePath, "trace", "", "write a Go execution trace of this process's measured window to this file (the first run's; `go tool trace`)")
	f.StringVar(&leaderProfile, "leader-cpuprofile", "", "write the leader's CPU profile of the measured window to this file, read from its /debug/pprof (the first run's; with --processes the leader's process alone)")
	f.StringVar(&leaderAllocs, "leader-memprofile", "", "write what the leader allocated in the measured window to this file (a heap profile's difference over it, read from its /debug/pprof: as of the last collection at each end, so where, not how much; go tool pprof -sample_index=alloc_space; the first run's)")
	f.StringVar(&leaderHeap, "leader-heapprofile", "", "write the leader's live heap at the end of the measured window to this file (a heap profile after a collection, read from its /debug/pprof: what each mark walks; go tool pprof -sample_index=inuse_space; the first run's)")
	f.StringVar(&leaderTrace, "leader-trace", "", "write the leader's Go execution trace of the measured window to this file, read from its /debug/pprof (the first run's)")
	f.StringVar(&keepDir, "dir", "", "keep each run's data directories, and with --processes each member's log, under this directory (run<N>; default: a temporary one, removed)")
	f.IntVar(&runs, "runs", 1, "repeat the run (fresh cluster each time); quote the median")
	f.StringSliceVar(&logStores, "log-store", nil, "raft log store of the servers: wal or bolt (default: the server's, wal); several (wal,bolt) run side by side, one run of each per round for --runs rounds, and add their medians and per-round p99 ratios (-o json: {runs, compare})")
	var so bench.SchedOptions
	var schedProfile, schedMemProfile, schedTrace string
	schedCmd := &cobra.Command{
		Use:   "sched",
		Short: "Drain a queue of mixed jobs (whole GPUs, gangs up to 512, MIG, shares) through the scheduler on a large synthetic cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			stop, err := startCPUProfile(schedProfile)
			if err != nil {
				return err
			}
			if schedTrace != "" {
				f, err := os.Create(schedTrace)
				if err != nil {
					stop()
					return domain.Invalid("trace", "cannot create %s: %v", schedTrace, err)
				}
				defer f.Close()
				so.Trace = f
			}
			r, err := bench.Sched(so)
			stop()
			if err != nil {
				return err
			}
			if err := writeAllocProfile(schedMemProfile); err != nil {
				return err
			}
			return g.emit(r, func(w io.Writer) {
				fmt.Fprintf(w, "cluster: %d servers, %d GPUs, %d tenants, %d workspaces; %d pending jobs\n", r.Servers, r.GPUs, r.Tenants, r.Workspaces, r.Jobs)
				fmt.Fprintf(w, "drained in %d cycles: %d placements (%d preemptions) in %.2f s of scheduling = %.0f placements/s (%d never fit)\n", r.Cycles, r.Placements, r.Preemptions, r.ScheduleSeconds, r.PlacementsPerSecond, r.Unplaced)
				fmt.Fprintf(w, "first cycle (empty cluster) %.0f ms; later cycles: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", r.FirstCyclems, r.CycleP50ms, r.CycleP99ms, r.CycleMaxms)
				fmt.Fprintf(w, "in CPU time of the cycle's thread: first %.0f ms, later p50 %.2f ms, p99 %.2f ms; %.0f placements per CPU second\n", r.FirstCycleCPUms, r.CycleCPUP50ms, r.CycleCPUP99ms, r.PlacementsPerCPUSecond)
				fmt.Fprintf(w, "64-GPU gang decision: p50 %.2f ms, p99 %.2f ms over %d cluster states\n", r.Gang64P50ms, r.Gang64P99ms, r.Gang64Trials)
				fmt.Fprintf(w, "memory: peak heap %.0f MiB, peak RSS %.0f MiB\n", r.PeakHeapMiB, r.PeakRSSMiB)
				if r.PlanDigest != "" {
					fmt.Fprintf(w, "plans: sha256 %s\n", r.PlanDigest)
				}
			})
		},
	}
	sf := schedCmd.Flags()
	sf.IntVar(&so.Stripes, "stripes", 32, "stripes of 8 rails")
	sf.IntVar(&so.ServersPerStripe, "servers-per-stripe", 64, "8-GPU servers per stripe")
	sf.IntVar(&so.Tenants, "tenants", 50, "tenants")
	sf.IntVar(&so.Workspaces, "workspaces", 200, "workspaces, spread over the tenants")
	sf.IntVar(&so.Jobs, "jobs", 10000, "pending jobs")
	sf.Uint64Var(&so.Seed, "seed", 1, "seed of the job stream")
	sf.IntVar(&so.MaxCycles, "max-cycles", 2000, "stop the drain after this many cycles")
	sf.StringVar(&schedProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	sf.StringVar(&schedTrace, "trace", "", "write a Go execution trace of the cycles to this file (each cycle a region \"cycle N\"; `go tool trace`)")
	sf.StringVar(&schedMemProfile, "memprofile", "", "write the run's heap profile (allocations sampled over the whole run, the cycles' and the benchmark's own; go tool pprof -sample_index=alloc_space) to this file")
	sf.BoolVar(&so.NoCarry, "no-carry", false, "sum over every job every cycle (sched.Schedule) instead of keeping the sums from the cycle before (sched.Carry), the 64-GPU gang probe's too; both decide alike")
	sf.IntVar(&so.Pools, "pools", 0, "split the stripes into this many server pools (as Slurm partitions) and give every job one (0: no pools)")
	sf.BoolVar(&so.Digest, "plan-digest", false, "hash every cycle's whole plan (placements, reasons, order) to compare two builds of the scheduler")
	var fo bench.FabricOptions
	var placement string
	fabricCmd := &cobra.Command{
		Use:   "fabric",
		Short: "Compile and verify a large fabric (256 leaves, 16 spines, 1,000 tenants, 10,000 running jobs), then time single job starts compiled incrementally",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			fo.Placement = fabric.VRFPlacement(placement)
			r, err := bench.Fabric(fo)
			if err != nil {
				return err
			}
			return g.emit(r, func(w io.Writer) {
				fmt.Fprintf(w, "fabric: %d leaves, %d spines, %d super-spines, %d servers, %d GPUs, %d tenants, %d running jobs, %d ports, %d VRF instances (VRFs on %s leaves)\n",
					r.Leaves, r.Spines, r.SuperSpines, r.Servers, r.GPUs, r.Tenants, r.Jobs, r.Ports, r.VRFs, r.Placement)
				fmt.Fprintf(w, "full compile + verify: median %.0f ms [%.0f-%.0f] (compile %.0f ms, verify %.0f ms; CPU %.0f and %.0f ms) over %d runs; verifier ok: %t\n",
					r.FullMs.Median, r.FullMs.Min, r.FullMs.Max, r.CompileMs.Median, r.VerifyMs.Median, r.CompileCPUMs.Median, r.VerifyCPUMs.Median, r.Runs, r.VerifyOK)
				fmt.Fprintf(w, "one job start, incremental: median %.2f ms [%.2f-%.2f], p90 %.2f ms, %d devices changed (median) over %d starts; equal to a full compile: %t\n",
					r.StartMs.Median, r.StartMs.Min, r.StartMs.Max, r.StartP90Ms, r.Devices, r.Starts, r.IncrementalOK)
				if l := r.Loop; l != nil {
					fmt.Fprintf(w, "fabric loop, per revision (a job start or stop; file driver): median %.0f ms [%.0f-%.0f]: compile %.2f ms, render and hash %.0f ms, verify %.0f ms, deploy %d devices %.0f ms, over %d revisions\n",
						l.TotalMs.Median, l.TotalMs.Min, l.TotalMs.Max, l.CompileMs.Median, l.RenderMs.Median, l.VerifyMs.Median, l.Devices, l.DeployMs.Median, l.Revisions)
				}
				fmt.Fprintf(w, "memory: peak RSS %.0f MiB, live heap %.0f MiB\n", r.PeakRSSMiB, r.HeapMiB)
			})
		},
	}
	ff := fabricCmd.Flags()
	ff.IntVar(&fo.Stripes, "stripes", 0, "stripes of 8 leaves (default 32: 256 leaves)")
	ff.IntVar(&fo.ServersPerStripe, "servers-per-stripe", 0, "servers per stripe (default: the generator's)")
	ff.IntVar(&fo.Spines, "spines", 0, "spines, per pod with --super-spines (default 16)")
	ff.IntVar(&fo.SuperSpines, "super-spines", 0, "super-spines joining --pods pods: a three-tier fabric (default 0: two tiers)")
	ff.IntVar(&fo.Pods, "pods", 0, "pods of a three-tier fabric (default 1)")
	ff.IntVar(&fo.Tenants, "tenants", 0, "tenants (default 1,000)")
	ff.IntVar(&fo.Jobs, "jobs", 0, "running jobs (default 10,000)")
	ff.IntVar(&fo.Runs, "runs", 0, "full compile + verify runs (default 5)")
	ff.IntVar(&fo.Starts, "starts", 0, "single job starts timed, each undone by a stop (default 101)")
	ff.IntVar(&fo.Revisions, "revisions", 0, "fabric-loop revisions timed: job starts and their stops, rendered, verified and deployed to a file driver (default 10; -1: none)")
	ff.StringVar(&placement, "vrfs", "all", "VRFs on all leaves (all) or only where used (used)")
	var soak bench.SoakOptions
	var soakOut, soakProfile string
	soakCmd := &cobra.Command{
		Use:   "soak",
		Short: "Submit, run and end many jobs through the API of one server whose clock runs fast; sample RSS, raft.db, snapshot size and restart time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			// Each sample is written as it is taken (the CSV and plots
			// so far), so a long run that is stopped leaves its curve.
			partial := &bench.SoakResult{Jobs: soak.Jobs}
			var werr error
			soak.Progress = func(s bench.SoakSample) {
				p := s.Restart
				fmt.Fprintf(cmd.ErrOrStderr(), "%d jobs ended, %.0f s, %.0f/s: RSS %.0f MiB, heap %.0f MiB, raft.db %.1f MiB, snapshot %.1f MiB, "+
					"restart %.0f ms (CPU %.0f ms; stop %.0f, restore %.0f, leader at %.0f, started %.0f; %d of %d log entries replayed; load %.1f); %d live, %d ended jobs, %d events, %d usage records\n",
					s.Done, s.Seconds, s.JobsPerSec, s.RSSMiB, s.HeapMiB, s.RaftDBMiB, s.SnapshotMiB,
					s.RestartMs, p.CPUMs, p.StopMs, p.RestoreMs, p.LeaderMs, p.StartedMs, p.ReplayEntries, p.LogEntries, p.Load1,
					s.LiveJobs, s.EndedJobs, s.Events, s.UsageRecords)
				if soakOut != "" && werr == nil {
					partial.Samples, partial.Seconds = append(partial.Samples, s), s.Seconds
					werr = bench.WriteSoak(soakOut, partial)
				}
			}
			stopProfile, err := startCPUProfile(soakProfile)
			if err != nil {
				return err
			}
			r, err := bench.Soak(cmd.Context(), soak)
			stopProfile()
			if err != nil {
				return err
			}
			if soakOut != "" {
				if err := errors.Join(werr, bench.WriteSoak(soakOut, r)); err != nil {
					return err
				}
			}
			return g.emit(r, func(w io.Writer) {
				header(w, "DONE", "SECONDS", "CLOCK-DAYS", "JOBS/S", "RSS-MIB", "HEAP-MIB", "RAFTDB-MIB", "SNAPSHOT-MIB", "RESTART-MS", "RESTART-CPU-MS", "REPLAYED", "ENDED-JOBS", "EVENTS", "USAGE")
				for _, s := range r.Samples {
					row(w, s.Done, fmt.Sprintf("%.0f", s.Seconds), fmt.Sprintf("%.1f", s.ClockDays), fmt.Sprintf("%.0f", s.JobsPerSec), fmt.Sprintf("%.0f", s.RSSMiB),
						fmt.Sprintf("%.0f", s.HeapMiB), fmt.Sprintf("%.1f", s.RaftDBMiB), fmt.Sprintf("%.1f", s.SnapshotMiB), fmt.Sprintf("%.0f", s.RestartMs), fmt.Sprintf("%.0f", s.Restart.CPUMs), s.Restart.ReplayEntries, s.EndedJobs, s.Events, s.UsageRecords)
				}
				fmt.Fprintf(w, "%d jobs in %.0f s; %d errors %s\n", r.Jobs, r.Seconds, r.Errors, r.FirstErr)
			})
		},
	}
	kf := soakCmd.Flags()
	kf.IntVar(&soak.Jobs, "jobs", 1_000_000, "jobs to submit, run and end")
	kf.IntVar(&soak.Samples, "samples", 20, "sample points (each restarts the server)")
	kf.IntVar(&soak.Tenants, "tenants", 2, "tenants sharing the load")
	kf.IntVar(&soak.Clients, "clients", 32, "concurrent submitters (and reporters)")
	kf.IntVar(&soak.GPUs, "gpus", 512, "GPUs in the cluster (servers of 8); at most this many jobs are live")
	kf.Float64Var(&soak.Speedup, "speedup", 86_400, "how much faster the server's clock runs than real time")
	kf.StringVar(&soakProfile, "cpuprofile", "", "write a CPU profile of the whole run (server and load) to this file")
	kf.StringVar(&soakOut, "out", "", "write PREFIX.csv, PREFIX.svg, PREFIX-restart.svg and PREFIX-replay.svg (after each sample)")
	var soakPlotJobs int
	soakPlot := &cobra.Command{
		Use:   "soak-plot PREFIX",
		Short: "Draw a soak's plots again from PREFIX.csv (also a run stopped halfway): PREFIX.svg, PREFIX-restart.svg, PREFIX-replay.svg",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := bench.ReadSoakCSV(args[0] + ".csv")
			if err != nil {
				return err
			}
			if soakPlotJobs > 0 {
				r.Jobs = soakPlotJobs
			}
			return bench.PlotSoak(args[0], r)
		},
	}
	soakPlot.Flags().IntVar(&soakPlotJobs, "jobs", 0, "the run's job count, for the titles (default: the last sample's)")
	var plotOut, schedPlotOut string
	plot := &cobra.Command{
		Use:   "fabric-plot RESULT.json...",
		Short: "Plot how `bench fabric -o json` results grow with the cluster, as an SVG (docs/bench/fabric-scale.svg)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rs, err := readResults(args, "bench fabric", func(r bench.FabricResult) bool { return r.GPUs > 0 })
			if err != nil {
				return err
			}
			return writePlot(cmd, plotOut, bench.FabricScaleSVG(rs))
		},
	}
	plot.Flags().StringVar(&plotOut, "out", "", "SVG file to write (default: standard output)")
	schedPlot := &cobra.Command{
		Use:   "sched-plot RESULT.json...",
		Short: "Plot how `bench sched -o json` results grow with the cluster, as an SVG (docs/scale/sched-scale.svg)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rs, err := readResults(args, "bench sched", func(r bench.SchedResult) bool { return r.GPUs > 0 && r.Cycles > 1 })
			if err != nil {
				return err
			}
			return writePlot(cmd, schedPlotOut, bench.SchedScaleSVG(rs))
		},
	}
	schedPlot.Flags().StringVar(&schedPlotOut, "out", "", "SVG file to write (default: standard output)")
	cmd.AddCommand(submit, schedCmd, fabricCmd, soakCmd, soakPlot, plot, schedPlot)
	return cmd
}

// readResults reads each file as the JSON of `WHAT -o json`; ok says
// whether a decoded result is one (a JSON file of something else decodes
// to zero values).
func readResults[T any](files []string, what string, ok func(T) bool) ([]T, error) {
	var rs []T
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, domain.Invalid("result", "cannot read %s: %v", f, err)
		}
		var r T
		if err := json.Unmarshal(b, &r); err != nil || !ok(r) {
			return nil, domain.Invalid("result", "%s is not the JSON of `%s -o json` (%v)", f, what, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// writePlot writes an SVG to path, or to standard output for "" or "-".
func writePlot(cmd *cobra.Command, path, svg string) error {
	if path == "" || path == "-" {
		_, err := io.WriteString(cmd.OutOrStdout(), svg)
		return err
	}
	return os.WriteFile(path, []byte(svg), 0o644)
}

// startCPUProfile profiles the process into path until stop is called;
// an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, domain.Invalid("cpuprofile", "cannot create %s: %v", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeAllocProfile writes the heap profile, with every allocation
// sampled so far (GODEBUG=memprofilerate=N samples more), to path; an
// empty path writes nothing.
func writeAllocProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return domain.Invalid("memprofile", "cannot create %s: %v", path, err)
	}
	// The profile holds what was allocated up to the last collection:
	// one now (the run is over) counts the last cycles too.
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write the heap profile to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the heap profile to %s: %w", path, err)
	}
	return nil
}

func rate(r float64) string {
	if r == 0 {
		return "closed"
	}
	return fmt.Sprintf("%.0f/s", r)
}

// readsTable lists the readers' latency by route, one row a run and route.
func readsTable(w io.Writer, results []*bench.SubmitResult) {
	if len(results) == 0 || results[0].Readers == 0 {
		return
	}
	fmt.Fprintln(w)
	header(w, "RUN", "READERS", "ROUTE", "READS", "ERRORS", "P50-MS", "P99-MS", "MAX-MS")
	for i, r := range results {
		for _, f := range r.Reads {
			row(w, i+1, r.Readers, f.Route, f.Reads, f.Errors, fmt.Sprintf("%.2f", f.P50ms), fmt.Sprintf("%.2f", f.P99ms), fmt.Sprintf("%.2f", f.Maxms))
		}
	}
}

// membersTable lists every member's window, one row a run and member, and
// when the slowest 1 % of submits were due, one line a run.
func membersTable(w io.Writer, results []*bench.SubmitResult) {
	if len(results) == 0 || len(results[0].Members) == 0 {
		return
	}
	fmt.Fprintln(w)
	header(w, "RUN", "MEMBER", "ROLE", "GCS", "CPU-S", "ALLOC-MIB", "HEAP-MIB", "SNAPSHOTS", "SNAPSHOTS-AT-MS", "COMMIT-P99-MS", "OWN-LOG-P99-MS", "APPEND-STORE-P99-MS", "APPEND-P99-MS")
	for i, r := range results {
		for _, m := range r.Members {
			role := "follower"
			if m.Leader {
				role = "leader"
			}
			at := "-"
			if len(m.SnapshotsAtMs) > 0 {
				at = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(m.SnapshotsAtMs)), ","), "[]")
			}
			row(w, i+1, m.Member, role, m.GCs, fmt.Sprintf("%.1f", m.CPUSec), fmt.Sprintf("%.0f", m.AllocMiB), fmt.Sprintf("%.0f", m.HeapMiB), m.Snapshots, at,
				fmt.Sprintf("%.2f", m.CommitP99ms), fmt.Sprintf("%.2f", m.DispatchP99ms), fmt.Sprintf("%.2f", m.AppendStoreP99ms), fmt.Sprintf("%.2f", m.AppendP99ms))
		}
	}
	fmt.Fprintln(w)
	for i, r := range results {
		var bs []string
		for _, b := range r.SlowBursts {
			bs = append(bs, fmt.Sprintf("%.0f-%.0f ms: %d (max %.1f ms)", b.FromMs, b.ToMs, b.Submits, b.MaxMs))
		}
		fmt.Fprintf(w, "run %d: submits at or over p99 due at %s\n", i+1, strings.Join(bs, "; "))
	}
}

// logStoreReport is `bench submit`'s JSON output when it compares log
// stores.
type logStoreReport struct {
	Runs    []*bench.SubmitResult   `json:"runs"`
	Compare []bench.LogStoreFigures `json:"compare"`
}

// logStoreList checks --log-store: known kinds, each once; none is the
// server's default.
func logStoreList(kinds []string) ([]string, error) {
	if len(kinds) == 0 {
		return []string{""}, nil
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		if k != store.LogStoreWAL && k != store.LogStoreBolt {
			return nil, domain.Invalid("log-store", "--log-store %q is not one of %s, %s", k, store.LogStoreWAL, store.LogStoreBolt)
		}
		if seen[k] {
			return nil, domain.Invalid("log-store", "--log-store names %q twice", k)
		}
		seen[k] = true
	}
	return kinds, nil
}
