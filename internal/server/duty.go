package server

import (
	"context"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// defaultSchedulerDuty leaves the leader half its time for the API while
// a cycle over a large queue takes hundreds of milliseconds.
const defaultSchedulerDuty = 0.5

// checkDuty rejects a duty outside (0, 1]; 0 in a Config means the default.
func checkDuty(duty float64) error {
	if duty < 0 || duty > 1 || duty != duty {
		return domain.Invalid("scheduler-duty", "--scheduler-duty %g must be greater than 0 and at most 1", duty)
	}
	return nil
}

func (s *Server) schedulerDuty() float64 {
	if s.cfg.SchedulerDuty > 0 {
		return s.cfg.SchedulerDuty
	}
	return defaultSchedulerDuty
}

// dutyGap is the pause after a cycle of d that keeps cycles to a duty
// share of wall time: d x (1/duty - 1), at most limit (the regular
// interval, which stays the longest a change waits for a cycle).
func dutyGap(d time.Duration, duty float64, limit time.Duration) time.Duration {
	if d <= 0 || duty >= 1 {
		return 0
	}
	return min(time.Duration(float64(d)*(1/duty-1)), limit)
}

// dutyGate holds the next cycle until the gap after the last one has
// passed. It is the scheduling loop's alone.
type dutyGate struct {
	notBefore time.Time
}

// ran records a cycle from start to end (the server's clock).
func (g *dutyGate) ran(start, end time.Time, duty float64, limit time.Duration) {
	g.notBefore = end.Add(dutyGap(end.Sub(start), duty, limit))
}

// hold returns once the gap has passed (false if ctx ended first). Kicks,
// ticks and due deadlines that arrive meanwhile are taken and served by
// the cycle that follows: it starts after the state they announce, so
// none waits more than the gap for it. A deadline therefore runs at most
// min(d x (1/duty - 1), interval) late.
func (g *dutyGate) hold(ctx context.Context, clock tstime.Clock, kick <-chan struct{}, tick, due <-chan time.Time) bool {
	wait := g.notBefore.Sub(clock.Now())
	if wait <= 0 {
		return true
	}
	t, fire := clock.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-fire:
			return true
		case <-kick:
		case <-tick:
		case <-due:
		}
	}
}
