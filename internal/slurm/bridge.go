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

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Runner runs a Slurm command (squeue, scontrol, scancel) and returns its
// standard output; the error carries what it wrote to standard error. The
// bridge calls it from several goroutines at once.
type Runner interface {
	Command(ctx context.Context, name string, args ...string) ([]byte, error)
	// Pipe runs the command with stdin as its standard input: scontrol
	// without arguments runs one command per line, in one process.
	Pipe(ctx context.Context, stdin string, name string, args ...string) ([]byte, error)
}

// ExecRunner runs the Slurm commands found on PATH, with Env added to the
// environment (SLURM_CONF, for instance).
type ExecRunner struct{ Env []string }

// Command implements Runner.
func (r ExecRunner) Command(ctx context.Context, name string, args ...string) ([]byte, error) {
	return r.Pipe(ctx, "", name, args...)
}

// Pipe implements Runner.
func (r ExecRunner) Pipe(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if len(r.Env) > 0 {
		cmd.Env = append(cmd.Environ(), r.Env...)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// API is what the bridge asks of jobfabric; *client.Client has it. A
// platform runtime token is enough: a runtime may submit a job carrying
// an externalId and cancel one a runtime submitted.
type API interface {
	Jobs(ctx context.Context, q client.JobQuery) ([]domain.Job, error)
	JobByExternalID(ctx context.Context, ext, tenant string) (*domain.Job, error)
	SubmitJob(ctx context.Context, spec domain.JobSpec) (*domain.Job, error)
	CancelJob(ctx context.Context, id uint64) (*domain.Job, error)
	Report(ctx context.Context, id uint64, state, message string) (*domain.Job, error)
	Workspace(ctx context.Context, tenant, name string) (*domain.Workspace, error)
	// ReportRuntimeNodes tells jobfabric which servers Slurm can and
	// cannot use (POST /v1/nodes/runtime).
	ReportRuntimeNodes(ctx context.Context, req api.RuntimeNodesRequest) ([]domain.NodeCondition, error)
	// Pools, SetPool and DeletePool keep a pool per Slurm partition
	// (pools.go).
	Pools(ctx context.Context) ([]api.Pool, error)
	SetPool(ctx context.Context, name string, servers []string) (*api.Pool, error)
	DeletePool(ctx context.Context, name string) (*api.Pool, error)
	// SetJobPool moves a job that has not started to another pool: a
	// user moved its Slurm job to another partition (pools.go).
	SetJobPool(ctx context.Context, id uint64, pool string) (*domain.Job, error)
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
	// SubmitsPerPass bounds the new Slurm jobs one pass submits (default
	// 1000): a long queue is bridged in slices, and the jobs placed from
	// one slice are released while the next is submitted.
	SubmitsPerPass int
	// StuckAfter is how long a released job may stay PENDING for its
	// nodes (Slurm's reason ReqNodeNotAvail, NodeDown...) before the bridge
	// holds it again and hands it back to jobfabric to place elsewhere;
	// default 60s: one period of Slurm's main scheduler (sched_interval)
	// and time for a node's slurmd to register again after a restart, so
	// a job that would start is not moved.
	StuckAfter time.Duration
	// PageSize is how many live jobs each request of a pass's list asks
	// for (0: livePage); the pass reads every page. Tests set it small.
	PageSize int
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
	// submitted by it. A Slurm job not live now is looked up (its job may
	// have ended) only when it was known, or when it was in Slurm's queue
	// at the bridge's first pass (unchecked, until looked up): a new held
	// job costs one request.
	known, unchecked map[string]bool
	// stuck are the released jobs found pending for their nodes, since
	// when (lost on restart: the wait starts again).
	stuck map[string]stuck
	// missing are servers jobfabric placed a job on that Slurm does not
	// have; lastNodes and lastUsable, the last node report jobfabric took.
	missing map[string]bool
	// suspect are nodes a released job stayed pending for though Slurm
	// did not show them unusable: cordoned for a while.
	suspect    map[string]suspect
	lastNodes  map[string]string
	lastUsable []string
	// pools are the cluster's pools in jobfabric (pools.go).
	pools pools
	// termed are the Slurm jobs (external id @ run) signalled for their
	// preemption and still Preempting at the last pass.
	termed map[string]bool
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
	// Preempted counts Slurm jobs requeued (held) or cancelled because
	// their jobfabric job was preempted and its grace deadline passed.
	Preempted int `json:"preempted"`
	// Misplaced counts Slurm jobs requeued held (or cancelled) because
	// Slurm allocated them off their placement: released by someone else.
	Misplaced int `json:"misplaced"`
	// Rejected counts jobs handed back to jobfabric because Slurm cannot
	// start them on their placement (a node down, drained, missing, or
	// pending for its nodes longer than StuckAfter): jobfabric places
	// them again.
	Rejected int `json:"rejected"`
	// Signalled counts running Slurm jobs sent SIGTERM at the start of
	// their preemption's grace period.
	Signalled int `json:"signalled"`
	// Moved counts jobfabric jobs moved to the pool of the partition a
	// user moved their Slurm job to.
	Moved int `json:"moved"`
}

func (s *Stats) add(o Stats) {
	s.Submitted += o.Submitted
	s.Released += o.Released
	s.Held += o.Held
	s.Cancelled += o.Cancelled
	s.Reported += o.Reported
	s.Preempted += o.Preempted
	s.Misplaced += o.Misplaced
	s.Rejected += o.Rejected
	s.Signalled += o.Signalled
	s.Moved += o.Moved
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
	if cfg.SubmitsPerPass <= 0 {
		cfg.SubmitsPerPass = 1000
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = tstime.Std{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Bridge{cfg: cfg, settled: map[string]bool{}, known: map[string]bool{}, stuck: map[string]stuck{}, missing: map[string]bool{}, suspect: map[string]suspect{}, termed: map[string]bool{}}, nil
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
			b.cfg.Logger.Info("slurm bridge pass", "submitted", st.Submitted, "released", st.Released, "held", st.Held,
				"cancelled", st.Cancelled, "reported", st.Reported, "preempted", st.Preempted, "misplaced", st.Misplaced, "rejected", st.Rejected, "signalled", st.Signalled, "moved", st.Moved)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c:
		}
	}
}

// livePage is the page size of the list of live jobs: one request for
// a queue of 10,000 instead of 20 of the default 500. It is the most a
// server's page holds (a larger limit is taken as that many).
const livePage = 10000

// pass is what one Sync gathers as it walks the queue.
type pass struct {
	st Stats
	// rel are held jobs to release; fresh and retry the held jobs to
	// submit, in Slurm's order (retry: jobfabric refused them before).
	rel          []release
	fresh, retry []*Job
	next         map[string]bool // known, for the next pass
	workspaces   map[string]*domain.Workspace
	// nodes is Slurm's view of its nodes (nil: unread); stuck, the
	// bridge's stuck for the next pass; reject, the Ready jobs Slurm
	// cannot start where they are placed.
	nodes  *nodeView
	stuck  map[string]stuck
	reject []rejection
	// pools: jobfabric has this pass's partition pools; jobs name them.
	pools bool
	// resv are slurmctld's reservations, once read this pass (resvRead;
	// resvOK: read without error).
	resv             []Reservation
	resvRead, resvOK bool
}

// Sync makes one pass over the Slurm queue. An error on one job is logged
// and the pass goes on; only an unreadable queue or jobfabric fails it.
func (b *Bridge) Sync(ctx context.Context) (Stats, error) {
	out, err := b.cfg.Slurm.Command(ctx, "squeue", squeueArgs...)
	if err != nil {
		return Stats{}, fmt.Errorf("slurm bridge: read the queue: %w", err)
	}
	jobs, err := ParseSqueue(string(out))
	if err != nil {
		return Stats{}, fmt.Errorf("slurm bridge: %w", err)
	}
	// Oldest first: jobfabric queues them in the order Slurm got them.
	slices.SortStableFunc(jobs, func(a, b Job) int { return compareIDs(a.ID, b.ID) })
	// One list of live jobs instead of a lookup per Slurm job.
	live, err := b.cfg.API.Jobs(ctx, client.JobQuery{States: []domain.JobState{domain.JobPending, domain.JobPlaced, domain.JobReady, domain.JobRunning, domain.JobPreempting},
		PageSize: cmp.Or(b.cfg.PageSize, livePage)})
	if err != nil {
		return Stats{}, fmt.Errorf("slurm bridge: list jobfabric jobs: %w", err)
	}
	// Only a runtime's (or an admin's) jobs mirror Slurm jobs: a tenant's user may submit
	// a job with the id the bridge will give another tenant's next Slurm
	// job (ids are sequential), and that job must never be taken for the
	// other tenant's (released onto, reported on, cancelled).
	live = slices.DeleteFunc(live, func(j domain.Job) bool { return j.ExternalID == "" || !mirror(&j) })
	byExt := map[string][]*domain.Job{}
	for i := range live {
		byExt[live[i].ExternalID] = append(byExt[live[i].ExternalID], &live[i])
	}
	// The Slurm job's own: of the tenant its account maps to.
	mine := func(j *Job, ext string) *domain.Job {
		tenant, why := b.cfg.Mapping.tenant(j)
		if why != "" {
			return nil
		}
		for _, jf := range byExt[ext] {
			if jf.Tenant == tenant {
				return jf
			}
		}
		return nil
	}
	if b.unchecked == nil {
		// The first pass: any job not live may have a jobfabric job that
		// ended while no bridge ran.
		b.unchecked = map[string]bool{}
		for i := range jobs {
			if ext := ExternalID(b.cfg.Cluster, jobs[i].ID); mine(&jobs[i], ext) == nil {
				b.unchecked[ext] = true
			}
		}
	}
	p := &pass{next: make(map[string]bool, len(byExt)), workspaces: map[string]*domain.Workspace{}, nodes: b.readNodes(ctx), stuck: map[string]stuck{}}
	p.pools = b.syncPools(ctx, p.nodes, jobs)
	b.followReservations(ctx, p)
	for ext := range byExt {
		p.next[ext] = true
	}
	interrupted := func() (Stats, error) {
		for ext := range b.known { // the jobs not reached keep their lookup
			p.next[ext] = true
		}
		for ext, s := range b.stuck { // and their wait
			if _, ok := p.stuck[ext]; !ok {
				p.stuck[ext] = s
			}
		}
		b.known, b.stuck = p.next, p.stuck
		return p.st, ctx.Err()
	}
	for i := range jobs {
		j := &jobs[i]
		ext := ExternalID(b.cfg.Cluster, j.ID)
		var err error
		switch jf := mine(j, ext); {
		case j.Held():
			err = b.held(ctx, p, j, ext, jf)
		case j.Ended():
			if !b.settled[ext] {
				err = b.ended(ctx, j, ext, jf, &p.st)
			}
		default:
			err = b.active(ctx, p, j, ext, jf)
		}
		if err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			b.cfg.Logger.Warn("slurm bridge: job", "slurm_job", j.ID, "err", err)
		}
	}
	// Slurm's unusable nodes are cordoned before the jobs it cannot start
	// on them are handed back, so their next placement avoids them.
	b.rejectAll(ctx, p, b.reportNodes(ctx, p.nodes))
	// The Ready jobs are released while the new ones are submitted.
	released := make(chan Stats, 1)
	go func() { released <- b.releaseAll(ctx, p.rel) }()
	late := b.submitAll(ctx, p)
	p.st.add(<-released)
	p.st.add(b.releaseAll(ctx, late))
	// Found by submitAll's lookups; a node they found missing is reported
	// first.
	b.rejectAll(ctx, p, b.reportNodes(ctx, p.nodes))
	if ctx.Err() != nil {
		return interrupted()
	}
	b.known, b.stuck = p.next, p.stuck
	preempting := map[string]bool{}
	for i := range live {
		if live[i].State == domain.JobPreempting {
			preempting[fmt.Sprintf("%s@%d", live[i].ExternalID, live[i].Requeues)] = true
		}
	}
	for key := range b.termed { // preempted and stopped since: forgotten
		if !preempting[key] {
			delete(b.termed, key)
		}
	}
	shown := make(map[string]bool, len(jobs))
	for i := range jobs {
		shown[ExternalID(b.cfg.Cluster, jobs[i].ID)] = true
	}
	for ext := range b.settled { // squeue forgot them: so can the bridge
		if !shown[ext] {
			delete(b.settled, ext)
		}
	}
	for ext := range b.unchecked {
		if !shown[ext] {
			delete(b.unchecked, ext)
		}
	}
	b.gone(ctx, shown, live, &p.st)
	return p.st, ctx.Err()
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
		switch jf.State {
		case domain.JobPending, domain.JobPlaced, domain.JobReady:
			_, err = b.cfg.API.CancelJob(ctx, jf.ID)
		case domain.JobPreempting:
			_, err = b.cfg.API.Report(ctx, jf.ID, "stopped", "slurm job "+strings.TrimPrefix(jf.ExternalID, prefix)+" is gone from slurmctld")
		default:
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

// lookup finds the jobfabric job of a Slurm job that is not live: nil
// when there is none. It is the job of the tenant the Slurm job's account
// maps to, submitted by a runtime (the bridge): another tenant's or a
// user's job with the same id is not the Slurm job's.
func (b *Bridge) lookup(ctx context.Context, j *Job, ext string) (*domain.Job, error) {
	tenant, why := b.cfg.Mapping.tenant(j)
	if why != "" {
		delete(b.unchecked, ext)
		return nil, nil // never submitted: the bridge keeps such jobs held
	}
	found, err := b.cfg.API.JobByExternalID(ctx, ext, tenant)
	switch {
	case err == nil:
		delete(b.unchecked, ext)
		if !mirror(found) {
			return nil, nil
		}
		return found, nil
	case domain.CodeOf(err) == domain.CodeNotFound:
		delete(b.unchecked, ext)
		return nil, nil
	}
	return nil, fmt.Errorf("look up %s: %w", ext, err)
}

// mirror: jf was submitted by a runtime or an admin (the bridge's token
// mirrors a Slurm job), not by a tenant's user.
func mirror(jf *domain.Job) bool {
	return strings.HasPrefix(jf.SubmittedBy, string(domain.RoleRuntime)+":") || strings.HasPrefix(jf.SubmittedBy, string(domain.RoleAdmin)+":")
}

// held handles a held Slurm job: queue it for a submit, release it when
// its jobfabric job is Ready, cancel it when that job ended first.
func (b *Bridge) held(ctx context.Context, p *pass, j *Job, ext string, jf *domain.Job) error {
	if jf == nil && b.known[ext] { // live at the last pass: it ended since
		var err error
		if jf, err = b.lookup(ctx, j, ext); err != nil {
			return err
		}
	}
	if jf != nil {
		jf, skip, err := b.repartition(ctx, p, j, jf)
		if skip || err != nil {
			return err
		}
		return b.placed(ctx, p, j, jf)
	}
	if _, why := b.cfg.Mapping.tenant(j); why != "" {
		return b.keepHeld(ctx, j, why, &p.st)
	}
	if strings.HasPrefix(j.Comment, commentPrefix) {
		p.retry = append(p.retry, j)
	} else {
		p.fresh = append(p.fresh, j)
	}
	return nil
}

// submitAll submits the queued held jobs, in Slurm's order, up to
// SubmitsPerPass; those refused before come after the others. A job not
// yet looked up since the bridge started is looked up first. It returns
// the jobs found Ready by a lookup, to release.
func (b *Bridge) submitAll(ctx context.Context, p *pass) []release {
	var late []release
	budget := b.cfg.SubmitsPerPass
	for _, j := range append(p.fresh, p.retry...) {
		if budget == 0 || ctx.Err() != nil {
			break
		}
		budget--
		ext := ExternalID(b.cfg.Cluster, j.ID)
		err := func() error {
			if b.unchecked[ext] {
				jf, err := b.lookup(ctx, j, ext)
				if err != nil {
					return err
				}
				if jf != nil {
					q := &pass{nodes: p.nodes}
					err := b.placed(ctx, q, j, jf)
					late = append(late, q.rel...)
					p.reject = append(p.reject, q.reject...)
					p.st.add(q.st)
					return err
				}
			}
			return b.submit(ctx, p, j, ext)
		}()
		if err != nil && ctx.Err() == nil {
			b.cfg.Logger.Warn("slurm bridge: job", "slurm_job", j.ID, "err", err)
		}
	}
	return late
}

// submit makes a held Slurm job a jobfabric job.
func (b *Bridge) submit(ctx context.Context, p *pass, j *Job, ext string) error {
	spec, why, err := b.spec(ctx, p, j, ext)
	if err != nil {
		return err
	}
	if why != "" {
		return b.keepHeld(ctx, j, why, &p.st)
	}
	jf, err := b.cfg.API.SubmitJob(ctx, spec)
	if err != nil {
		switch domain.CodeOf(err) {
		case domain.CodeAlreadyExists:
			// Another bridge (or a pass that timed out) submitted it: the
			// next pass finds it live.
			p.next[ext] = true
			return nil
		case domain.CodeInvalidArgument, domain.CodeNotFound, domain.CodeFailedPrecondition, domain.CodePermissionDenied:
			// jobfabric refuses the job as asked: say so on the Slurm job.
			why := err.Error()
			if de := (*domain.Error)(nil); errors.As(err, &de) && de.Message != "" {
				why = de.Message
			}
			return b.keepHeld(ctx, j, why, &p.st)
		}
		return fmt.Errorf("submit %s: %w", ext, err)
	}
	p.st.Submitted++
	p.next[ext] = true
	b.cfg.Logger.Info("slurm bridge: submitted", "slurm_job", j.ID, "job", jf.ID, "tenant", spec.Tenant, "workspace", spec.Workspace, "gpus", spec.GPUs)
	return nil
}

// placed acts on a held Slurm job by its jobfabric job's state.
func (b *Bridge) placed(ctx context.Context, p *pass, j *Job, jf *domain.Job) error {
	switch {
	case jf.State == domain.JobReady || jf.State == domain.JobRunning:
		nodes := PlacedNodes(jf)
		if len(nodes) == 0 {
			return fmt.Errorf("job %d is %s without a placement", jf.ID, jf.State)
		}
		if why := b.blocked(p.nodes, nodes); why != "" && jf.State == domain.JobReady {
			// Released there, it would wait forever: jobfabric places it
			// again once the node is cordoned.
			p.reject = append(p.reject, rejection{slurmID: j.ID, job: jf.ID, why: clip("slurm job "+j.ID+" not released: "+why, 1024)})
			return nil
		}
		p.rel = append(p.rel, release{slurmID: j.ID, job: jf.ID, run: jf.Requeues, nodes: nodes})
	case jf.State == domain.JobPreempting:
		// Requeued held at the deadline; the report did not reach jobfabric.
		return b.stopped(ctx, j, jf, "requeued held")
	case jf.State.Terminal():
		if _, err := b.cfg.Slurm.Command(ctx, "scancel", j.ID); err != nil {
			return err
		}
		p.st.Cancelled++
		b.cfg.Logger.Info("slurm bridge: cancelled the slurm job", "slurm_job", j.ID, "job", jf.ID, "state", jf.State)
	}
	return nil
}

// active acts on a Slurm job that was released (pending, configuring,
// running) by its jobfabric job's state: cancelled when that job ended,
// requeued held or cancelled at a preemption's grace deadline, reported
// running.
func (b *Bridge) active(ctx context.Context, p *pass, j *Job, ext string, jf *domain.Job) error {
	if jf == nil && (b.known[ext] || b.unchecked[ext]) {
		var err error
		if jf, err = b.lookup(ctx, j, ext); err != nil {
			return err
		}
	}
	switch {
	case jf == nil:
		return nil
	case jf.State.Terminal():
		// Cancelled in jobfabric, preempted without requeue (jobfabric
		// ended it at the deadline before the bridge saw it), over its
		// time limit: Slurm must not keep the servers.
		if _, err := b.cfg.Slurm.Command(ctx, "scancel", j.ID); err != nil {
			return err
		}
		if jf.State == domain.JobPreempted {
			p.st.Preempted++
		} else {
			p.st.Cancelled++
		}
		b.cfg.Logger.Info("slurm bridge: cancelled the slurm job", "slurm_job", j.ID, "job", jf.ID, "state", jf.State)
	case jf.State == domain.JobPreempting:
		if jf.StopDeadline == nil || b.cfg.Clock.Now().Before(*jf.StopDeadline) {
			// The grace period: the job may checkpoint, told as Slurm's
			// own preemption tells it.
			return b.terminate(ctx, p, j, ext, jf)
		}
		return b.preempt(ctx, p, j, jf)
	case releasedRun(j) >= 0 && releasedRun(j) != jf.Requeues:
		// jobfabric requeued the job (and may have placed it again)
		// before the bridge saw it preempted: Slurm still runs the old
		// placement.
		return b.preempt(ctx, p, j, jf)
	case misplaced(j, jf):
		// Released by someone else (a user may release a job held for
		// the bridge) before jobfabric placed it, or elsewhere: Slurm
		// must not run it on servers jobfabric did not give it.
		how := "requeued held"
		if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "requeuehold", j.ID); err != nil {
			b.cfg.Logger.Warn("slurm bridge: requeue a misplaced job failed, cancelling", "slurm_job", j.ID, "job", jf.ID, "err", err)
			if _, err := b.cfg.Slurm.Command(ctx, "scancel", j.ID); err != nil {
				return err
			}
			how = "cancelled"
		}
		p.st.Misplaced++
		b.cfg.Logger.Warn("slurm bridge: slurm job allocated off jobfabric's placement", "slurm_job", j.ID, "job", jf.ID,
			"state", jf.State, "nodes", j.NodeList, "placed", strings.Join(PlacedNodes(jf), ","), "how", how)
	case j.State == "PENDING" && jf.State == domain.JobReady:
		// Released on its placement; Slurm has not started it (a user
		// may have moved it to another partition meanwhile).
		jf, skip, err := b.repartition(ctx, p, j, jf)
		if skip || err != nil {
			return err
		}
		return b.unstick(ctx, p, j, ext, jf)
	case j.State == "RUNNING" && jf.State == domain.JobReady:
		if _, err := b.cfg.API.Report(ctx, jf.ID, "running", "slurm job "+j.ID+" runs"); err != nil {
			return err
		}
		p.st.Reported++
	}
	return nil
}

// misplaced reports whether Slurm allocated a job other servers than its
// jobfabric job's placement (or any while that job holds none).
func misplaced(j *Job, jf *domain.Job) bool {
	if (j.State != "RUNNING" && j.State != "CONFIGURING") || j.NodeList == "" {
		return false
	}
	if !jf.State.HoldsGPUs() {
		return true
	}
	nodes, err := ExpandHostlist(j.NodeList)
	if err != nil {
		return false // a hostlist the bridge cannot read: leave it to the run check
	}
	want := PlacedNodes(jf)
	slices.Sort(nodes)
	slices.Sort(want)
	return !slices.Equal(nodes, want)
}

// termSuffix ends the comment of a released job sent SIGTERM for its
// placement's preemption: a restarted bridge does not send it again.
const termSuffix = "_term"

// terminate sends SIGTERM to a running Slurm job whose jobfabric job is
// Preempting, once per placement, as Slurm's own preemption does at the
// start of GraceTime: the batch script, its children and its steps
// (scancel --full; --batch would signal the shell alone, which cannot
// handle it while a child runs). The job learns it is preempted without
// asking jobfabric, and may checkpoint before the deadline, when the
// bridge requeues or cancels it. A job not yet RUNNING (CONFIGURING: its
// nodes boot) has no processes to tell: it is signalled when it runs, if
// the grace period lasts. The mark is the job's Comment (its run with
// termSuffix), and the bridge's memory in case that update fails.
func (b *Bridge) terminate(ctx context.Context, p *pass, j *Job, ext string, jf *domain.Job) error {
	run := releasedRun(j)
	if j.State != "RUNNING" || run != jf.Requeues || strings.HasSuffix(j.Comment, termSuffix) {
		return nil
	}
	key := fmt.Sprintf("%s@%d", ext, run)
	if b.termed[key] {
		return nil
	}
	if _, err := b.cfg.Slurm.Command(ctx, "scancel", "--signal=TERM", "--full", j.ID); err != nil {
		return fmt.Errorf("signal slurm job %s at the start of its grace period: %w", j.ID, err)
	}
	b.termed[key] = true
	p.st.Signalled++
	b.cfg.Logger.Info("slurm bridge: preempted job signalled (SIGTERM) at the start of its grace period", "slurm_job", j.ID, "job", jf.ID, "deadline", jf.StopDeadline)
	if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "update", "JobId="+j.ID, "Comment="+releasedComment(jf.ID, run)+termSuffix); err != nil {
		b.cfg.Logger.Warn("slurm bridge: mark a signalled job (a restarted bridge would signal it again)", "slurm_job", j.ID, "err", err)
	}
	return nil
}

// preempt stops a Slurm job whose jobfabric job was preempted, as its
// workspace says: requeued held (the job is preemptible; the bridge
// releases it at its next placement) or cancelled; then tells jobfabric
// it stopped.
func (b *Bridge) preempt(ctx context.Context, p *pass, j *Job, jf *domain.Job) error {
	how := "cancelled"
	if jf.Preemptible {
		// A job released but not yet allocated is held again, not requeued.
		verb := "requeuehold"
		how = "requeued held"
		if j.State == "PENDING" {
			how, verb = "held", "hold"
		}
		if _, err := b.cfg.Slurm.Command(ctx, "scontrol", verb, j.ID); err != nil {
			// Not requeueable (--no-requeue, JobRequeue=0): cancel it.
			b.cfg.Logger.Warn("slurm bridge: requeue failed, cancelling", "slurm_job", j.ID, "job", jf.ID, "err", err)
			how = "cancelled"
		}
	}
	if how == "cancelled" {
		if _, err := b.cfg.Slurm.Command(ctx, "scancel", j.ID); err != nil {
			return err
		}
	}
	p.st.Preempted++
	b.cfg.Logger.Info("slurm bridge: preempted", "slurm_job", j.ID, "job", jf.ID, "how", how)
	if jf.State == domain.JobPreempting {
		return b.stopped(ctx, j, jf, how)
	}
	return nil
}

// stopped reports a preempted job stopped: jobfabric requeues or ends it
// at once instead of at its deadline.
func (b *Bridge) stopped(ctx context.Context, j *Job, jf *domain.Job, how string) error {
	_, err := b.cfg.API.Report(ctx, jf.ID, "stopped", "slurm job "+j.ID+" "+how)
	if domain.CodeOf(err) == domain.CodeFailedPrecondition {
		return nil // jobfabric released it at the deadline itself
	}
	return err
}

// spec is the jobfabric job of a Slurm job; why says, instead, why it
// cannot be one.
func (b *Bridge) spec(ctx context.Context, p *pass, j *Job, ext string) (domain.JobSpec, string, error) {
	tenant, why := b.cfg.Mapping.tenant(j)
	if why != "" {
		return domain.JobSpec{}, why, nil
	}
	spec := domain.JobSpec{Tenant: tenant, Workspace: b.cfg.Mapping.workspace(j), ExternalID: ext, TimeLimitSeconds: int64(j.TimeLimit / time.Second)}
	// Preemptible exactly when the workspace requeues preempted jobs.
	ref := domain.Ref(spec.Tenant, spec.Workspace)
	ws, ok := p.workspaces[ref]
	if !ok {
		var err error
		ws, err = b.cfg.API.Workspace(ctx, spec.Tenant, spec.Workspace)
		switch {
		case domain.CodeOf(err) == domain.CodeNotFound:
			ws = nil // the submit says so
		case err != nil:
			return spec, "", fmt.Errorf("read workspace %s: %w", ref, err)
		}
		p.workspaces[ref] = ws
	}
	spec.Preemptible = ws == nil || ws.Requeues()
	// Placed only where slurmctld can start it: its partitions' nodes.
	if spec.Pool, why = b.poolOf(p, j); why != "" {
		return spec, why, nil
	}
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

// commentPrefix starts the comment of a job the bridge keeps held.
const commentPrefix = "jobfabric: "

// keepHeld leaves the job held with why in its comment (once).
func (b *Bridge) keepHeld(ctx context.Context, j *Job, why string, st *Stats) error {
	comment := commentPrefix + strings.ReplaceAll(why, "\n", " ")
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
	run     int // the jobfabric job's Requeues: which placement this is
	nodes   []string
}

// releasedComment marks a released Slurm job with its jobfabric job and
// placement (one word: scontrol reads its standard input word by word).
func releasedComment(job uint64, run int) string {
	return fmt.Sprintf("jobfabric_job_%d_run_%d", job, run)
}

// releasedRun reads the placement a released job was given from its
// comment; -1 when it has none.
func releasedRun(j *Job) int {
	var job uint64
	var run int
	if n, _ := fmt.Sscanf(j.Comment, "jobfabric_job_%d_run_%d", &job, &run); n != 2 {
		return -1
	}
	return run
}

// releaseWorkers bounds the scontrol processes in flight: slurmctld
// serializes the updates anyway.
const releaseWorkers = 4

// releaseBatch bounds the jobs of one scontrol process.
const releaseBatch = 128

// releaseAll sets each job's required nodes to its placement and
// releases it: per batch, one scontrol process reading an update per job
// from its standard input, then one scontrol release of the batch. A
// process per command was the bridge's bottleneck at 10,000 jobs. When an
// update fails, the batch's updates run one by one to find the bad one,
// and only the jobs updated are released.
func (b *Bridge) releaseAll(ctx context.Context, rs []release) Stats {
	var st Stats
	var mu sync.Mutex
	sem := make(chan struct{}, releaseWorkers)
	var wg sync.WaitGroup
	for lo := 0; lo < len(rs); lo += releaseBatch {
		batch := rs[lo:min(lo+releaseBatch, len(rs))]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n := b.releaseBatch(ctx, batch)
			mu.Lock()
			st.Released += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return st
}

func (b *Bridge) releaseBatch(ctx context.Context, batch []release) int {
	update := func(r release) string {
		return fmt.Sprintf("update JobId=%s ReqNodeList=%s NumNodes=%d Comment=%s", r.slurmID, strings.Join(r.nodes, ","), len(r.nodes), releasedComment(r.job, r.run))
	}
	var script strings.Builder
	for _, r := range batch {
		script.WriteString(update(r) + "\n")
	}
	updated := batch
	if _, err := b.cfg.Slurm.Pipe(ctx, script.String(), "scontrol"); err != nil {
		updated = nil
		for _, r := range batch {
			if _, err := b.cfg.Slurm.Command(ctx, "scontrol", strings.Fields(update(r))...); err != nil {
				b.cfg.Logger.Warn("slurm bridge: set the placement", "slurm_job", r.slurmID, "job", r.job, "err", err)
				continue
			}
			updated = append(updated, r)
		}
	}
	if len(updated) == 0 {
		return 0
	}
	ids := make([]string, len(updated))
	for i, r := range updated {
		ids[i] = r.slurmID
	}
	done := updated
	if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "release", strings.Join(ids, ",")); err != nil {
		// One bad id fails the command: release one by one to find it.
		done = nil
		for _, r := range updated {
			if _, err := b.cfg.Slurm.Command(ctx, "scontrol", "release", r.slurmID); err != nil {
				b.cfg.Logger.Warn("slurm bridge: release", "slurm_job", r.slurmID, "job", r.job, "err", err)
				continue
			}
			done = append(done, r)
		}
	}
	for _, r := range done {
		b.cfg.Logger.Info("slurm bridge: released", "slurm_job", r.slurmID, "job", r.job, "nodes", strings.Join(r.nodes, ","))
	}
	return len(done)
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
	case jf.State == domain.JobPreempting:
		err = b.stopped(ctx, j, jf, "ended "+j.State)
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
