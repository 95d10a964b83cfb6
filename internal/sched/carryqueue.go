package sched

import (
	"cmp"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// pendJob is a pending job as the queue's order reads it, kept by a Carry
// in its workspace's list.
type pendJob struct {
	j       *domain.Job
	id      uint64
	prio    int
	demand  int
	reclaim bool // its reason is reclaim_pending
}

// cmpPend is a workspace's own order of its pending jobs: priority, then
// ID (IDs are unique in a Carry's lists).
func cmpPend(a, b pendJob) int {
	if c := cmp.Compare(b.prio, a.prio); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// pendOf is j's entry from its row.
func pendOf(j *domain.Job, r *jobRow) pendJob {
	return pendJob{j: j, id: r.id, prio: r.prio, demand: r.demand, reclaim: r.reclaimWait}
}

// listPending makes each pair's list of pending jobs from the table, in
// the workspace's own order; kept only when the jobs come by ID (unique
// IDs: the order then never falls back on a job's place in the list).
func (cr *Carry) listPending() {
	tbl := &cr.tbl
	cr.pend, cr.pendOK = make([][]pendJob, len(tbl.pairs)), true
	for k := range tbl.rows {
		r := &tbl.rows[k]
		if k > 0 && r.id <= tbl.rows[k-1].id {
			cr.pend, cr.pendOK = nil, false
			return
		}
		if r.state == rowPending {
			cr.pend[r.pair] = append(cr.pend[r.pair], pendOf(tbl.jobs[k], r))
		}
	}
	for _, l := range cr.pend {
		slices.SortFunc(l, cmpPend)
	}
}

// unpend marks a changed or gone job's old copy (its row r) on its pair's
// list to leave it; dropUnpended takes the marked copies off. A Delete
// per job shifted its list's tail each time: after a fill (32,622 jobs
// leaving lists of tens) that was a quarter of the patch.
func (cr *Carry) unpend(j *domain.Job, r *jobRow) {
	if r.state != rowPending || int(r.pair) >= len(cr.pend) {
		return
	}
	l := cr.pend[r.pair]
	// The order reads priority and ID only, so a marked entry (nil
	// job) keeps the list searchable until it goes.
	if k, ok := slices.BinarySearchFunc(l, pendOf(j, r), cmpPend); ok && l[k].j == j {
		l[k].j = nil
		if len(cr.cut) < len(cr.pend) {
			cr.cut = slices.Grow(cr.cut, len(cr.pend)-len(cr.cut))[:len(cr.pend)]
		}
		if !cr.cut[r.pair] {
			cr.cut[r.pair] = true
			cr.cutPairs = append(cr.cutPairs, r.pair)
		}
	}
}

// dropUnpended takes the entries unpend marked off their lists, one pass
// per list.
func (cr *Carry) dropUnpended() {
	for _, p := range cr.cutPairs {
		cr.pend[p] = slices.DeleteFunc(cr.pend[p], func(e pendJob) bool { return e.j == nil })
		cr.cut[p] = false
	}
	cr.cutPairs = cr.cutPairs[:0]
}

// repend puts a new or changed job's copy on its pair's list, in order.
func (cr *Carry) repend(j *domain.Job, r *jobRow) {
	if r.state != rowPending {
		return
	}
	for len(cr.pend) <= int(r.pair) {
		cr.pend = append(cr.pend, nil)
	}
	e := pendOf(j, r)
	l := cr.pend[r.pair]
	at, _ := slices.BinarySearchFunc(l, e, cmpPend)
	cr.pend[r.pair] = slices.Insert(l, at, e)
}

// order is order(jobs, ...) from the kept lists: each workspace's pending
// jobs are in its own order already, so neither the grouping by workspace
// nor that sort is made again; what moves with the cycle (what is left of
// each guarantee, the workspaces' shares, the jobs GPUs are being freed
// for) is read as order reads it. jobs are the cycle's pending jobs (the
// same set); false when the lists do not hold as many (never, but then
// order decides).
func (cr *Carry) order(jobs []*domain.Job, s *Snapshot, u *usage, pairWS []int32, stopping map[string]int, freeingFor map[uint64]freeing) ([]queued, bool) {
	qw := newQueueWSsIn(&cr.orderQW, &cr.tbl, s, u, pairWS, stopping)
	// The keys' buffers are the Carry's, reused: the cycle before's
	// are dead once its plan is made (3.7 MB of keys a cycle at 67,000
	// pending jobs).
	ks, byWS := reuse(cr.orderKeys, len(jobs)), cr.orderWS[:0]
	defer func() { cr.orderKeys, cr.orderWS = ks, byWS }()
	for p, l := range cr.pend {
		if len(l) == 0 {
			continue
		}
		if len(ks)+len(l) > len(jobs) {
			return nil, false
		}
		wk := qw.of(int32(p))
		wk.off, wk.n = len(ks), len(l)
		for _, e := range l {
			byWS = append(byWS, int32(len(ks)))
			ks = append(ks, orderKey{j: e.j, ws: wk, id: e.id, idx: len(ks), prio: e.prio, demand: e.demand,
				freeing: e.reclaim || (len(freeingFor) > 0 && freeingFor[e.id].units > 0)})
		}
		within(ks, byWS[wk.off:wk.off+wk.n])
	}
	if len(ks) != len(jobs) {
		return nil, false
	}
	return orderRuns(jobs, ks, byWS, qw.list, &cr.orderBufs), true
}

// zeroed is buf's array holding n zero values when it has room for
// them, else a new one with room to grow (grown).
func zeroed[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n, grown(n))
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// emptied is buf with no entries, all it held cleared (they would keep
// what they point to).
func emptied[T any](buf []T) []T {
	clear(buf[:cap(buf)])
	return buf[:0]
}

// reuse is buf emptied with room for n, its old entries cleared (they
// would keep the jobs they point to); a new array when buf is too small,
// with room to grow (grown).
func reuse[T any](buf []T, n int) []T {
	clear(buf)
	if cap(buf) < n {
		return make([]T, 0, grown(n))
	}
	return buf[:0]
}

// grown is the room a kept buffer gets when n does not fit: a quarter
// more. A queue fed a stream of submits is longer every cycle, and a
// buffer made to the exact length was made anew every cycle (about 100 MB
// in 10 s on a leader holding 100,000 jobs at 1,000 submits/s).
func grown(n int) int { return n + n/4 }
