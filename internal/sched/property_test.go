package sched

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// sim applies plans to a hand-built snapshot, for the reclaim scenarios
// (reclaim_test.go, reclaim_bound_test.go) that start from states no
// sequence of commands reaches in a few lines (jobs placed an hour ago).
// It is not the state machine: the property test and the simulator commit
// every plan through the real one (invariants_test.go, sim/ledger.go).
type sim struct {
	t       *testing.T
	s       *Snapshot
	now     time.Time
	next    uint64
	reclaim map[uint64][]time.Time // job -> times it was reclaimed
	waiting map[uint64]time.Time   // guaranteed job -> when it became placeable in principle
}

const tick = 5 * time.Second

func (m *sim) job(id uint64) *domain.Job {
	for _, j := range m.s.Jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

// commit applies a plan as the state machine would, re-checking each
// placement with Fit.
func (m *sim) commit(p *Plan) {
	for _, r := range p.Releases {
		j := m.job(r.JobID)
		m.release(j)
	}
	for _, pr := range p.Preemptions {
		j := m.job(pr.JobID)
		d := pr.Deadline
		j.State, j.StopDeadline, j.PreemptedFor = domain.JobPreempting, &d, pr.ForJob
		if pr.BorrowBackoff != nil {
			b := *pr.BorrowBackoff
			j.BorrowNotBefore = &b
			m.reclaim[j.ID] = append(m.reclaim[j.ID], m.now)
		}
	}
	// The state machine's plan applier re-checks every placement with Fit
	// against the state it commits to: on the state the plan was made
	// for, it must refuse none.
	fit := NewFit(m.s, m.now)
	for _, pl := range p.Placements {
		j := m.job(pl.JobID)
		if r, ok := fit.Place(j, pl.Placement); !ok {
			m.t.Fatalf("the plan applier refuses job %d's planned placement %+v on the state it was planned for: %s: %s", j.ID, pl.Placement, r.Code, r.Message)
		}
		t := m.now
		j.State, j.Placement, j.PlacedAt = domain.JobRunning, pl.Placement, &t
	}
	for id, r := range p.Pending.All() {
		r := r
		m.job(id).Reason = &r
	}
}

func (m *sim) release(j *domain.Job) {
	if j.State == domain.JobPreempting && j.Preemptible {
		j.State, j.Placement, j.StopDeadline, j.PlacedAt = domain.JobPending, nil, nil, nil
		j.Requeues++
		return
	}
	t := m.now
	j.State, j.Placement, j.EndedAt = domain.JobSucceeded, nil, &t
}
