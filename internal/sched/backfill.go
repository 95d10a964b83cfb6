package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Backfill with reservations (EASY backfill, one reservation per
// workspace). The first job of a workspace that cannot be placed for lack of
// free GPUs gets a reservation: the earliest time it fits once running jobs
// end (each at its time limit, expected duration, stop deadline, or a
// history-based estimate), and the GPUs it would take then, preferably GPUs
// busy now. Jobs after it in the queue, of any workspace, may still run now,
// but only where they do not delay a reservation: on GPUs no reservation
// needs, or on reserved GPUs if they end before the reservation starts (by
// their own expected duration or time limit; a job with neither never ends
// before anything). A job that would still run at a reservation's start must
// also leave that job's quota room at that time. A job of a workspace below
// its guarantee is exempt. Each reservation is computed with the earlier ones
// holding their GPUs (conservative among the reserved jobs).
//
// Reservations are advice, computed afresh every cycle from the snapshot: the
// plan carries them in the pending jobs' reasons only, and the state machine
// re-checks placements with Fit as always. A job that gets no reservation
// (fractional requests, quota reasons, GPUs held by jobs with no estimate, or
// more than maxReservations in a cycle) holds back its workspace as before.

// maxReservations bounds the reservations of one cycle, and
// maxReservationSearches the searches for them (a search may find none):
// each costs a few what-if placements; the jobs past them hold back their
// workspaces instead.
const (
	maxReservations        = 16
	maxReservationSearches = 32
	// maxHorizonSearches bounds the searches behind jobs of unknown end:
	// each places on an empty cluster, the costliest placement there is
	// (bench sched spent twice the CPU with 32, a third more with 4).
	maxHorizonSearches = 1
)

// reservation is one blocked job's expected start.
type reservation struct {
	job *domain.Job
	w   *domain.Workspace
	// start is when it fits; overdue when that is now (running jobs past
	// their estimated ends).
	start   time.Time
	overdue bool
	// unknown: it waits for jobs with no known end (start is pretend).
	unknown bool
	pl      []domain.Placement
	basis   []string
	// u is the usage at start with the job booked: jobs still running then
	// are added to it, and must leave the job's quota room.
	u *usage
	// mask is the GPUs of pl free now, which later jobs that would still
	// run at start may not take.
	mask []gpuRef
}

type gpuRef struct {
	server, gpu int
}

// backfill is a cycle's reservations and what computing them reuses.
type backfill struct {
	res []*reservation
	// placed are this cycle's placements: they hold GPUs from now.
	placed []ending
	// running is the jobs holding GPUs before the cycle with a known end,
	// soonest first, built on first use; searches counts the reservation
	// searches, failed the workspace|shape keys that found none (capacity
	// only shrinks within a cycle).
	running []ending
	// runningUnknown: some job holding GPUs before the cycle has no
	// known end (only whether any does is asked).
	runningUnknown bool
	// histPair is historyEstimate by the table's pair number, filled as
	// asked (histAsked).
	histPair  []time.Duration
	histOK    []bool
	histAsked []bool
	built     bool
	// placedEnds is the endings of placed[:folded], soonest first, and
	// placedUnknown whether any has no known end; ends the last endings
	// (nil: none yet), current while no job was placed since.
	placedEnds    []ending
	placedUnknown bool
	folded        int
	ends          *[]ending
	// anyUnknown: some job holding GPUs has no known end (endings); hz
	// is the cluster once every job has ended, and hzU its usage, built
	// on first use.
	anyUnknown bool
	hz         *cluster
	hzU        *usage
	hzSearches int
	searches   int
	failed     map[string]bool
	// hist is the median run time of recently ended jobs, by workspace ("" for
	// all), built on first use.
	hist map[string]time.Duration
	// scratch backs the what-if views (one at a time).
	scratch []*server
}

// ending is a job holding GPUs and when it is expected to release them.
type ending struct {
	j     *domain.Job
	pl    []domain.Placement
	at    time.Time
	basis string
	units int
}

// runEnd estimates when j, placed at placedAt, stops holding GPUs: a stop
// deadline, else its expected duration (at most its time limit), else its
// time limit, else the median run time of recent jobs of its workspace (of
// all workspaces if it has none). ok is false when nothing is known.
func (st *cycle) runEnd(j *domain.Job, placedAt time.Time) (time.Time, string, bool) {
	if st.victim[j.ID] {
		return st.now.Add(st.policy.Grace), domain.BasisPreemption, true
	}
	if j.State == domain.JobPreempting && j.StopDeadline != nil {
		return *j.StopDeadline, domain.BasisPreemption, true
	}
	if at, basis, ok := declaredEnd(j, placedAt); ok {
		return at, basis, true
	}
	if d, ok := st.historyEstimate(j.Tenant + "/" + j.Workspace); ok {
		return placedAt.Add(d), domain.BasisHistory, true
	}
	return time.Time{}, "", false
}

// runEndRow is runEnd of the job at place k of the table, read from its
// row (the job is loaded only for a stop deadline), with the history's
// estimate looked up once per tenant/workspace pair.
func (st *cycle) runEndRow(k int, placedAt time.Time) (time.Time, string, bool) {
	r := &st.tbl.rows[k]
	if st.victim[r.id] {
		return st.now.Add(st.policy.Grace), domain.BasisPreemption, true
	}
	if r.state == rowPreempting {
		if j := st.tbl.jobs[k]; j.StopDeadline != nil {
			return *j.StopDeadline, domain.BasisPreemption, true
		}
	}
	switch {
	case r.expected > 0:
		return placedAt.Add(time.Duration(r.expected) * time.Second), domain.BasisExpectedDuration, true
	case r.timeLimit > 0:
		return placedAt.Add(time.Duration(r.timeLimit) * time.Second), domain.BasisTimeLimit, true
	}
	if st.bf.histAsked == nil {
		n := len(st.tbl.pairs)
		st.bf.histPair, st.bf.histOK, st.bf.histAsked = make([]time.Duration, n), make([]bool, n), make([]bool, n)
	}
	if !st.bf.histAsked[r.pair] {
		p := st.tbl.pairs[r.pair]
		st.bf.histPair[r.pair], st.bf.histOK[r.pair] = st.historyEstimate(p[0] + "/" + p[1])
		st.bf.histAsked[r.pair] = true
	}
	if st.bf.histOK[r.pair] {
		return placedAt.Add(st.bf.histPair[r.pair]), domain.BasisHistory, true
	}
	return time.Time{}, "", false
}

// declaredEnd is the end by the job's own expected duration or time limit.
func declaredEnd(j *domain.Job, placedAt time.Time) (time.Time, string, bool) {
	switch {
	case j.ExpectedDurationSeconds > 0:
		return placedAt.Add(time.Duration(j.ExpectedDurationSeconds) * time.Second), domain.BasisExpectedDuration, true
	case j.TimeLimitSeconds > 0:
		return placedAt.Add(time.Duration(j.TimeLimitSeconds) * time.Second), domain.BasisTimeLimit, true
	}
	return time.Time{}, "", false
}

// historyEstimate is the median run time of the recently ended jobs of
// workspace ref, else of all recently ended jobs.
func (st *cycle) historyEstimate(ref string) (time.Duration, bool) {
	if st.bf.hist == nil {
		runs := map[string][]time.Duration{}
		for _, h := range st.s.History {
			from := h.StartedAt
			if from == nil {
				from = h.PlacedAt
			}
			if from == nil || h.EndedAt == nil || !h.EndedAt.After(*from) {
				continue
			}
			d := h.EndedAt.Sub(*from)
			runs[h.Tenant+"/"+h.Workspace] = append(runs[h.Tenant+"/"+h.Workspace], d)
			runs[""] = append(runs[""], d)
		}
		st.bf.hist = map[string]time.Duration{}
		for k, ds := range runs {
			slices.Sort(ds)
			st.bf.hist[k] = ds[len(ds)/2]
		}
	}
	if d, ok := st.bf.hist[ref]; ok {
		return d, true
	}
	d, ok := st.bf.hist[""]
	return d, ok
}

// endings lists the jobs holding GPUs in the cycle's view with a known
// end, soonest first; ends already past count as now (overdue). The jobs
// holding GPUs before the cycle are listed once; this cycle's placements
// are merged in.
func (st *cycle) endings() []ending {
	// add appends j's end to out; unknown when it has none (only
	// whether any has none is read: a list of them was 0.5 MB a burst
	// cycle at 100,000 GPUs).
	add := func(out []ending, unknown bool, j *domain.Job, pl []domain.Placement, placedAt time.Time) ([]ending, bool) {
		at, basis, ok := st.runEnd(j, placedAt)
		if !ok {
			return out, true
		}
		if at.Before(st.now) {
			at = st.now
		}
		n := 0
		for _, p := range pl {
			n += placementUnits(p)
		}
		return append(out, ending{j: j, pl: pl, at: at, basis: basis, units: n}), unknown
	}
	byEnd := func(a, b ending) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.j.ID, b.j.ID)
	}
	if !st.bf.built {
		st.bf.built = true
		// From the table's rows: a job is loaded only when it has a
		// known end (or a stop deadline to read).
		rows := st.tbl.rows
		for k := range rows {
			r := &rows[k]
			if !r.placed || st.released[r.id] || r.state == rowPending {
				continue
			}
			placedAt := st.now
			if r.hasPlacedAt {
				placedAt = st.tbl.placedAt(k)
			}
			at, basis, ok := st.runEndRow(k, placedAt)
			if !ok {
				st.bf.runningUnknown = true
				continue
			}
			if at.Before(st.now) {
				at = st.now
			}
			j := st.tbl.jobs[k]
			st.bf.running = append(st.bf.running, ending{j: j, pl: j.Placement, at: at, basis: basis, units: r.held})
		}
		slices.SortFunc(st.bf.running, byEnd)
	}
	// This cycle's placements are folded in as they come (a placed job's
	// end is fixed for the cycle: placed now, never a victim of the cycle
	// that places it), and the answer is kept until the next placement:
	// re-estimating every placement of the cycle at every search was a
	// twentieth of a later cycle at 100,000 GPUs.
	if st.s.exhaustive {
		// The equivalence tests' reference: every placement folded in
		// again at every search.
		st.bf.ends, st.bf.placedEnds, st.bf.placedUnknown, st.bf.folded = nil, nil, false, 0
	}
	fresh := st.bf.placed[st.bf.folded:]
	if st.bf.ends != nil && len(fresh) == 0 {
		return *st.bf.ends
	}
	var placed []ending
	unknown := false
	for _, e := range fresh {
		placed, unknown = add(placed, unknown, e.j, e.pl, st.now)
	}
	st.bf.folded = len(st.bf.placed)
	st.bf.placedUnknown = st.bf.placedUnknown || unknown
	slices.SortFunc(placed, byEnd)
	st.bf.placedEnds = mergeEndings(st.bf.placedEnds, placed, byEnd)
	out := st.bf.running
	if len(st.bf.placedEnds) > 0 {
		out = mergeEndings(st.bf.running, st.bf.placedEnds, byEnd)
	}
	st.bf.anyUnknown = st.bf.placedUnknown || st.bf.runningUnknown
	st.bf.ends = &out
	return out
}

// mergeEndings merges two lists sorted by byEnd into a new one, a's first
// on ties.
func mergeEndings(a, b []ending, byEnd func(x, y ending) int) []ending {
	if len(b) == 0 {
		return a
	}
	out := make([]ending, 0, len(a)+len(b))
	i, k := 0, 0
	for i < len(a) || k < len(b) {
		if k == len(b) || (i < len(a) && byEnd(a[i], b[k]) <= 0) {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[k])
			k++
		}
	}
	return out
}

// reservationFor finds when and where j, which cannot be placed now for lack of
// free GPUs, fits once running jobs end, with the earlier reservations
// holding their GPUs; it records the reservation and returns it, nil when
// j gets none.
func (st *cycle) reservationFor(j *domain.Job, t *domain.Tenant, w *domain.Workspace) *reservation {
	if len(st.bf.res) >= maxReservations || st.bf.searches >= maxReservationSearches || j.GPUs == 0 || j.MIGProfile != "" || j.Share > 0 {
		return nil
	}
	failKey := w.Ref() + "|" + st.shapeOf(j)
	if st.bf.failed[failKey] {
		return nil
	}
	st.bf.searches++
	ends := st.endings()
	// Prefixes end at group boundaries: jobs ending at the same time go
	// together.
	var bounds []int
	for i := range ends {
		if i+1 == len(ends) || !ends[i+1].at.Equal(ends[i].at) {
			bounds = append(bounds, i+1)
		}
	}
	if len(bounds) == 0 && !st.bf.anyUnknown {
		return nil // nothing holds GPUs
	}
	cum := make([]int, len(ends)+1)
	for i, e := range ends {
		cum[i+1] = cum[i] + e.units
	}
	reserved := 0
	for _, r := range st.bf.res {
		for _, p := range r.pl {
			reserved += placementUnits(p)
		}
	}
	free := st.c.total - st.u.usedTotal - reserved
	need := demand(j)
	type result struct {
		pl []domain.Placement
		u  *usage
	}
	// check reports j's placement once the first n jobs of ends have
	// ended: a fresh what-if view each time (the search goes back and
	// forth). With onlyFreed, only the GPUs those jobs release count: a
	// placement there holds back nothing free now.
	check := func(n int, onlyFreed bool) *result {
		if free+cum[n] < need {
			return nil // not enough GPUs released yet: no placement can work
		}
		c := st.c.shallow(st.bf.scratch)
		st.bf.scratch = c.servers
		u := st.u.clone()
		if onlyFreed {
			// A pool job's placement reads its pool's servers only: the
			// others' free GPUs need no hiding (each hidden clones a server).
			servers := st.c.servers
			if in := st.c.poolServers(j); in != nil {
				servers = in
			}
			for _, v := range servers {
				if v.nfree == 0 {
					continue
				}
				cv := c.mut(v.s.Name)
				for g, f := range cv.free {
					if f {
						cv.free[g] = false
						cv.nfree--
					}
				}
			}
		}
		for _, e := range ends[:n] {
			releaseIn(c, u, e.j, e.pl)
		}
		for _, r := range st.bf.res {
			holdIn(c, u, r.job, st.s.Tenants[r.job.Tenant], r.pl)
		}
		models, _, ok := admit(j, w, st.s, u, c)
		if !ok {
			return nil
		}
		pl, _, _ := c.placeIn(j, t, models)
		if pl == nil {
			return nil
		}
		u.addJob(j, pl, 1)
		return &result{pl, u}
	}
	// Exponential search over the boundaries, then binary search back to
	// the first that fits: placement is monotone in what has ended.
	lo, hi := -1, -1 // last boundary index known not to fit, first known to
	var found *result
	for k := 0; len(bounds) > 0; k = 2*k + 1 {
		k = min(k, len(bounds)-1)
		if r := check(bounds[k], false); r != nil {
			hi, found = k, r
			break
		}
		lo = k
		if k == len(bounds)-1 {
			break
		}
	}
	if found == nil {
		// GPUs held by jobs with no known end: taken to end after all
		// the others (the horizon).
		res := st.horizonReservation(j, t, w)
		if res == nil {
			// The same shape of the workspace will not fit later in the
			// cycle either.
			if st.bf.failed == nil {
				st.bf.failed = map[string]bool{}
			}
			st.bf.failed[failKey] = true
		}
		return res
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if r := check(bounds[mid], false); r != nil {
			hi, found = mid, r
		} else {
			lo = mid
		}
	}
	n := bounds[hi]
	// Among the placements at that time, one on GPUs that are busy now
	// costs the jobs after it nothing: prefer it.
	if r := check(n, true); r != nil {
		found = r
	}
	res := &reservation{job: j, w: w, start: ends[n-1].at, pl: found.pl, u: found.u}
	res.overdue = !res.start.After(st.now)
	// The basis: what the ends of the jobs on the reserved servers were
	// estimated from (of every job ended by then if none is on them).
	on := map[string]bool{}
	for _, p := range found.pl {
		on[p.Server] = true
	}
	var all []string
	for _, e := range ends[:n] {
		if !slices.Contains(all, e.basis) {
			all = append(all, e.basis)
		}
		if slices.ContainsFunc(e.pl, func(p domain.Placement) bool { return on[p.Server] }) && !slices.Contains(res.basis, e.basis) {
			res.basis = append(res.basis, e.basis)
		}
	}
	if len(res.basis) == 0 {
		res.basis = all
	}
	slices.Sort(res.basis)
	st.keep(res)
	return res
}

// keep records a reservation, with the GPUs of its placement free now as
// its mask.
func (st *cycle) keep(res *reservation) {
	for _, p := range res.pl {
		v := st.c.server(p.Server)
		if v == nil {
			continue
		}
		for _, g := range p.GPUs {
			if g >= 0 && g < len(v.free) && v.free[g] {
				res.mask = append(res.mask, gpuRef{v.idx, g})
			}
		}
	}
	st.bf.res = append(st.bf.res, res)
	if st.bf.hz != nil {
		holdIn(st.bf.hz, st.bf.hzU, res.job, st.s.Tenants[res.job.Tenant], res.pl)
	}
}

// horizonReservation reserves j for when every job holding GPUs has ended,
// those with no known end too (nothing known says when: basis unknown,
// no start): on GPUs busy now where it fits on them, so the jobs behind it
// fill the GPUs free now, as Slurm's backfill does with jobs of unlimited
// time (issue 14: without a reservation such a job held back its whole
// workspace, and a fill of 2,048 x 8 GPUs left GPUs idle behind it); else
// on GPUs busy now and those of the servers with the most GPUs free now,
// as many as it needs (it keeps their free GPUs, and the other servers'
// stay for the jobs behind it); else anywhere. Nothing known, nothing else
// protects it from the jobs behind it than its place ahead of them in the
// queue.
//
// One view of the empty cluster, with the cycle's reservations held in it,
// serves the cycle's horizon checks: a check hides GPUs free now in place
// and shows them again after, copying nothing.
func (st *cycle) horizonReservation(j *domain.Job, t *domain.Tenant, w *domain.Workspace) *reservation {
	if st.bf.hzSearches >= maxHorizonSearches || !st.behind(w) {
		// Nothing known, a reservation serves only to let the jobs
		// behind it in its workspace run (the others do not wait for
		// it): without any that could run now, none is needed.
		return nil
	}
	st.bf.hzSearches++
	if st.bf.hz == nil {
		empty := *st.s
		empty.Jobs = nil
		// A Carry's cycles make it in the same arrays each time.
		var into *serverBufs
		if st.cr != nil {
			into = &st.cr.hzBufs
		}
		hz := buildClusterIn(&empty, nil, into)
		st.bf.hzU = usageOn(st.u.ix, &empty, hz) // the same workspaces and tenants
		// A what-if view (no explanations, the scorer's tally left alone)
		// whose servers are its own: writes need no copy (marking each
		// of 12,500 servers cloned in a map was most of building it).
		hz.cow, hz.owned = true, true
		st.bf.hz = hz
		for _, r := range st.bf.res {
			holdIn(hz, st.bf.hzU, r.job, st.s.Tenants[r.job.Tenant], r.pl)
		}
	}
	hz, hzU := st.bf.hz, st.bf.hzU
	models, _, ok := admit(j, w, st.s, hzU, hz)
	if !ok {
		return nil
	}
	// check places j with the GPUs free now hidden, except on the servers
	// of show.
	var hidden []gpuRef
	check := func(hide bool, show map[int]bool) []domain.Placement {
		if hide {
			for i, v := range st.c.servers {
				if v.nfree == 0 || show[i] {
					continue
				}
				hv := hz.servers[i]
				for g, f := range v.free {
					if f && g < len(hv.free) && hv.free[g] {
						hv.free[g] = false
						hv.nfree--
						hidden = append(hidden, gpuRef{i, g})
					}
				}
				hv.ver++
			}
		}
		pl, _, _ := hz.placeIn(j, t, models)
		for _, g := range hidden {
			hv := hz.servers[g.server]
			hv.free[g.gpu] = true
			hv.nfree++
			hv.ver++
		}
		hidden = hidden[:0]
		return pl
	}
	pl := check(true, nil)
	if pl == nil {
		if show := st.emptiest(j, t); show != nil {
			pl = check(true, show)
		}
	}
	if pl == nil {
		if pl = check(false, nil); pl == nil {
			return nil
		}
	}
	u := hzU.clone()
	u.addJob(j, pl, 1)
	res := &reservation{job: j, w: w, pl: pl, u: u, unknown: true, basis: []string{domain.BasisUnknown}}
	st.keep(res)
	return res
}

// emptiest is the servers j may use with the most GPUs free now, as many
// as it needs servers (by index in the cluster), nil if none.
func (st *cycle) emptiest(j *domain.Job, t *domain.Tenant) map[int]bool {
	nodes, _, ok := shape(j, st.c.largestServer(j, t))
	if !ok || nodes <= 0 {
		return nil
	}
	var pick []*server
	for _, v := range st.c.servers {
		if v.nfree > 0 && st.c.eligible(v, j, t) {
			pick = append(pick, v)
		}
	}
	if len(pick) == 0 {
		return nil
	}
	slices.SortStableFunc(pick, func(a, b *server) int { return cmp.Compare(b.nfree, a.nfree) })
	show := map[int]bool{}
	for _, v := range pick[:min(len(pick), nodes)] {
		show[v.idx] = true
	}
	return show
}

// releaseIn takes a job's placement out of a what-if view.
func releaseIn(c *cluster, u *usage, j *domain.Job, pl []domain.Placement) {
	for _, p := range pl {
		v := c.mut(p.Server)
		if v == nil {
			continue
		}
		v.give(p)
		v.unhold(j.Tenant)
		c.account(v, j, -1)
	}
	u.addJob(j, pl, -1)
}

// holdIn books a reservation's GPUs in a what-if view.
func holdIn(c *cluster, u *usage, j *domain.Job, t *domain.Tenant, pl []domain.Placement) {
	for _, p := range pl {
		v := c.mut(p.Server)
		if v == nil {
			continue
		}
		v.take(p, j.Tenant)
		c.hold(v, j.Tenant, t)
	}
	u.addJob(j, pl, 1)
}

// delayed lists the reservations a job would delay if placed now: those
// starting before it is expected to end (all of them when it declares no
// expected duration or time limit).
func (st *cycle) delayed(j *domain.Job) []*reservation {
	if len(st.bf.res) == 0 {
		return nil
	}
	end, _, known := declaredEnd(j, st.now)
	var out []*reservation
	for _, r := range st.bf.res {
		if !known || r.unknown || end.After(r.start) {
			out = append(out, r)
		}
	}
	return out
}

// appendMaskKey appends a name of a set of reservations for the no-fit
// cache ("|r" and their jobs' IDs) to b.
func appendMaskKey(b []byte, rs []*reservation) []byte {
	if len(rs) == 0 {
		return b
	}
	b = append(b, "|r"...)
	for _, r := range rs {
		b = append(b, ',')
		b = strconv.AppendUint(b, r.job.ID, 10)
	}
	return b
}

// placeAround places j in the cycle's view without the free GPUs of the
// reservations rs: they are held back for the placement and given back
// after it.
func (st *cycle) placeAround(j *domain.Job, t *domain.Tenant, models []string, rs []*reservation) ([]domain.Placement, string, domain.Reason) {
	if len(rs) == 0 {
		return st.c.placeIn(j, t, models)
	}
	// A job of a pool is placed on its pool's servers only: hiding the
	// GPUs of other servers changes nothing it reads, and marked them
	// changed for every cache of the view (issue 18: at 100,000 GPUs in 8
	// pools, nine in ten hidden GPUs were elsewhere). Jobs without a pool
	// hide every one, as before.
	var set []bool
	if j.Pool != "" && !st.s.exhaustive { // exhaustive: the equivalence tests' reference
		set = st.c.statics.pool(st.c, j.Pool)
	}
	var flipped []gpuRef
	for _, r := range rs {
		for _, g := range r.mask {
			v := st.c.servers[g.server]
			if set != nil && (g.server >= len(set) || !set[g.server]) {
				continue
			}
			if v.free[g.gpu] {
				v.free[g.gpu] = false
				v.nfree--
				v.ver++
				flipped = append(flipped, g)
				st.c.touched(g.server) // scans of the cluster without the hidden GPUs are not its own
			}
		}
	}
	pl, level, why := st.c.placeIn(j, t, models)
	for _, g := range flipped {
		v := st.c.servers[g.server]
		v.free[g.gpu] = true
		v.nfree++
		v.ver++
		st.c.touched(g.server)
	}
	if pl == nil && len(flipped) > 0 {
		// Say so when the reservations are what stops it.
		if free, _, _ := st.c.placeIn(j, t, models); free != nil {
			why = domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf(
				"the free GPUs it fits on are reserved for a job that has waited longer, %s; it may use them if it ends before then (its expected duration or time limit)",
				whenText(rs[0]))}
		}
	}
	return pl, level, why
}

// quotaAround checks that j, placed at pl and still running when the
// reservations rs start, leaves each reserved job the quota it needs then;
// it books j in their usage when it does.
func (st *cycle) quotaAround(j *domain.Job, pl []domain.Placement, rs []*reservation) (domain.Reason, bool) {
	for i, r := range rs {
		r.u.addJob(j, pl, 1)
		r.u.addJob(r.job, r.pl, -1)
		_, _, ok := admit(r.job, r.w, st.s, r.u, st.c)
		r.u.addJob(r.job, r.pl, 1)
		if !ok {
			for _, b := range rs[:i+1] {
				b.u.addJob(j, pl, -1)
			}
			return domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf(
				"running now it would take quota a job that has waited longer needs %s; it may run if it ends before then (its expected duration or time limit)", whenText(r))}, false
		}
	}
	return domain.Reason{}, true
}

// whenText is a reservation's start for people.
func whenText(r *reservation) string {
	if r.unknown {
		return "once running jobs with no time limit, expected duration or history stop"
	}
	if r.overdue {
		return "as soon as running jobs past their estimated end stop"
	}
	return "from " + r.start.UTC().Format(time.RFC3339)
}

// reserved is the pending reason of a job with a reservation.
func (r *reservation) reason(why domain.Reason) domain.Reason {
	var where []string
	for i, p := range r.pl {
		if i == 4 {
			where = append(where, fmt.Sprintf("%d more servers", len(r.pl)-i))
			break
		}
		where = append(where, p.Server+" GPUs "+intsText(p.GPUs))
	}
	basis := " (estimated from the running jobs' " + strings.ReplaceAll(strings.Join(r.basis, ", "), "_", " ") + ")"
	if slices.Equal(r.basis, []string{domain.BasisUnknown}) {
		basis = ""
	}
	why.Message += fmt.Sprintf("; reserved %s on %s%s: later jobs use these GPUs only if they end before then",
		whenText(r), strings.Join(where, ", "), basis)
	res := &domain.Reservation{Placement: r.pl, Basis: r.basis}
	if !r.overdue && !r.unknown {
		res.Start = r.start.UTC()
	}
	why.Reservation = res
	return why
}

// intsText writes GPU indices compactly: 0-7, or 0,2,5.
func intsText(xs []int) string {
	if len(xs) > 1 && xs[len(xs)-1]-xs[0] == len(xs)-1 {
		return fmt.Sprintf("%d-%d", xs[0], xs[len(xs)-1])
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
