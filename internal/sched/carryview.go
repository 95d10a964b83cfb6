package sched

import (
	"maps"
	"math/bits"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// carriedView is phase 1's cluster view (the servers' free GPUs, shares,
// MIG instances, holders, CPU and memory used) kept by a Carry across
// cycles: building it from every placed job's GPUs was the largest cost
// of a later cycle outside its decisions at issue 18's scale (69,000
// placed jobs, 12,500 servers, a new view every cycle).
//
// A server changed by some job (placed, ended, preempted, requeued) is
// loaded again from the live jobs placed on it, in the snapshot's order,
// as a view built from scratch loads it: its holders' order, its MIG
// instances' order and its change count come out the same, not merely
// an equivalent state. Anything wider (the topology, a tenant's
// isolation) loads every server again. Nodes' conditions are not part of
// the view: the totals they change are counted every cycle.
//
// A cycle gets a copy: the servers' fields and free GPUs flat, their
// holders, MIG instances and shares shared with the view until the cycle
// first changes the server (cluster.mut copies them then).
type carriedView struct {
	st *Static
	// views is each server, by st's numbering; free backs their free
	// GPUs; on lists the placements of live jobs on each, in snapshot
	// order (a job's in its own order).
	views []server
	free  []bool
	on    [][]onRef
	// tbl names the tenants of the lists' entries (by pair number);
	// odd holds the job of each entry that cannot hold its placement
	// (MIG, a share), at the entry's slot; oddFree lists the slots free.
	// byID: the lists were made from jobs by ID, so an ID is one job
	// (remove finds its entries by ID).
	tbl     *jobTable
	odd     []*domain.Job
	oddFree []int32
	byID    bool
	// dirty lists the servers to load again (isDirty marks them); all:
	// every one.
	dirty   []int
	isDirty []bool
	all     bool
	// excl is the server-isolated tenants the holders were made with.
	excl map[string]bool
	// total and totalModel count every server's GPUs, nodes' conditions
	// aside; modelNames are the models by name.
	total      int
	totalModel map[string]int
	modelNames []string
	// work, workFree, ptrs and shared back the cycle's copy (reused: a
	// cycle's view is dead once its plan is made); shared[i]: work[i]'s
	// holders and maps are the view's.
	work     []server
	workFree []bool
	ptrs     []*server
	shared   []bool
}

// onRef is placement p of job id (the lists are kept by ID without
// loading each job), with what a server's load reads of it: a load after
// a fill or a burst read the job, its placements and their GPUs for each
// placement, three loads from far apart in memory. It holds no pointer
// (the tenant is its pair's number in the Carry's table, the job its ID):
// the lists, 100,000 entries at issue 18's scale, are then not scanned by
// each collection, which marked them beside the cycles after a fill.
type onRef struct {
	id       uint64
	cpu, mem int64
	// gpus marks the placement's GPUs when whole is set: whole GPUs
	// only, each under 64 (else load reads the placement, of the job at
	// slot in the view's odd).
	gpus  uint64
	pair  int32
	p     int32
	slot  int32
	whole bool
}

// refOf is j's placement k as a server's list holds it, pair the
// number of its tenant/workspace pair.
func refOf(j *domain.Job, pair int32, k int) onRef {
	e := onRef{id: j.ID, pair: pair, cpu: j.CPUMilli, mem: j.MemoryMiB, p: int32(k)}
	p := &j.Placement[k]
	if p.Share > 0 || len(p.MIG) > 0 {
		return e
	}
	for _, g := range p.GPUs {
		if g < 0 || g >= 64 {
			e.gpus = 0
			return e
		}
		e.gpus |= 1 << g
	}
	e.whole = true
	return e
}

// newCarriedView is the view of tbl's jobs (live ones, in snapshot order)
// on st's servers; tbl names their tenants while the view lives.
func newCarriedView(st *Static, tbl *jobTable) *carriedView {
	n := len(st.servers)
	cv := &carriedView{st: st, tbl: tbl, byID: true, views: make([]server, n), on: make([][]onRef, n), isDirty: make([]bool, n),
		work: make([]server, n), ptrs: make([]*server, n), shared: make([]bool, n), totalModel: map[string]int{}}
	cv.free, cv.workFree = make([]bool, st.gpus), make([]bool, st.gpus)
	off := 0
	for i := range st.servers {
		ss := st.servers[i].s
		g := ss.GPUs
		cv.views[i] = server{static: &st.servers[i], free: cv.free[off : off+g : off+g], idx: i,
			cpuCap: ss.CPUMilli, memCap: ss.MemoryMiB, model: ss.GPUModel, sigID: st.servers[i].sigID}
		off += g
		if _, ok := cv.totalModel[ss.GPUModel]; !ok {
			cv.modelNames = append(cv.modelNames, ss.GPUModel)
		}
		cv.totalModel[ss.GPUModel] += g * unit
		cv.total += g * unit
	}
	slices.Sort(cv.modelNames)
	// Each server's list starts with room for 8 placements, from one
	// array: grown one insertion at a time, the lists of the cycle after
	// a fill (every server's, from empty) were a call to the allocator
	// per placement.
	room := make([]onRef, 8*n)
	for i := range cv.on {
		cv.on[i] = room[8*i : 8*i : 8*i+8]
	}
	// In the snapshot's order, as buildCluster loads them (by ID when
	// the Carry patches; any order when it sums every job).
	for x, j := range tbl.jobs {
		r := &tbl.rows[x]
		if x > 0 && r.id <= tbl.rows[x-1].id {
			cv.byID = false
		}
		for k, p := range j.Placement {
			if i, ok := st.byName[p.Server]; ok {
				cv.list(int(i), j, r.pair, k, len(cv.on[i]))
			}
		}
	}
	cv.all = true
	return cv
}

// list puts j's placement k (its pair's number pair) at place at of
// server i's list.
func (cv *carriedView) list(i int, j *domain.Job, pair int32, k, at int) {
	e := refOf(j, pair, k)
	if !e.whole {
		// A slot of its own (an index, not a map by ID: a map's
		// look-up per load and its insert and delete per change
		// were 7 % of the patch after a fill).
		if n := len(cv.oddFree); n > 0 {
			e.slot, cv.oddFree = cv.oddFree[n-1], cv.oddFree[:n-1]
			cv.odd[e.slot] = j
		} else {
			e.slot = int32(len(cv.odd))
			cv.odd = append(cv.odd, j)
		}
	}
	if at == len(cv.on[i]) {
		// The usual case (jobs come by ID): one entry appended, not a
		// one-entry slice copied in (slices.Insert's typed copy was
		// most of adding after a fill).
		cv.on[i] = append(cv.on[i], e)
	} else {
		cv.on[i] = slices.Insert(cv.on[i], at, e)
	}
}

// add lists j's placements (its pair's number pair) on their servers
// srvs (Static's numbers, -1: unknown), after the jobs of lower ID (a
// Carry patches only lists by ID), and marks the servers to load.
func (cv *carriedView) add(j *domain.Job, pair int32, srvs []int32) {
	for k, i := range srvs {
		if i < 0 {
			continue
		}
		l := cv.on[i]
		at := len(l)
		for at > 0 && l[at-1].id > j.ID {
			at--
		}
		cv.list(int(i), j, pair, k, at)
		cv.mark(int(i))
	}
}

// remove takes j's placements off their servers srvs: its entries by ID,
// which are this copy's in a view by ID (a Carry removes every old copy
// before it adds a new one).
func (cv *carriedView) remove(j *domain.Job, srvs []int32) {
	for k, i := range srvs {
		if i < 0 || slices.Contains(srvs[:k], i) {
			continue // once per server
		}
		l, n := cv.on[i], 0
		for _, e := range l {
			if e.id != j.ID {
				l[n] = e
				n++
			} else if !e.whole {
				cv.odd[e.slot] = nil
				cv.oddFree = append(cv.oddFree, e.slot)
			}
		}
		cv.on[i] = l[:n]
		cv.mark(int(i))
	}
}

func (cv *carriedView) mark(i int) {
	if !cv.isDirty[i] {
		cv.isDirty[i] = true
		cv.dirty = append(cv.dirty, i)
	}
}

// load makes server i's view from the jobs on it, as buildCluster does.
func (cv *carriedView) load(i int) {
	v := &cv.views[i]
	for g := range v.free {
		v.free[g] = true
	}
	v.nfree = len(v.free)
	// The server's holders and maps are refilled in place: made anew they
	// were 3 MB in the cycle after a fill at 100,000 GPUs and 4 MB a
	// burst cycle. Only this view holds them by now: a cycle's copy that
	// changed a server took its own (own), one that did not is dead once
	// its plan is made. What is left empty is nil again, as a view built
	// from scratch has it.
	clear(v.share)
	clear(v.shareTenant)
	for g, l := range v.mig {
		v.mig[g] = l[:0]
	}
	v.holders, v.exclusive = v.holders[:0], ""
	v.cpuUsed, v.memUsed, v.ver = 0, 0, 0
	pairs := cv.tbl.pairs
	for x := range cv.on[i] {
		e := &cv.on[i][x]
		tenant := pairs[e.pair][0]
		if e.whole {
			// As take marks whole GPUs.
			for m := e.gpus; m != 0; m &= m - 1 {
				if g := bits.TrailingZeros64(m); g < len(v.free) && v.free[g] {
					v.free[g] = false
					v.nfree--
				}
			}
		} else {
			v.take(cv.odd[e.slot].Placement[e.p], tenant)
		}
		// hold's effect, the holder found once: a tenant holding the
		// server already was looked up in excl when it came (a map
		// look-up per placement was a third of loading).
		h := 0
		for h < len(v.holders) && v.holders[h].tenant != tenant {
			h++
		}
		if h < len(v.holders) {
			v.holders[h].n++
			if v.holders[h].exclusive {
				v.exclusive = tenant
			}
		} else {
			ex := len(cv.excl) > 0 && cv.excl[tenant]
			v.hold(tenant, ex)
		}
		v.ver++ // account's count, with no scorer tally
		v.cpuUsed += e.cpu
		v.memUsed += e.mem
	}
	for g, l := range v.mig {
		if len(l) == 0 {
			delete(v.mig, g)
		}
	}
	if len(v.mig) == 0 {
		v.mig = nil
	}
	if len(v.share) == 0 {
		v.share, v.shareTenant = nil, nil
	}
	if len(v.holders) == 0 {
		v.holders = nil
	}
}

// bring loads the servers changed since the last cycle, all of them when
// the tenants' isolation changed (whole); loaded counts them.
func (cv *carriedView) bring(tenants map[string]*domain.Tenant) (loaded int, whole bool) {
	n := 0
	same := true
	for name, t := range tenants {
		if t != nil && t.Isolation == domain.IsolationServer {
			n++
			if !cv.excl[name] {
				same = false
			}
		}
	}
	if !same || n != len(cv.excl) {
		cv.excl = map[string]bool{}
		for name, t := range tenants {
			if t != nil && t.Isolation == domain.IsolationServer {
				cv.excl[name] = true
			}
		}
		cv.all = true
	}
	whole = cv.all
	if whole {
		for i := range cv.views {
			cv.load(i)
		}
		loaded = len(cv.views)
	} else {
		for _, i := range cv.dirty {
			cv.load(i)
		}
		loaded = len(cv.dirty)
	}
	for _, i := range cv.dirty {
		cv.isDirty[i] = false
	}
	cv.dirty, cv.all = cv.dirty[:0], false
	return loaded, whole
}

// into gives c the cycle's copy of the view and its totals under nodes.
func (cv *carriedView) into(c *cluster, nodes map[string]domain.NodeCondition) {
	copy(cv.workFree, cv.free)
	copy(cv.work, cv.views)
	off := 0
	for i := range cv.work {
		v := &cv.work[i]
		g := len(v.free)
		v.free = cv.workFree[off : off+g : off+g]
		off += g
		cv.ptrs[i] = v
		cv.shared[i] = true
	}
	c.servers, c.shared = cv.ptrs, cv.shared
	c.total, c.totalModel, c.modelNames = cv.total, maps.Clone(cv.totalModel), slices.Clone(cv.modelNames)
	// A server that is not schedulable counts only its busy GPUs, as
	// buildCluster counts them.
	for name, cond := range nodes {
		i, ok := cv.st.byName[name]
		if !ok || cond.Schedulable() {
			continue
		}
		v := c.servers[i]
		d := len(v.free)*unit - v.usedUnits()
		c.total -= d
		c.totalModel[v.s.GPUModel] -= d
	}
}

// own gives v holders and maps of its own, no longer the carried view's.
func (v *server) own() {
	v.holders = slices.Clone(v.holders)
	if v.mig != nil {
		m := make(map[int][]mig.Instance, len(v.mig))
		for g, l := range v.mig {
			m[g] = slices.Clone(l)
		}
		v.mig = m
	}
	v.share = maps.Clone(v.share)
	v.shareTenant = maps.Clone(v.shareTenant)
}
