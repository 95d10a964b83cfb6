package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/metrics"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// defaultScheduleInterval bounds how long a change the loop was not told
// about (a lost kick, a leadership change) waits for a cycle.
const defaultScheduleInterval = 2 * time.Second

// kickScheduler asks for a cycle soon; it never blocks.
func (s *Server) kickScheduler() {
	s.kickUrgent.Store(true)
	s.kickForSubmit()
}

// kickForSubmit asks for a cycle for a submitted job: after a quiet cycle
// it waits the quiet duty's gap (dutyGate).
func (s *Server) kickForSubmit() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// scheduleLoop runs scheduling cycles on the leader: after changes and on
// a tick. Only the leader schedules; its plans go through Raft, where the
// state machine re-checks them.
func (s *Server) scheduleLoop(ctx context.Context) {
	interval := s.scheduleInterval()
	// The interval and the deadlines are the server's clock (a test steps
	// a fake one); the burst window after a kick is real time, as the
	// requests it waits for arrive in real time.
	t, tick := s.clock.NewTicker(interval)
	defer t.Stop()
	// due fires when the earliest grace deadline or time limit falls due,
	// so the guaranteed demand waits grace + one cycle, not grace + a tick.
	due, dueC := s.clock.NewTimer(time.Hour)
	defer due.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			// Let a burst of submits land, then schedule them in one cycle.
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		case <-tick:
		case <-dueC:
		}
		if !s.store.IsLeader() {
			s.idle = idleCycle{} // a new term may bring a restored state
			continue
		}
		if s.idle.holds(s.fsm.AppliedIndex(), s.clock.Now()) {
			// It counts as a cycle that committed nothing: whoever waits
			// for the next cycle to end sees what one would have done.
			s.cycles.begin()
			s.cyclesSkipped.Add(1)
			if s.cfg.CheckSkippedCycles {
				s.checkSkipped()
			}
			s.cycles.end()
			continue
		}
		// Cycles take at most the duty share of wall time, so that API
		// requests keep the CPU while a large queue is decided.
		if !s.duty.hold(ctx, s.clock, s.kick, s.kickUrgent.Load, tick, dueC) {
			return
		}
		s.cycles.begin()
		// What changes from here on is the next cycle's to weigh.
		s.kickUrgent.Store(false)
		start, began := time.Now(), s.clock.Now()
		next, quiet, err := s.scheduleOnce(ctx)
		s.metrics.CycleDuration.Observe(metrics.Since(start))
		// The server's clock, as for the wait: a test's fake clock stands
		// still through a cycle unless the test steps it.
		s.duty.ran(began, s.clock.Now(), s.schedulerDuty(), s.quietDuty(), quiet, interval)
		s.cycles.end()
		if err != nil {
			s.log.Warn("scheduling cycle", "err", err)
		}
		if !next.IsZero() {
			due.Reset(max(next.Sub(s.clock.Now()), time.Millisecond))
		}
	}
}

func (s *Server) scheduleInterval() time.Duration {
	if s.cfg.ScheduleInterval > 0 {
		return s.cfg.ScheduleInterval
	}
	return defaultScheduleInterval
}

// reclaimBound is the promise a reclaim keeps: a job within its guarantee
// is placed within the grace period and one cycle.
func (s *Server) reclaimBound() time.Duration {
	g := s.policy().Grace
	if g <= 0 {
		g = sched.DefaultPolicy.Grace
	}
	return g + s.scheduleInterval()
}

// cycleCount counts the leader's scheduling cycles, begun and ended, so
// that a caller can wait for a cycle begun after a change to end (its plan
// committed) instead of sleeping.
type cycleCount struct {
	mu           sync.Mutex
	begun, ended uint64
	done         chan struct{} // closed when a cycle ends; nil until waited on
}

func (c *cycleCount) begin() {
	c.mu.Lock()
	c.begun++
	c.mu.Unlock()
}

func (c *cycleCount) end() {
	c.mu.Lock()
	c.ended++
	if c.done != nil {
		close(c.done)
		c.done = nil
	}
	c.mu.Unlock()
}

// next is the number the next cycle to begin will have.
func (c *cycleCount) next() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.begun + 1
}

// wait returns once cycle n has ended.
func (c *cycleCount) wait(ctx context.Context, n uint64) error {
	for {
		c.mu.Lock()
		if c.ended >= n {
			c.mu.Unlock()
			return nil
		}
		if c.done == nil {
			c.done = make(chan struct{})
		}
		done := c.done
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for scheduling cycle %d: %w", n, ctx.Err())
		case <-done:
		}
	}
}

// policy is the scheduler configuration of this server.
func (s *Server) policy() sched.Policy {
	return sched.Policy{Grace: s.cfg.PreemptionGrace, ReclaimBackoff: s.cfg.ReclaimBackoff, HalfLife: s.cfg.FairShareHalfLife}
}

// scheduleOnce runs one cycle and commits its plan as one command
// (plan.apply): due releases, preemptions, then placements with the reasons
// of pending jobs that changed. The state machine re-checks every entry
// against the state it applies to. It returns when the next deadline falls
// due.
//
// quiet reports a cycle that placed, preempted and released nothing (it
// may have committed pending reasons): the cluster had nothing for its
// queue.
func (s *Server) scheduleOnce(ctx context.Context) (next time.Time, quiet bool, err error) {
	now := s.clock.Now()
	// The index first: a change applied while the snapshot is built makes
	// the state newer than the index, never older, so an idle cycle is
	// never recorded for a state it did not see.
	applied := s.fsm.AppliedIndex()
	snap, plan, cmd := s.decide(now)
	s.queueOrder.Store(&queueOrder{at: now, order: plan.Order})
	s.idle = idleCycle{}
	quiet = len(cmd.Placements) == 0 && len(cmd.Preemptions) == 0 && len(cmd.Releases) == 0
	if planEmpty(cmd) {
		s.idle = idleCycle{ok: true, applied: applied, until: idleUntil(snap, plan, now, s.idleRecheck())}
		return plan.Next, quiet, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.commitPlan(cctx, cmd)
	if err != nil {
		return plan.Next, false, err
	}
	s.recordPlan(snap, plan, res, now)
	if len(plan.Releases) > 0 {
		s.kickScheduler() // released GPUs serve waiting jobs in the next cycle
	}
	return plan.Next, quiet, nil
}

// decide runs the scheduler on the state as it is now and turns its plan
// into the command that would commit it.
func (s *Server) decide(now time.Time) (*sched.Snapshot, *sched.Plan, state.PlanApply) {
	snap := s.cycleSnapshot(now.Add(-s.policy().HistoryHorizon()))
	snap.Policy = s.policy()
	plan := s.carry.Schedule(snap, now)
	cmd := state.PlanApply{Releases: plan.Releases, Preemptions: plan.Preemptions, Placements: plan.Placements,
		Reasons: plan.Pending.Changed(snap.Jobs), NetworkGate: s.fabricEnabled()}
	return snap, plan, cmd
}

// planEmpty: committing cmd would change nothing.
func planEmpty(cmd state.PlanApply) bool {
	return len(cmd.Releases) == 0 && len(cmd.Preemptions) == 0 && len(cmd.Placements) == 0 && len(cmd.Reasons) == 0
}

// idleCycle is what the last cycle that changed nothing saw. A cycle on
// the same state (no entry applied since: no job submitted, ended or
// reported, no quota, node or topology change) before until would decide
// the same nothing, so the loop skips it: a leader with a long queue on a
// full cluster does not re-decide every job every tick.
type idleCycle struct {
	ok      bool
	applied uint64    // the state's applied index it saw
	until   time.Time // when time alone may change its decisions
}

func (c idleCycle) holds(applied uint64, now time.Time) bool {
	return c.ok && applied == c.applied && now.Before(c.until)
}

// idleUntil is when time alone may change a cycle that decided nothing on
// snap: a deadline or time limit falls due (plan.Next), a reclaimed job's
// borrowing backoff ends, a running job's expected end passes (pending
// reasons name the next one), or recheck has passed: fair share decays
// with time and may reorder borrowers, so an idle leader still decides
// again every recheck.
func idleUntil(snap *sched.Snapshot, plan *sched.Plan, now time.Time, recheck time.Duration) time.Time {
	until := now.Add(recheck)
	earlier := func(t time.Time) {
		if t.After(now) && t.Before(until) {
			until = t
		}
	}
	if !plan.Next.IsZero() {
		if !plan.Next.After(now) {
			return now // due already: decide again
		}
		earlier(plan.Next)
	}
	for _, j := range snap.Jobs {
		if j.BorrowNotBefore != nil {
			earlier(*j.BorrowNotBefore)
		}
		if j.PlacedAt != nil {
			for _, secs := range []int64{j.ExpectedDurationSeconds, j.TimeLimitSeconds} {
				if secs > 0 {
					earlier(j.PlacedAt.Add(time.Duration(secs) * time.Second))
				}
			}
		}
	}
	return until
}

// idleRecheck bounds how long the loop skips cycles on an unchanged state.
func (s *Server) idleRecheck() time.Duration {
	if s.cfg.IdleRecheck > 0 {
		return s.cfg.IdleRecheck
	}
	return 15 * s.scheduleInterval()
}

// checkSkipped decides a skipped cycle anyway and logs an error if it
// would have changed something (Config.CheckSkippedCycles, tests).
func (s *Server) checkSkipped() {
	_, plan, cmd := s.decide(s.clock.Now())
	if !planEmpty(cmd) {
		s.skipWrong.Add(1)
		s.log.Error("a skipped scheduling cycle would have changed the state", "placements", len(plan.Placements),
			"preemptions", len(plan.Preemptions), "releases", len(plan.Releases), "reasons", len(cmd.Reasons))
	}
}

// commitPlan proposes a cycle's plan and logs what the re-check refused.
func (s *Server) commitPlan(ctx context.Context, cmd state.PlanApply) (*state.PlanResult, error) {
	v, err := s.propose(ctx, state.CmdPlanApply, "scheduler", cmd)
	if err != nil {
		return nil, err
	}
	res, _ := v.(*state.PlanResult)
	if res != nil && len(res.Rejected) > 0 {
		// The state moved between snapshot and commit; the next cycle
		// sees the new state.
		s.log.Info("plan re-check refused", "rejected", res.Rejected)
		s.kickScheduler()
	}
	return res, nil
}

// recordPlan logs a committed plan's decisions and counts them: each
// placement (and its admission latency), preemption, release, and the
// latency of reclaims served. Only what the state machine committed
// counts (res), not what its re-check refused.
func (s *Server) recordPlan(snap *sched.Snapshot, plan *sched.Plan, res *state.PlanResult, now time.Time) {
	if res == nil {
		return
	}
	// The snapshot's jobs come by ID (sched.SnapshotOf): a search finds
	// the few the plan names without a map of every pending job.
	byID := func(a *domain.Job, id uint64) int { return cmp.Compare(a.ID, id) }
	job := func(id uint64) *domain.Job {
		if i, ok := slices.BinarySearchFunc(snap.Jobs, id, byID); ok {
			return snap.Jobs[i]
		}
		return nil
	}
	committed := func(ids []uint64) map[uint64]bool {
		m := make(map[uint64]bool, len(ids))
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	placed, preempted, released := committed(res.Placed), committed(res.Preempted), committed(res.Released)
	for _, r := range plan.Releases {
		if j := job(r.JobID); j != nil && released[r.JobID] {
			s.log.Info("job released", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "cause", r.Cause)
		}
	}
	for _, p := range plan.Preemptions {
		j := job(p.JobID)
		if j == nil || !preempted[p.JobID] {
			continue
		}
		kind := metrics.PreemptionKind(p.Reason.Code)
		s.metrics.Preemptions.WithLabelValues(j.Tenant, j.Workspace, kind).Inc()
		s.log.Info("job preempted", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "kind", kind,
			"for_job", p.ForJob, "deadline", p.Deadline, "reason", p.Reason.Message)
		if kind == "reclaimed" && p.ForJob != 0 {
			if _, ok := s.reclaims[p.ForJob]; !ok {
				s.reclaims[p.ForJob] = now
				if f := job(p.ForJob); f != nil {
					s.log.Info("reclaim started", "job", f.ID, "tenant", f.Tenant, "workspace", f.Workspace, "bound", s.reclaimBound())
				}
			}
		}
	}
	for _, p := range plan.Placements {
		j := job(p.JobID)
		if j == nil || !placed[p.JobID] {
			continue
		}
		waited := now.Sub(j.SubmittedAt)
		s.metrics.Placements.WithLabelValues(j.Tenant, j.Workspace).Inc()
		s.metrics.AdmissionLatency.Observe(max(0, waited.Seconds()))
		s.log.Info("job placed", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "level", p.Level,
			"servers", len(p.Placement), "waited", waited)
		if since, ok := s.reclaims[j.ID]; ok {
			delete(s.reclaims, j.ID)
			took, bound := now.Sub(since), s.reclaimBound()
			s.metrics.ReclaimLatency.Observe(took.Seconds())
			if took > bound {
				s.metrics.ReclaimsOverdue.Inc()
				s.log.Warn("reclaim served over its bound", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "took", took, "bound", bound)
			} else {
				s.log.Info("reclaim served", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "took", took, "bound", bound)
			}
		}
	}
	// A job that ended or left the queue is no longer waited for.
	for id := range s.reclaims {
		if j := job(id); j == nil || j.State != domain.JobPending {
			delete(s.reclaims, id)
		}
	}
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	for _, j := range snap.Jobs {
		if r, ok := plan.Pending.Get(j.ID); ok && !j.Reason.Equal(r) {
			s.log.Debug("job pending", "job", j.ID, "tenant", j.Tenant, "workspace", j.Workspace, "reason", r.Code, "message", r.Message)
		}
	}
}

// dryRun places spec against the current state as if it were the only
// pending job: quota, isolation, topology and free capacity all apply.
func (s *Server) dryRun(spec domain.JobSpec) (*api.DryRun, error) {
	if err := s.fsm.CheckSubmit(&spec, s.proposeRules()); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	snap := drySnapshot(s.fsm, now.Add(-s.policy().HistoryHorizon()))
	snap.Policy = s.policy()
	var held []*domain.Job
	for _, j := range snap.Jobs {
		if len(j.Placement) > 0 {
			held = append(held, j)
		}
	}
	probe := &domain.Job{ID: 0, JobSpec: spec, State: domain.JobPending}
	snap.Jobs = append(held, probe)
	plan := sched.Schedule(snap, now) // a probe's plan: the queue's order stays the last cycle's
	for _, p := range plan.Placements {
		if p.JobID == 0 {
			return &api.DryRun{Placement: p.Placement, Level: p.Level}, nil
		}
	}
	r := plan.Pending.Of(0)
	return &api.DryRun{Reason: &r}, nil
}
