package sched

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Before any placement the cycle ends what is due (releases) and tells the
// jobs on draining servers to stop (drain): both change what the rest of the
// cycle sees.

// releases lists allocations due now, and the next time one falls due.
func (st *cycle) releases() {
	next := time.Time{}
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	rows := st.tbl.rows
	for k := range rows {
		r := &rows[k]
		switch {
		case r.state == rowPreempting && st.tbl.jobs[k].StopDeadline != nil:
			v := st.tbl.jobs[k]
			if !st.now.Before(*v.StopDeadline) {
				st.plan.Releases = append(st.plan.Releases, Release{JobID: v.ID, Cause: "deadline"})
				st.release(v)
			} else {
				soon(*v.StopDeadline)
			}
		case r.stoppable && r.timeLimit > 0 && r.hasPlacedAt:
			end := st.tbl.placedAt(k).Add(time.Duration(r.timeLimit) * time.Second)
			if !st.now.Before(end) {
				v := st.tbl.jobs[k]
				st.plan.Releases = append(st.plan.Releases, Release{JobID: v.ID, Cause: "time_limit"})
				st.release(v)
			} else {
				soon(end)
			}
		}
	}
	st.plan.Next = next
}

// release takes a due allocation out of the cycle's view: the release
// commits before the placements. The GPUs of a victim preempted for a job
// that still waits are kept for that job until its turn in the queue
// (giveBack): released into the cycle at once, a job ahead of it in the
// queue (another job GPUs are being freed for, placed on the first fitting
// GPUs) could take them, and the job they were freed for would need a
// second reclaim and a second grace period.
func (st *cycle) release(v *domain.Job) {
	st.released[v.ID] = true
	st.u.addJob(v, v.Placement, -1)
	if f := v.PreemptedFor; f != 0 && st.waiting[f] {
		st.heldFor[f] = append(st.heldFor[f], v)
		st.freedNow[f] = true
		return
	}
	st.c.release(v)
	st.freeVer++
}

// giveBack releases the GPUs kept for job id, at its turn: into the
// future view first (which copies the servers it changes, so the base's
// change below is not seen there twice), then into the cycle's view.
func (st *cycle) giveBack(id uint64) {
	if !st.targets[id] {
		return // nothing is kept for it, and nobody asks
	}
	st.givenBack[id] = true
	if st.fv.c != nil {
		for _, v := range st.fv.heldFor[id] {
			st.fv.c.release(v)
			st.gainIn(v) // freeingFits' answers for its servers no longer hold
		}
		delete(st.fv.heldFor, id)
	}
	for _, v := range st.heldFor[id] {
		st.c.release(v)
		st.freeVer++
	}
	delete(st.heldFor, id)
}

// drain tells the jobs on draining servers to stop by the grace deadline.
func (st *cycle) drain() {
	draining := false
	for _, cond := range st.s.Nodes {
		draining = draining || cond.Draining
	}
	if !draining {
		return // no server drains: nothing to read of the jobs
	}
	rows := st.tbl.rows
	for k := range rows {
		if !rows[k].stoppable || st.released[rows[k].id] {
			continue
		}
		v := st.tbl.jobs[k]
		for _, p := range v.Placement {
			if cond, ok := st.s.Nodes[p.Server]; ok && cond.Draining {
				deadline := st.now.Add(st.policy.Grace)
				st.victim[v.ID] = true
				st.plan.Preemptions = append(st.plan.Preemptions, Preemption{JobID: v.ID, Deadline: deadline,
					Reason: preemptDrain.reason(0, p.Server, deadline)})
				break
			}
		}
	}
}
