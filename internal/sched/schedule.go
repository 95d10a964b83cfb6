package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// cycle is the working state of one Schedule call.
type cycle struct {
	s      *Snapshot
	cr     *Carry // the caller's (nil: Schedule), for buffers it keeps
	now    time.Time
	policy Policy
	// c and u are the cluster and usage now, as this cycle's releases and
	// placements leave them.
	c    *cluster
	u    *usage
	plan *Plan
	// victim are the jobs this cycle tells to stop (reclaim, priority or
	// drain); released the allocations it ends (due releases), out of c and
	// u already.
	victim   map[uint64]bool
	released map[uint64]bool
	// queued is what order found for each pending job, by place in the
	// queue: its workspace, and whether it fits in the workspace's
	// guarantee (counted over its queue).
	queued []queued
	// waiting is the pending jobs some job was preempted for (only those
	// are asked about: targets is every job's PreemptedFor); heldFor the
	// released victims whose GPUs are kept for the pending job they were
	// preempted for (release), until its turn (givenBack, kept for
	// targets only).
	targets   map[uint64]bool
	waiting   map[uint64]bool
	heldFor   map[uint64][]*domain.Job
	givenBack map[uint64]bool
	// freedNow is the pending jobs some of whose victims this cycle
	// released.
	freedNow map[uint64]bool
	// fair is each workspace's fair share (fairShares), nil until needed;
	// churn the GPUs reclaimed within the backoff window, -1 until counted.
	fair  []int
	churn int
	// fv is what the cycle assumes will be once the plan's preemptions
	// have taken effect, and the caches that planning them reuses.
	fv futureView
	// tbl is the snapshot's jobs as rows (jobtable.go); pairWS maps its
	// tenant/workspace pairs to the usage index's workspaces.
	tbl    *jobTable
	pairWS []int32
	// bf is the cycle's reservations for blocked jobs (backfill.go);
	// queue is the pending jobs in order, pos the one being decided.
	bf    backfill
	queue []*domain.Job
	pos   int
	// shaped is the job shape is shapeKey of (shapeOf): the step, reclaim
	// and backfill each key a refused job by it.
	shaped *domain.Job
	shape  string
	// keyBuf is the step's noFit key, made in place: the map is read
	// with it without a string, one made only for a shape that failed
	// (three strings a job were 0.4 MB a cycle at 100,000 GPUs).
	keyBuf []byte
	// poolFill is poolNote's counts by pool; freeVer counts the
	// changes of free GPUs in c that last (placements, bookings,
	// releases), not the GPUs placeAround hides for one placement.
	poolFill map[string]poolFill
	freeVer  uint64
}

// shapeOf is shapeKey(j), made once for the job being decided.
func (st *cycle) shapeOf(j *domain.Job) string {
	if st.shaped != j {
		st.shaped, st.shape = j, shapeKey(j)
	}
	return st.shape
}

// futureView is the cycle's view of the cluster once every job told to
// stop (before or in this cycle) has stopped and the jobs waiting for
// their GPUs hold them: reclaims are planned against it, so a job served
// by GPUs already being freed takes no new victims, and two reclaiming
// jobs never count on the same freed GPUs. It is built on the first
// reclaim (buildFuture); a cycle without one never pays for it.
type futureView struct {
	// c and u are the cluster and usage in the future, nil until built;
	// by is when that is at the latest (the last stop deadline), freed
	// whether anything was released into it (else it differs from now
	// only by reservations, which take GPUs).
	c     *cluster
	u     *usage
	by    time.Time
	freed bool
	// freeing is the GPUs being freed by earlier cycles' preemptions, by
	// the job they are freed for; heldFor the victims whose GPUs the future
	// view keeps for that job until its turn (giveBack), so jobs before it
	// in the queue book other GPUs.
	freeing map[uint64]freeing
	heldFor map[uint64][]*domain.Job
	// scratch and cloned back the what-if views of the future (one at a
	// time).
	scratch []*server
	cloned  map[int]bool
	// byCost is the running jobs cheapest to preempt first (victimOrder),
	// byWorkspace the same per workspace (victimsIn): built once a cycle.
	byCost      []victim
	byWorkspace map[int][]victim
	sortedIn    map[int]bool
	// byPool is victimOrder per server pool (victimsOn).
	byPool map[string][]victim
	// setGen counts the releases into the future view on the servers of
	// each static set (gainIn); noRoom is the shapes freeingFits found no
	// room for.
	setGen map[*staticSet]int
	noRoom map[string]noRoom
	// lowPrio is the lowest priority of a job that may be told to stop
	// (lowestStoppable), once lowKnown.
	lowPrio  int
	lowKnown bool
	// searches counts this cycle's victim searches (at most
	// maxReclaimSearches); failed remembers the workspace|shape keys a
	// search found no victims for, with the rule that stopped it (victims
	// only get fewer in a cycle).
	searches int
	failed   map[string]string
	// nextRelease is when running jobs are expected to start freeing GPUs
	// (expectedRelease), computed once.
	nextRelease *time.Time
	// releaseNote is releaseNote's wording of nextRelease.
	releaseNote string
}

type freeing struct {
	units    int
	deadline time.Time
}

// Schedule runs one cycle over the snapshot at time now (passed in, never
// read, so replays and simulations are deterministic).
func Schedule(s *Snapshot, now time.Time) *Plan {
	return schedule(s, now, nil)
}

// schedule is Schedule, with the sums over the jobs taken from cr when it
// is not nil (Carry.Schedule).
func schedule(s *Snapshot, now time.Time, cr *Carry) *Plan {
	var tbl *jobTable
	if cr != nil {
		cr.sync(s)
		tbl = &cr.tbl
	} else {
		tbl = newJobTable(s.Jobs)
	}
	st := &cycle{s: s, now: now, policy: s.Policy, plan: &Plan{Pending: Reasons{list: []reasonAt{}}},
		victim: map[uint64]bool{}, released: map[uint64]bool{}, waiting: map[uint64]bool{}, heldFor: map[uint64][]*domain.Job{}, givenBack: map[uint64]bool{}, freedNow: map[uint64]bool{}, churn: -1,
		fv: futureView{cloned: map[int]bool{}, freeing: map[uint64]freeing{}, failed: map[string]string{}}}
	st.tbl, st.cr = tbl, cr
	if st.policy.Grace <= 0 {
		st.policy.Grace = DefaultPolicy.Grace
	}
	if st.policy.ReclaimBackoff <= 0 {
		st.policy.ReclaimBackoff = DefaultPolicy.ReclaimBackoff
	}
	if st.policy.HalfLife <= 0 {
		st.policy.HalfLife = DefaultPolicy.HalfLife
	}
	// Phase 1 and 2: who holds what.
	st.c = buildClusterWith(s, cr)
	var ix *usageIndex
	if cr != nil {
		ix = cr.usageIndex(s)
	} else {
		ix = newUsageIndex(s)
	}
	st.u = usageWith(ix, s, st.c, cr)
	st.pairWS = tbl.pairIndex(st.u.ix)
	st.u.addDecayRows(s, tbl, st.pairWS, now, st.policy.HalfLife)
	// A map of every pending job was a tenth of a later cycle at
	// 100,000 GPUs; the jobs others were preempted for are a handful.
	// The passes over every job read the table's rows, not the jobs.
	rows := tbl.rows
	st.targets = map[uint64]bool{}
	npend := 0
	var preempting []int32 // rows of jobs told to stop (a handful)
	for k := range rows {
		r := &rows[k]
		if f := r.preemptedFor; f != 0 {
			st.targets[f] = true
		}
		switch r.state {
		case rowPending:
			npend++
		case rowPreempting:
			preempting = append(preempting, int32(k))
		}
	}
	// Sized once: grown job by job they were 90 MB of allocation over 40
	// cycles at 100,000 GPUs.
	var pending []*domain.Job // the queue, ordered below (phase 3)
	var pendIdx []int32       // their rows
	if cr != nil {
		// A Carry's, reused: the cycle before's are dead once its plan
		// is made.
		pending, pendIdx = reuse(cr.pendBuf, npend), reuse(cr.pendIdxBuf, npend)
		defer func() { cr.pendBuf, cr.pendIdxBuf = pending, pendIdx }()
	} else {
		pending, pendIdx = make([]*domain.Job, 0, npend), make([]int32, 0, npend)
	}
	for k := range rows {
		if r := &rows[k]; r.state == rowPending {
			pending = append(pending, tbl.jobs[k])
			pendIdx = append(pendIdx, int32(k))
			if st.targets[r.id] {
				st.waiting[r.id] = true
			}
		}
	}
	for _, k := range preempting {
		if r := &rows[k]; r.preemptedFor != 0 {
			j := tbl.jobs[k]
			f := st.fv.freeing[j.PreemptedFor]
			f.units += r.held
			if j.StopDeadline != nil && j.StopDeadline.After(f.deadline) {
				f.deadline = *j.StopDeadline
			}
			st.fv.freeing[j.PreemptedFor] = f
		}
	}
	// Allocations that are due end first: the releases commit before the
	// placements, so their GPUs serve this cycle's placements, first the
	// jobs they were freed for (a reclaim is served at its deadline).
	st.releases()
	st.drain()

	// Phase 3: order the queue.
	stopping := map[string]int{} // held by jobs told to stop, by workspace
	for _, k := range preempting {
		if r := &rows[k]; !st.released[r.id] {
			j := tbl.jobs[k]
			stopping[j.Tenant+"/"+j.Workspace] += r.held
		}
	}
	ordered := false
	if cr != nil && cr.pendOK {
		// From the Carry's lists of each workspace's pending jobs.
		if st.queued, ordered = cr.order(pending, s, st.u, st.pairWS, stopping, st.fv.freeing); !ordered {
			cr.pendMiss++
		}
	}
	if !ordered {
		st.queued = order(pending, pendIdx, tbl, s, st.u, st.pairWS, stopping, st.fv.freeing)
	}
	// In the queue's order; the jobs behind a blocked one share its
	// block's reason.
	var unplaced reasonList
	if cr != nil {
		// The Carry's list, byID's scratch: the plan gets its own.
		if cap(cr.reasonList) < len(pending) {
			cr.reasonList = make([]reasonAt, 0, grown(len(pending)))
		}
		unplaced.list, unplaced.scratch = cr.reasonList[:0], true
	} else {
		unplaced.list = make([]reasonAt, 0, len(pending))
	}
	if cr != nil && cr.reasonSet > 0 {
		// About the cycle before's, not doubled from nothing (10,000
		// reasons at 100,000 GPUs).
		unplaced.set = make([]domain.Reason, 0, min(len(pending), cr.reasonSet+cr.reasonSet/8))
	}
	st.plan.Order = make([]uint64, len(pending))
	for i, q := range st.queued {
		st.plan.Order[i] = q.id
	}

	// Phase 4 and 5: admit and place in order, preempting where the rules
	// allow. A job that cannot be placed does not block jobs behind it (no
	// head-of-line blocking) except within its own workspace, where the next
	// jobs wait for it so a big job is not starved by a stream of small ones.
	// By the workspace's slot (order): at most one per ref of the table.
	var blocked []block
	var rank *[]int32
	if cr != nil {
		blocked = zeroed(cr.blocked, min(len(pending), len(tbl.refID)))
		cr.blocked, rank = blocked, &cr.reasonRank
	} else {
		blocked = make([]block, min(len(pending), len(tbl.refID)))
	}
	// noFit remembers shapes that found no placement this cycle: capacity
	// only shrinks within a cycle, so the same shape of the same tenant
	// cannot fit later in it either.
	var noFit map[string]domain.Reason
	if cr != nil {
		// The Carry's, emptied: a map grown anew each cycle was 1 MB a
		// cycle at 100,000 GPUs; the reasons are values, copied out.
		if cr.noFit == nil {
			cr.noFit = map[string]domain.Reason{}
		}
		noFit = cr.noFit
		clear(noFit)
	} else {
		noFit = map[string]domain.Reason{}
	}
	if cr != nil {
		st.bf.placed = cr.placed
	}
	st.queue = pending
	for i, j := range pending {
		st.pos = i
		yieldAt(i)
		// The job's ID and priority come with its place in the queue:
		// the tens of thousands queued behind their workspace's first
		// blocked job are decided without loading them.
		q := st.queued[i]
		st.giveBack(q.id)
		o := st.step(j, q, blocked, noFit)
		if o.pl == nil {
			switch b := o.behind; {
			case b == nil:
				unplaced.add(q.id, o.reason)
			case b.listed:
				unplaced.share(q.id, b.at)
			default:
				b.at, b.listed = unplaced.add(q.id, o.reason), true
			}
			if o.blocks {
				blocked[q.ws.slot] = block{id: q.id, prio: q.prio, set: true}
			}
			continue
		}
		t := q.ws.t
		if st.fv.c != nil {
			// First: the future view copies a server before the base
			// changes it (copy on write).
			st.reserve(j, t, o.pl)
		}
		st.c.commit(j, t, o.pl)
		st.freeVer++
		at := q.usageAt(st.u, j)
		st.u.addJobAt(j, o.pl, 1, at.ref, at.jt)
		st.bf.placed = append(st.bf.placed, ending{j: j, pl: o.pl})
		st.plan.Placements = append(st.plan.Placements, Placement{JobID: j.ID, Placement: o.pl, Level: o.level})
	}
	st.plan.Pending = unplaced.byID(rank)
	if cr != nil {
		cr.reasonSet = len(unplaced.set)
		cr.reasonList = unplaced.list[:0]
	}
	// The deadlines of this plan's own preemptions fall due too: the cycle
	// then releases the victims' GPUs to the jobs waiting for them.
	for _, p := range st.plan.Preemptions {
		if st.plan.Next.IsZero() || p.Deadline.Before(st.plan.Next) {
			st.plan.Next = p.Deadline
		}
	}
	if c := st.c; c.spare != nil && c.rank != nil {
		for _, tr := range c.rank.trees {
			*c.spare = append(*c.spare, tr)
		}
	}
	if st.c.sc != nil {
		st.c.sc.giveRows()
	}
	st.c.giveSums()
	if cr != nil {
		// Emptied whole: what they point to is this cycle's.
		cr.cands, cr.fit, cr.placed = emptied(st.c.cands), emptied(st.c.fit), emptied(st.bf.placed)
	}
	return st.plan
}

// block is the first job of a workspace that could not be placed (set):
// the workspace's jobs of no higher priority wait behind it, all for the
// same reason (made once: a full cluster's queue has tens of thousands),
// listed once in the plan's reasons, at at once listed.
type block struct {
	id     uint64
	prio   int
	reason domain.Reason
	at     int32
	listed bool
	set    bool
}

// outcome is what the cycle decided for one pending job: placed now (pl, at
// level), or pending for reason, holding back its workspace if blocks;
// behind is the block it waits behind (reason is the block's).
type outcome struct {
	pl     []domain.Placement
	level  string
	reason domain.Reason
	blocks bool
	behind *block
}

// step decides one pending job, in queue order: admit and place it, or
// preempt for it where the rules allow. Reclaim books what it plans in the
// future view; the caller applies the outcome to the cycle's view and plan.
func (st *cycle) step(j *domain.Job, q queued, blocked []block, noFit map[string]domain.Reason) outcome {
	ref, w, t := q.ws.ref, q.ws.w, q.ws.t
	if w == nil || t == nil {
		return outcome{reason: domain.Reason{Code: ReasonUnknown, Message: fmt.Sprintf("workspace %s no longer exists", ref)}}
	}
	// A job within its workspace's guarantee is not held back: the
	// guarantee left for the jobs before it is counted already, so it
	// takes nothing they are owed, and it must be served within the bound.
	if first := &blocked[q.ws.slot]; first.set && q.prio <= first.prio && !q.within {
		if first.reason.Code == "" {
			// fmt's "waiting behind job %d of workspace %s, which is
			// first in line", built without fmt: once per blocked
			// workspace, thousands a cycle.
			first.reason = domain.Reason{Code: ReasonGangOrder, Message: "waiting behind job " + strconv.FormatUint(first.id, 10) + " of workspace " + ref + ", which is first in line"}
		}
		return outcome{reason: first.reason, behind: first}
	}
	at := q.usageAt(st.u, j)
	if j.BorrowNotBefore != nil && st.now.Before(*j.BorrowNotBefore) && st.u.usedAt(at.ref)+demand(j) > w.Guaranteed*unit {
		return outcome{reason: domain.Reason{Code: ReasonBackoff, Message: fmt.Sprintf(
			"reclaimed recently: it may run within the workspace's guarantee, but may not borrow again before %s", j.BorrowNotBefore.UTC().Format(time.RFC3339))}}
	}
	// A job whose own GPUs are still being freed (none released yet) and
	// that will fit once they are, on GPUs not free now, waits: placed now
	// on free GPUs it would take those left over from other reclaims that
	// a job without victims of its own waits for, which would then wait
	// for this job's victims, past its grace period.
	if f := st.fv.freeing[j.ID]; f.units > 0 && !st.freedNow[j.ID] && j.MIGProfile == "" && j.Share == 0 {
		st.buildFuture()
		if pl := st.futureOnly(j); pl != nil {
			st.reserve(j, t, pl)
			return outcome{reason: domain.Reason{Code: ReasonReclaim, Message: fmt.Sprintf(
				"waiting for %s GPUs being freed for it (released by %s at the latest)", gpus(f.units), f.deadline.UTC().Format(time.RFC3339))}}
		}
	}
	models, r, ok := admitAt(j, w, t, st.u, st.c, at)
	var pl []domain.Placement
	var level string
	if ok {
		// shapeOf(j) + "|" + models joined by "," + maskKey(rs).
		key := st.keyBuf[:0]
		if st.shaped == j {
			key = append(key, st.shape...)
		} else {
			key = appendShapeKey(key, j)
		}
		key = append(key, '|')
		for i, m := range models {
			if i > 0 {
				key = append(key, ',')
			}
			key = append(key, m...)
		}
		// Reservations this job would delay keep their free GPUs from it,
		// unless its workspace is below its guarantee: guaranteed work is
		// never held back for a waiting job (reclaim serves both), nor is a
		// job that takes its workspace from below its guarantee to above.
		var rs []*reservation
		if st.u.usedAt(at.ref) >= w.Guaranteed*unit {
			rs = st.delayed(j)
		}
		key = appendMaskKey(key, rs)
		st.keyBuf = key
		if why, failed := noFit[string(key)]; failed {
			r = why
		} else if pl, level, r = st.placeAround(j, t, models, rs); pl == nil {
			noFit[string(key)] = r
		}
		if pl != nil && len(rs) > 0 {
			if why, ok := st.quotaAround(j, pl, rs); !ok {
				pl, r = nil, why
			}
		}
	}
	if pl != nil {
		return outcome{pl: pl, level: level}
	}
	if j.Pool != "" && (r.Code == ReasonCapacity || r.Code == ReasonTopology) {
		// The cluster's free GPUs may be elsewhere: say how full the
		// job's pool is.
		r.Message = st.poolNote(j) + r.Message
	}
	plain := r // a reservation says more than when GPUs start to free up
	if r.Code == ReasonCapacity || r.Code == ReasonTopology {
		if note, ok := st.releaseNote(); ok {
			r.Message += note
		}
	}
	// A job whose GPUs are being freed holds nothing back: the freed GPUs
	// stay busy until released, and it is ahead of the jobs behind it when
	// they are. A job that simply does not fit holds back its workspace.
	if why, waiting := st.reclaim(j, ref, at, w, t); waiting {
		return outcome{reason: why}
	} else if why.Message != "" && r.Code != ReasonNoInventory {
		// The rule that stops reclaim is part of the reason, with or
		// without a reservation.
		r.Message += "; " + why.Message
		plain.Message += "; " + why.Message
	}
	// A job that could not fit even an empty cluster (servers cordoned or
	// gone since it was submitted) holds nothing back. The first job of a
	// workspace that waits for GPUs gets a reservation instead of holding
	// back its workspace: the jobs after it run where they do not delay it
	// (backfill); later blocked jobs of that workspace wait without one.
	blocks := r.Code != ReasonNoInventory && demand(j) <= st.c.total
	if blocks && st.reservable(j, r.Code) {
		if slices.ContainsFunc(st.bf.res, func(x *reservation) bool { return x.w == w }) {
			return outcome{reason: r}
		}
		if res := st.reservationFor(j, t, w); res != nil {
			// A job within its guarantee still holds back its own
			// workspace's borrowers: placed ahead of it they would take
			// the guarantee it is owed, and reclaim (which takes only
			// other workspaces' borrowed GPUs) could no longer serve it.
			return outcome{reason: res.reason(plain), blocks: q.within}
		}
	}
	return outcome{reason: r, blocks: blocks}
}

// poolFill is the GPUs of a pool's servers and how many of them are
// free, at a version of the cycle's free GPUs (freeVer), and poolNote's
// wording of them.
type poolFill struct {
	ver         uint64
	free, total int
	note        string
}

// poolNote is what a pool job's capacity reason starts with: "pool X: F
// of its N GPUs free; ", counted over the pool's servers in the
// inventory, kept per pool while the free GPUs are unchanged: the blocked
// jobs of a full pool come one after another.
func (st *cycle) poolNote(j *domain.Job) string {
	f, ok := st.poolFill[j.Pool]
	if !ok || f.ver != st.freeVer || st.s.exhaustive {
		f = poolFill{ver: st.freeVer}
		for i, in := range st.c.statics.pool(st.c, j.Pool) {
			if in {
				v := st.c.servers[i]
				f.free += v.nfree
				f.total += len(v.free)
			}
		}
		f.note = "pool " + j.Pool + ": " + strconv.Itoa(f.free) + " of its " + strconv.Itoa(f.total) + " GPUs free; "
		if st.poolFill == nil {
			st.poolFill = map[string]poolFill{}
		}
		st.poolFill[j.Pool] = f
	}
	return f.note
}

// reservable: a job pending for want of GPUs may get a reservation; one
// pending for quota too when the cluster lacks the GPUs as well (its quota
// and the pool are both full: the search admits it against the usage left
// then). A quota alone, with GPUs free, is left to hold back its workspace:
// searching for each such job cost bench sched a tenth more CPU, for no
// change in the ITP replay.
func (st *cycle) reservable(j *domain.Job, code string) bool {
	switch code {
	case ReasonCapacity, ReasonTopology:
		return true
	case ReasonWorkspaceQuota, ReasonTenantQuota, ReasonClusterQuota:
		return demand(j) > st.c.total-st.u.usedTotal
	}
	return false
}

// behind reports whether a job of workspace w comes after the one being
// decided that asks no more than the GPUs free now (one that could run
// now if nothing held it back).
func (st *cycle) behind(w *domain.Workspace) bool {
	free := st.c.total - st.u.usedTotal
	for _, j := range st.queue[st.pos+1:] {
		if j.Workspace == w.Name && j.Tenant == w.Tenant && demand(j) <= free {
			return true
		}
	}
	return false
}

// expectedRelease is the earliest time a running job is expected to end
// (its expected duration or time limit from placement), computed once per
// cycle; it names no job, as reasons never show other tenants' work.
func (st *cycle) expectedRelease() (time.Time, bool) {
	if st.fv.nextRelease == nil {
		var best time.Time
		rows := st.tbl.rows
		for k := range rows {
			r := &rows[k]
			if (r.state != rowRunning && r.state != rowReady) || !r.hasPlacedAt {
				continue
			}
			for _, secs := range [2]int64{r.expected, r.timeLimit} {
				if secs <= 0 {
					continue
				}
				if end := st.tbl.placedAt(k).Add(time.Duration(secs) * time.Second); end.After(st.now) && (best.IsZero() || end.Before(best)) {
					best = end
				}
			}
		}
		st.fv.nextRelease = &best
	}
	return *st.fv.nextRelease, !st.fv.nextRelease.IsZero()
}

// releaseNote is what a capacity reason adds about expectedRelease,
// worded once per cycle (thousands of blocked jobs add it).
func (st *cycle) releaseNote() (string, bool) {
	at, ok := st.expectedRelease()
	if !ok {
		return "", false
	}
	if st.fv.releaseNote == "" {
		st.fv.releaseNote = fmt.Sprintf("; by the running jobs' expected durations and time limits, GPUs start to free up at %s", at.UTC().Format(time.RFC3339))
	}
	return st.fv.releaseNote, true
}

// shapeKey identifies what decides whether a job can be placed: its tenant
// (isolation, sites), its request, and its pool.
// It is what fmt's "%s|%d|%d|%s|%d|%g|%s|%v|%s" made of those fields,
// built without fmt: it is asked for thousands of jobs a cycle.
func shapeKey(j *domain.Job) string {
	return string(appendShapeKey(make([]byte, 0, 64), j))
}

// appendShapeKey appends shapeKey(j) to b.
func appendShapeKey(b []byte, j *domain.Job) []byte {
	b = append(b, j.Tenant...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.GPUs), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.GPUsPerNode), 10)
	b = append(b, '|')
	b = append(b, j.MIGProfile...)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.MIGCount), 10)
	b = append(b, '|')
	b = strconv.AppendFloat(b, j.Share, 'g', -1, 64)
	b = append(b, '|')
	b = append(b, j.GPUModel...)
	b = append(b, "|["...)
	for i, m := range j.GPUModels {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, m...)
	}
	b = append(b, "]|"...)
	b = append(b, j.MinDriver...)
	b = append(b, '=')
	b = append(b, j.Driver...)
	if t := j.Topology; t != nil {
		b = append(b, '|')
		b = append(b, t.Level...)
		b = append(b, '|')
		b = strconv.AppendBool(b, t.Required)
	}
	if j.Pool != "" {
		// After every other part, only when set: the keys of jobs
		// without a pool are as they were.
		b = append(b, "|pool="...)
		b = append(b, j.Pool...)
	}
	return b
}

// order sorts the queue: jobs that fit in their workspace's guarantee
// before borrowing ones (a workspace's pending jobs, in its own order of
// priority then age, each taking what is left of its guarantee above what
// it holds once its jobs told to stop have stopped; one that does not fit
// borrows, and a later, smaller one may still fit), then workspace
// priority, job priority, jobs GPUs are being freed for (a reclaim or
// preemption issued for them) before the others of their rank, so the
// freed GPUs serve the job they were freed for; then the workspace with the
// least time-decayed usage per weight (fair share among borrowers), then
// age (ID), then the job's place in the queue as given (the order is
// total).
//
// It returns, by place in the sorted queue, what it looked up for each
// job (its workspace, tenant, ref) and whether the job fits in its
// workspace's guarantee.
//
// The order is not sorted whole: of the key, only the workspace's share
// and priority differ between workspaces, and within a workspace the jobs
// keep their own order of priority and ID. So each workspace's jobs are
// sorted apart (a dozen on average), cut into runs of one (within,
// priority, freeing) class, and the runs sorted by class and share; runs
// of one class and share from several workspaces are merged by ID. At
// 100,000 GPUs two sorts of 60,000 jobs were a sixth of a later cycle.
func order(jobs []*domain.Job, rows []int32, tbl *jobTable, s *Snapshot, u *usage, pairWS []int32, stopping map[string]int, freeingFor map[uint64]freeing) []queued {
	qw := newQueueWSs(tbl, s, u, pairWS, stopping)
	ks := make([]orderKey, len(jobs))
	for i, j := range jobs {
		r := &tbl.rows[rows[i]]
		wk := qw.of(r.pair)
		wk.n++
		// A job already waiting for GPUs being freed (its own victims, or
		// those left over from other reclaims, reason reclaim_pending)
		// ranks with the jobs GPUs are being freed for: a job that
		// reclaims after it must not book the leftovers it counts on
		// (issue 14: at dev 48x8 a guaranteed job was pushed to later
		// victims' deadlines cycle after cycle, 34 s).
		ks[i] = orderKey{j: j, ws: wk, id: r.id, idx: i, prio: r.prio, demand: r.demand,
			freeing: r.reclaimWait || (len(freeingFor) > 0 && freeingFor[r.id].units > 0)}
	}
	// Each workspace's jobs together (a counting sort by workspace), then
	// in the workspace's own order.
	off := 0
	for _, wk := range qw.list {
		wk.off, off = off, off+wk.n
		wk.n = 0
	}
	byWS := make([]int32, len(ks))
	for i := range ks {
		wk := ks[i].ws
		byWS[wk.off+wk.n] = int32(i)
		wk.n++
	}
	for _, wk := range qw.list {
		sub := byWS[wk.off : wk.off+wk.n]
		slices.SortFunc(sub, func(a, b int32) int {
			ka, kb := &ks[a], &ks[b]
			if c := cmp.Compare(kb.prio, ka.prio); c != 0 {
				return c
			}
			if c := cmp.Compare(ka.id, kb.id); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		within(ks, sub)
	}
	return orderRuns(jobs, ks, byWS, qw.list, &orderBufs{})
}

// orderKey is what order reads of one pending job.
type orderKey struct {
	j       *domain.Job
	ws      *queueWS
	id      uint64
	idx     int
	prio    int
	demand  int
	within  bool
	freeing bool
}

// within marks the jobs of one workspace, in its own order (priority,
// then ID), that fit in what is left of its guarantee, each taking its
// part.
func within(ks []orderKey, sub []int32) {
	if len(sub) == 0 {
		return
	}
	wk := ks[sub[0]].ws
	if wk.w == nil {
		return
	}
	for _, i := range sub {
		k := &ks[i]
		if d := k.demand; d <= wk.left {
			k.within = true
			wk.left -= d
		}
	}
}

// queueWSs makes order's workspaces, one per tenant/workspace pair of
// the table, looked up once a cycle.
type queueWSs struct {
	tbl      *jobTable
	s        *Snapshot
	u        *usage
	stopping map[string]int
	// pairWS is each pair's workspace in u's index (tbl.pairIndex):
	// its usage read by number, not looked up by ref.
	pairWS []int32
	byPair []*queueWS // by the table's pair number
	buf    []queueWS
	slotOf []int32 // a ref number's slot + 1 (0: none yet)
	nslots int32
	list   []*queueWS // in the order made
}

func newQueueWSs(tbl *jobTable, s *Snapshot, u *usage, pairWS []int32, stopping map[string]int) *queueWSs {
	return newQueueWSsIn(&queueWSs{}, tbl, s, u, pairWS, stopping)
}

// newQueueWSsIn is newQueueWSs in qw's arrays (a Carry's, reused: the
// workspaces of the cycle before are dead once its plan is made).
func newQueueWSsIn(qw *queueWSs, tbl *jobTable, s *Snapshot, u *usage, pairWS []int32, stopping map[string]int) *queueWSs {
	// The workspaces from one array (at most one per pair: the pointers
	// stay), their refs the table's, and slots numbered by the table's
	// ref numbers (pairs naming one ref share a slot): 5,000 workspaces'
	// refs, objects and map entries made every cycle were a sixth of
	// ordering.
	*qw = queueWSs{tbl: tbl, s: s, u: u, pairWS: pairWS, stopping: stopping, byPair: zeroed(qw.byPair, len(tbl.pairs)),
		buf: reuse(qw.buf, len(tbl.pairs)), slotOf: zeroed(qw.slotOf, len(tbl.refID)+1), list: reuse(qw.list, 0)}
	return qw
}

// of is the workspace of the table's pair, made on first use.
func (qw *queueWSs) of(pair int32) *queueWS {
	if wk := qw.byPair[pair]; wk != nil {
		return wk
	}
	s, u, tbl := qw.s, qw.u, qw.tbl
	p := tbl.pairs[pair]
	qw.buf = append(qw.buf, queueWS{ref: tbl.refs[pair]})
	wk := &qw.buf[len(qw.buf)-1]
	// The pair's workspace and tenant from u's index by the pair's
	// numbers where the index holds the snapshot's (asSnap): two
	// look-ups by name per workspace a cycle fewer (5,000 at 100,000
	// GPUs).
	ts := qw.tbl.pairTenants()
	byNum := u.ix.asSnap && qw.tbl.ixFor == u.ix.numbered && int(pair) < len(ts)
	var w *domain.Workspace
	if i := qw.pairWS[pair]; byNum && i >= 0 {
		w = u.ix.ws[i]
	} else {
		w = s.Workspaces[wk.ref]
	}
	if w != nil {
		wk.w, wk.wprio = w, w.Priority
		// The pair's workspace in the usage index is the one its ref
		// (wk.ref) names: by number, 5,000 workspaces' look-ups by ref
		// a cycle fewer.
		i := qw.pairWS[pair]
		if w.Weight > 0 {
			// By w.Ref(), which is the ref unless the map names w
			// otherwise.
			if w.Tenant != p[0] || w.Name != p[1] {
				wk.share = u.decayedOf(w.Ref()) / float64(w.Weight)
			} else if i >= 0 {
				wk.share = u.decayed[i] / float64(w.Weight)
			}
		}
		used := 0
		if i >= 0 {
			used = u.used[i]
		}
		wk.left = w.Guaranteed*unit - used + qw.stopping[wk.ref]
		// Where step reads its usage, from the pair's numbers (the
		// table's look-ups, of's answers).
		if qw.tbl.ixFor == u.ix.numbered && int(pair) < len(ts) {
			wk.at, wk.atOK = u.ix.atFrom(int(i), int(ts[pair]), p[0], p[1], w), true
		}
	}
	if byNum && ts[pair] >= 0 {
		wk.t = u.ix.tenants[ts[pair]]
	} else {
		wk.t = s.Tenants[p[0]]
	}
	rid := tbl.refOf[pair]
	if qw.slotOf[rid] == 0 {
		qw.nslots++
		qw.slotOf[rid] = qw.nslots
	}
	wk.slot = qw.slotOf[rid] - 1
	qw.byPair[pair] = wk
	qw.list = append(qw.list, wk)
	return wk
}

// orderRun is jobs of one workspace and one class, in ID order; it
// carries its sort keys (the class, the workspace's priority and share,
// its first job's ID and place) so sorting the runs reads nothing else.
type orderRun struct {
	within, freeing bool
	wprio, prio     int
	share           float64
	id              uint64
	idx             int
	start, end      int32 // in byWS
}

// orderBufs are orderRuns' buffers: a Carry's are reused from cycle to
// cycle (the queue alone is 2.7 MB at 67,000 pending jobs), the queue
// of one cycle dead once its plan is made.
type orderBufs struct {
	runs   []orderRun
	tmp    []int32
	out    []queued
	merge  []int32
	packed []uint64
}

// orderRuns finishes order from the pending jobs' keys ks, grouped by
// workspace in byWS (each workspace's ks[wk.off:wk.off+wk.n], in its own
// order, within marked): each workspace's jobs in the queue's order, cut
// into runs, the runs sorted and those of one class and share merged by
// ID. It writes the jobs to jobs in queue order.
func orderRuns(jobs []*domain.Job, ks []orderKey, byWS []int32, wss []*queueWS, bufs *orderBufs) []queued {
	runs := reuse(bufs.runs, len(wss))
	tmp := bufs.tmp[:0]
	defer func() { bufs.runs, bufs.tmp = runs, tmp }()
	for _, wk := range wss {
		sub := byWS[wk.off : wk.off+wk.n]
		// In the queue's order, which within one workspace leaves
		// out its priority and share.
		tmp = classOrder(ks, sub, tmp)
		start := wk.off
		for x := wk.off + 1; x <= wk.off+wk.n; x++ {
			if x < wk.off+wk.n {
				ka, kb := &ks[byWS[x-1]], &ks[byWS[x]]
				if ka.within == kb.within && ka.prio == kb.prio && ka.freeing == kb.freeing {
					continue
				}
			}
			h := &ks[byWS[start]]
			runs = append(runs, orderRun{within: h.within, freeing: h.freeing, wprio: wk.wprio, prio: h.prio, share: wk.share,
				id: h.id, idx: h.idx, start: int32(start), end: int32(x)})
			start = x
		}
	}
	sameClass := func(a, b *orderRun) int {
		if c := cmpClass(a.within, b.within, a.wprio, b.wprio, a.prio, b.prio, a.freeing, b.freeing); c != 0 {
			return c
		}
		return cmp.Compare(a.share, b.share)
	}
	slices.SortFunc(runs, func(a, b orderRun) int {
		if c := sameClass(&a, &b); c != 0 {
			return c
		}
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	out := reuse(bufs.out, len(ks))
	merge, packed := bufs.merge[:0], bufs.packed[:0]
	defer func() { bufs.out, bufs.merge, bufs.packed = out, merge, packed }()
	var wide bool
	for a := 0; a < len(runs); {
		b := a + 1
		for b < len(runs) && sameClass(&runs[a], &runs[b]) == 0 {
			b++
		}
		if b == a+1 {
			for _, i := range byWS[runs[a].start:runs[a].end] {
				out = append(out, queued{ws: ks[i].ws, within: ks[i].within, id: ks[i].id, prio: ks[i].prio})
				jobs[len(out)-1] = ks[i].j
			}
		} else {
			// Workspaces of one share: their runs merged by ID (then
			// place). IDs under 2^32 sort as one integer with the
			// place, without a comparison function reading each key
			// (tens of thousands of borrowing jobs of idle workspaces
			// are one group: its sort was most of ordering).
			merge, wide = merge[:0], false
			packed = packed[:0]
			for _, r := range runs[a:b] {
				for _, i := range byWS[r.start:r.end] {
					id := ks[i].id
					wide = wide || id >= 1<<32
					packed = append(packed, id<<32|uint64(i))
				}
			}
			if !wide {
				slices.Sort(packed)
				for _, p := range packed {
					merge = append(merge, int32(uint32(p)))
				}
			} else {
				for _, r := range runs[a:b] {
					merge = append(merge, byWS[r.start:r.end]...)
				}
				slices.SortFunc(merge, func(x, y int32) int {
					if c := cmp.Compare(ks[x].id, ks[y].id); c != 0 {
						return c
					}
					return cmp.Compare(x, y)
				})
			}
			for _, i := range merge {
				out = append(out, queued{ws: ks[i].ws, within: ks[i].within, id: ks[i].id, prio: ks[i].prio})
				jobs[len(out)-1] = ks[i].j
			}
		}
		a = b
	}
	return out
}

// classOrder puts one workspace's jobs sub, given in its own order
// (priority, then ID, then place in ks), in the queue's order: those
// within its guarantee first, then by priority, the jobs GPUs are being
// freed for first, then ID and place. Each class keeps the given order,
// so picking the classes out in turn sorts them (a sort per workspace was
// three quarters of ordering from the Carry's lists). tmp is a buffer,
// returned for reuse.
func classOrder(ks []orderKey, sub, tmp []int32) []int32 {
	if len(sub) < 2 {
		return tmp
	}
	tmp = tmp[:0]
	for _, within := range [2]bool{true, false} {
		for x := 0; x < len(sub); {
			y, prio := x+1, ks[sub[x]].prio
			for y < len(sub) && ks[sub[y]].prio == prio {
				y++
			}
			for _, freeing := range [2]bool{true, false} {
				for _, i := range sub[x:y] {
					if k := &ks[i]; k.within == within && k.freeing == freeing {
						tmp = append(tmp, i)
					}
				}
			}
			x = y
		}
	}
	copy(sub, tmp)
	return tmp
}

// cmpClass orders the first keys of the queue: jobs within their
// guarantee first, then by workspace priority, job priority, and the jobs
// GPUs are being freed for first.
func cmpClass(wa, wb bool, wpa, wpb, pa, pb int, fa, fb bool) int {
	if wa != wb {
		// Guarantees first, whatever the priorities: a borrowing job of a
		// high-priority workspace must not take GPUs that were freed (or
		// are free) for another workspace's guarantee.
		if wa {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(wpb, wpa); c != 0 {
		return c
	}
	if c := cmp.Compare(pb, pa); c != 0 {
		return c
	}
	if fa != fb {
		if fa {
			return -1
		}
		return 1
	}
	return 0
}

// queueWS is what order looks up once per workspace of the queue.
type queueWS struct {
	w     *domain.Workspace // nil: unknown
	t     *domain.Tenant    // nil: unknown
	ref   string            // tenant/workspace, as the job names it
	slot  int32             // numbers the refs of the queue, from 0
	wprio int
	share float64
	left  int // guarantee left, as order hands it out
	n     int // jobs; off the first in order's buffer
	off   int
	// at is where the workspace sits in the usage index, once step
	// has looked it up (atOK).
	at   wsAt
	atOK bool
}

// wsAt is where a queued workspace sits in the usage index: ref its ref as
// the job names it, i the workspace by w.Ref(), wt its tenant, jt the
// job's tenant (-1: unknown). step reads the usage by these, looked up
// once per workspace: by ref for every job (and w.Ref() built for each)
// they were a tenth of refusing a job.
type wsAt struct{ ref, i, wt, jt int }

// at is ix's wsAt of workspace w, named by jobs of tenant as workspace:
// the pair's memoized indices (of), and w's own only where it is not
// the workspace the pair names.
func (ix *usageIndex) at(tenant, workspace string, w *domain.Workspace) wsAt {
	ri, ti := ix.of(tenant, workspace)
	return ix.atFrom(ri, ti, tenant, workspace, w)
}

// atFrom is at, given of's answers for tenant and workspace.
func (ix *usageIndex) atFrom(ri, ti int, tenant, workspace string, w *domain.Workspace) wsAt {
	at := wsAt{ref: ri, i: ri, wt: ti, jt: ti}
	if w.Tenant != tenant {
		at.wt = -1
		if t, ok := ix.byTenant[w.Tenant]; ok {
			at.wt = t
		}
	}
	if w.Tenant != tenant || w.Name != workspace {
		at.i = -1
		if i, ok := ix.byRef[w.Ref()]; ok {
			at.i = i
		}
	}
	return at
}

// usageAt is q's wsAt in u's index (j is one of its jobs).
func (q *queued) usageAt(u *usage, j *domain.Job) wsAt {
	if !q.ws.atOK {
		q.ws.at, q.ws.atOK = u.ix.at(j.Tenant, j.Workspace, q.ws.w), true
	}
	return q.ws.at
}

// usedAt is usedOf by index (-1: unknown, none).
func (u *usage) usedAt(i int) int {
	if i >= 0 {
		return u.used[i]
	}
	return 0
}

// tenantUsedAt is tenantUsedOf by index.
func (u *usage) tenantUsedAt(t int) int {
	if t >= 0 {
		return u.tUsed[t]
	}
	return 0
}

// protectedFromAt is protectedFrom by the workspace's and its tenant's
// indices.
func (u *usage) protectedFromAt(i, t int) int {
	total := u.protTotal
	if t >= 0 {
		total += u.tProtWs[t] - u.tProt[t]
		if i >= 0 {
			total -= u.prot[i]
		}
	}
	return total
}

// queued is what order found for the job at one place of the queue.
type queued struct {
	ws     *queueWS
	within bool // it fits in its workspace's guarantee
	id     uint64
	prio   int // the job's ID and priority, from its row
}

// quotaAt checks that admitting j overcommits nothing: the workspace stays
// within guaranteed + borrowLimit, and the GPUs it takes are not another
// workspace's protected (idle, not lendable) guarantee. j's tenant and the
// workspace's usage indices (at) are looked up by the caller.
func quotaAt(j *domain.Job, w *domain.Workspace, tenant *domain.Tenant, u *usage, c *cluster, at wsAt) (domain.Reason, bool) {
	need := demand(j)
	used := u.usedAt(at.i)
	if limit := (w.Guaranteed + w.BorrowLimit) * unit; used+need > limit {
		return domain.Reason{Code: ReasonWorkspaceQuota, Message: fmt.Sprintf(
			"workspace %s uses %s GPUs; %s more would exceed its limit of %s (guaranteed %d + borrowLimit %d) by %s",
			w.Ref(), gpus(used), gpus(need), gpus(limit), w.Guaranteed, w.BorrowLimit, gpus(used+need-limit))}, false
	}
	if tenant != nil && tenant.Quota != nil {
		tUsed := u.tenantUsedAt(at.jt)
		if limit := (tenant.Quota.Guaranteed + tenant.Quota.BorrowLimit) * unit; tUsed+need > limit {
			return domain.Reason{Code: ReasonTenantQuota, Message: fmt.Sprintf(
				"tenant %s uses %s GPUs; %s more would exceed its limit of %s (guaranteed %d + borrowLimit %d) by %s",
				j.Tenant, gpus(tUsed), gpus(need), gpus(limit), tenant.Quota.Guaranteed, tenant.Quota.BorrowLimit, gpus(tUsed+need-limit))}, false
		}
	}
	protected := u.protectedFromAt(at.i, at.wt)
	free := c.total - u.usedTotal
	if need > free {
		return domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf("needs %s GPUs; %s of the cluster's %s are free", gpus(need), gpus(free), gpus(c.total))}, false
	}
	if avail := free - protected; need > avail {
		// Counts only: other tenants' workspaces are never named.
		return domain.Reason{Code: ReasonClusterQuota, Message: fmt.Sprintf(
			"needs %s GPUs; %s are free but %s of them are other workspaces' guarantees they do not lend, leaving %s",
			gpus(need), gpus(free), gpus(min(protected, free)), gpus(max(0, avail)))}, false
	}
	return domain.Reason{}, true
}

// commit marks a placement's GPUs busy in the view.
func (c *cluster) commit(j *domain.Job, t *domain.Tenant, pl []domain.Placement) {
	for _, p := range pl {
		v := c.mut(p.Server)
		if v == nil {
			continue
		}
		v.take(p, j.Tenant)
		c.hold(v, j.Tenant, t)
		c.account(v, j, 1)
	}
}
