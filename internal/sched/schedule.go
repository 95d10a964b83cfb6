package sched

import (
	"fmt"
	"sort"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Schedule runs one cycle over the snapshot. now is passed in (never read)
// so that replays and simulations are deterministic; this version of the
// scheduler does not depend on it yet, but fair-share decay and reclaim
// deadlines will.
func Schedule(s *Snapshot, now time.Time) *Plan {
	_ = now
	plan := &Plan{Pending: map[uint64]domain.Reason{}}
	// Phase 1 and 2: who holds what.
	c := buildCluster(s)
	u := buildUsage(s)

	// Phase 3: order the queue.
	pending := make([]*domain.Job, 0)
	for _, j := range s.Jobs {
		if j.State == domain.JobPending {
			pending = append(pending, j)
		}
	}
	order(pending, s, u)

	// Phase 4: admit and place, in order. A job that cannot be placed does
	// not block jobs behind it (no head-of-line blocking) except within its
	// own workspace, where the next jobs wait for it so a big job is not
	// starved by a stream of small ones.
	blocked := map[string]uint64{}
	for _, j := range pending {
		ref := j.Tenant + "/" + j.Workspace
		w := s.Workspaces[ref]
		t := s.Tenants[j.Tenant]
		if w == nil || t == nil {
			plan.Pending[j.ID] = domain.Reason{Code: ReasonUnknown, Message: fmt.Sprintf("workspace %s no longer exists", ref)}
			continue
		}
		if first, ok := blocked[ref]; ok && j.Priority <= s.jobPriority(first) {
			plan.Pending[j.ID] = domain.Reason{Code: ReasonGangOrder, Message: fmt.Sprintf("waiting behind job %d of workspace %s, which is first in line", first, ref)}
			continue
		}
		if r, ok := quota(j, w, s, u, c); !ok {
			plan.Pending[j.ID] = r
			blocked[ref] = j.ID
			continue
		}
		pl, level, r := c.place(j, t)
		if pl == nil {
			plan.Pending[j.ID] = r
			blocked[ref] = j.ID
			continue
		}
		c.commit(j, t, pl)
		u.used[ref] += j.GPUs
		u.usedTotal += j.GPUs
		plan.Placements = append(plan.Placements, Placement{JobID: j.ID, Placement: pl, Level: level})
	}
	return plan
}

func (s *Snapshot) jobPriority(id uint64) int {
	for _, j := range s.Jobs {
		if j.ID == id {
			return j.Priority
		}
	}
	return 0
}

// order sorts the queue: workspace priority, job priority, jobs that fit in
// their workspace's guarantee before borrowing ones, then the workspace with
// the least usage per weight (fair share among borrowers), then age.
func order(jobs []*domain.Job, s *Snapshot, u *usage) {
	within := func(j *domain.Job) bool {
		w := s.Workspaces[j.Tenant+"/"+j.Workspace]
		return w != nil && u.used[w.Ref()]+j.GPUs <= w.Guaranteed
	}
	share := func(j *domain.Job) float64 {
		w := s.Workspaces[j.Tenant+"/"+j.Workspace]
		if w == nil || w.Weight <= 0 {
			return 0
		}
		return float64(u.used[w.Ref()]) / float64(w.Weight)
	}
	wprio := func(j *domain.Job) int {
		if w := s.Workspaces[j.Tenant+"/"+j.Workspace]; w != nil {
			return w.Priority
		}
		return 0
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		ja, jb := jobs[a], jobs[b]
		if pa, pb := wprio(ja), wprio(jb); pa != pb {
			return pa > pb
		}
		if ja.Priority != jb.Priority {
			return ja.Priority > jb.Priority
		}
		if wa, wb := within(ja), within(jb); wa != wb {
			return wa
		}
		if sa, sb := share(ja), share(jb); sa != sb {
			return sa < sb
		}
		return ja.ID < jb.ID
	})
}

// quota checks that admitting j overcommits nothing: the workspace stays
// within guaranteed + borrowLimit, and the GPUs it takes are not another
// workspace's protected (idle, not lendable) guarantee.
func quota(j *domain.Job, w *domain.Workspace, s *Snapshot, u *usage, c *cluster) (domain.Reason, bool) {
	used := u.used[w.Ref()]
	if limit := w.Guaranteed + w.BorrowLimit; used+j.GPUs > limit {
		return domain.Reason{Code: ReasonWorkspaceQuota, Message: fmt.Sprintf(
			"workspace %s uses %d GPUs; %d more would exceed its limit of %d (guaranteed %d + borrowLimit %d) by %d",
			w.Ref(), used, j.GPUs, limit, w.Guaranteed, w.BorrowLimit, used+j.GPUs-limit)}, false
	}
	protected := 0
	for _, o := range sortedWorkspaces(s) {
		if o.Ref() != w.Ref() {
			protected += u.protected(o)
		}
	}
	free := c.total - u.usedTotal
	if j.GPUs > free {
		return domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf("needs %d GPUs; %d of the cluster's %d are free", j.GPUs, free, c.total)}, false
	}
	if avail := free - protected; j.GPUs > avail {
		// Counts only: other tenants' workspaces are never named.
		return domain.Reason{Code: ReasonClusterQuota, Message: fmt.Sprintf(
			"needs %d GPUs; %d are free but %d of them are other workspaces' guarantees they do not lend, leaving %d",
			j.GPUs, free, min(protected, free), max(0, avail))}, false
	}
	return domain.Reason{}, true
}

// commit marks a placement's GPUs busy in the working view.
func (c *cluster) commit(j *domain.Job, t *domain.Tenant, pl []domain.Placement) {
	for _, p := range pl {
		v := c.byName[p.Server]
		for _, g := range p.GPUs {
			v.free[g] = false
			v.nfree--
		}
		c.hold(v, j.Tenant, t)
	}
}
