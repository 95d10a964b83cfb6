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

// defaultQuietDuty is the share after a quiet cycle (one that placed,
// preempted and released nothing): the cluster had nothing for its queue,
// and submits alone will not change that for the jobs already decided,
// so re-deciding the whole queue for each burst of submits is mostly
// waste. Anything else (an end, a cancel, a quota or node change, a due
// deadline) still gets the regular gap.
const defaultQuietDuty = 0.1

// checkDuty rejects a duty outside (0, 1]; 0 in a Config means the default.
func checkDuty(field string, duty float64) error {
	if duty < 0 || duty > 1 || duty != duty {
		return domain.Invalid(field, "--%s %g must be greater than 0 and at most 1", field, duty)
	}
	return nil
}

func (s *Server) schedulerDuty() float64 {
	if s.cfg.SchedulerDuty > 0 {
		return s.cfg.SchedulerDuty
	}
	return defaultSchedulerDuty
}

// quietDuty is the duty after a quiet cycle: never above the regular one.
func (s *Server) quietDuty() float64 {
	q := defaultQuietDuty
	if s.cfg.SchedulerQuietDuty > 0 {
		q = s.cfg.SchedulerQuietDuty
	}
	return min(q, s.schedulerDuty())
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
	// notBefore ends the gap after the last cycle: the quiet duty's when
	// it was quiet; urgent ends the regular duty's, which is what a
	// deadline or a change other than a submit waits for.
	notBefore, urgent time.Time
}

// ran records a cycle from start to end (the server's clock) and whether
// it was quiet.
func (g *dutyGate) ran(start, end time.Time, duty, quietDuty float64, quiet bool, limit time.Duration) {
	d := end.Sub(start)
	g.urgent = end.Add(dutyGap(d, duty, limit))
	g.notBefore = g.urgent
	if quiet {
		g.notBefore = end.Add(dutyGap(d, quietDuty, limit))
	}
}

// hold returns once the gap has passed (false if ctx ended first). Kicks,
// ticks and due deadlines that arrive meanwhile are taken and served by
// the cycle that follows: it starts after the state they announce, so
// none waits more than the gap for it. A due deadline, or a kick for
// which urgent reports true (a change other than a submit), shortens a
// quiet gap to the regular one. A deadline therefore runs at most
// min(d x (1/duty - 1), interval) late, and a submit after a quiet cycle
// at most min(d x (1/quietDuty - 1), interval).
func (g *dutyGate) hold(ctx context.Context, clock tstime.Clock, kick <-chan struct{}, urgent func() bool, tick, due <-chan time.Time) bool {
	target := g.notBefore
	if urgent != nil && urgent() {
		target = g.urgent // a change that was not a submit came first
	}
	wait := target.Sub(clock.Now())
	if wait <= 0 {
		return true
	}
	t, fire := clock.NewTimer(wait)
	defer t.Stop()
	// toUrgent moves the end of the hold to the regular gap's; false when
	// that has passed already.
	toUrgent := func() bool {
		if !g.urgent.Before(target) {
			return true
		}
		target = g.urgent
		wait := target.Sub(clock.Now())
		if wait <= 0 {
			return false
		}
		t.Reset(wait)
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-fire:
			return true
		case <-kick:
			if urgent != nil && urgent() && !toUrgent() {
				return true
			}
		case <-tick:
		case <-due:
			if !toUrgent() {
				return true
			}
		}
	}
}
