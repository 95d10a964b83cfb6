package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// defaultScheduleInterval bounds how long a change the loop was not told
// about (a lost kick, a leadership change) waits for a cycle.
const defaultScheduleInterval = 2 * time.Second

// kickScheduler asks for a cycle soon; it never blocks.
func (s *Server) kickScheduler() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// scheduleLoop runs scheduling cycles on the leader: after changes and on
// a tick. Only the leader schedules; its plans go through Raft, where the
// state machine re-checks them.
func (s *Server) scheduleLoop(ctx context.Context) {
	interval := s.cfg.ScheduleInterval
	if interval <= 0 {
		interval = defaultScheduleInterval
	}
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
			continue
		}
		s.cycles.begin()
		next, err := s.scheduleOnce(ctx)
		s.cycles.end()
		if err != nil {
			s.log.Warn("scheduling cycle", "err", err)
		}
		if !next.IsZero() {
			due.Reset(max(next.Sub(s.clock.Now()), time.Millisecond))
		}
	}
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
func (s *Server) scheduleOnce(ctx context.Context) (time.Time, error) {
	now := s.clock.Now()
	snap := schedSnapshot(s.fsm, now.Add(-s.policy().HistoryHorizon()))
	snap.Policy = s.policy()
	plan := sched.Schedule(snap, now)
	cmd := state.PlanApply{Releases: plan.Releases, Preemptions: plan.Preemptions, Placements: plan.Placements,
		Reasons: map[uint64]domain.Reason{}, NetworkGate: s.fabricEnabled()}
	for _, j := range snap.Jobs {
		if r, ok := plan.Pending[j.ID]; ok && !j.Reason.Equal(r) {
			cmd.Reasons[j.ID] = r
		}
	}
	if len(cmd.Releases) == 0 && len(cmd.Preemptions) == 0 && len(cmd.Placements) == 0 && len(cmd.Reasons) == 0 {
		return plan.Next, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.commitPlan(cctx, cmd); err != nil {
		return plan.Next, err
	}
	if len(plan.Releases) > 0 {
		s.kickScheduler() // released GPUs serve waiting jobs in the next cycle
	}
	return plan.Next, nil
}

// commitPlan proposes a cycle's plan and logs what the re-check refused.
func (s *Server) commitPlan(ctx context.Context, cmd state.PlanApply) error {
	v, err := s.propose(ctx, state.CmdPlanApply, "scheduler", cmd)
	if err != nil {
		return err
	}
	if res, ok := v.(*state.PlanResult); ok && len(res.Rejected) > 0 {
		// The state moved between snapshot and commit; the next cycle
		// sees the new state.
		s.log.Info("plan re-check refused", "rejected", res.Rejected)
		s.kickScheduler()
	}
	return nil
}

// dryRun places spec against the current state as if it were the only
// pending job: quota, isolation, topology and free capacity all apply.
func (s *Server) dryRun(spec domain.JobSpec) (*api.DryRun, error) {
	if err := s.fsm.CheckSubmit(&spec); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	snap := schedSnapshot(s.fsm, now.Add(-s.policy().HistoryHorizon()))
	snap.Policy = s.policy()
	var held []*domain.Job
	for _, j := range snap.Jobs {
		if len(j.Placement) > 0 {
			held = append(held, j)
		}
	}
	probe := &domain.Job{ID: 0, JobSpec: spec, State: domain.JobPending}
	snap.Jobs = append(held, probe)
	plan := sched.Schedule(snap, now)
	for _, p := range plan.Placements {
		if p.JobID == 0 {
			return &api.DryRun{Placement: p.Placement, Level: p.Level}, nil
		}
	}
	r := plan.Pending[0]
	return &api.DryRun{Reason: &r}, nil
}
