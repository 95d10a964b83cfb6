package server

import (
	"context"
	"time"

	"github.com/jobfabric/jobfabric/internal/state"
)

// Retention is the retention policy (internal/state retain.go), for the
// CLI, which does not link the state machine.
type Retention = state.Retention

// retainLoop runs retention passes on the leader: every RetainEvery it
// turns the policy into cutoffs at its clock's now and proposes them when
// they remove something (state.FSM.Retainable), so an idle cluster writes
// nothing. Apply removes what the cutoffs select (internal/state
// retain.go): every replica removes the same jobs and events.
func (s *Server) retainLoop(ctx context.Context) {
	p := s.cfg.Retention
	if !p.Enabled() {
		return
	}
	// The scheduler's fair share reads ended jobs back to its history
	// horizon: a count never removes those.
	p.KeepRecent = max(p.KeepRecent, s.policy().HistoryHorizon())
	every := s.cfg.RetainEvery
	if every <= 0 {
		every = 10 * time.Minute
	}
	s.onLeaderEvery(ctx, every, func() {
		cmd := p.Command(s.clock.Now())
		if s.fsm.Retainable(cmd) == (state.Retained{}) {
			return
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := s.propose(actx, state.CmdRetain, "system", cmd)
		cancel()
		if err != nil {
			s.log.Warn("retention pass", "err", err)
			return
		}
		if r, ok := v.(state.Retained); ok {
			s.log.Info("retention pass", "jobs", r.Jobs, "archived", r.Archived, "events", r.Events, "usageRecords", r.Usage)
		}
	})
}
