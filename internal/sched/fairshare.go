package sched

import (
	"cmp"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Fair-share reclaim (Policy.FairShareReclaim, off by default): a job
// beyond its workspace's guarantee but within its fair share may reclaim
// from workspaces above theirs, as KAI's reclaim does. A workspace's fair
// share is its guarantee plus its weighted part of what the guarantees
// leave, water-filled over the workspaces with demand (running plus
// pending), never more than that demand. Victims come only from
// workspaces above their fair share, from each at most its excess, so
// nobody is taken below its own fair share (nor below its guarantee:
// the fair share of a workspace with demand is at least the part of its
// guarantee it uses). Churn is bounded: fair-share reclaim stops once the
// GPUs of the jobs reclaimed within the last backoff window (those that
// may not borrow yet, and those stopping) reach Policy.ChurnBudget.

// fairShares computes each workspace's fair share in units, once a cycle.
func (st *cycle) fairShares() []int {
	if st.fair != nil {
		return st.fair
	}
	ws := st.u.ix.ws
	dem := make([]int, len(ws))
	copy(dem, st.u.used)
	for _, j := range st.s.Jobs {
		if j.State == domain.JobPending {
			if i, ok := st.u.ix.byRef[j.Tenant+"/"+j.Workspace]; ok {
				dem[i] += demand(j)
			}
		}
	}
	fair := make([]int, len(ws))
	left := st.c.total
	for i, w := range ws {
		fair[i] = min(dem[i], w.Guaranteed*unit)
		left -= fair[i]
	}
	// Water-fill what is left by weight among the workspaces that want
	// more; one pass per workspace that saturates.
	for left > 0 {
		var want []int
		wsum := 0
		for i, w := range ws {
			if fair[i] < dem[i] {
				want = append(want, i)
				wsum += max(1, w.Weight)
			}
		}
		if len(want) == 0 {
			break
		}
		given := 0
		for _, i := range want {
			part := left * max(1, ws[i].Weight) / wsum
			add := min(part, dem[i]-fair[i])
			fair[i] += add
			given += add
		}
		if given == 0 {
			// Less than one unit per weight left: the first ones by
			// weight (then index) take it.
			slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(ws[b].Weight, ws[a].Weight) })
			for _, i := range want {
				if left-given == 0 {
					break
				}
				fair[i]++
				given++
			}
		}
		left -= given
	}
	st.fair = fair
	return fair
}

// withinFairShare reports whether j fits in what is left of its
// workspace's fair share, counting its jobs told to stop as gone.
func (st *cycle) withinFairShare(j *domain.Job) bool {
	i, ok := st.fv.u.ix.byRef[j.Tenant+"/"+j.Workspace]
	return ok && st.fv.u.used[i]+demand(j) <= st.fairShares()[i]
}

// churnLeft is what fair-share reclaim may still preempt this cycle, in
// units: the budget less the GPUs of jobs reclaimed within the backoff
// window (pending or placed again with a borrow backoff still running,
// or stopping now) and of this cycle's fair-share victims.
func (st *cycle) churnLeft() int {
	if st.churn < 0 {
		st.churn = 0
		for _, j := range st.s.Jobs {
			recent := j.BorrowNotBefore != nil && st.now.Before(*j.BorrowNotBefore)
			if recent || (j.State == domain.JobPreempting && j.PreemptedFor != 0) {
				st.churn += max(held(j), demand(j))
			}
		}
	}
	return st.policy.ChurnBudget*unit - st.churn
}

// threshold is what reclaim leaves workspace wi, in units: its fair share
// (fair-share reclaim) or its guarantee (reclaim).
func (st *cycle) threshold(kind preemptKind, wi int) int {
	if kind == preemptFairShare {
		return st.fairShares()[wi]
	}
	return st.fv.u.ix.ws[wi].Guaranteed * unit
}

// above is what reclaim may take from workspace wi: what it holds above
// its threshold.
func (st *cycle) above(kind preemptKind, wi int) int {
	return st.fv.u.used[wi] - st.threshold(kind, wi)
}
