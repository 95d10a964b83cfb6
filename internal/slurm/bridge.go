package slurm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Runner runs a Slurm command (squeue, scontrol, scancel) and returns its
// standard output; the error carries what it wrote to standard error. The
// bridge calls it from several goroutines at once.
type Runner interface {
	Command(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs the Slurm commands found on PATH, with Env added to the
// environment (SLURM_CONF, for instance).
type ExecRunner struct{ Env []string }

// Command implements Runner.
func (r ExecRunner) Command(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if len(r.Env) > 0 {
		cmd.Env = append(cmd.Environ(), r.Env...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// API is what the bridge asks of jobfabric; *client.Client has it. The
// token must submit, cancel and report on jobs of every mapped tenant.
type API interface {
	Jobs(ctx context.Context, q client.JobQuery) ([]domain.Job, error)
	JobByExternalID(ctx context.Context, ext string) (*domain.Job, error)
	SubmitJob(ctx context.Context, spec domain.JobSpec) (*domain.Job, error)
	CancelJob(ctx context.Context, id uint64) (*domain.Job, error)
	Report(ctx context.Context, id uint64, state, message string) (*domain.Job, error)
}

// Config is what a Bridge needs.
type Config struct {
	// Cluster is Slurm's ClusterName: it scopes the external ids.
	Cluster string
	Slurm   Runner
	API     API
	Mapping Mapping
	// Interval is the time between passes of Run; default 1s.
	Interval time.Duration
	Clock    tstime.Clock
	Logger   *slog.Logger
}

// Bridge submits held Slurm jobs to jobfabric and releases them where
// jobfabric placed them.
type Bridge struct {
	cfg Config
	// settled are the ended Slurm jobs already told to jobfabric: squeue
	// keeps showing them for MinJobAge. Lost on restart, which costs one
	// lookup per such job.
	settled map[string]bool
	// known are the external ids live in jobfabric at the last pass, or
	// submitted by it; nil before the first pass. A held job not live now
	// is looked up (its job may have ended) only when it was known, or on
	// the first pass after a start: a new held job costs one request.
	known map[string]bool
}

// Stats count what one pass did.
type Stats struct {
	// Submitted held Slurm jobs became jobfabric jobs; Released ones were
	// set to their placement and released; Held ones were left held with
	// a comment saying why.
	Submitted int `json:"submitted"`
	Released  int `json:"released"`
	Held      int `json:"held"`
	// Cancelled counts Slurm jobs cancelled for their jobfabric job and
	// jobfabric jobs ended for their Slurm job; Reported, jobs reported
	// running.
	Cancelled int `json:"cancelled"`
	Reported  int `json:"reported"`
}

// New checks cfg and returns a Bridge.
func New(cfg Config) (*Bridge, error) {
	if cfg.Cluster == "" {
		return nil, domain.Invalid("cluster", "the Slurm cluster name is required (it scopes the external ids slurm:CLUSTER:JOBID)")
	}
	if err := domain.ValidateExternalID("cluster", ExternalID(cfg.Cluster, "1")); err != nil {
		return nil, err
	}
	if cfg.Slurm == nil || cfg.API == nil {
		return nil, errors.New("slurm bridge: a Slurm runner and a jobfabric API are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = tstime.Std{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Bridge{cfg: cfg, settled: map[string]bool{}}, nil
}

// ExternalID is the jobfabric external id of a Slurm job.
func ExternalID(cluster, jobID string) string { return "slurm:" + cluster + ":" + jobID }

// Run makes a pass every Interval until ctx ends; a failed pass is logged
// and the next one tries again.
func (b *Bridge) Run(ctx context.Context) error {
	tick, c := b.cfg.Clock.NewTicker(b.cfg.Interval)
	defer tick.Stop()
	for {
		if st, err := b.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.cfg.Logger.Warn("slurm bridge pass failed", "err", err)
		} else if st != (Stats{}) {
			b.cfg.Logger.Info("slurm bridge pass", "submitted", st.Submitted, "released", st.Released, "held", st.Held, "cancelled", st.Cancelled, "reported", st.Reported)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c:
		}
	}
}

// Sync makes one pass over the Slurm queue. An error on one job is logged
// and the pass goes on; only an unreadable queue or jobfabric fails it.
func (b *Bridge) Sync(ctx context.Context) (Stats, error) {
	var st Stats
	out, err := b.cfg.Slurm.Command(ctx, "squeue", "-h", "-t", "all", "-o", squeueFormat)
	if err != nil {
		return st, fmt.Errorf("slurm bridge: read the queue: %w", err)
	}
	jobs, err := ParseSqueue(string(out))
	if err != nil {
		return st, fmt.Errorf("slurm bridge: %w", err)
	}
	// Oldest first: jobfabric queues them in the order Slurm got them.
	slices.SortStableFunc(jobs, func(a, b Job) int { return compareIDs(a.ID, b.ID) })
	// One list of live jobs instead of a lookup per Slurm job.
	live, err := b.cfg.API.Jobs(ctx, client.JobQuery{States: []domain.JobState{domain.JobPending, domain.JobPlaced, domain.JobReady, domain.JobRunning, domain.JobPreempting}})
	if err != nil {
		return st, fmt.Errorf("slurm bridge: list jobfabric jobs: %w", err)
	}
	byExt := map[string]*domain.Job{}
	for i := range live {
		if live[i].ExternalID != "" {
			byExt[live[i].ExternalID] = &live[i]
		}
	}
	var rel []release
	next := make(map[string]bool, len(byExt))
	for ext := range byExt {
		next[ext] = true
	}
	for i := range jobs {
		j := &jobs[i]
		ext := ExternalID(b.cfg.Cluster, j.ID)
		var err error
		switch {
		case j.Held():
			err = b.held(ctx, j, ext, byExt[ext], &st, &rel, next)
		case j.Ended() && !b.settled[ext]:
			err = b.ended(ctx, j, ext, byExt[ext], &st)
		case j.State == "RUNNING":
			if jf := byExt[ext]; jf != nil && jf.State == domain.JobReady {
				if _, err = b.cfg.API.Report(ctx, jf.ID, "running", "slurm job "+j.ID+" runs"); err == nil {
					st.Reported++
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				if b.known != nil { // the jobs not reached keep their lookup
					for ext := range b.known {
						next[ext] = true
					}
					b.known = next
				}
				return st, ctx.Err()
			}
			b.cfg.Logger.Warn("slurm bridge: job", "slurm_job", j.ID, "err", err)
		}
	}
	b.known = next
	b.releaseAll(ctx, rel, &st)
	shown := make(map[string]bool, len(jobs))
	for i := range jobs {
		shown[ExternalID(b.cfg.Cluster, jobs[i].ID)] = true
	}
	for ext := range b.settled { // squeue forgot them: so can the bridge
		if !shown[ext] {
			delete(b.settled, ext)
		}
	}
	b.gone(ctx, shown, live, &st)
	return st, ctx.Err()
}

// gone ends the live jobfabric jobs of this cluster's Slurm jobs that
// squeue no longer shows at all (ended longer ago than MinJobAge, or lost
// with slurmctld's state): nothing will ever run them.
func (b *Bridge) gone(ctx context.Context, shown map[string]bool, live []domain.Job, st *Stats) {
	prefix := ExternalID(b.cfg.Cluster, "")
	for i := range live {
		jf := &live[i]
		if !strings.HasPrefix(jf.ExternalID, prefix) || shown[jf.ExternalID] {
			continue
		}
		var err error
		if jf.State == domain.JobPending || jf.State == domain.JobPlaced || jf.State == domain.JobReady {
			_, err = b.cfg.API.CancelJob(ctx, jf.ID)
		} else {
			_, err = b.cfg.API.Report(ctx, jf.ID, "failed", "slurm job "+strings.TrimPrefix(jf.ExternalID, prefix)+" is gone from slurmctld")
		}
		if err != nil {
			b.cfg.Logger.Warn("slurm bridge: end a job whose slurm job is gone", "job", jf.ID, "external_id", jf.ExternalID, "err", err)
			continue
		}
		st.Cancelled++
		b.cfg.Logger.Info("slurm bridge: slurm job gone", "job", jf.ID, "external_id", jf.ExternalID)
	}
}

// held handles a held Slurm job: submit it once, release it when its
// jobfabric job is Ready, cancel it when that job ended first.
func (b *Bridge) held(ctx context.Context, j *Job, ext string, jf *domain.Job, st *Stats, rel *[]release, next map[string]bool) error {
	if jf == nil && (b.known == nil || b.known[ext]) {
		found, err := b.cfg.API.JobByExternalID(ctx, ext)
		switch {
		case err == nil:
			jf = found // an ended job: cancelled before Slurm ran it
		case domain.CodeOf(err) != domain.CodeNotFound:
			return fmt.Errorf("look up %s: %w", ext, err)
		}
	}
	if jf == nil {
		spec, why, err := b.spec(ctx, j, ext)
		if err != nil {
			return err
		}
		if why != "" {
			return b.keepHeld(ctx, j, why, st)
		}
		jf, err = b.cfg.API.SubmitJob(ctx, spec)
		if err != nil {
			switch domain.CodeOf(err) {
			case domain.CodeAlreadyExists:
				// Another bridge (or a pass that timed out) submitted it.
				if jf, err = b.cfg.API.JobByExternalID(ctx, ext); err != nil {
					return fmt.Errorf("look up %s: %w", ext, err)
				}
				return b.placed(ctx, j, jf, st, rel)
			case domain.CodeInvalidArgument, domain.CodeNotFound, domain.CodeFailedPrecondition, domain.CodePermissionDenied:
				// jobfabric refuses the job as asked: say so on the Slurm job.
				why := err.Error()
				if de := (*domain.Error)(nil); errors.As(err, &de) && de.Message != "" {
					why = de.Message
				}
				return b.keepHeld(ctx, j, why, st)
			}
			return fmt.Errorf("submit %s: %w", ext, err)
		}
		st.Submitted++
		next[ext] = true
		b.cfg.Logger.Info("slurm bridge: submitted", "slurm_job", j.ID, "job", jf.ID, "tenant", spec.Tenant, "workspace", spec.Workspace, "gpus", spec.GPUs)
	}
	return b.placed(ctx, j, jf, st, rel)
}

// placed acts on a held Slurm job by its jobfabric job's state.
func (b *Bridge) placed(ctx context.Context, j *Job, jf *domain.Job, st *Stats, rel *[]release) error {
	switch {
	case jf.State == domain.JobReady || jf.State == domain.JobRunning:
		nodes := PlacedNodes(jf)
		if len(nodes) == 0 {
			return fmt.Errorf("job %d is %s without a placement", jf.ID, jf.State)
		}
		*rel = append(*rel, release{slurmID: j.ID, job: jf.ID, nodes: nodes})
	case jf.State.Terminal():
		if _, err := b.cfg.Slurm.Command(ctx, "scancel", j.ID); err != nil {
			return err
		}
		st.Cancelled++
		b.cfg.Logger.Info("slurm bridge: cancelled the slurm job", "slurm_job", j.ID, "job", jf.ID, "state", jf.State)
	}
	return nil
}

// spec is the jobfabric job of a Slurm job; why says, instead, why it
// cannot be one.
func (b *Bridge) spec(ctx context.Context, j *Job, ext string) (domain.JobSpec, string, error) {
	tenant, why := b.cfg.Mapping.tenant(j)
	if why != "" {
		return domain.JobSpec{}, why, nil
	}
	spec := domain.JobSpec{Tenant: tenant, Workspace: b.cfg.Mapping.workspace(j), ExternalID: ext, TimeLimitSeconds: int64(j.TimeLimit / time.Second)}
	nodes := max(j.Nodes, 1)
	perNode, err := GPUCount(j.TresPerNode)
	if err != nil {
		return spec, "", err
	}
	if perNode > 0 {
		spec.GPUs, spec.GPUsPerNode = perNode*nodes, perNode
		return spec, "", nil
	}
	// --gpus is per job, and not among squeue's -o fields.
	out, err := b.cfg.Slurm.Command(ctx, "scontrol", "show", "job", "-o", j.ID)
	if err != nil {
		return spec, "", err
	}
	total, err := GPUCount(nullable(ParseShowJob(string(out))["TresPerJob"]))
	if err != nil {
		return spec, "", err
	}
	switch {
	case total == 0:
		return spec, "the job asks for no GPU (--gres=gpu:N or --gpus=N)", nil
	case total%nodes != 0:
		return spec, fmt.Sprintf("%d GPUs do not spread evenly over %d nodes", total, nodes), nil
	}
	spec.GPUs, spec.GPUsPerNode = total, total/nodes
	return spec, "", nil
}

// keepHeld leaves the job held with why in its comment (once).
func (b *Bridge) keepHeld(ctx context.Context, j *Job, why string, st *Stats) error {
	comment := "jobfabric: " + strings.ReplaceAll(why, "\n", " ")
	if j.Comment == comment {
		return nil
	}
	if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "update", "JobId="+j.ID, "Comment="+comment); err != nil {
		return err
	}
	st.Held++
	b.cfg.Logger.Info("slurm bridge: kept held", "slurm_job", j.ID, "why", why)
	return nil
}

// release is a held Slurm job whose jobfabric job is Ready.
type release struct {
	slurmID string
	job     uint64
	nodes   []string
}

// releaseWorkers bounds the scontrol updates in flight: each is a process
// and an RPC to slurmctld, which serializes them anyway.
const releaseWorkers = 4

// releaseBatch bounds the job ids of one scontrol release command line.
const releaseBatch = 256

// releaseAll sets each job's required nodes to its placement (one
// scontrol update per job, a few at a time), then releases the updated
// jobs with one scontrol release per batch: two commands per job in
// sequence were the bridge's bottleneck.
func (b *Bridge) releaseAll(ctx context.Context, rs []release, st *Stats) {
	updated := make([]bool, len(rs))
	sem := make(chan struct{}, releaseWorkers)
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := b.cfg.Slurm.Command(ctx, "scontrol", "update", "JobId="+r.slurmID, "ReqNodeList="+strings.Join(r.nodes, ","), fmt.Sprintf("NumNodes=%d", len(r.nodes)))
			if err != nil {
				b.cfg.Logger.Warn("slurm bridge: set the placement", "slurm_job", r.slurmID, "job", r.job, "err", err)
				return
			}
			updated[i] = true
		}()
	}
	wg.Wait()
	var batch []release
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ids := make([]string, len(batch))
		for i, r := range batch {
			ids[i] = r.slurmID
		}
		done := batch
		if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "release", strings.Join(ids, ",")); err != nil {
			// One bad id fails the command: release one by one to find it.
			done = nil
			for _, r := range batch {
				if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "release", r.slurmID); err != nil {
					b.cfg.Logger.Warn("slurm bridge: release", "slurm_job", r.slurmID, "job", r.job, "err", err)
					continue
				}
				done = append(done, r)
			}
		}
		for _, r := range done {
			st.Released++
			b.cfg.Logger.Info("slurm bridge: released", "slurm_job", r.slurmID, "job", r.job, "nodes", strings.Join(r.nodes, ","))
		}
		batch = batch[:0]
	}
	for i, r := range rs {
		if !updated[i] {
			continue
		}
		if batch = append(batch, r); len(batch) == releaseBatch {
			flush()
		}
	}
	flush()
}

// PlacedNodes are the servers of a job's placement, in placement order,
// each once.
func PlacedNodes(jf *domain.Job) []string {
	var nodes []string
	seen := map[string]bool{}
	for _, p := range jf.Placement {
		if !seen[p.Server] {
			seen[p.Server] = true
			nodes = append(nodes, p.Server)
		}
	}
	return nodes
}

// ended tells jobfabric a Slurm job is over: cancelled in Slurm cancels
// the jobfabric job, anything else is reported as its outcome.
func (b *Bridge) ended(ctx context.Context, j *Job, ext string, jf *domain.Job, st *Stats) error {
	if jf == nil { // not live in jobfabric: nothing to tell
		b.settled[ext] = true
		return nil
	}
	var err error
	switch {
	case j.State == "CANCELLED":
		_, err = b.cfg.API.CancelJob(ctx, jf.ID)
	case j.State == "COMPLETED":
		_, err = b.cfg.API.Report(ctx, jf.ID, "succeeded", "slurm job "+j.ID+" completed")
	default:
		_, err = b.cfg.API.Report(ctx, jf.ID, "failed", "slurm job "+j.ID+" ended "+j.State)
	}
	if err != nil {
		return fmt.Errorf("tell jobfabric job %d that slurm job %s is %s: %w", jf.ID, j.ID, j.State, err)
	}
	b.settled[ext] = true
	st.Cancelled++
	return nil
}

// compareIDs orders Slurm job ids by number (123 before 1000); an array
// task id (123_4) orders by its job, then its task. Ids are decimal
// without leading zeros, so length then text is numeric order.
func compareIDs(a, b string) int {
	an, at, _ := strings.Cut(a, "_")
	bn, bt, _ := strings.Cut(b, "_")
	return cmp.Or(cmp.Compare(len(an), len(bn)), strings.Compare(an, bn), cmp.Compare(len(at), len(bt)), strings.Compare(at, bt))
}
