package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sim"
)

// newSimCmd is `jobfabric sim`: trace replays through the real scheduler
// (internal/sim), no server needed.
func newSimCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "Replay GPU-cluster traces through the scheduler (openb placement quality, ITP job traces) and report"}
	cmd.AddCommand(newSimOpenbCmd(g), newSimJobsCmd(g), newSimReportCmd(g))
	return cmd
}

// readInput opens path (a bad path is an error on field) and parses it with
// read, which names the file in its own errors.
func readInput[T any](field, path string, read func(name string, r io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, domain.Invalid(field, "cannot read %s: %v", path, err)
	}
	defer f.Close()
	return read(filepath.Base(path), f)
}

func writeFile(dir, name string, write func(io.Writer) error) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return domain.Invalid("out", "cannot write %s: %v", filepath.Join(dir, name), err)
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func newSimOpenbCmd(g *globals) *cobra.Command {
	var pods, policies []string
	var nodes, seeds, out string
	var tune float64
	var replicate, workers int
	c := &cobra.Command{
		Use:   "openb",
		Short: "Replay openb pod lists under the FGD paper's protocol with each placement policy",
		Long: `Replay openb pod lists (Alibaba GPU-sharing traces) under the FGD paper's protocol:
the whole trace shuffled per seed, resampled pods appended until demand is --tune x GPU
capacity, each pod placed or failed before the next arrives, by the scheduler's placement
code with the policy's scorer. Writes DIR/analysis_allo_discrete.csv (the paper's layout)
and DIR/runs.json; progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if out == "" {
				return domain.Invalid("out", "--out DIR is required")
			}
			if len(pods) == 0 {
				return domain.Invalid("pods", "--pods FILE is required (repeat it for several workloads)")
			}
			if tune < 0 || tune > 100 {
				return domain.Invalid("tune", "tune %g must be between 0 (no tuning) and 100", tune)
			}
			if replicate < 1 || replicate > 100 {
				return domain.Invalid("replicate", "replicate %d must be between 1 and 100", replicate)
			}
			pols := splitList(policies)
			if len(pols) == 0 {
				pols = []string{"jobfabric"}
			}
			for _, p := range pols {
				if err := sim.CheckPolicy(p); err != nil {
					return err
				}
			}
			ss, err := sim.ParseSeeds(seeds)
			if err != nil {
				return err
			}
			ns, err := readInput("nodes", nodes, sim.ReadNodes)
			if err != nil {
				return err
			}
			suite := sim.OpenbSuite{Nodes: ns, Policies: pols, Seeds: ss, Tune: tune, Replicate: replicate, Workers: workers}
			for _, p := range pods {
				ps, err := readInput("pods", p, sim.ReadPods)
				if err != nil {
					return err
				}
				suite.Traces = append(suite.Traces, sim.Trace{Workload: sim.WorkloadName(p), Pods: ps})
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return domain.Invalid("out", "cannot create %s: %v", out, err)
			}
			start := g.clock()
			runs, err := suite.Run(func(done, total int, r *sim.OpenbResult) {
				fmt.Fprintf(g.stderr, "[%d/%d %.0fs] %s\n", done, total, g.clock().Sub(start).Seconds(), r)
			})
			if err != nil {
				return err
			}
			if err := writeFile(out, "analysis_allo_discrete.csv", func(w io.Writer) error { return sim.WriteAllocCSV(w, runs) }); err != nil {
				return err
			}
			sum := sim.OpenbSummary{Kind: "openb", Nodes: nodes, Pods: pods, Tune: tune, Runs: runs}
			if err := writeFile(out, "runs.json", func(w io.Writer) error { return sim.WriteJSON(w, sum) }); err != nil {
				return err
			}
			means := sim.Means(sim.Rows(runs), 130)
			return g.emit(means, func(w io.Writer) {
				header(w, "WORKLOAD", "POLICY", "RUNS", "ALLOC%@130")
				for _, m := range means {
					row(w, m.Workload, m.Policy, m.N, fmt.Sprintf("%.2f", m.Value))
				}
			})
		},
	}
	f := c.Flags()
	f.StringArrayVar(&pods, "pods", nil, "openb pod list CSV (repeat for several workloads)")
	f.StringVar(&nodes, "nodes", "", "openb node list CSV (servers without GPUs are left out)")
	f.StringArrayVar(&policies, "policy", nil, "placement policy: random, dotprod, gpuclustering, gpupacking, bestfit, fgd, jobfabric (repeat or comma-separate; default jobfabric)")
	f.StringVar(&seeds, "seeds", "42-51", "seeds: 42-51, 42,43 or 42")
	f.Float64Var(&tune, "tune", 1.3, "arrived demand target as a multiple of GPU capacity (0: the trace as is)")
	f.IntVar(&replicate, "replicate", 1, "copies of the cluster and the trace (speed at scale)")
	f.IntVar(&workers, "workers", 0, "runs in parallel (0: one per CPU; results do not depend on it)")
	f.StringVar(&out, "out", "", "output directory")
	return c
}

func newSimJobsCmd(g *globals) *cobra.Command {
	var traces, policies []string
	var cluster, tenantsFrom, out string
	var checkpoint, grace, horizon time.Duration
	var fairShare bool
	var churn int
	c := &cobra.Command{
		Use:   "jobs",
		Short: "Replay ITP job traces as tenants sharing one pool: static partitioning, Kueue-like borrowing, jobfabric",
		Long: `Replay ITP job traces (job_id, submission_time, duration, num_gpu) with a simulated
clock: each trace is a tenant (one workspace) of one shared pool, its guarantee the pool
split in proportion to each trace's p90 concurrent GPU demand. Policies: static (no
borrowing), borrow (Kueue-like cohort borrowing, reclaim evicting the most recently
admitted borrowers at once), jobfabric (the real scheduler: sched.Schedule every event).
Preempted jobs are requeued and lose the work since their last checkpoint.
Writes DIR/jobs.json; progress goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if out == "" {
				return domain.Invalid("out", "--out DIR is required")
			}
			if churn < 0 || (churn > 0) != fairShare {
				return domain.Invalid("churn-budget", "--churn-budget %d: give a positive budget with --fair-share-reclaim, and only with it", churn)
			}
			if tenantsFrom != "from-traces" {
				return domain.Invalid("tenants", "tenants %q: only from-traces (each trace is a tenant) is supported", tenantsFrom)
			}
			servers, gpus, err := sim.ParseCluster(cluster)
			if err != nil {
				return err
			}
			pols := splitList(policies)
			if len(pols) == 0 {
				pols = sim.JobsPolicies
			}
			for _, p := range pols {
				if !slices.Contains(sim.JobsPolicies, p) {
					return domain.Invalid("policy", "policy %q is not one of %s", p, strings.Join(sim.JobsPolicies, ", "))
				}
			}
			if len(traces) == 0 {
				return domain.Invalid("trace", "--trace FILE is required (repeat it: each trace is a tenant)")
			}
			var ts []sim.Tenant
			for _, p := range traces {
				js, err := readInput("trace", p, sim.ReadITP)
				if err != nil {
					return err
				}
				ts = append(ts, sim.Tenant{Name: sim.WorkloadName(p), Jobs: js})
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return domain.Invalid("out", "cannot create %s: %v", out, err)
			}
			var results []*sim.JobsResult
			for _, p := range pols {
				r, err := sim.RunJobs(sim.JobsRun{Tenants: ts, Servers: servers, GPUs: gpus, Policy: p, Checkpoint: checkpoint, Grace: grace, MaxArrivalTime: horizon,
					FairShareReclaim: fairShare, ChurnBudget: churn},
					func(msg string) { fmt.Fprintln(g.stderr, msg) })
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "%s: %d jobs, %d cycles in %.1f s\n", p, r.Jobs, r.Cycles, r.Seconds)
				results = append(results, r)
			}
			sum := sim.JobsSummary{Kind: "jobs", Cluster: cluster, Traces: traces, Checkpoint: checkpoint.String(), Runs: results}
			if err := writeFile(out, "jobs.json", func(w io.Writer) error { return sim.WriteJSON(w, sum) }); err != nil {
				return err
			}
			return g.emit(results, func(w io.Writer) { sim.JobsTable(w, results) })
		},
	}
	f := c.Flags()
	f.StringArrayVar(&traces, "trace", nil, "ITP trace CSV (repeat: each is a tenant)")
	f.StringVar(&cluster, "cluster", "128x8", "the shared pool: SERVERSxGPUS")
	f.StringVar(&tenantsFrom, "tenants", "from-traces", "how traces map to tenants: from-traces (each trace one tenant)")
	f.StringArrayVar(&policies, "policy", nil, "static, borrow, jobfabric (repeat or comma-separate; default all three)")
	f.DurationVar(&checkpoint, "checkpoint", 30*time.Minute, "checkpoint interval: a preempted job loses the work since its last checkpoint")
	f.DurationVar(&grace, "grace", 30*time.Second, "jobfabric's preemption grace")
	f.DurationVar(&horizon, "horizon", 0, "drop arrivals later than this after each trace's first (0: all)")
	f.BoolVar(&fairShare, "fair-share-reclaim", false, "jobfabric: a job within its workspace's fair share reclaims from workspaces above theirs")
	f.IntVar(&churn, "churn-budget", 0, "jobfabric with --fair-share-reclaim: GPUs it may reclaim per reclaim-backoff window (5 min)")
	f.StringVar(&out, "out", "", "output directory")
	return c
}

func newSimReportCmd(g *globals) *cobra.Command {
	var expected, out string
	c := &cobra.Command{
		Use:   "report DIR...",
		Short: "Markdown summary and SVG plots of sim openb / sim jobs output directories",
		Long: `Read the output directories of sim openb (runs.json, analysis_allo_discrete.csv) and
sim jobs (jobs.json) and write report.md with SVG plots to --out (default: the first DIR).
--expected FILE compares openb runs with published results in the same CSV layout
(e.g. the FGD paper's analysis_allo_discrete.csv).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = args[0]
			}
			var exp []sim.AllocRow
			if expected != "" {
				var err error
				if exp, err = readInput("expected", expected, sim.ReadAllocCSV); err != nil {
					return err
				}
			}
			var md strings.Builder
			md.WriteString("# jobfabric simulation report\n\n")
			files := map[string]string{}
			var rows []sim.AllocRow
			var runs []*sim.OpenbResult
			for _, dir := range args {
				found := false
				if f, err := os.Open(filepath.Join(dir, "analysis_allo_discrete.csv")); err == nil {
					rs, err := sim.ReadAllocCSV(filepath.Join(dir, "analysis_allo_discrete.csv"), f)
					f.Close()
					if err != nil {
						return err
					}
					rows = append(rows, rs...)
					found = true
					if b, err := os.ReadFile(filepath.Join(dir, "runs.json")); err == nil {
						var sum sim.OpenbSummary
						if err := json.Unmarshal(b, &sum); err != nil {
							return domain.Invalid("dir", "%s/runs.json: %v", dir, err)
						}
						runs = append(runs, sum.Runs...)
					}
				}
				if b, err := os.ReadFile(filepath.Join(dir, "jobs.json")); err == nil {
					var sum sim.JobsSummary
					if err := json.Unmarshal(b, &sum); err != nil {
						return domain.Invalid("dir", "%s/jobs.json: %v", dir, err)
					}
					rep := sim.JobsReport(sum)
					md.WriteString(rep.Markdown + "\n")
					for k, v := range rep.Files {
						files[k] = v
					}
					found = true
				}
				if !found {
					return domain.Invalid("dir", "%s holds no sim output (analysis_allo_discrete.csv or jobs.json)", dir)
				}
			}
			if len(rows) > 0 {
				rep := sim.OpenbReport(rows, runs, exp)
				md.WriteString(rep.Markdown + "\n")
				for k, v := range rep.Files {
					files[k] = v
				}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return domain.Invalid("out", "cannot create %s: %v", out, err)
			}
			files["report.md"] = md.String()
			names := make([]string, 0, len(files))
			for k := range files {
				names = append(names, k)
			}
			slices.Sort(names)
			var written []string
			for _, k := range names {
				if err := writeFile(out, k, func(w io.Writer) error { _, err := io.WriteString(w, files[k]); return err }); err != nil {
					return err
				}
				written = append(written, filepath.Join(out, k))
			}
			return g.emit(written, func(w io.Writer) {
				for _, p := range written {
					fmt.Fprintln(w, p)
				}
			})
		},
	}
	c.Flags().StringVar(&expected, "expected", "", "published results to validate openb runs against (analysis_allo_discrete.csv layout)")
	c.Flags().StringVar(&out, "out", "", "where to write report.md and the plots (default: the first DIR)")
	return c
}
