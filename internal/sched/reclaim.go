package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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
const maxReclaimSearches = 256

// maxPruneChecks bounds the one-by-one pruning of a victim set.
const maxPruneChecks = 32

// preemptKind is why the scheduler tells a running job to stop.
type preemptKind int

const (
	// preemptReclaim: a job within its workspace's guarantee takes back
	// GPUs other workspaces borrowed.
	preemptReclaim preemptKind = iota + 1
	// preemptPriority: a higher-priority job of the victim's own workspace
	// needs its GPUs.
	preemptPriority
	// preemptDrain: the victim's server is draining.
	preemptDrain
	// preemptFairShare: a job within its workspace's fair share (beyond
	// its guarantee) takes back GPUs of workspaces above theirs
	// (Policy.FairShareReclaim).
	preemptFairShare
)

// reclaims: the kinds that take from other workspaces what they hold
// above a threshold (the guarantee, or the fair share).
func (k preemptKind) reclaims() bool { return k == preemptReclaim || k == preemptFairShare }

func (k preemptKind) String() string {
	switch k {
	case preemptReclaim:
		return "reclaim"
	case preemptPriority:
		return "priority"
	case preemptDrain:
		return "drain"
	case preemptFairShare:
		return "fair-share reclaim"
	}
	return fmt.Sprintf("preemptKind(%d)", int(k))
}

// reason is what a victim of this kind is told: for is the job it stops
// for (reclaim, priority), server the draining server (drain).
func (k preemptKind) reason(forJob uint64, server string, deadline time.Time) domain.Reason {
	by := deadline.UTC().Format(time.RFC3339)
	switch k {
	case preemptReclaim:
		return domain.Reason{Code: "reclaimed", Message: fmt.Sprintf(
			"its workspace borrowed these GPUs and a guaranteed job needs them back; stop by %s", by)}
	case preemptFairShare:
		return domain.Reason{Code: "reclaimed", Message: fmt.Sprintf(
			"its workspace holds more than its fair share and a workspace below its own needs these GPUs; stop by %s", by)}
	case preemptPriority:
		return domain.Reason{Code: "preempted_by_priority", Message: fmt.Sprintf(
			"a higher-priority job of the workspace (job %d) needs its GPUs; stop by %s", forJob, by)}
	default:
		return domain.Reason{Code: "drained", Message: fmt.Sprintf("server %s is draining; stop by %s", server, by)}
	}
}

// reclaim tries to free GPUs for j, which could not be placed, in phases
// (as Kueue's preemption.GetTargets): wait for GPUs already being freed;
// else candidates (who may be preempted, in preemption order), pick (take
// them until j can be placed), prune (drop those the placement does not
// need) and issue (the preemptions, and j's reservation). It reports
// whether j now waits for GPUs being freed; when j is within its
// guarantee and does not, the reason names the rule that stops the reclaim.
// ref, w and t are j's workspace and tenant, at where the workspace sits
// in the usage index (reclaimFor).
func (st *cycle) reclaim(j *domain.Job, ref string, at wsAt, w *domain.Workspace, t *domain.Tenant) (domain.Reason, bool) {
	r, ok, rule := st.reclaimFor(j, ref, at, w, t)
	if !ok && rule != "" {
		return domain.Reason{Message: "reclaim cannot serve it: " + rule}, false
	}
	return r, ok
}

// Rules that stop a reclaim for a job within its guarantee (reclaimFor).
const (
	ruleNoBorrower = "no other workspace is above its guarantee (reclaim takes only borrowed GPUs)"
	ruleNoVictim   = "the borrowed GPUs are held by jobs within their minimum runtime or already stopping"
	// ruleNoBorrowerInPool: a job of a pool reclaims on its servers only
	// (victimsOn).
	ruleNoBorrowerInPool = "no other workspace's job above its guarantee runs on the servers of pool %s"
	ruleNoRoom           = "stopping borrowed work (from each workspace at most what it borrowed) frees no room of its shape: the borrowed GPUs share servers with guaranteed work"
	ruleBudget           = "this cycle's reclaim searches are used up (the next cycle continues)"
	ruleChurn            = "the churn budget of fair-share reclaim is used up"
)

// ref, w and t are j's workspace (by ref) and tenant, as the queue's
// order looked them up, and at where the workspace sits in the usage
// index (the future view's is the cycle's): thousands of blocked jobs a
// cycle get here.
func (st *cycle) reclaimFor(j *domain.Job, ref string, at wsAt, w *domain.Workspace, t *domain.Tenant) (domain.Reason, bool, string) {
	st.buildFuture()
	withinGuarantee := st.fv.u.usedAt(at.ref)+demand(j) <= w.Guaranteed*unit
	if r, ok := st.awaitFreeing(j, t, withinGuarantee); ok {
		return r, true, ""
	}
	rule := func(r string) string {
		if withinGuarantee {
			return r
		}
		return ""
	}
	// Searches are bounded per cycle (the rest are served in the next
	// cycles), and a shape that found no victims in a workspace will not
	// find any for the next job of that shape: victims only get fewer.
	if st.fv.searches >= maxReclaimSearches {
		return domain.Reason{}, false, rule(ruleBudget)
	}
	// Made once the budget is known to allow a search: most blocked jobs
	// of a full cluster come after it is used up.
	failKey := ref + "|" + st.shapeOf(j)
	if why, failed := st.fv.failed[failKey]; failed {
		return domain.Reason{}, false, rule(why)
	}
	st.fv.searches++
	kind := preemptPriority
	switch {
	case withinGuarantee:
		kind = preemptReclaim
	case st.policy.FairShareReclaim && st.withinFairShare(j) && st.churnLeft() >= demand(j):
		// Beyond the guarantee, within the fair share: reclaim from
		// workspaces above theirs first, else priority preemption.
		if r, ok := st.searchAndIssue(j, t, preemptFairShare); ok {
			return r, true, ""
		}
	}
	if kind == preemptPriority {
		r, ok := st.searchAndIssue(j, t, kind)
		if !ok {
			st.fv.failed[failKey] = ruleNoVictim
		}
		return r, ok, ""
	}
	cands := st.candidates(j, kind)
	if len(cands) == 0 {
		why := ruleNoVictim
		switch {
		case kind == preemptReclaim && !st.fv.u.anyAbove(ref):
			why = ruleNoBorrower
		case kind == preemptReclaim && j.Pool != "" && !st.borrowsOn(j.Pool, st.fv.u.index(ref)):
			why = fmt.Sprintf(ruleNoBorrowerInPool, j.Pool)
		}
		st.fv.failed[failKey] = why
		return domain.Reason{}, false, rule(why)
	}
	// Victims free at most what they hold: until they hold the shortfall,
	// no placement can work, so the costly check waits for it.
	avail := st.fv.c.total - st.fv.u.usedTotal - st.fv.u.protectedFrom(w)
	shortfall := demand(j) - max(0, avail)
	// Take allowed victims in cost order until the job can be placed. Cost
	// order scatters victims over the servers; a job of whole GPUs needs
	// them together (whole servers for a gang), and what reclaim may take
	// is bounded by what the victims' workspaces borrowed, so when that
	// fails the same victims are tried server by server: the servers they
	// can empty first.
	chosen, pl, found := st.find(j, kind, cands, shortfall)
	if !found {
		st.fv.failed[failKey] = ruleNoRoom
		return domain.Reason{}, false, rule(ruleNoRoom)
	}
	chosen, pl = st.prune(j, chosen, pl, shortfall)
	if len(chosen) > 1 {
		if alt, apl, ok := st.fewest(j, kind, cands, len(chosen), shortfall); ok {
			chosen, pl = alt, apl
		}
	}
	return st.issue(j, t, kind, chosen, pl), true, ""
}

// searchAndIssue is a victim search of one kind for j, issued if found.
func (st *cycle) searchAndIssue(j *domain.Job, t *domain.Tenant, kind preemptKind) (domain.Reason, bool) {
	cands := st.candidates(j, kind)
	if len(cands) == 0 {
		return domain.Reason{}, false
	}
	w := st.s.Workspaces[j.Tenant+"/"+j.Workspace]
	avail := st.fv.c.total - st.fv.u.usedTotal - st.fv.u.protectedFrom(w)
	shortfall := demand(j) - max(0, avail)
	chosen, pl, found := st.find(j, kind, cands, shortfall)
	if !found {
		return domain.Reason{}, false
	}
	chosen, pl = st.prune(j, chosen, pl, shortfall)
	if kind == preemptFairShare {
		n := 0
		for _, v := range chosen {
			n += held(v)
		}
		if n > st.churnLeft() {
			return domain.Reason{}, false
		}
		st.churn += n
	}
	return st.issue(j, t, kind, chosen, pl), true
}

// awaitFreeing reserves j's placement in the future view when GPUs already
// being freed (for this job, or left over by the victims of other
// reclaims) are enough once they stop, so it takes no more. Only a job
// entitled to reclaim may reserve; a borrowing job waits for free GPUs like
// any other. (The future view differs from now only by reservations, which
// take GPUs, until something is released into it.)
func (st *cycle) awaitFreeing(j *domain.Job, t *domain.Tenant, withinGuarantee bool) (domain.Reason, bool) {
	f := st.fv.freeing[j.ID]
	if !st.fv.freed || (!withinGuarantee && f.units == 0) {
		return domain.Reason{}, false
	}
	pl := st.freeingFits(j)
	if pl == nil {
		return domain.Reason{}, false
	}
	st.book(j, t, pl)
	msg := fmt.Sprintf("waiting for GPUs being freed by other jobs' preemption (by %s at the latest)", st.fv.by.UTC().Format(time.RFC3339))
	if f.units > 0 {
		msg = fmt.Sprintf("waiting for %s GPUs being freed for it (released by %s at the latest)", gpus(f.units), f.deadline.UTC().Format(time.RFC3339))
	}
	return domain.Reason{Code: ReasonReclaim, Message: msg}, true
}

// freeingFits is fitsWithout(j, nil), with the shapes found to have no
// room kept until a server of their static set gains GPUs in the future
// view (issue, giveBack: gainIn): it only loses them otherwise
// (bookings), as the cycle's view does (noFit), and a placement reads
// only the servers of its static set. The quota is checked every time: a
// booking in one workspace can leave another more of the cluster
// (protected guarantees shrink). Every blocked job within its guarantee
// asks once anything is being freed: at 100,000 GPUs in 8 pools, 600
// what-if placements in one cycle, most for shapes of pools nothing had
// been freed in since they found no room.
func (st *cycle) freeingFits(j *domain.Job) []domain.Placement {
	w := st.s.Workspaces[j.Tenant+"/"+j.Workspace]
	models, _, ok := admit(j, w, st.s, st.fv.u, st.fv.c)
	if !ok {
		return nil
	}
	t := st.s.Tenants[j.Tenant]
	key := roomKey(j, t, st.shapeOf(j)) + "|" + strings.Join(models, ",")
	set := st.c.statics.of(st.c, j, t)
	if at, ok := st.fv.noRoom[key]; ok && at.set == set && at.gen == st.fv.setGen[set] && !st.s.exhaustive {
		return nil
	}
	pl := st.futureView().fits(st, j)
	if pl == nil {
		if st.fv.noRoom == nil {
			st.fv.noRoom = map[string]noRoom{}
		}
		st.fv.noRoom[key] = noRoom{set: set, gen: st.fv.setGen[set]}
	}
	return pl
}

// roomKey is what decides whether j fits a view, given its static set:
// its shape (shapeKey), its CPU and memory, and its tenant only where
// the placement reads it. Whole GPUs of a tenant that is not
// server-isolated go on any server of the set no server-isolated tenant
// holds, whoever asks (a share is placed by its tenant's shares; a
// server-isolated tenant by who else is on the server): their shapes are
// kept for every such tenant (5,000 tenants made every key new).
func roomKey(j *domain.Job, t *domain.Tenant, shape string) string {
	key := shape + "|" + strconv.FormatInt(j.CPUMilli, 10) + "|" + strconv.FormatInt(j.MemoryMiB, 10)
	if t != nil && t.Isolation != domain.IsolationServer && j.GPUs > 0 && j.Share == 0 && j.MIGProfile == "" {
		return key[len(j.Tenant):] // shapeKey starts with the tenant
	}
	return key
}

// noRoom is when freeingFits found no room for a shape: its static set,
// and the set's count of gains then.
type noRoom struct {
	set *staticSet
	gen int
}

// gainIn counts v's release into the future view in every static set of
// the cycle with a server v runs on (a handful of sets: models, sites,
// pools).
func (st *cycle) gainIn(v *domain.Job) {
	for _, set := range st.c.statics.byKey {
		for _, p := range v.Placement {
			if k, ok := st.c.byName[p.Server]; ok && k < len(set.ok) && set.ok[k] {
				if st.fv.setGen == nil {
					st.fv.setGen = map[*staticSet]int{}
				}
				st.fv.setGen[set]++
				break
			}
		}
	}
}

// futureOnly is j's placement in the future view on GPUs that are not
// free now (nil if there is none): booking it takes nothing a job could
// be placed on in this cycle.
func (st *cycle) futureOnly(j *domain.Job) []domain.Placement {
	w := st.futureView()
	// Servers outside a pool job's pool are never placed on: their free
	// GPUs need no hiding (each hidden copies a server).
	var set []bool
	if j.Pool != "" && !st.s.exhaustive { // exhaustive: the equivalence tests' reference
		set = st.c.statics.pool(st.c, j.Pool)
	}
	for i, base := range st.c.servers {
		if base.nfree == 0 || (set != nil && (i >= len(set) || !set[i])) {
			continue
		}
		v := w.c.servers[i]
		hide := false
		for g := range base.free {
			if base.free[g] && g < len(v.free) && v.free[g] {
				hide = true
				break
			}
		}
		if !hide {
			continue
		}
		if !w.c.cloned[i] {
			w.c.servers[i], w.c.cloned[i] = v.clone(), true
			v = w.c.servers[i]
		}
		for g := range base.free {
			if base.free[g] && g < len(v.free) && v.free[g] {
				v.free[g] = false
				v.nfree--
			}
		}
		v.ver++
		w.c.ver++
	}
	return w.fits(st, j)
}

// candidates are the jobs j may preempt, in preemption order: the running
// jobs sorted once per cycle by cost (fewest GPU-hours lost, then lowest
// priority, then newest), filtered by kind:
//   - reclaim: jobs of other workspaces above their guarantee (none when
//     no workspace is above it once the jobs told to stop have stopped);
//   - priority: lower-priority jobs of the job's own workspace.
//
// Jobs younger than their minimum runtime, or already told to stop, are
// not candidates; nor, for a reclaim, jobs within their borrow backoff. A victim whose workspace stays at or above its guarantee
// without it costs only its own work; one whose gang straddles the
// guarantee also takes guaranteed GPUs from its workspace: such victims go
// last (a stable partition keeps the order).
func (st *cycle) candidates(j *domain.Job, kind preemptKind) []victim {
	ref := j.Tenant + "/" + j.Workspace
	if kind == preemptReclaim && !st.fv.u.anyAbove(ref) {
		return nil
	}
	var fair []int
	if kind == preemptFairShare {
		fair = st.fairShares()
	}
	// Priority preemption takes only jobs of a lower priority: with none
	// anywhere (the filter below would drop every victim), the pool is not
	// built. On a cluster of one priority, every search of a cycle (256)
	// ended so, after sorting its workspace's running jobs. (An exhaustive
	// cycle builds it, for the tests that compare the two.)
	if kind == preemptPriority && !st.s.exhaustive && j.Priority <= st.lowestStoppable() {
		return nil
	}
	own := st.fv.u.index(ref)
	var pool []victim
	switch {
	case kind == preemptPriority:
		pool = st.victimsIn(own)
	case j.Pool != "":
		pool = st.victimsOn(j.Pool)
	default:
		pool = st.victimOrder()
	}
	in := st.c.statics.pool(st.c, j.Pool)
	var cands, last []victim
	for _, v := range pool {
		if v.wi < 0 || v.young || st.victim[v.ID] {
			continue
		}
		if j.Pool != "" && kind == preemptPriority && !runsOn(st.c, v.Job, in) {
			continue
		}
		used, g := st.fv.u.used[v.wi], st.fv.u.ix.ws[v.wi].Guaranteed*unit
		if fair != nil {
			g = fair[v.wi]
		}
		if kind.reclaims() && (v.wi == own || used <= g) {
			continue
		}
		if kind == preemptReclaim && v.BorrowNotBefore != nil && st.now.Before(*v.BorrowNotBefore) {
			// Reclaimed recently, it was admitted again only within its
			// workspace's guarantee: its workspace's borrowers go, not it.
			continue
		}
		if kind == preemptPriority && v.Priority >= j.Priority {
			continue
		}
		if used-v.held < g {
			last = append(last, v)
		} else {
			cands = append(cands, v)
		}
	}
	return append(cands, last...)
}

// prune drops the victims j's placement does not need, so the scheduler
// never evicts much more than it serves, and returns the victims kept and
// j's placement once they stop. A set that frees less than the shortfall
// cannot work: such trials are skipped without a placement check.
func (st *cycle) prune(j *domain.Job, chosen []*domain.Job, pl []domain.Placement, shortfall int) ([]*domain.Job, []domain.Placement) {
	// First keep only the victims on the servers the placement uses (one
	// check where one-by-one pruning of a set grown cheapest-first across
	// the cluster would take many).
	on := map[string]bool{}
	for _, p := range pl {
		on[p.Server] = true
	}
	var keep []*domain.Job
	for _, v := range chosen {
		if slices.ContainsFunc(v.Placement, func(p domain.Placement) bool { return on[p.Server] }) {
			keep = append(keep, v)
		}
	}
	if len(keep) > 0 && len(keep) < len(chosen) && st.fitsWithout(j, keep) != nil {
		chosen = keep
	}
	sum := func(vs []*domain.Job) int {
		n := 0
		for _, v := range vs {
			n += held(v)
		}
		return n
	}
	// Then halve while the first half still serves.
	for len(chosen) > 1 {
		half := chosen[:len(chosen)/2]
		if sum(half) < shortfall || st.fitsWithout(j, half) == nil {
			break
		}
		chosen = half
	}
	// Then one by one, from the costliest, a bounded number of checks.
	total := sum(chosen)
	for i, checks := len(chosen)-1, 0; i >= 0 && checks < maxPruneChecks; i-- {
		if len(chosen) == 1 || total-held(chosen[i]) < shortfall {
			continue
		}
		checks++
		trial := append(append([]*domain.Job(nil), chosen[:i]...), chosen[i+1:]...)
		if st.fitsWithout(j, trial) != nil {
			total -= held(chosen[i])
			chosen = trial
		}
	}
	return chosen, st.fitsWithout(j, chosen)
}

// issue tells the chosen victims to stop by the grace deadline, releases
// them into the future view and books j's placement there. It returns j's
// reclaim_pending reason: j is placed once the GPUs are released.
func (st *cycle) issue(j *domain.Job, t *domain.Tenant, kind preemptKind, chosen []*domain.Job, pl []domain.Placement) domain.Reason {
	deadline := st.now.Add(st.policy.Grace)
	freed := 0
	for _, v := range chosen {
		st.victim[v.ID] = true
		st.fv.freed = true
		st.fv.c.release(v)
		st.gainIn(v)
		st.fv.u.addJob(v, v.Placement, -1)
		freed += held(v)
		p := Preemption{JobID: v.ID, ForJob: j.ID, Deadline: deadline, Reason: kind.reason(j.ID, "", deadline)}
		if kind.reclaims() {
			b := st.now.Add(st.policy.ReclaimBackoff)
			p.BorrowBackoff = &b
		}
		st.plan.Preemptions = append(st.plan.Preemptions, p)
	}
	if deadline.After(st.fv.by) {
		st.fv.by = deadline
	}
	st.book(j, t, pl)
	return domain.Reason{Code: ReasonReclaim, Message: fmt.Sprintf(
		"%s: freeing %s GPUs from %d running jobs; placed once they stop (by %s at the latest)", kind, gpus(freed), len(chosen), deadline.UTC().Format(time.RFC3339))}
}

// pick takes victims from cands, in order, until j can be placed: reclaim
// takes only what a workspace borrowed, so once the victims before bring it
// back to its guarantee, its other jobs stay. One what-if view grows with
// the victims; a placement check walks the whole cluster, so past the
// shortfall it runs at doubling set sizes (1, 2, 4... victims more), not at
// every victim, and the caller's pruning takes the set back to what is
// needed. Victims enter the view only when a check is due: a search that
// never reaches the shortfall costs no view at all.
func (st *cycle) pick(j *domain.Job, kind preemptKind, cands []victim, shortfall int) ([]*domain.Job, []domain.Placement, bool) {
	var view *whatIf
	dropped := 0
	var pl []domain.Placement
	var chosen []*domain.Job
	check := func() bool {
		if view == nil {
			view = st.whatIf(nil)
		}
		for ; dropped < len(chosen); dropped++ {
			view.drop(chosen[dropped])
		}
		pl = view.fits(st, j)
		return pl != nil
	}
	left := map[int]int{} // usage of victims' workspaces once the chosen stop
	freedSoFar, checkAt := 0, 0
	for _, v := range cands {
		if _, ok := left[v.wi]; !ok {
			left[v.wi] = st.fv.u.used[v.wi]
		}
		if kind.reclaims() && left[v.wi] <= st.threshold(kind, v.wi) {
			continue
		}
		left[v.wi] -= v.held
		chosen = append(chosen, v.Job)
		freedSoFar += v.held
		if freedSoFar >= shortfall && (checkAt == 0 || len(chosen) >= checkAt) {
			if check() {
				return chosen, pl, true
			}
			checkAt = 2*len(chosen) + 1
		}
	}
	if len(chosen) > 0 && checkAt > 0 && len(chosen) < checkAt && check() {
		return chosen, pl, true // the last candidates, between two checks
	}
	return nil, nil, false
}

// find takes victims from cands until j can be placed: in cost order;
// else, for a job of whole GPUs, server by server (byServer); else, for a
// gang that requires one NVLink domain or stripe, group by group
// (byGroup): the defragmentation of a domain or leaf, within the same
// rules (victims only from what each workspace may lose).
func (st *cycle) find(j *domain.Job, kind preemptKind, cands []victim, shortfall int) ([]*domain.Job, []domain.Placement, bool) {
	chosen, pl, found := st.pick(j, kind, cands, shortfall)
	if found || j.GPUs <= 0 || j.MIGProfile != "" || j.Share != 0 {
		return chosen, pl, found
	}
	if chosen, pl, found = st.pick(j, kind, st.byServer(kind, cands), shortfall); found {
		return chosen, pl, found
	}
	if req := j.Topology; req != nil && req.Required && (req.Level == LevelNVLinkDomain || req.Level == LevelStripe) {
		return st.pick(j, kind, st.byGroup(req.Level, cands, demand(j)), shortfall)
	}
	return nil, nil, false
}

// byGroup orders candidates NVLink domain by domain (or stripe by
// stripe): first the groups whose free GPUs and candidates' whole GPUs
// could hold the job, the most freeable first, then the cheapest; each
// group's candidates in cost order. A candidate spanning groups comes with
// the first of them.
func (st *cycle) byGroup(level string, cands []victim, need int) []victim {
	key := func(v *server) int {
		if level == LevelStripe {
			return v.stripeID
		}
		return v.domainID
	}
	type grp struct {
		freeable int
		cost     float64
		on       []int
	}
	groups := map[int]*grp{}
	var order []int
	get := func(k int) *grp {
		g := groups[k]
		if g == nil {
			g = &grp{}
			groups[k] = g
			order = append(order, k)
		}
		return g
	}
	for _, sv := range st.fv.c.servers {
		get(key(sv)).freeable += sv.nfree * unit
	}
	for i, v := range cands {
		for n, p := range v.Placement {
			sv := st.fv.c.server(p.Server)
			if sv == nil {
				continue
			}
			g := get(key(sv))
			if p.Share == 0 && len(p.MIG) == 0 {
				g.freeable += len(p.GPUs) * unit
			}
			if n == 0 {
				g.cost += v.cost
				g.on = append(g.on, i)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ga, gb := groups[a], groups[b]
		if fa, fb := ga.freeable >= need, gb.freeable >= need; fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(gb.freeable, ga.freeable); c != 0 {
			return c
		}
		return cmp.Compare(ga.cost, gb.cost)
	})
	out := make([]victim, 0, len(cands))
	for _, k := range order {
		for _, i := range groups[k].on {
			out = append(out, cands[i])
		}
	}
	return out
}

// byServer orders reclaim candidates server by server: first the servers
// the candidates can empty (with the GPUs already free there) within what
// their workspaces borrowed, taken greedily so one server's victims do not
// use up what another's need; then the others by the share of the server
// they can free, then the cheapest. Each server's candidates keep their
// cost order; a gang over several servers comes with the first of them.
func (st *cycle) byServer(kind preemptKind, cands []victim) []victim {
	type srv struct {
		name     string
		freeable int // free GPUs + whole GPUs candidates hold here
		size     int
		cost     float64
		on       []int // candidates with a placement here, in cost order
		empty    bool  // emptied within what the workspaces borrowed
	}
	var order []*srv
	per := map[string]*srv{}
	for i, v := range cands {
		for _, p := range v.Placement {
			s := per[p.Server]
			if s == nil {
				sv := st.fv.c.server(p.Server)
				if sv == nil {
					continue
				}
				s = &srv{name: p.Server, freeable: sv.nfree, size: len(sv.free)}
				per[p.Server] = s
				order = append(order, s)
			}
			if p.Share == 0 && len(p.MIG) == 0 {
				s.freeable += len(p.GPUs)
			}
			s.cost += v.cost
			s.on = append(s.on, i)
		}
	}
	slices.SortStableFunc(order, func(a, b *srv) int {
		// Share of the server that can be freed, compared exactly.
		if c := cmp.Compare(b.freeable*a.size, a.freeable*b.size); c != 0 {
			return c
		}
		return cmp.Compare(a.cost, b.cost)
	})
	// Reclaim takes from a workspace at most what it borrowed.
	borrowed := map[int]int{}
	for _, s := range order {
		if s.freeable < s.size {
			break
		}
		need := map[int]int{}
		ok := true
		for _, i := range s.on {
			v := cands[i]
			if _, seen := borrowed[v.wi]; !seen {
				borrowed[v.wi] = st.above(kind, v.wi)
			}
			need[v.wi] += v.held
			if kind.reclaims() && need[v.wi] > borrowed[v.wi] {
				ok = false
			}
		}
		if ok {
			s.empty = true
			for wi, n := range need {
				borrowed[wi] -= n
			}
		}
	}
	slices.SortStableFunc(order, func(a, b *srv) int {
		if a.empty != b.empty {
			if a.empty {
				return -1
			}
			return 1
		}
		return 0
	})
	out := make([]victim, 0, len(cands))
	taken := make([]bool, len(cands))
	for _, s := range order {
		for _, i := range s.on {
			if !taken[i] {
				taken[i] = true
				out = append(out, cands[i])
			}
		}
	}
	return out
}

// victim is a running job with what reclaim asks of it, computed once per
// cycle.
type victim struct {
	*domain.Job
	wi    int // workspace index in the usage, -1 if unknown
	held  int
	young bool
	cost  float64
}

// victimOrder is the running jobs, cheapest to preempt first; built once
// per cycle (costs depend on the cycle's time only).
func (st *cycle) victimOrder() []victim {
	if st.fv.byCost != nil {
		return st.fv.byCost
	}
	st.fv.byCost = st.stoppable()
	sortVictims(st.fv.byCost)
	return st.fv.byCost
}

// stoppable is the running jobs a cycle may tell to stop, in the
// snapshot's order.
func (st *cycle) stoppable() []victim {
	// From the table's rows: young and cost as st.young and st.cost
	// find them, without loading every running job.
	var out []victim
	rows := st.tbl.rows
	for k := range rows {
		r := &rows[k]
		if !r.stoppable || st.released[r.id] {
			continue
		}
		v := victim{Job: st.tbl.jobs[k], wi: int(st.pairWS[r.pair]), held: r.held}
		if r.minRuntime > 0 && r.hasPlacedAt {
			v.young = st.now.Before(st.tbl.placedAt(k).Add(time.Duration(r.minRuntime) * time.Second))
		}
		if r.hasSince {
			v.cost = float64(r.held) / unit * max(0, st.now.Sub(st.tbl.since(k)).Seconds())
		}
		out = append(out, v)
	}
	return out
}

// victimsOn is victimOrder restricted to the jobs with a placement on a
// server of pool name, made once per cycle and pool: a job of a pool is
// placed on its servers only, so stopping a job elsewhere makes it no
// room. Counted in pick, such victims used up what their workspaces
// borrowed before the victims on the pool's servers were reached (a
// guaranteed job then found no room while borrowers ran on its pool),
// and each made a what-if check of the whole cluster (issue 18: at
// 100,000 GPUs in 8 pools, nine in ten candidates ran elsewhere, and one
// cycle's reclaims took 3 s).
func (st *cycle) victimsOn(name string) []victim {
	if vs, ok := st.fv.byPool[name]; ok {
		return vs
	}
	in := st.c.statics.pool(st.c, name)
	var vs []victim
	for _, v := range st.victimOrder() {
		if runsOn(st.c, v.Job, in) {
			vs = append(vs, v)
		}
	}
	if st.fv.byPool == nil {
		st.fv.byPool = map[string][]victim{}
	}
	st.fv.byPool[name] = vs
	return vs
}

// borrowsOn reports whether a job of a workspace other than own, above
// its guarantee in the future view, runs on the servers of pool name.
func (st *cycle) borrowsOn(name string, own int) bool {
	for _, v := range st.victimsOn(name) {
		if v.wi >= 0 && v.wi != own && st.fv.u.used[v.wi] > st.fv.u.ix.ws[v.wi].Guaranteed*unit {
			return true
		}
	}
	return false
}

// runsOn reports whether j has a placement on a server of the pool whose
// membership by server index is in (statics.pool).
func runsOn(c *cluster, j *domain.Job, in []bool) bool {
	for _, p := range j.Placement {
		if i, ok := c.byName[p.Server]; ok && i < len(in) && in[i] {
			return true
		}
	}
	return false
}

// lowestStoppable is the lowest priority of the jobs a cycle may tell to
// stop (of every row stoppable may list: those released this cycle too,
// which can only make it lower), math.MaxInt if none; once per cycle.
func (st *cycle) lowestStoppable() int {
	if !st.fv.lowKnown {
		low := math.MaxInt
		for k := range st.tbl.rows {
			if r := &st.tbl.rows[k]; r.stoppable {
				low = min(low, r.prio)
			}
		}
		st.fv.lowPrio, st.fv.lowKnown = low, true
	}
	return st.fv.lowPrio
}

// sortVictims puts victims cheapest first: least work lost, then lowest
// priority, then newest (a total order: job ids are unique).
func sortVictims(vs []victim) {
	slices.SortFunc(vs, func(a, b victim) int {
		if c := cmp.Compare(a.cost, b.cost); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
}

// victimsIn is victimOrder restricted to one workspace: each workspace's
// list is sorted when first asked for, so a cycle whose searches are all
// within workspaces (priority preemption) never sorts every running job.
func (st *cycle) victimsIn(wi int) []victim {
	if st.fv.byWorkspace == nil {
		st.fv.byWorkspace = map[int][]victim{}
		st.fv.sortedIn = map[int]bool{}
		all := st.fv.byCost
		if all == nil {
			all = st.stoppable()
		}
		for _, v := range all {
			st.fv.byWorkspace[v.wi] = append(st.fv.byWorkspace[v.wi], v)
		}
	}
	vs := st.fv.byWorkspace[wi]
	if !st.fv.sortedIn[wi] {
		sortVictims(vs)
		st.fv.sortedIn[wi] = true
	}
	return vs
}

// buildFuture builds the future view, once per cycle: the cluster and usage
// without the jobs told to stop (see futureView).
func (st *cycle) buildFuture() {
	if st.fv.c != nil {
		return
	}
	st.fv.c, st.fv.u = st.c.shallow(nil), st.u.clone()
	st.fv.heldFor = map[uint64][]*domain.Job{}
	// GPUs released but kept for a job until its turn stay kept in the
	// future view too (giveBack releases them there).
	for id, vs := range st.heldFor {
		st.fv.freed = true
		st.fv.heldFor[id] = append(st.fv.heldFor[id], vs...)
	}
	// The table's rows say which jobs are stopping: only those are
	// loaded (a pass loading 100,000 jobs was most of building the view).
	rows := st.tbl.rows
	for k := range rows {
		if r := &rows[k]; (r.state == rowPreempting || st.victim[r.id]) && !st.released[r.id] {
			v := st.tbl.jobs[k]
			st.fv.freed = true
			st.fv.u.addJob(v, v.Placement, -1)
			if f := v.PreemptedFor; f != 0 && !st.victim[v.ID] && st.waiting[f] && !st.givenBack[f] {
				st.fv.heldFor[f] = append(st.fv.heldFor[f], v)
			} else {
				st.fv.c.release(v)
			}
			if v.StopDeadline != nil && v.StopDeadline.After(st.fv.by) {
				st.fv.by = *v.StopDeadline
			}
		}
	}
	if !st.fv.by.After(st.now) {
		st.fv.by = st.now.Add(st.policy.Grace)
	}
}

// reserve books j's placement in the future view.
func (st *cycle) reserve(j *domain.Job, t *domain.Tenant, pl []domain.Placement) {
	st.fv.c.commit(j, t, pl)
	st.fv.u.addJob(j, pl, 1)
}

// book reserves a waiting job's placement in the future view and keeps
// the GPUs of it that are free now from the jobs after it in this cycle:
// placed now, a later job (a borrower, say) would take GPUs the waiting job
// counts on, and at the deadline it would need another reclaim and another
// grace period. Whole GPUs are held back (shares and MIG slices are not:
// their GPUs may already hold the victims' instances); the job's tenant
// counts as holding the servers, for isolation.
func (st *cycle) book(j *domain.Job, t *domain.Tenant, pl []domain.Placement) {
	st.reserve(j, t, pl)
	st.freeVer++
	for _, p := range pl {
		if p.Share > 0 || len(p.MIG) > 0 {
			continue
		}
		v := st.c.mut(p.Server)
		if v == nil {
			continue
		}
		for _, g := range p.GPUs {
			if g >= 0 && g < len(v.free) && v.free[g] {
				v.free[g] = false
				v.nfree--
				v.ver++
			}
		}
		st.c.hold(v, j.Tenant, t)
	}
}

// whatIf is the future view with some more jobs gone.
type whatIf struct {
	c *cluster
	u *usage
}

// whatIf builds a view of the future without the victims. Views share the
// cycle's scratch buffers: one is used at a time.
// The view owns its usage (drop changes it).
func (st *cycle) whatIf(victims []*domain.Job) *whatIf {
	u := st.fv.u.clone()
	for _, v := range victims {
		u.addJob(v, v.Placement, -1)
	}
	return st.whatIfWith(victims, u)
}

// futureView is whatIf(nil) for a view only placed in (fits), never
// dropped from: it reads the future view's usage as it is, where a copy
// per what-if placement was most of the cost of awaitFreeing's.
func (st *cycle) futureView() *whatIf {
	return st.whatIfWith(nil, st.fv.u)
}

// whatIfWith is whatIf with the usage already without the victims.
func (st *cycle) whatIfWith(victims []*domain.Job, u *usage) *whatIf {
	c := st.fv.c.shallow(st.fv.scratch)
	st.fv.scratch = c.servers
	clear(st.fv.cloned)
	c.cloned = st.fv.cloned
	for _, v := range victims {
		c.release(v)
	}
	return &whatIf{c: c, u: u}
}

// drop removes a job from the view.
func (w *whatIf) drop(v *domain.Job) {
	w.c.release(v)
	w.u.addJob(v, v.Placement, -1)
}

// fits returns j's placement in the view if quota and capacity allow one.
func (w *whatIf) fits(st *cycle, j *domain.Job) []domain.Placement {
	ws := st.s.Workspaces[j.Tenant+"/"+j.Workspace]
	models, _, ok := admit(j, ws, st.s, w.u, w.c)
	if !ok {
		return nil
	}
	pl, _, _ := w.c.placeIn(j, st.s.Tenants[j.Tenant], models)
	return pl
}

// fitsWithout returns j's placement in the future view once the victims
// have stopped too, if quota and capacity allow one (nil otherwise).
func (st *cycle) fitsWithout(j *domain.Job, victims []*domain.Job) []domain.Placement {
	// Quota first: it needs only the usage, not a view of the servers.
	u := st.fv.u.clone()
	for _, v := range victims {
		u.addJob(v, v.Placement, -1)
	}
	w := st.s.Workspaces[j.Tenant+"/"+j.Workspace]
	if _, _, ok := admit(j, w, st.s, u, st.fv.c); !ok {
		return nil
	}
	// The same usage serves the view: it was copied twice.
	return st.whatIfWith(victims, u).fits(st, j)
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

// fewest is another victim set for a job of whole GPUs, one server or a
// gang of whole servers: on the servers where the fewest GPUs stop to make
// its room (a victim's GPUs counted on every server it runs on), the
// smallest victims first, then the cheapest; and j's placement once they
// stop (ok false if there is none). Cost order takes the cheapest jobs
// wherever they run and prune keeps those on the placement's servers:
// often a server of many new 1-GPU borrowers, where a server with GPUs free
// and one small borrower needed one preemption (issue 14: at dev 48x8,
// reclaims for gangs of 4-64 GPUs were 59 % of the preemptions, 2.7
// victims per 8-GPU job). It returns only a set of fewer jobs than the
// caller's (than), and gives up early when no set can be.
// Reclaim takes from each workspace at most what it borrowed, over all
// the chosen servers.
func (st *cycle) fewest(j *domain.Job, kind preemptKind, cands []victim, than, shortfall int) ([]*domain.Job, []domain.Placement, bool) {
	if j.GPUs <= 0 || j.MIGProfile != "" || j.Share != 0 || len(cands) == 0 {
		return nil, nil, false
	}
	// Fewer victims must still free the shortfall: with the largest
	// candidate, at least shortfall/largest of them.
	most := 0
	for _, v := range cands {
		most = max(most, v.held)
	}
	if most == 0 || (shortfall+most-1)/most >= than {
		return nil, nil, false
	}
	type entry struct{ i, here int } // a candidate, and its GPUs on the server
	type srv struct {
		sv   *server
		on   []entry // candidates with whole GPUs here
		took []int   // the candidates stopped to make room here
		// stopped is the GPUs the victims hold (on every server), cost
		// the work they lose.
		stopped int
		cost    float64
	}
	pos := make([]int32, len(st.fv.c.servers)) // server index -> 1 + its place in servers
	var servers []srv
	largest := 0
	for i, v := range cands {
		for _, p := range v.Placement {
			if p.Share != 0 || len(p.MIG) != 0 {
				continue
			}
			k, ok := st.fv.c.byName[p.Server]
			if !ok {
				continue
			}
			if pos[k] == 0 {
				sv := st.fv.c.servers[k]
				servers = append(servers, srv{sv: sv})
				pos[k] = int32(len(servers))
				largest = max(largest, len(sv.free))
			}
			s := &servers[pos[k]-1]
			s.on = append(s.on, entry{i, len(p.GPUs)})
		}
	}
	// The room it wants: one server of j.GPUs, else n whole servers of per
	// GPUs (gpusPerNode, or the largest server size dividing it: 16 GPUs
	// on 8-GPU servers is 2 x 8).
	per, n := j.GPUs, 1
	if j.GPUsPerNode > 0 && j.GPUsPerNode < j.GPUs {
		per, n = j.GPUsPerNode, j.GPUs/j.GPUsPerNode
	} else if j.GPUsPerNode == 0 && largest > 0 && j.GPUs > largest {
		if j.GPUs%largest != 0 {
			return nil, nil, false
		}
		per, n = largest, j.GPUs/largest
	}
	gpusOf := func(i int) int { return cands[i].held / unit }
	took := map[int]int{}
	var ok []*srv
	for k := range servers {
		s := &servers[k]
		size := len(s.sv.free)
		if size < per || (n > 1 && per != size) {
			continue
		}
		need := per - s.sv.nfree
		if need <= 0 {
			continue
		}
		slices.SortStableFunc(s.on, func(a, b entry) int {
			if c := cmp.Compare(gpusOf(a.i), gpusOf(b.i)); c != 0 {
				return c
			}
			if c := cmp.Compare(b.here, a.here); c != 0 {
				return c
			}
			return cmp.Compare(cands[a.i].cost, cands[b.i].cost)
		})
		clear(took)
		for _, e := range s.on {
			if need <= 0 {
				break
			}
			v := cands[e.i]
			if kind.reclaims() && took[v.wi]+v.held > st.above(kind, v.wi) {
				continue
			}
			took[v.wi] += v.held
			s.took = append(s.took, e.i)
			s.stopped += gpusOf(e.i)
			s.cost += v.cost
			need -= e.here
		}
		if need <= 0 {
			ok = append(ok, s)
		}
	}
	if len(ok) < n {
		return nil, nil, false
	}
	slices.SortStableFunc(ok, func(a, b *srv) int {
		if c := cmp.Compare(a.stopped, b.stopped); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.took), len(b.took)); c != 0 {
			return c
		}
		return cmp.Compare(a.cost, b.cost)
	})
	// n servers, greedily, each workspace within what it borrowed over all
	// of them; a victim on several counts once.
	clear(took)
	picked := map[int]bool{}
	var chosen []*domain.Job
	got := 0
	add := map[int]int{}
	for _, s := range ok {
		if got == n {
			break
		}
		clear(add)
		for _, i := range s.took {
			if !picked[i] {
				add[cands[i].wi] += cands[i].held
			}
		}
		fits := true
		for wi, a := range add {
			if kind.reclaims() && took[wi]+a > st.above(kind, wi) {
				fits = false
			}
		}
		if !fits {
			continue
		}
		for wi, a := range add {
			took[wi] += a
		}
		for _, i := range s.took {
			if !picked[i] {
				picked[i] = true
				chosen = append(chosen, cands[i].Job)
			}
		}
		got++
	}
	if got < n || len(chosen) >= than {
		return nil, nil, false
	}
	pl := st.fitsWithout(j, chosen)
	return chosen, pl, pl != nil
}
