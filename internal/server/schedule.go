package server

import (
	"context"
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
	t := time.NewTicker(interval)
	defer t.Stop()
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
		case <-t.C:
		}
		if !s.store.IsLeader() {
			continue
		}
		if err := s.scheduleOnce(ctx); err != nil {
			s.log.Warn("scheduling cycle", "err", err)
		}
	}
}

// scheduleOnce runs one cycle and commits its plan: placements, and the
// reasons of pending jobs that changed.
func (s *Server) scheduleOnce(ctx context.Context) error {
	snap := s.fsm.SchedSnapshot()
	plan := sched.Schedule(snap, s.clock.Now())
	cmd := state.JobsPlace{Reasons: map[uint64]domain.Reason{}}
	for _, p := range plan.Placements {
		cmd.Jobs = append(cmd.Jobs, state.JobPlacement{ID: p.JobID, Placements: p.Placement})
	}
	for _, j := range snap.Jobs {
		if r, ok := plan.Pending[j.ID]; ok && (j.Reason == nil || *j.Reason != r) {
			cmd.Reasons[j.ID] = r
		}
	}
	if len(cmd.Jobs) == 0 && len(cmd.Reasons) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := s.propose(cctx, state.CmdJobsPlace, "scheduler", cmd)
	if err != nil {
		return err
	}
	if res, ok := v.(*state.PlanResult); ok && len(res.Rejected) > 0 {
		// The state moved between snapshot and commit; the next cycle
		// sees the new state.
		s.log.Info("plan re-check refused placements", "rejected", res.Rejected)
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
	snap := s.fsm.SchedSnapshot()
	var held []*domain.Job
	for _, j := range snap.Jobs {
		if len(j.Placement) > 0 {
			held = append(held, j)
		}
	}
	probe := &domain.Job{ID: 0, JobSpec: spec, State: domain.JobPending}
	snap.Jobs = append(held, probe)
	plan := sched.Schedule(snap, s.clock.Now())
	for _, p := range plan.Placements {
		if p.JobID == 0 {
			return &api.DryRun{Placement: p.Placement, Level: p.Level}, nil
		}
	}
	r := plan.Pending[0]
	return &api.DryRun{Reason: &r}, nil
}
