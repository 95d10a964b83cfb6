package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/store"
)

func newJobCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit, list, show, cancel, watch and report on jobs"}
	var spec domain.JobSpec
	var ws string
	var dry bool
	var timeLimit, minRuntime, expected time.Duration
	var topo, file string
	var wait bool
	var waitFor time.Duration
	submit := &cobra.Command{
		Use: "submit", Short: "Submit a job (flags, or a spec file with -f; --wait until it is Ready)", Args: cobra.NoArgs,
		Long: `Submit a job described by flags, or by a spec file (-f FILE, YAML or JSON, the
API's JobSpec fields: workspace: acme/research, gpus: 16, gpusPerNode: 8,
gpuModel, priority, preemptible, timeLimitSeconds, topology: {level: stripe,
required: true}, ...). Flags given with -f override the file's fields.
With --wait the command follows the job until it is Ready (exit 0), or ends
without becoming Ready (exit 6), or --timeout passes (exit 7).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setRef(ws, &spec.Tenant, &spec.Workspace); err != nil {
				return err
			}
			var err error
			if spec.TimeLimitSeconds, err = durationSeconds("time-limit", timeLimit); err != nil {
				return err
			}
			if spec.MinRuntimeSeconds, err = durationSeconds("min-runtime", minRuntime); err != nil {
				return err
			}
			if spec.ExpectedDurationSeconds, err = durationSeconds("expected-duration", expected); err != nil {
				return err
			}
			if spec.Topology, err = parseTopology(topo); err != nil {
				return err
			}
			if file != "" {
				m, err := readSpecFile(file)
				if err != nil {
					return err
				}
				if spec, err = mergeSpec(cmd, m, &spec); err != nil {
					return err
				}
				if spec.MIGProfile != "" && spec.MIGCount == 0 {
					spec.MIGCount = 1 // as --mig-count's default
				}
			}
			if spec.MIGProfile == "" {
				spec.MIGCount = 0 // the flag's default only applies with --mig
			}
			if wait && dry {
				return usagef("--wait follows a submitted job; --dry-run submits none")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if dry {
				d, err := c.DryRun(cmd.Context(), spec)
				if err != nil {
					return err
				}
				return g.emit(d, func(w io.Writer) {
					if d.Reason != nil {
						fmt.Fprintf(w, "would wait: %s (%s)\n", d.Reason.Message, d.Reason.Code)
						reservationLines(w, d.Reason.Reservation)
						return
					}
					fmt.Fprintf(w, "would run now, packed at %s level:\n", d.Level)
					for _, p := range d.Placement {
						fmt.Fprintf(w, "  %s GPUs %s\n", p.Server, joinInts(p.GPUs))
					}
				})
			}
			j, err := c.SubmitJob(cmd.Context(), spec)
			if err != nil {
				return err
			}
			var waitErr error
			if wait {
				var last *domain.Job
				if last, waitErr = g.waitReady(cmd.Context(), c, j.ID, waitFor); last != nil {
					j = last
				}
			}
			if err := g.emit(j, func(w io.Writer) { g.jobTable(w, []domain.Job{*j}) }); err != nil {
				return err
			}
			return waitErr
		},
	}
	f := submit.Flags()
	f.StringVar(&ws, "workspace", "", "TENANT/WORKSPACE to run in (a member token's own workspace when omitted)")
	f.IntVar(&spec.GPUs, "gpus", 0, "number of whole GPUs")
	f.StringVar(&spec.MIGProfile, "mig", "", "MIG profile of each slice instead of whole GPUs, e.g. 3g.40gb")
	f.IntVar(&spec.MIGCount, "mig-count", 1, "number of MIG slices (with --mig)")
	f.Float64Var(&spec.Share, "share", 0, "a time-sliced fraction of one GPU instead of whole GPUs, e.g. 0.25")
	f.StringVar(&topo, "topology", "", "pack the gang within one nvlink-domain, leaf or stripe (preferred; add :required to wait rather than spread)")
	f.StringVar(&spec.MinDriver, "min-driver", "", "lowest NVIDIA driver version accepted, e.g. 535.104")
	f.StringVar(&spec.Driver, "driver", "", "exact NVIDIA driver version required, e.g. 535.183.01 (a validated stack)")
	f.StringVar(&spec.Pool, "pool", "", "server pool to run in, e.g. slurm:CLUSTER:PARTITION: placed on the pool's servers only (jobfabric pool list)")
	f.StringVar(&spec.ExternalID, "external-id", "", "the workload runtime's id of the job, e.g. slurm:4242 (the Slurm prolog finds the job by it)")
	f.IntVar(&spec.GPUsPerNode, "gpus-per-node", 0, "GPUs on each server (gpus must be a multiple)")
	f.StringVar(&spec.GPUModel, "gpu-model", "", "GPU model, e.g. H100-80GB")
	f.StringSliceVar(&spec.GPUModels, "gpu-models", nil, "GPU models the job accepts, in order of preference, e.g. H100-80GB,A100-80GB (instead of --gpu-model)")
	f.IntVar(&spec.Priority, "priority", 0, "priority within the workspace")
	f.BoolVar(&spec.Preemptible, "preemptible", false, "the job may be preempted")
	f.StringVar(&spec.Name, "name", "", "job name (default job-ID)")
	f.BoolVar(&dry, "dry-run", false, "answer where the job would land now, or why it would wait, without submitting it")
	f.DurationVar(&timeLimit, "time-limit", 0, "end the job this long after it is placed, e.g. 2h (whole seconds; 0: no limit)")
	f.DurationVar(&minRuntime, "min-runtime", 0, "protect the job from preemption for this long after it is placed, e.g. 10m (whole seconds)")
	f.DurationVar(&expected, "expected-duration", 0, "how long the job is expected to run, e.g. 6h: tells waiting jobs when GPUs free up; ends nothing")
	f.StringVarP(&file, "file", "f", "", "job spec file, YAML or JSON (- for stdin); flags given too override its fields")
	f.BoolVar(&wait, "wait", false, "wait until the job is Ready (exit 0), ends first (exit 6) or --timeout passes (exit 7)")
	f.DurationVar(&waitFor, "timeout", 0, "with --wait, how long to wait (0: as long as it takes)")
	setsFields(submit, "workspace", "tenant", "workspace")
	setsFields(submit, "mig", "migProfile")
	setsFields(submit, "time-limit", "timeLimitSeconds")
	setsFields(submit, "min-runtime", "minRuntimeSeconds")
	setsFields(submit, "expected-duration", "expectedDurationSeconds")
	setsFields(submit, "topology", "topology", "topology.level")

	var q client.JobQuery
	var states []string
	var watch bool
	list := &cobra.Command{
		Use: "list", Short: "List jobs you can see", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setRef(ws, &q.Tenant, &q.Workspace); err != nil {
				return err
			}
			var err error
			if q.States, err = parseStates(states); err != nil {
				return err
			}
			if cmd.Flags().Changed("limit") && q.Limit < 1 {
				return usagef("--limit %d: give a positive number of jobs", q.Limit)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if watch {
				fetch := func(ctx context.Context) ([]domain.Job, error) { return c.Jobs(ctx, q) }
				key := func(j domain.Job) string { return strconv.FormatUint(j.ID, 10) }
				return watchList(cmd.Context(), g, fetch, key, nil, g.jobTable)
			}
			js, err := c.Jobs(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(js, func(w io.Writer) { g.jobTable(w, js) })
		},
	}
	list.Flags().StringVar(&q.Tenant, "tenant", "", "only this tenant's jobs")
	list.Flags().StringVar(&ws, "workspace", "", "only this TENANT/WORKSPACE's jobs")
	list.Flags().StringSliceVarP(&states, "state", "t", nil, "only jobs in these states, any case: pending,running (as squeue -t)")
	list.Flags().IntVar(&q.Limit, "limit", 0, "at most this many jobs, lowest IDs first (default: all, read page by page)")
	addWatchFlag(list, &watch, "each job that is new or changed")

	show := &cobra.Command{
		Use: "show ID", Short: "Show a job and why it is where it is", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return jobDo(cmd, g, args[0], false)
		},
	}
	cancel := &cobra.Command{
		Use: "cancel ID", Short: "Cancel a job", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return jobDo(cmd, g, args[0], true)
		},
	}
	var movePool string
	move := &cobra.Command{
		Use:   "move ID --pool POOL",
		Short: "Move a job that has not started to another server pool (admin, or the runtime that submitted it); --pool '' lets it run on any server",
		Long: `Move a job that has not started (pending, placed or ready) to another server pool, keeping
its ID and its place in the queue: what a runtime does when a user moves a job to another
partition. A placed job keeps its placement only when the new pool holds every server of it;
otherwise the move is refused and the job must be handed back first. A running job is never
moved.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("pool") {
				return domain.Invalid("pool", "name the pool to move the job to (--pool NAME; --pool '' for any server)")
			}
			return g.onJob(args[0], func(c *client.Client, id uint64) error {
				j, err := c.SetJobPool(cmd.Context(), id, movePool)
				if err != nil {
					return err
				}
				return g.emit(j, func(w io.Writer) { g.jobDetail(w, j) })
			})
		},
	}
	move.Flags().StringVar(&movePool, "pool", "", "the server pool the job may run on from now on ('' for any server)")
	explain := &cobra.Command{
		Use: "explain ID", Short: "Why a job is where it is: its reason, or where it was placed", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onJob(args[0], func(c *client.Client, id uint64) error {
				j, err := c.Job(cmd.Context(), id)
				if err != nil {
					return err
				}
				return g.emit(j, func(w io.Writer) {
					fmt.Fprintf(w, "job %d (%s) is %s", j.ID, j.Name, j.State)
					if j.Reason != nil {
						fmt.Fprintf(w, ": %s [%s]", j.Reason.Message, j.Reason.Code)
					}
					fmt.Fprintln(w)
					if j.Reason != nil && j.State == domain.JobPending {
						reservationLines(w, j.Reason.Reservation)
					}
					for _, p := range j.Placement {
						fmt.Fprintf(w, "  %s GPUs %s\n", p.Server, joinInts(p.GPUs))
					}
				})
			})
		},
	}
	cmd.AddCommand(submit, list, show, explain, cancel, move, newJobReportCmd(g), newJobWatchCmd(g), newJobEnvCmd(g), newJobHealthCmd(g))
	return cmd
}

// parseStates reads --state values, each one state or a comma-separated
// list, in any case.
func parseStates(values []string) ([]domain.JobState, error) {
	var out []domain.JobState
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			st, ok := domain.ParseJobState(name)
			if !ok {
				return nil, usagef("--state %q is not a job state; give one or more of %s", name, stateNames())
			}
			out = append(out, st)
		}
	}
	return out, nil
}

func stateNames() string {
	names := make([]string, len(domain.JobStates))
	for i, s := range domain.JobStates {
		names[i] = strings.ToLower(string(s))
	}
	return strings.Join(names, ", ")
}

// durationSeconds converts a duration flag to the API's whole seconds,
// naming the flag when it cannot be one.
func durationSeconds(flag string, d time.Duration) (int64, error) {
	switch {
	case d < 0:
		return 0, domain.Invalid(flag, "--%s %s is negative", flag, d)
	case d%time.Second != 0:
		return 0, domain.Invalid(flag, "--%s %s is not a whole number of seconds (the smallest limit is 1s)", flag, d)
	case d > domain.MaxSeconds*time.Second:
		return 0, domain.Invalid(flag, "--%s %s is longer than the limit of %s", flag, d, time.Duration(domain.MaxSeconds)*time.Second)
	}
	return int64(d / time.Second), nil
}

func newJobReportCmd(g *globals) *cobra.Command {
	var st, msg string
	cmd := &cobra.Command{
		Use:   "report ID --state running|succeeded|failed|stopped|rejected",
		Short: "Report a job's progress as its runtime (a runtime or admin token)",
		Long: `Report a job's progress, as the runtime that runs it: running when it starts
(and again as a heartbeat), succeeded or failed when it ends, stopped when a
Preempting job has stopped and its GPUs may go, rejected (with --message saying
why) when the runtime cannot start a Ready job on its placement: jobfabric
requeues it and places it again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onJob(args[0], func(c *client.Client, id uint64) error {
				j, err := c.Report(cmd.Context(), id, st, msg)
				if err != nil {
					return err
				}
				return g.emit(j, func(w io.Writer) { g.jobDetail(w, j) })
			})
		},
	}
	cmd.Flags().StringVar(&st, "state", "", "running, succeeded, failed, stopped or rejected")
	cmd.Flags().StringVar(&msg, "message", "", "what the runtime has to say (at most 1024 characters)")
	_ = cmd.MarkFlagRequired("state")
	return cmd
}

func newJobWatchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID",
		Short: "Print a line each time a job changes, until it ends (-o json: one JSON object per line)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.onJob(args[0], func(c *client.Client, id uint64) error {
				return c.Watch(cmd.Context(), id, func(j *domain.Job) error { return g.emitLine(j) })
			})
		},
	}
}

// emitLine prints one job of a stream as it comes: a line (time, state,
// reason, the runtime's message), a line of JSON, or a YAML document.
func (g *globals) emitLine(j *domain.Job) error {
	return g.emitItem(j, false, func(w io.Writer) {
		reason := "-"
		if j.Reason != nil {
			reason = fmt.Sprintf("%s (%s)", j.Reason.Message, j.Reason.Code)
		}
		line := fmt.Sprintf("%s  %-10s  %s", g.when(j.UpdatedAt), j.State, reason)
		if j.Message != "" {
			line += fmt.Sprintf("  message: %q", j.Message)
		}
		if h := j.PathHealth; h != nil {
			line += "  path: " + string(h.Verdict)
			if h.Verdict.Faulty() {
				line += fmt.Sprintf(" (%s)", h.Message)
			}
		}
		fmt.Fprintln(w, line)
	})
}

// onJob parses a job ID argument and calls fn with a client of the
// server: what every `job VERB ID` command starts with.
func (g *globals) onJob(raw string, fn func(c *client.Client, id uint64) error) error {
	id, err := parseJobID(raw)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	return fn(c, id)
}

func parseJobID(raw string) (uint64, error) {
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, domain.Invalid("id", "job id %q is not a positive integer", raw)
	}
	return id, nil
}

// reservationLines prints a waiting job's reservation: when (and on what
// estimates) and on which GPUs it is expected to start.
func reservationLines(w io.Writer, r *domain.Reservation) {
	if r == nil {
		return
	}
	when := "as soon as running jobs past their estimated end stop"
	if slices.Contains(r.Basis, domain.BasisUnknown) {
		when = "once running jobs with no time limit, expected duration or history stop"
	} else if !r.Start.IsZero() {
		when = "from " + r.Start.UTC().Format(time.RFC3339)
	}
	if slices.Equal(r.Basis, []string{domain.BasisUnknown}) {
		fmt.Fprintf(w, "  reserved %s:\n", when)
	} else {
		fmt.Fprintf(w, "  reserved %s (estimated from running jobs' %s):\n", when, strings.ReplaceAll(strings.Join(r.Basis, ", "), "_", " "))
	}
	for _, p := range r.Placement {
		fmt.Fprintf(w, "    %s GPUs %s\n", p.Server, joinInts(p.GPUs))
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func jobDo(cmd *cobra.Command, g *globals, raw string, cancel bool) error {
	id, err := parseJobID(raw)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	var j *domain.Job
	if cancel {
		j, err = c.CancelJob(cmd.Context(), id)
	} else {
		j, err = c.Job(cmd.Context(), id)
	}
	if err != nil {
		return err
	}
	return g.emit(j, func(w io.Writer) { g.jobDetail(w, j) })
}

// jobTable lists jobs; -o wide adds priority, preemptibility, the
// submission time and each server's GPUs.
func (p *printing) jobTable(w io.Writer, js []domain.Job) {
	header(w, wideCols(w, []any{"ID", "NAME", "WORKSPACE", "GPUS", "STATE", "AGE", "SERVERS", "REASON"}, "PRIORITY", "PREEMPTIBLE", "SUBMITTED", "PLACEMENT")...)
	for _, j := range js {
		reason := ""
		if j.Reason != nil && j.State == domain.JobPending {
			reason = j.Reason.Message
		}
		servers := make([]string, len(j.Placement))
		where := make([]string, len(j.Placement))
		for i, pl := range j.Placement {
			servers[i] = pl.Server
			where[i] = pl.Server + ":" + joinInts(pl.GPUs)
		}
		row(w, wideCols(w, []any{j.ID, j.Name, j.Tenant + "/" + j.Workspace, demand(&j.JobSpec), j.State, p.age(j.SubmittedAt), orDash(strings.Join(servers, ",")), orDash(reason)},
			j.Priority, j.Preemptible, p.when(j.SubmittedAt), orDash(strings.Join(where, " ")))...)
	}
}

func (p *printing) jobDetail(w io.Writer, j *domain.Job) {
	row(w, "ID:", j.ID)
	row(w, "Name:", j.Name)
	row(w, "Workspace:", j.Tenant+"/"+j.Workspace)
	row(w, "Asks for:", demand(&j.JobSpec))
	if j.GPUsPerNode > 0 {
		row(w, "GPUs per node:", j.GPUsPerNode)
	}
	row(w, "GPU model:", orDash(strings.Join(j.Models(), " or ")))
	row(w, "Priority:", j.Priority)
	row(w, "Preemptible:", j.Preemptible)
	if j.TimeLimitSeconds > 0 {
		row(w, "Time limit:", time.Duration(j.TimeLimitSeconds)*time.Second)
	}
	if j.MinRuntimeSeconds > 0 {
		row(w, "Min runtime:", time.Duration(j.MinRuntimeSeconds)*time.Second)
	}
	if j.ExpectedDurationSeconds > 0 {
		row(w, "Expected duration:", time.Duration(j.ExpectedDurationSeconds)*time.Second)
	}
	row(w, "State:", j.State)
	if j.Reason != nil {
		row(w, "Reason:", fmt.Sprintf("%s (%s)", j.Reason.Message, j.Reason.Code))
	}
	if j.Message != "" {
		row(w, "Message:", j.Message)
	}
	if t := j.Topology; t != nil {
		mode := "preferred"
		if t.Required {
			mode = "required"
		}
		row(w, "Topology:", t.Level+" ("+mode+")")
	}
	for _, p := range j.Placement {
		where := p.Server
		switch {
		case len(p.MIG) > 0:
			parts := make([]string, len(p.MIG))
			for i, s := range p.MIG {
				parts[i] = fmt.Sprintf("GPU %d %s@%d", s.GPU, s.Profile, s.Start)
			}
			where += " MIG " + strings.Join(parts, ", ")
		case p.Share > 0:
			where += fmt.Sprintf(" GPU %s share %g", joinInts(p.GPUs), p.Share)
		default:
			where += " GPUs " + joinInts(p.GPUs)
		}
		if p.NVLinkDomain != "" {
			where += " (NVLink domain " + p.NVLinkDomain
			if len(p.Leaves) > 0 {
				where += "; leaves " + strings.Join(uniq(p.Leaves), ",")
			}
			where += ")"
		}
		row(w, "Placement:", where)
	}
	if j.Requeues > 0 {
		row(w, "Requeues:", j.Requeues)
	}
	row(w, "Submitted:", p.when(j.SubmittedAt)+" ("+p.age(j.SubmittedAt)+" ago) by "+orDash(j.SubmittedBy))
	for _, t := range []struct {
		label string
		at    *time.Time
	}{{"Placed:", j.PlacedAt}, {"Started:", j.StartedAt}, {"Stop by:", j.StopDeadline}, {"Ended:", j.EndedAt}} {
		if t.at != nil {
			row(w, t.label, p.when(*t.at))
		}
	}
	for _, warn := range j.Warnings { // host problems under the job (hosts.go)
		row(w, "Warning:", warn.Message+" ("+warn.Code+")")
	}
	if h := j.PathHealth; h != nil {
		row(w, "Path health:", pathHealthLine(p, h))
	}
}

// pathHealthLine is a committed path verdict for people: "congested since
// 2026-11-26T10:00:00Z: leaf-1/swp3 pfc_pause_rx ...".
func pathHealthLine(p *printing, h *domain.PathHealth) string {
	s := string(h.Verdict) + " since " + p.when(h.Since)
	if h.Message != "" {
		s += ": " + h.Message
	}
	return s
}

func newEventsCmd(g *globals) *cobra.Command {
	var q client.EventQuery
	var ws string
	var follow bool
	cmd := &cobra.Command{
		Use: "events", Short: "The audit trail: who changed what, when", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setRef(ws, &q.Tenant, &q.Workspace); err != nil {
				return err
			}
			// The client leaves a limit below 1 out of the query, which
			// would list everything: refuse it here as the API does.
			if cmd.Flags().Changed("limit") && q.Limit < 1 {
				return domain.Invalid("limit", "--limit %d: give a positive number of events", q.Limit)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if follow {
				return followEvents(cmd.Context(), g, c, q)
			}
			es, err := c.Events(cmd.Context(), q)
			if err != nil {
				return err
			}
			return g.emit(es, func(w io.Writer) { g.eventTable(w, es) })
		},
	}
	cmd.Flags().StringVar(&q.Tenant, "tenant", "", "only this tenant's events")
	cmd.Flags().StringVar(&ws, "workspace", "", "only this TENANT/WORKSPACE's events")
	cmd.Flags().StringVar(&q.Since, "since", "", "only events newer than this duration (1h, 30m) or RFC 3339 time")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "at most this many (newest)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "after printing, keep printing new events as they happen, until Ctrl-C")
	return cmd
}

func (p *printing) eventTable(w io.Writer, es []domain.Event) {
	header(w, "SEQ", "TIME", "ACTOR", "ACTION", "OBJECT", "MESSAGE")
	for _, e := range es {
		row(w, e.Seq, p.when(e.At), e.Actor, e.Action, e.Object, orDash(e.Message))
	}
}

// followEvents prints the events q selects, then each new one as it is
// recorded. Each poll asks only for events from shortly before the last one
// seen (a second's overlap for clocks' rounding; the sequence number drops
// repeats), not the whole trail again.
func followEvents(ctx context.Context, g *globals, c *client.Client, q client.EventQuery) error {
	var last domain.Event
	fetch := func(ctx context.Context) ([]domain.Event, error) {
		qq := q
		if last.Seq > 0 {
			qq.Since, qq.Limit = last.At.Add(-time.Second).UTC().Format(time.RFC3339Nano), 0
		}
		es, err := c.Events(ctx, qq)
		if err != nil {
			return nil, err
		}
		var kept []domain.Event
		for _, e := range es {
			if e.Seq > last.Seq {
				kept = append(kept, e)
			}
		}
		for _, e := range kept {
			if e.Seq > last.Seq {
				last = e
			}
		}
		return kept, nil
	}
	key := func(e domain.Event) string { return strconv.FormatUint(e.Seq, 10) }
	return watchList(ctx, g, fetch, key, nil, g.eventTable)
}

func newClusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Control-plane members and leader"}
	status := &cobra.Command{
		Use: "status", Short: "Members, their roles, the leader and the apply rules each member's binary applies (admin)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			v, err := c.Cluster(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(v, func(w io.Writer) {
				title(w, "raft peer authentication: %s\n", v.PeerAuth)
				title(w, "raft log store (the answering leader's): %s\n", v.LogStore)
				title(w, "apply rules in effect: %d (the highest every member applies)\n", v.ApplyRules)
				header(w, "ID", "RAFT", "API", "SUFFRAGE", "LEADER", "RULES")
				for _, m := range v.Members {
					row(w, m.ID, m.RaftAddr, orDash(m.APIAddr), m.Suffrage, m.Leader, m.ApplyRules)
				}
			})
		},
	}
	remove := &cobra.Command{
		Use: "remove ID", Short: "Remove a member from the cluster (admin)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), "DELETE", "/v1/cluster/members/"+args[0], nil, nil); err != nil {
				return err
			}
			return g.emit(memberRemoved{ID: args[0], Removed: true}, func(w io.Writer) { fmt.Fprintf(w, "member %s removed\n", args[0]) })
		},
	}
	secret := &cobra.Command{
		Use:   "secret",
		Short: "Print a new cluster secret (32 random bytes, base64) for --cluster-secret-file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := store.NewSecret()
			if err != nil {
				return err
			}
			s := string(b)
			return g.emit(clusterSecret{Secret: s}, func(w io.Writer) { fmt.Fprintln(w, s) })
		},
	}
	cmd.AddCommand(status, remove, secret, newClusterTLSCmd(g))
	return cmd
}

// memberRemoved is what cluster remove prints with -o json|yaml|name.
type memberRemoved struct {
	ID      string `json:"id"`
	Removed bool   `json:"removed"`
}

func (m memberRemoved) names() []string { return []string{"member/" + m.ID} }

type clusterSecret struct {
	Secret string `json:"secret"`
}

// demand says what a job asks for: "16", "2x3g.40gb", "0.25".
func demand(s *domain.JobSpec) string {
	switch {
	case s.MIGProfile != "":
		return fmt.Sprintf("%dx%s", s.MIGCount, s.MIGProfile)
	case s.Share > 0:
		return fmt.Sprintf("%g", s.Share)
	}
	return strconv.Itoa(s.GPUs)
}

func uniq(xs []string) []string {
	var out []string
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// parseTopology reads LEVEL[:required|:preferred].
func parseTopology(v string) (*domain.TopologyRequirement, error) {
	if v == "" {
		return nil, nil
	}
	level, mode, _ := strings.Cut(v, ":")
	r := &domain.TopologyRequirement{Level: level}
	switch mode {
	case "", "preferred":
	case "required":
		r.Required = true
	default:
		return nil, domain.Invalid("topology", "--topology %q: the mode after ':' is required or preferred", v)
	}
	return r, nil
}
