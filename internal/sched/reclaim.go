package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Phase 5: reclaim and priority preemption. A pending job that could not be
// placed may free GPUs held by others when the rules allow it:
//   - reclaim: the job fits in its workspace's guarantee, and the victims
//     are jobs of other workspaces that borrow; victims that leave their
//     workspace at or above its guarantee go first, and no more are taken
//     from a workspace once it is back to its guarantee;
//   - priority: the victims are lower-priority jobs of the job's own
//     workspace.
// Victims younger than their minimum runtime are protected. Among the
// allowed victims the scheduler frees the cheapest (fewest GPU-hours of work
// lost, then lowest priority, then newest) until the job can be *placed* —
// on the topology it needs, not just counted — and then drops every victim
// the placement does not need, so it never evicts much more than it serves.
// Victims get a deadline (the grace period); the job waits with a
// reclaim_pending reason and is placed once the GPUs are released.

// maxReclaimSearches bounds the reclaim searches of one cycle, so a deep
// queue of guaranteed demand cannot make a cycle slow; the next cycles take
// the rest, in queue order.
const maxReclaimSearches = 32

// maxPruneChecks bounds the one-by-one pruning of a victim set.
const maxPruneChecks = 32

// victimRule says whether v may be preempted for j, and why not.
type victimRule func(j, v *domain.Job) bool

func (st *cycle) reclaim(j *domain.Job) bool {
	ref := j.Tenant + "/" + j.Workspace
	w := st.s.Workspaces[ref]
	// GPUs already being freed for this job: wait for them, take no more.
	if f := st.freeing[j.ID]; f.units > 0 {
		st.plan.Pending[j.ID] = domain.Reason{Code: ReasonReclaim, Message: fmt.Sprintf(
			"waiting for %s GPUs being freed for it (released by %s at the latest)", gpus(f.units), f.deadline.UTC().Format(time.RFC3339))}
		return true
	}
	// Searches are bounded per cycle (the rest are served in the next
	// cycles), and a shape that found no victims in a workspace will not
	// find any for the next job of that shape: victims only get fewer.
	failKey := ref + "|" + shapeKey(j)
	if st.reclaims >= maxReclaimSearches || st.reclaimFailed[failKey] {
		return false
	}
	st.reclaims++
	withinGuarantee := st.u.usedOf(ref)+demand(j) <= w.Guaranteed*unit
	var kind string
	var rule victimRule
	switch {
	case withinGuarantee:
		kind = "reclaim"
		rule = func(j, v *domain.Job) bool {
			vw := st.s.Workspaces[v.Tenant+"/"+v.Workspace]
			return vw != nil && vw.Ref() != ref && st.u.usedOf(vw.Ref()) > vw.Guaranteed*unit
		}
	default:
		kind = "priority"
		rule = func(j, v *domain.Job) bool {
			return v.Tenant == j.Tenant && v.Workspace == j.Workspace && v.Priority < j.Priority
		}
	}
	// Candidates in preemption order: the running jobs sorted once per
	// cycle by cost (fewest GPU-hours lost, then lowest priority, then
	// newest), filtered here by the rule. A victim whose workspace stays at
	// or above its guarantee without it costs only its own work; one whose
	// gang straddles the guarantee also takes guaranteed GPUs from its
	// workspace: such victims go last (a stable partition keeps the order).
	var cands, last []*domain.Job
	for _, v := range st.victimOrder() {
		if st.victim[v.ID] || !rule(j, v) || st.young(v) {
			continue
		}
		vw := st.s.Workspaces[v.Tenant+"/"+v.Workspace]
		if vw != nil && st.u.usedOf(vw.Ref())-held(v) < vw.Guaranteed*unit {
			last = append(last, v)
		} else {
			cands = append(cands, v)
		}
	}
	cands = append(cands, last...)
	if len(cands) == 0 {
		st.reclaimFailed[failKey] = true
		return false
	}
	// Victims free at most what they hold: until they hold the shortfall,
	// no placement can work, so the costly check waits for it.
	avail := st.c.total - st.u.usedTotal - st.u.protectedFrom(w)
	shortfall := demand(j) - max(0, avail)
	freedSoFar, checkAt := 0, 0
	var chosen []*domain.Job
	found := false
	left := map[string]int{} // usage of victims' workspaces once the chosen stop
	for _, v := range cands {
		vref := v.Tenant + "/" + v.Workspace
		if _, ok := left[vref]; !ok {
			left[vref] = st.u.usedOf(vref)
		}
		// Reclaim takes only what a workspace borrowed: once the chosen
		// victims bring it back to its guarantee, its other jobs stay.
		if vw := st.s.Workspaces[vref]; kind == "reclaim" && left[vref] <= vw.Guaranteed*unit {
			continue
		}
		left[vref] -= held(v)
		chosen = append(chosen, v)
		freedSoFar += held(v)
		// A placement check walks the whole cluster: past the shortfall,
		// check at doubling set sizes (1, 2, 4... victims more), not at every
		// victim; pruning below takes the set back to what is needed.
		if freedSoFar >= shortfall && (checkAt == 0 || len(chosen) >= checkAt) {
			if st.fitsWithout(j, chosen) {
				found = true
				break
			}
			checkAt = 2*len(chosen) + 1
		}
	}
	if !found && len(chosen) > 0 && checkAt != 0 && len(chosen) < checkAt && st.fitsWithout(j, chosen) {
		found = true // the last candidates, between two checks
	}
	if !found {
		st.reclaimFailed[failKey] = true
		return false
	}
	// Drop victims the placement does not need, the costliest first (a
	// bounded number of checks: a large set is first halved while it holds).
	for len(chosen) > 1 {
		half := chosen[:len(chosen)/2]
		if !st.fitsWithout(j, half) {
			break
		}
		chosen = half
	}
	for i, checks := len(chosen)-1, 0; i >= 0 && checks < maxPruneChecks; i, checks = i-1, checks+1 {
		trial := append(append([]*domain.Job(nil), chosen[:i]...), chosen[i+1:]...)
		if len(trial) > 0 && st.fitsWithout(j, trial) {
			chosen = trial
		}
	}
	deadline := st.now.Add(st.policy.Grace)
	freed := 0
	for _, v := range chosen {
		st.victim[v.ID] = true
		freed += held(v)
		p := Preemption{JobID: v.ID, ForJob: j.ID, Deadline: deadline}
		if kind == "reclaim" {
			b := st.now.Add(st.policy.ReclaimBackoff)
			p.BorrowBackoff = &b
			p.Reason = domain.Reason{Code: "reclaimed", Message: fmt.Sprintf(
				"its workspace borrowed these GPUs and a guaranteed job needs them back; stop by %s", deadline.UTC().Format(time.RFC3339))}
		} else {
			p.Reason = domain.Reason{Code: "preempted_by_priority", Message: fmt.Sprintf(
				"a higher-priority job of the workspace (job %d) needs its GPUs; stop by %s", j.ID, deadline.UTC().Format(time.RFC3339))}
		}
		st.plan.Preemptions = append(st.plan.Preemptions, p)
	}
	st.plan.Pending[j.ID] = domain.Reason{Code: ReasonReclaim, Message: fmt.Sprintf(
		"%s: freeing %s GPUs from %d running jobs; placed once they stop (by %s at the latest)", kind, gpus(freed), len(chosen), deadline.UTC().Format(time.RFC3339))}
	return true
}

// victimOrder is the running jobs, cheapest to preempt first; built once
// per cycle (costs depend on the cycle's time only).
func (st *cycle) victimOrder() []*domain.Job {
	if st.byCost != nil {
		return st.byCost
	}
	type ranked struct {
		v    *domain.Job
		cost float64
	}
	var rs []ranked
	for _, v := range st.s.Jobs {
		if v.State == domain.JobReady || v.State == domain.JobRunning {
			rs = append(rs, ranked{v, st.cost(v)})
		}
	}
	slices.SortFunc(rs, func(ra, rb ranked) int {
		if c := cmp.Compare(ra.cost, rb.cost); c != 0 {
			return c
		}
		if c := cmp.Compare(ra.v.Priority, rb.v.Priority); c != 0 {
			return c
		}
		return cmp.Compare(rb.v.ID, ra.v.ID)
	})
	st.byCost = make([]*domain.Job, len(rs))
	for i := range rs {
		st.byCost[i] = rs[i].v
	}
	return st.byCost
}

// fitsWithout reports whether j passes quota and has a placement once the
// victims' GPUs are free.
func (st *cycle) fitsWithout(j *domain.Job, victims []*domain.Job) bool {
	gone := map[uint64]bool{}
	u := st.u.clone()
	for _, v := range victims {
		gone[v.ID] = true
		n := held(v)
		u.add(v.Tenant, v.Tenant+"/"+v.Workspace, -n)
	}
	c := st.c.shallow(st.scratch)
	st.scratch = c.servers
	for _, v := range victims {
		c.release(v, func(server string) ([]string, string) { return st.holdersWithout(server, gone) })
	}
	w := st.s.Workspaces[j.Tenant+"/"+j.Workspace]
	if _, ok := quota(j, w, st.s, u, c); !ok {
		return false
	}
	pl, _, _ := c.place(j, st.s.Tenants[j.Tenant])
	return pl != nil
}

// holdersWithout recomputes who holds a server once the gone jobs left it.
func (st *cycle) holdersWithout(server string, gone map[uint64]bool) ([]string, string) {
	var h []string
	excl := ""
	if st.onServer == nil {
		st.onServer = map[string][]*domain.Job{}
		for _, j := range st.s.Jobs {
			for _, p := range j.Placement {
				st.onServer[p.Server] = append(st.onServer[p.Server], j)
			}
		}
	}
	for _, o := range st.onServer[server] {
		if gone[o.ID] {
			continue
		}
		if !slices.Contains(h, o.Tenant) {
			h = append(h, o.Tenant)
		}
		if t := st.s.Tenants[o.Tenant]; t != nil && t.Isolation == domain.IsolationServer {
			excl = o.Tenant
		}
	}
	return h, excl
}

// young: within its minimum runtime, a job may not be preempted.
func (st *cycle) young(v *domain.Job) bool {
	if v.MinRuntimeSeconds <= 0 || v.PlacedAt == nil {
		return false
	}
	return st.now.Before(v.PlacedAt.Add(time.Duration(v.MinRuntimeSeconds) * time.Second))
}

// cost is the work a preemption loses, in GPU-seconds: GPUs held times the
// time since the job started (or was placed).
func (st *cycle) cost(v *domain.Job) float64 {
	since := v.PlacedAt
	if v.StartedAt != nil {
		since = v.StartedAt
	}
	if since == nil {
		return 0
	}
	return float64(held(v)) / unit * max(0, st.now.Sub(*since).Seconds())
}

// releases lists allocations due now, and the next time one falls due.
func (st *cycle) releases() {
	next := time.Time{}
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, v := range st.s.Jobs {
		switch {
		case v.State == domain.JobPreempting && v.StopDeadline != nil:
			if !st.now.Before(*v.StopDeadline) {
				st.plan.Releases = append(st.plan.Releases, Release{JobID: v.ID, Cause: "deadline"})
			} else {
				soon(*v.StopDeadline)
			}
		case (v.State == domain.JobReady || v.State == domain.JobRunning) && v.TimeLimitSeconds > 0 && v.PlacedAt != nil:
			end := v.PlacedAt.Add(time.Duration(v.TimeLimitSeconds) * time.Second)
			if !st.now.Before(end) {
				st.plan.Releases = append(st.plan.Releases, Release{JobID: v.ID, Cause: "time_limit"})
			} else {
				soon(end)
			}
		}
	}
	st.plan.Next = next
}

// drain tells the jobs on draining servers to stop by the grace deadline.
func (st *cycle) drain() {
	for _, v := range st.s.Jobs {
		if v.State != domain.JobReady && v.State != domain.JobRunning {
			continue
		}
		for _, p := range v.Placement {
			if cond, ok := st.s.Nodes[p.Server]; ok && cond.Draining {
				deadline := st.now.Add(st.policy.Grace)
				st.victim[v.ID] = true
				st.plan.Preemptions = append(st.plan.Preemptions, Preemption{JobID: v.ID, Deadline: deadline,
					Reason: domain.Reason{Code: "drained", Message: fmt.Sprintf("server %s is draining; stop by %s", p.Server, deadline.UTC().Format(time.RFC3339))}})
				break
			}
		}
	}
}
