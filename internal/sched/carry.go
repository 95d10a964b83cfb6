package sched

import (
	"slices"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Carry is what one caller's successive cycles keep of their jobs: what
// a cycle would otherwise derive again from every live job (100,000 at
// issue 18's scale), kept up to date by the jobs that changed since the
// previous cycle. Each is an integer sum, a numbering or a job's own
// row, so adding and taking away a job's part gives what going over every
// job gives, and a cycle through a Carry decides exactly as Schedule does
// on the same snapshot (TestCarryDecidesAlike):
//
//   - each tenant/workspace pair's held units (the usage view);
//   - the live jobs' mix of single-server shapes (ShapesOf), and each
//     server's GPUs, CPU and memory their placements take (the hosts the
//     JobFabric policy weighs its shapes on);
//   - the job table's rows (jobtable.go), with the server of a one-server
//     placement numbered;
//   - the usage index, while the workspaces and tenants are the same;
//   - the cluster view (carryview.go): each server loaded again from the
//     live jobs on it when one of them changed, the cycle given a copy;
//   - each workspace's pending jobs in its own order (carryqueue.go).
//
// Nothing that depends on the time or on a cycle's own decisions is kept.
//
// What changed is found without reading the jobs: a snapshot's jobs are
// read-only and a job that changes is a new *domain.Job (the state's
// Snapshotter shares its unchanged copies from one snapshot to the next
// and copies the changed ones), so a job at the same place with the same
// pointer as last cycle is unchanged, and only the others are read. A
// caller that changes jobs in place must not use a Carry (the simulator
// does, and calls Schedule). Jobs must come by ID, as every Source lists
// them; a list that does not is summed whole.
//
// A Carry is not safe for concurrent use.
type Carry struct {
	// tbl is the jobs summed, by ID, with their rows (jobtable.go), which
	// the cycle's passes read; spare the rows before, refilled at the
	// next patch.
	tbl   jobTable
	spare []jobRow
	// topo is the topology the per-server sums are of (a new one starts
	// over).
	topo   *domain.Topology
	static *Static
	// used is each tenant/workspace pair's held units, by the table's
	// pair number (a slice, not a map by the pair's names: two string
	// hashes per changed job were a tenth of the patch after a fill).
	used   []pairUse
	shapes map[shapeTallyKey]*shapeTally
	// Per server, by Static's numbering: GPU milli taken per GPU (one
	// backing array, gpuOff[i] the server's first), CPU and memory.
	gpuOff []int
	gpu    []int
	cpu    []int64
	mem    []int64
	// odd counts the live jobs whose GPU models could make two shapes one
	// key (a model named with '|'): while there are any, the shapes are
	// summed whole as ShapesOf does.
	odd int
	// ix is the usage index of the previous cycle, kept while the
	// snapshot's workspaces and tenants are the same ones (by ref and
	// name; their figures are read from the snapshot every cycle);
	// ixTenant is each workspace's Tenant field it was numbered with.
	ix       *usageIndex
	ixTenant []string
	// ixRefs and ixNames are the index's refs and tenant names by
	// number.
	ixRefs, ixNames []string
	ixKept          int // cycles that kept it (tests)
	// view is the cluster view kept for the cycles (carryview.go), made
	// on first use after a sum.
	view *carriedView
	// viewLoads counts the servers its cycles loaded again, viewWhole
	// the loads of every server (tests).
	viewLoads, viewWhole int
	// pend lists each pair's pending jobs in the workspace's own order
	// (priority, then ID), by the table's pair number, for the queue's
	// order (carryqueue.go); pendOK: kept (the jobs came by ID).
	// pendMiss counts cycles whose lists did not hold the queue (tests).
	pend     [][]pendJob
	pendOK   bool
	pendMiss int
	// cut marks the pairs whose lists hold entries unpend marked to
	// leave, cutPairs lists them.
	cut      []bool
	cutPairs []int32
	// orderKeys and orderWS are the order's buffers, reused; orderQW
	// its workspaces' arrays, pendBuf and pendIdxBuf the cycle's pending
	// jobs and their rows.
	orderQW    queueWSs
	pendBuf    []*domain.Job
	pendIdxBuf []int32
	orderKeys  []orderKey
	orderWS    []int32
	// noFit is the cycle's shapes that found no placement (step), kept
	// to be emptied and refilled.
	noFit     map[string]domain.Reason
	orderBufs orderBufs
	// blocked is the step loop's first blocked job per workspace, and
	// reasonRank the ranks that put the plan's reasons in ID order
	// (byID), reused: 0.7 MB a cycle at 100,000 GPUs; reasonSet the
	// number of distinct reasons the cycle before listed.
	blocked    []block
	reasonRank []int32
	// reasonList is the step loop's list of the unplaced, in the queue's
	// order (byID's scratch).
	reasonList []reasonAt
	reasonSet  int
	// changes, runs and fresh are patch's buffers, reused.
	changes []carryChange
	runs    []keptRun
	fresh   []jobRow
	// srvBuf backs the servers of one changed job's placements.
	srvBuf []int32
	// trees is the last cycle's ranked trees (ranked.go), their arrays
	// reused by the next cycle's: with jobs in 8 pools at 100,000 GPUs a
	// cycle built 76 trees of 250 KB each.
	trees []*rankTree
	// scoreRows is the last cycle's score cache rows (scoring.rowOf),
	// reused emptied: one of 200 KB per shape rated, about 1.6 MB a burst
	// cycle at 100,000 GPUs.
	scoreRows [][]scoreEntry
	// pack is pack's scratch, all 0 between calls.
	pack packScratch
	// sums is the last cycle's freeSums (keptSums), their arrays reused.
	sums []*freeSums
	// usageBufs back the cycle's usage, reused.
	usageBufs usageBufs
	// migStarts and sets are the statics' answers of mig.Place and
	// indexSets, kept across cycles: each is a function of its key alone
	// (a GPU's layout, a server's size), and a cycle asked them anew.
	migStarts map[migPlaceKey]int
	sets      map[[2]int][][]int
	// cands and fit are placeGang's candidates, placed the step loop's
	// placements (backfill's), kept emptied: grown anew each cycle they
	// were 0.8 MB a burst cycle at 100,000 GPUs.
	cands, fit []*server
	placed     []ending
	// hzBufs back the horizon's empty view (backfill.go), remade in
	// them each cycle that needs one.
	hzBufs serverBufs
	// syncs and resums count the cycles that patched the sums with some
	// change and those that summed every job (tests).
	syncs, resums int
}

// carryChange is a job the patch found changed: its old copy at row at of
// the old table (-1: new), its new one at place k of the new list (-1:
// gone). It names the copies by place, holding no pointer: the Carry
// keeps the array for the most a patch takes (50,000 changes at 100,000
// jobs), which the collector would otherwise scan.
type carryChange struct {
	at, k int
	f     int // its new row in the patch's fresh rows (-1: none)
	// same: old and cur ask for the same shape (sameShape), read while
	// both copies are at hand; held: they hold the same (sameHold).
	same, held bool
}

// keptRun is n unchanged jobs at row at of the old table and place k of
// the new.
type keptRun struct{ at, k, n int }

// pairUse is the units a tenant/workspace pair's placed jobs hold, and how
// many they are (an entry goes with its last job).
type pairUse struct{ units, jobs int }

type shapeTallyKey struct {
	cpu         int64
	gpus, milli int
	models      string
}

type shapeTally struct {
	n      int
	mem    int64
	models []string
}

// Schedule runs one cycle over s at time now, as Schedule(s, now) does,
// taking the sums over s's jobs from the previous cycle's and the jobs
// that changed since. s's jobs must not change in place after this call
// (a changed job is a new *domain.Job).
func (cr *Carry) Schedule(s *Snapshot, now time.Time) *Plan {
	return schedule(s, now, cr)
}

// sync brings the sums and the table to s's jobs.
func (cr *Carry) sync(s *Snapshot) {
	if cr.topo != s.Topology || cr.static == nil || len(cr.tbl.pairs) > 2*len(s.Jobs)+4096 || !cr.patch(s.Jobs) {
		st := s.Static
		if st == nil || st.topo != s.Topology {
			st = NewStatic(s.Topology)
		}
		cr.resum(s, st)
	}
	cr.topo = s.Topology
}

// patch applies the jobs that differ from the previous list; false (the
// sums then unusable) when jobs do not come by ID, or when most changed.
func (cr *Carry) patch(jobs []*domain.Job) bool {
	prev, rows := cr.tbl.jobs, cr.tbl.rows
	if cr.view != nil && !cr.view.byID {
		// Its lists may hold two jobs of one ID, which remove (by ID)
		// cannot tell apart: made again from the patched table.
		cr.view = nil
	}
	// A first pass finds the changes and the runs of unchanged jobs
	// without touching the sums or the rows, so a list out of order
	// leaves them to be summed whole. Its buffers are the Carry's:
	// grown change by change they were a tenth of the patch after a
	// fill (32,622 changes).
	changes, runs := cr.changes[:0], cr.runs[:0]
	// Sized once for the most a patch takes (more changes than half the
	// jobs sum them whole; a run lies between two changes): grown by
	// doubling, the cycle after a fill made 8 MB of changes' arrays
	// and copied each into the next.
	// With room to spare (grown): a queue fed by submits is longer every
	// cycle, and buffers made to the exact size were made every cycle.
	if most := len(jobs)/2 + 2; cap(changes) < most || cap(runs) < most {
		changes, runs = make([]carryChange, 0, grown(most)), make([]keptRun, 0, grown(most))
	}
	defer func() { cr.changes, cr.runs = changes[:0], runs[:0] }()
	var last uint64
	first := true
	i := 0
	for k := 0; k < len(jobs); k++ {
		j := jobs[k]
		if i < len(prev) && prev[i] == j {
			// The same copies: unchanged, their rows kept, a run at a
			// time (the previous list was by ID, so a run is too).
			if id := rows[i].id; !first && id <= last {
				return false
			}
			r := keptRun{at: i, k: k}
			for i < len(prev) && k < len(jobs) && prev[i] == jobs[k] {
				i++
				k++
			}
			k--
			r.n = i - r.at
			runs = append(runs, r)
			last, first = rows[i-1].id, false
			continue
		}
		id := j.ID
		if !first && id <= last {
			return false
		}
		last, first = id, false
		for i < len(prev) && rows[i].id < id {
			changes = append(changes, carryChange{at: i, k: -1}) // gone
			i++
		}
		c := carryChange{at: -1, k: k}
		if i < len(prev) && rows[i].id == id {
			c.at = i
			i++
		}
		changes = append(changes, c)
	}
	for ; i < len(prev); i++ {
		changes = append(changes, carryChange{at: i, k: -1})
	}
	if len(changes) > len(jobs)/2 {
		// Most jobs are new copies (a source without versions): summing
		// them whole costs less than taking each away and adding it again.
		return false
	}
	// The new and changed jobs' rows, aside (the old rows are read
	// until the new ones are in place). A changed job's copy keeps its
	// old row's pair when it names the same one.
	fresh := reuse(cr.fresh, len(changes))
	defer func() { cr.fresh = fresh }()
	for x := range changes {
		c := &changes[x]
		c.f = -1
		if c.k < 0 {
			continue
		}
		c.f = len(fresh)
		var old *domain.Job
		if c.at >= 0 {
			old = prev[c.at]
		}
		cur := jobs[c.k]
		if old != nil && old.Tenant == cur.Tenant && old.Workspace == cur.Workspace {
			fresh = append(fresh, cr.rowIn(cur, rows[c.at].pair))
		} else {
			fresh = append(fresh, cr.rowOf(cur))
		}
		// Both copies were just read: the passes below read a job
		// only for its placements (each pass over 32,622 changed jobs
		// after a fill loaded every copy from memory again).
		c.same = old != nil && sameShape(old, cur)
		c.held = old != nil && sameHold(old, &rows[c.at], cur, &fresh[c.f])
	}
	// The old copies leave the sums, the view and the lists, then the
	// new ones come (the sums are sums; the view's and the lists' places
	// are by ID, whatever the order they are put in).
	for _, c := range changes {
		if c.at < 0 {
			continue
		}
		old := prev[c.at]
		if !c.held {
			cr.addUse(old, &rows[c.at], -1)
		}
		if !c.same {
			cr.addShape(old, -1)
		}
		if cr.pendOK {
			cr.unpend(old, &rows[c.at])
		}
	}
	cr.dropUnpended()
	for _, c := range changes {
		if c.k < 0 {
			continue
		}
		cur, r := jobs[c.k], &fresh[c.f]
		if !c.held {
			cr.addUse(cur, r, 1)
		}
		// A copy asking for the same shape as the old one (a job
		// placed, stopped or requeued) leaves the tally as it was.
		if !c.same {
			cr.addShape(cur, 1)
		}
		if cr.pendOK {
			cr.repend(cur, r)
		}
	}
	// The rows in place: the kept runs move left within the table when
	// none moves right (no more new jobs than gone ones before it: a
	// cycle that places, ends and requeues jobs, or a submit's new IDs
	// at the end), else into the spare table. Copying every row into
	// the spare was 13.6 MB a cycle at 100,000 jobs.
	inPlace := true
	for _, r := range runs {
		if r.k > r.at {
			inPlace = false
			break
		}
	}
	var next []jobRow
	if inPlace {
		next = rows
		if len(jobs) > cap(next) {
			next = slices.Grow(next, grown(len(jobs))-len(next))
		}
		next = next[:max(len(jobs), len(next))]
	} else {
		next = cr.spare[:0]
		if cap(next) < len(jobs) {
			next = make([]jobRow, len(jobs), grown(len(jobs)))
		}
		next = next[:len(jobs)]
		cr.spare = rows
	}
	// Left to right: a run's rows land at or before where they were,
	// past the rows of the runs before it (copy moves overlapping rows
	// as memmove does), then the new rows fill the places between.
	// A run in place already (none before it moved) is left as it is:
	// after a fill, every row of an unchanged job.
	for _, r := range runs {
		if !inPlace || r.k != r.at {
			copy(next[r.k:r.k+r.n], rows[r.at:r.at+r.n])
		}
	}
	for _, c := range changes {
		if c.k >= 0 {
			next[c.k] = fresh[c.f]
		}
	}
	// Rows past the end moved or went.
	clear(next[len(jobs):])
	next = next[:len(jobs)]
	cr.tbl.rows = next
	// The jobs likewise, from the list: a run in place holds them.
	tj := cr.tbl.jobs
	if cap(tj) < len(jobs) {
		tj = append(make([]*domain.Job, 0, grown(len(jobs))), jobs...)
	} else {
		tj = tj[:max(len(jobs), len(tj))]
		for _, r := range runs {
			if r.k != r.at {
				copy(tj[r.k:r.k+r.n], jobs[r.k:r.k+r.n])
			}
		}
		for _, c := range changes {
			if c.k >= 0 {
				tj[c.k] = jobs[c.k]
			}
		}
		clear(tj[len(jobs):])
	}
	cr.tbl.jobs = tj[:len(jobs)]
	if len(changes) > 0 {
		cr.syncs++
	}
	return true
}

// resum sums every job of s again and makes every row.
func (cr *Carry) resum(s *Snapshot, st *Static) {
	cr.static = st
	cr.used = cr.used[:0]
	cr.shapes = map[shapeTallyKey]*shapeTally{}
	cr.odd = 0
	n := len(st.servers)
	cr.gpuOff = make([]int, n+1)
	for i := range st.servers {
		cr.gpuOff[i+1] = cr.gpuOff[i] + st.servers[i].s.GPUs
	}
	cr.gpu = make([]int, cr.gpuOff[n])
	cr.cpu = make([]int64, n)
	cr.mem = make([]int64, n)
	cr.view = nil
	cr.tbl = jobTable{pairID: map[[2]string]int32{}, jobs: slices.Clone(s.Jobs), rows: make([]jobRow, 0, len(s.Jobs))}
	for _, j := range s.Jobs {
		cr.tbl.rows = append(cr.tbl.rows, cr.rowOf(j))
	}
	for k, j := range s.Jobs {
		cr.addUse(j, &cr.tbl.rows[k], 1)
		cr.addShape(j, 1)
	}
	cr.spare = nil
	cr.listPending()
	cr.resums++
}

// addUse adds placed job j's part (its row r) to the units held, the
// per-server sums and the carried view (sign 1), or takes it away (-1).
func (cr *Carry) addUse(j *domain.Job, r *jobRow, sign int) {
	// The row says so without loading the job (r.placed is
	// len(j.Placement) > 0).
	if !r.placed {
		return
	}
	for int(r.pair) >= len(cr.used) {
		cr.used = append(cr.used, pairUse{})
	}
	u := &cr.used[r.pair]
	u.units += sign * r.held
	u.jobs += sign
	srvs := cr.serversOf(j, r)
	for k, p := range j.Placement {
		i := int(srvs[k])
		if i < 0 {
			continue
		}
		cr.cpu[i] += int64(sign) * j.CPUMilli
		cr.mem[i] += int64(sign) * j.MemoryMiB
		// eachGPUTaken's parts, without a call per GPU.
		gs := cr.gpu[cr.gpuOff[i]:cr.gpuOff[i+1]]
		milli := 1000
		if p.Share > 0 && len(p.MIG) == 0 {
			milli = domain.ShareUnits(p.Share) / Milli
		}
		for _, g := range p.GPUs {
			if g >= 0 && g < len(gs) {
				gs[g] += sign * milli
			}
		}
		for _, m := range p.MIG {
			if g := m.GPU; g >= 0 && g < len(gs) {
				gs[g] += sign * 1000
			}
		}
	}
	if cr.view != nil {
		if sign > 0 {
			cr.view.add(j, r.pair, srvs)
		} else {
			cr.view.remove(j, srvs)
		}
	}
}

// serversOf is the servers of j's placements by Static's numbering (-1:
// unknown), in cr's buffer: a one-server job's from its row r, looked up
// once for the sums and the view.
func (cr *Carry) serversOf(j *domain.Job, r *jobRow) []int32 {
	b := cr.srvBuf[:0]
	if len(j.Placement) == 1 {
		b = append(b, r.srv)
	} else {
		for _, p := range j.Placement {
			i, ok := cr.static.byName[p.Server]
			if !ok {
				i = -1
			}
			b = append(b, int32(i))
		}
	}
	cr.srvBuf = b
	return b
}

// sameHold reports whether placed copies a and b (rows ra and rb) hold
// the same: pair, units, CPU, memory and whole GPUs on the same servers,
// as addUse and the view's lists read them. Taking a away and adding b
// then leaves the sums and the view as they were, and marked the servers
// to load again for nothing: a running job's new copy (started,
// stopping, its reason) came with 1,000 to 1,400 a burst cycle at
// 100,000 GPUs. A share's or a MIG placement's entry holds the copy
// itself (the view's odd), so those are taken away and added.
func sameHold(a *domain.Job, ra *jobRow, b *domain.Job, rb *jobRow) bool {
	// The units held (r.held) and the server numbered (r.srv) follow
	// from the placements compared below.
	if !ra.placed || !rb.placed || ra.pair != rb.pair ||
		a.CPUMilli != b.CPUMilli || a.MemoryMiB != b.MemoryMiB || len(a.Placement) != len(b.Placement) {
		return false
	}
	for k := range a.Placement {
		p, q := &a.Placement[k], &b.Placement[k]
		if p.Share != 0 || q.Share != 0 || len(p.MIG) > 0 || len(q.MIG) > 0 || p.Server != q.Server || !slices.Equal(p.GPUs, q.GPUs) {
			return false
		}
		for _, g := range p.GPUs {
			if g < 0 || g >= 64 {
				return false // not a whole entry (refOf)
			}
		}
	}
	return true
}

// sameShape reports whether a and b ask for the same shape as ShapesOf
// tallies it (shapeOfJob's fields and the memory).
func sameShape(a, b *domain.Job) bool {
	return a.CPUMilli == b.CPUMilli && a.MemoryMiB == b.MemoryMiB && a.MIGProfile == b.MIGProfile && a.MIGCount == b.MIGCount &&
		a.Share == b.Share && a.GPUs == b.GPUs && a.GPUsPerNode == b.GPUsPerNode && a.GPUModel == b.GPUModel && slices.Equal(a.GPUModels, b.GPUModels)
}

// addShape adds j to ShapesOf's tally (sign 1) or takes it away (-1).
func (cr *Carry) addShape(j *domain.Job, sign int) {
	// ShapesOf's tally, key by key.
	k, n, ok := shapeOfJob(j)
	if !ok {
		return
	}
	ms := j.Models()
	if k.gpus == 0 {
		ms = nil
	}
	if slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, "|") }) {
		cr.odd += sign
	}
	t := cr.shapes[k]
	if t == nil {
		t = &shapeTally{models: slices.Clone(ms)}
		cr.shapes[k] = t
	}
	t.n += sign * n
	t.mem += int64(sign*n) * j.MemoryMiB
	if t.n == 0 {
		delete(cr.shapes, k)
	}
}

// usageInto adds the held units to u, as usageOn's pass over the jobs
// does.
func (cr *Carry) usageInto(u *usage) {
	for p, pu := range cr.used {
		if pu.jobs == 0 {
			continue
		}
		k := cr.tbl.pairs[p]
		i, t := u.ix.of(k[0], k[1])
		if i >= 0 {
			u.used[i] += pu.units
		}
		if t >= 0 {
			u.tUsed[t] += pu.units
		}
		u.usedTotal += pu.units
	}
}

// shapesOf is ShapesOf(s.Jobs) from the tally; false while a model name
// could merge two keys.
func (cr *Carry) shapesOf() ([]Shape, bool) {
	if cr.odd > 0 {
		return nil, false
	}
	total := 0
	keys := make([]shapeTallyKey, 0, len(cr.shapes))
	for k, t := range cr.shapes {
		keys = append(keys, k)
		total += t.n
	}
	return shapesFromTally(keys, func(k shapeTallyKey) *shapeTally { return cr.shapes[k] }, total), true
}

// hosts is Snapshot.hosts from the per-server sums: a server's GPU keeps
// 1000 milli less what its placements take, never below 0, which is what
// taking each placement's part in turn, floored at 0, leaves (every part
// is positive). One Host is yielded at a time, in one buffer the
// consumer must not keep (weigh reads each once): a Host per server and
// their GPUs were 1.7 MB a cycle at 12,500 servers.
func (cr *Carry) hosts(s *Snapshot) func(yield func(*Host) bool) {
	return func(yield func(*Host) bool) {
		st := cr.static
		var h Host
		var free []int
		for i := range st.servers {
			v := st.servers[i].s
			if cond, ok := s.Nodes[v.Name]; ok && !cond.Schedulable() {
				continue
			}
			gs := cr.gpu[cr.gpuOff[i]:cr.gpuOff[i+1]]
			if cap(free) < len(gs) {
				free = make([]int, len(gs))
			}
			f := free[:len(gs):len(gs)]
			for g, used := range gs {
				f[g] = max(0, 1000-used)
			}
			h = Host{Name: v.Name, Model: v.GPUModel, Free: f, CPUMilli: v.CPUMilli, CPUFree: v.CPUMilli - cr.cpu[i], MemoryMiB: v.MemoryMiB, MemFree: v.MemoryMiB - cr.mem[i]}
			if !yield(&h) {
				return
			}
		}
	}
}

// usageIndex is newUsageIndex(s), the numbering kept from the previous
// cycle when s has the same workspaces (each with the same ref and
// tenant) and tenants: sorting 5,000 refs and building their maps again
// every cycle gave the same numbers. The workspaces and tenants are s's.
func (cr *Carry) usageIndex(s *Snapshot) *usageIndex {
	if old := cr.ix; old != nil && len(old.ws) == len(s.Workspaces) && len(old.byRef) == len(old.ws) && len(old.tenants) == len(s.Tenants) {
		ix := &usageIndex{ws: make([]*domain.Workspace, len(old.ws)), wsTenant: old.wsTenant, byRef: old.byRef,
			tenants: make([]*domain.Tenant, len(old.tenants)), byTenant: old.byTenant, byPair: old.byPair, numbered: old.numbered}
		// By number, from the refs and names kept in slices (ranging
		// over the maps and building each w.Ref() to compare were most
		// of this).
		same := true
		for i, ref := range cr.ixRefs {
			w := s.Workspaces[ref]
			if w == nil || w.Tenant != cr.ixTenant[i] || !isRef(ref, w) {
				same = false
				break
			}
			ix.ws[i] = w
		}
		for i, name := range cr.ixNames {
			if !same {
				break
			}
			t, ok := s.Tenants[name]
			if !ok {
				same = false
				break
			}
			ix.tenants[i] = t
		}
		if same {
			cr.ixKept++
			ix.asSnap = true
			return ix
		}
	}
	ix := newUsageIndex(s)
	cr.ix = ix
	cr.ixTenant = make([]string, len(ix.ws))
	for i, w := range ix.ws {
		cr.ixTenant[i] = w.Tenant
	}
	cr.ixRefs = make([]string, len(ix.ws))
	for ref, i := range ix.byRef {
		cr.ixRefs[i] = ref
	}
	cr.ixNames = make([]string, len(ix.tenants))
	for name, i := range ix.byTenant {
		cr.ixNames[i] = name
	}
	return ix
}

// isRef reports whether ref is w.Ref(), without making it.
func isRef(ref string, w *domain.Workspace) bool {
	n := len(w.Tenant)
	return len(ref) == n+1+len(w.Name) && ref[:n] == w.Tenant && ref[n] == '/' && ref[n+1:] == w.Name
}

// keptMemos are the statics' memos the Carry keeps across cycles, emptied
// when they have grown past what a cluster's layouts and sizes make (a
// bound, not a cache policy: the keys are few).
func (cr *Carry) keptMemos() (map[migPlaceKey]int, map[[2]int][][]int) {
	const most = 1 << 14
	if cr.migStarts == nil || len(cr.migStarts) > most {
		cr.migStarts = map[migPlaceKey]int{}
	}
	if cr.sets == nil || len(cr.sets) > most {
		cr.sets = map[[2]int][][]int{}
	}
	return cr.migStarts, cr.sets
}

// rowOf is j's row with the server of its one placement numbered.
func (cr *Carry) rowOf(j *domain.Job) jobRow {
	return cr.rowIn(j, cr.tbl.intern(j.Tenant, j.Workspace))
}

// rowIn is rowOf, j's tenant/workspace pair numbered pair already.
func (cr *Carry) rowIn(j *domain.Job, pair int32) jobRow {
	r := cr.tbl.rowIn(j, pair)
	if len(j.Placement) == 1 {
		if i, ok := cr.static.byName[j.Placement[0].Server]; ok {
			r.srv = int32(i)
		}
	}
	return r
}
