package sched

import (
	"container/heap"
	"math"
	"math/bits"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A scored placement picks, among the servers a single-server job may use,
// the one its scorer rates highest (ties: topology order). The scan that
// did so visited every server with room for every job, though a placement
// changes the rating of one server only. The base cluster now keeps, per
// request shape, the servers in a tournament tree by rating: the best is
// its root, and a change re-rates the changed servers alone (a log of the
// servers touched since, read by each tree when next asked).
//
// A tree holds only what does not depend on the job's tenant: the servers
// of its static set (model, sites, drivers, schedulable) with room, CPU and
// memory, that no server-isolated tenant holds (and, for a server-isolated
// tenant's tree, that nobody holds), rated as a job of that shape whose
// tenant holds no share there. The tenant's own servers are rated apart and
// compete with the root: those a server-isolated tenant is alone on, and,
// for a share, those where its tenant has shares (their rating counts its
// time-sliced GPUs; the tree's entries for them are skipped). Every other
// server fails eligible for the tenant, as the scan would find: only a
// server-isolated tenant is ever a server's exclusive tenant (hold), so a
// server another tenant holds exclusively is no GPU-isolated tenant's, and
// one held at all is no server-isolated tenant's but its own.
//
// Only the base cluster ranks (a what-if view shares servers that change
// under it); an exhaustive snapshot scans, and the equivalence tests
// compare the two.

// rankKey is what a tree's entries depend on besides the servers.
type rankKey struct {
	shape int        // the tenant-neutral request's score row (shapeID)
	set   *staticSet // the job's static eligibility
	alone bool       // a server-isolated tenant's: only servers nobody holds
}

// ranking is the base cluster's trees and the log of touched servers they
// read.
type ranking struct {
	trees map[rankKey]*rankTree
	// log is the servers touched (cluster.touched) since base; a reader at
	// cursor k has seen log[:k-base].
	log  []int
	base int
	// sharesOf indexes servers by the tenants with shares on them.
	sharesOf *tenantIndex
	// stamp dedupes a tree's catch-up over the log.
	stamp []uint32
	epoch uint32
	// off: a scorer gave a NaN rating, which the scan's comparison and a
	// tree's order would rank differently; the cycle scans from then on.
	off bool
}

// rankTree is one key's servers by rating: best[node] is the best leaf
// under node (-1: none), leaves are server indices.
type rankTree struct {
	key    rankKey
	size   int // leaves, a power of two
	best   []int32
	score  []float64 // by server
	gpu    []int16   // the scorer's GPU, by server
	cursor int
}

func (c *cluster) rankingOf() *ranking {
	if c.rank == nil {
		n := len(c.servers)
		c.rank = &ranking{trees: map[rankKey]*rankTree{}, stamp: make([]uint32, n),
			sharesOf: newTenantIndex(n, shareTenants)}
		c.rank.sharesOf.fill(c.servers)
	}
	return c.rank
}

// shareTenants appends to out the tenants with shares on v not in out.
func shareTenants(v *server, out []string) []string {
	for g, tn := range v.shareTenant {
		if v.share[g] > 0 && !slices.Contains(out, tn) {
			out = append(out, tn)
		}
	}
	return out
}

// note records that server i may change (cluster.touched): it is called
// before the change is made, so the log is compacted first, i left out of
// what the compaction reads. Compacted after i was logged, the index of
// servers by share tenant read server i as it was, and never again (a
// tenant's first share placed by that change went unlisted, its next
// share rated on the tree's row: TestRankedSharesAcrossCompaction).
func (rk *ranking) note(c *cluster, i int) {
	if len(rk.log) > 1024 && len(rk.log) > 4*len(rk.stamp) {
		rk.compact(c)
	}
	rk.log = append(rk.log, i)
}

// compact drops the log every reader has read (the index reads it all
// first); a tree further behind than a rebuild costs is dropped (rebuilt
// when next asked).
func (rk *ranking) compact(c *cluster) {
	rk.sharesOf.of(rk, c, "")
	end := rk.base + len(rk.log)
	low := rk.sharesOf.cursor
	for k, t := range rk.trees {
		if end-t.cursor > len(rk.stamp) {
			delete(rk.trees, k)
			continue
		}
		low = min(low, t.cursor)
	}
	rk.log = append(rk.log[:0], rk.log[low-rk.base:]...)
	rk.base = low
}

// ranked is placeScored's answer from the trees: the best server for j (nil:
// none) and the GPU its scorer chose; ok is false when the cluster does not
// rank (what-if view, exhaustive snapshot, uncached scorer) and the caller
// scans. jm is j without its models (the caller's), r its request.
func (c *cluster) ranked(j, jm *domain.Job, t *domain.Tenant, models []string, r Request) (*server, int, bool) {
	sc := c.sc
	if !sc.cached || c.scans() == nil || (c.rank != nil && c.rank.off) {
		return nil, 0, false
	}
	neutral := jm
	if j.Share > 0 {
		// The tree rates as a job whose tenant holds no share anywhere.
		cp := *jm
		cp.Tenant = ""
		neutral = &cp
	}
	key := rankKey{shape: sc.shapeID(neutral, models), set: c.statics.of(c, jm, t), alone: t.Isolation == domain.IsolationServer}
	// The tree is built at the key's first question: at 100,000 GPUs
	// nearly every key of a cycle is asked again (5 to 10 keys a cycle, at
	// most 2 asked once), and a scan at the first question, as was done,
	// rated every server with room once more.
	rk := c.rankingOf()
	tr := rk.trees[key]
	if tr == nil {
		tr = c.buildTree(key, neutral, models, r)
		rk.trees[key] = tr
	} else {
		c.catchUp(tr, neutral, models, r)
	}
	// The tenant's own servers, rated as the scan rates them.
	var extra []int
	if key.alone {
		extra = append(extra, c.ownedBy(j.Tenant)...)
	}
	var skip []int
	if j.Share > 0 {
		skip = rk.sharesOf.of(rk, c, j.Tenant)
		extra = append(extra, skip...)
	}
	if rk.off {
		return nil, 0, false
	}
	bi := tr.top(skip)
	var best *server
	bestScore, bestGPU := 0.0, -1
	if bi >= 0 {
		best, bestScore, bestGPU = c.servers[bi], tr.score[bi], int(tr.gpu[bi])
	}
	// The job's own row: a share's counts its tenant's GPUs, so it is its
	// tenant's, and a row of every server for the few servers of one
	// tenant was most of a share's placement in a burst cycle (a hundred
	// tenants' rows, 300 KB each): a share rates them afresh unless its
	// tenant's row exists (its scan made it), as rateIn without a row
	// rates (the row only keeps what it rated).
	var row []scoreEntry
	if len(extra) > 0 {
		if j.Share > 0 {
			row = sc.rowIfAny(sc.shapeID(j, models))
		} else {
			row = sc.rowOf(sc.shapeID(j, models))
		}
	}
	for _, i := range extra {
		v := c.servers[i]
		if !c.open(v, j, r, models) || !c.eligible(v, jm, t) {
			continue
		}
		score, gpu := c.rateIn(row, v, j, r)
		if gpu == -2 {
			continue
		}
		if math.IsNaN(score) {
			rk.off = true
			return nil, 0, false
		}
		if best == nil || score > bestScore || (score == bestScore && v.idx < best.idx) {
			best, bestScore, bestGPU = v, score, gpu
		}
	}
	return best, bestGPU, true
}

// open is the scan's test of a server before eligibility: room for the
// whole GPUs, one of the models, the CPU and memory.
func (c *cluster) open(v *server, j *domain.Job, r Request, models []string) bool {
	if r.Milli == 1000 && v.nfree < r.GPUs {
		return false
	}
	if len(models) > 0 && !slices.Contains(models, v.model) {
		return false
	}
	return v.fitsHost(j)
}

// leaf rates server i for tree key k: ok false when it is not in the tree.
func (c *cluster) leaf(k rankKey, i int, j *domain.Job, models []string, r Request) (float64, int16, bool) {
	v := c.servers[i]
	if !k.set.ok[i] || v.exclusive != "" || (k.alone && len(v.holders) > 0) || !c.open(v, j, r, models) {
		return 0, -2, false
	}
	score, gpu := c.rateIn(c.sc.rowOf(k.shape), v, j, r)
	if gpu == -2 {
		return 0, -2, false
	}
	if math.IsNaN(score) {
		c.rank.off = true
	}
	return score, int16(gpu), true
}

func (c *cluster) buildTree(k rankKey, j *domain.Job, models []string, r Request) *rankTree {
	n := len(c.servers)
	size := 1
	for size < n {
		size *= 2
	}
	tr := c.spareTree(size, n)
	tr.key, tr.cursor = k, c.rank.base+len(c.rank.log)
	// A reused tree's scores and GPUs are stale but unread: a leaf's are
	// read only while best names it, and every leaf is set below.
	for i := range tr.best {
		tr.best[i] = -1
	}
	// A job of whole GPUs: only the servers with that many free can be
	// leaves (open), and the base cluster's free-GPU sets name them; the
	// others are out of the tree until a change re-rates them (the log).
	var room []uint64
	if r.Milli == 1000 {
		room = c.roomFor(r.GPUs)
	}
	// A pool job's tree holds its pool's servers only (the key's static
	// set is within the pool): the others are not rated at all.
	pool := c.poolMask(j)
	if room == nil {
		room, pool = pool, nil
	}
	for i := 0; i < n; i++ {
		if room != nil {
			w := i >> 6
			word := room[w]
			if pool != nil {
				word &= pool[w]
			}
			m := word >> (i & 63)
			if m == 0 {
				i = w<<6 + 63 // the next word
				continue
			}
			i += bits.TrailingZeros64(m)
			if i >= n {
				break
			}
		}
		if s, g, ok := c.leaf(k, i, j, models, r); ok {
			tr.score[i], tr.gpu[i], tr.best[size+i] = s, g, int32(i)
		}
	}
	for x := size - 1; x >= 1; x-- {
		tr.best[x] = tr.pick(tr.best[2*x], tr.best[2*x+1])
	}
	return tr
}

// spareTree is a tree of size leaves over n servers, its arrays an
// earlier cycle's when the Carry kept one of that size.
func (c *cluster) spareTree(size, n int) *rankTree {
	if c.spare != nil {
		l := *c.spare
		for len(l) > 0 {
			tr := l[len(l)-1]
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			if tr.size == size && len(tr.score) == n {
				*c.spare = l
				return tr
			}
		}
		*c.spare = l
	}
	return &rankTree{size: size, best: make([]int32, 2*size), score: make([]float64, n), gpu: make([]int16, n)}
}

// catchUp re-rates the servers touched since the tree last read the log.
func (c *cluster) catchUp(tr *rankTree, j *domain.Job, models []string, r Request) {
	rk := c.rank
	end := rk.base + len(rk.log)
	if tr.cursor == end {
		return
	}
	rk.epoch++
	for _, i := range rk.log[tr.cursor-rk.base:] {
		if rk.stamp[i] == rk.epoch {
			continue
		}
		rk.stamp[i] = rk.epoch
		x := tr.size + i
		s, g, ok := c.leaf(tr.key, i, j, models, r)
		// A leaf left as it was changes no node above it: most logged
		// servers are out of the tree before and after (another pool's,
		// no room for the shape), and walking to the root for each was
		// most of a catch-up (issue 18, eleventh pass). A NaN rating is
		// never equal to itself, so it is stored and the cycle scans.
		if was := tr.best[x] >= 0; was == ok && (!ok || (tr.score[i] == s && tr.gpu[i] == g)) {
			continue
		}
		if ok {
			tr.score[i], tr.gpu[i], tr.best[x] = s, g, int32(i)
		} else {
			tr.best[x] = -1
		}
		for x /= 2; x >= 1; x /= 2 {
			tr.best[x] = tr.pick(tr.best[2*x], tr.best[2*x+1])
		}
	}
	tr.cursor = end
}

// pick is the better of two leaves: the higher rating, then the lower
// index (the scan keeps the first of equal ratings).
func (tr *rankTree) pick(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	case tr.score[b] > tr.score[a] || (tr.score[b] == tr.score[a] && b < a):
		return b
	}
	return a
}

// top is the best leaf not in skip, -1 if none: the root, or a best-first
// walk past the skipped leaves.
func (tr *rankTree) top(skip []int) int {
	root := tr.best[1]
	if root < 0 || !slices.Contains(skip, int(root)) {
		return int(root)
	}
	h := &nodeHeap{tr: tr, nodes: []int{1}}
	for h.Len() > 0 {
		x := heap.Pop(h).(int)
		if x >= tr.size {
			if i := x - tr.size; !slices.Contains(skip, i) {
				return i
			}
			continue
		}
		for _, ch := range []int{2 * x, 2*x + 1} {
			if tr.best[ch] >= 0 {
				heap.Push(h, ch)
			}
		}
	}
	return -1
}

// nodeHeap orders tree nodes by their best leaf, best first.
type nodeHeap struct {
	tr    *rankTree
	nodes []int
}

func (h *nodeHeap) Len() int { return len(h.nodes) }
func (h *nodeHeap) Less(a, b int) bool {
	x, y := h.tr.best[h.nodes[a]], h.tr.best[h.nodes[b]]
	return h.tr.pick(x, y) == x && x != y
}
func (h *nodeHeap) Swap(a, b int) { h.nodes[a], h.nodes[b] = h.nodes[b], h.nodes[a] }
func (h *nodeHeap) Push(x any)    { h.nodes = append(h.nodes, x.(int)) }
func (h *nodeHeap) Pop() any {
	x := h.nodes[len(h.nodes)-1]
	h.nodes = h.nodes[:len(h.nodes)-1]
	return x
}

// tenantIndex lists servers by tenant (keys says under which), kept up to
// date from the ranking's log.
type tenantIndex struct {
	keys   func(v *server, out []string) []string
	on     [][]string // on[i]: the tenants server i is listed under
	by     map[string][]int
	cursor int
	buf    []string
}

func newTenantIndex(n int, keys func(v *server, out []string) []string) *tenantIndex {
	return &tenantIndex{keys: keys, on: make([][]string, n), by: map[string][]int{}}
}

// set lists server i under its tenants now.
func (x *tenantIndex) set(i int, v *server) {
	x.buf = x.keys(v, x.buf[:0])
	if slices.Equal(x.buf, x.on[i]) {
		return
	}
	for _, k := range x.on[i] {
		l := x.by[k]
		if p := slices.Index(l, i); p >= 0 {
			l[p] = l[len(l)-1]
			l = l[:len(l)-1]
		}
		if len(l) == 0 {
			delete(x.by, k)
		} else {
			x.by[k] = l
		}
	}
	x.on[i] = append(x.on[i][:0], x.buf...)
	for _, k := range x.on[i] {
		x.by[k] = append(x.by[k], i)
	}
}

// fill lists every server under its tenants, x empty: as set server by
// server, the servers' lists in one array and the map made for as many
// tenants as there are entries. Set by set, each list its own and the
// map grown as it went, was most of a cycle's first ranking at 100,000
// GPUs (2,000 to 3,000 servers with shares in a burst cycle).
func (x *tenantIndex) fill(servers []*server) {
	var all []string
	ends := make([]int32, len(servers))
	for i, v := range servers {
		// keys reads out as the server's own so far: handed the
		// array's free room, not what the servers before put in it.
		all = append(all, x.keys(v, all[len(all):])...)
		ends[i] = int32(len(all))
	}
	x.by = make(map[string][]int, len(all))
	start := 0
	for i, end := range ends {
		if int(end) == start {
			continue
		}
		// Capped at its end: set's append makes a list its own
		// before it outgrows it.
		x.on[i] = all[start:end:end]
		for _, k := range x.on[i] {
			x.by[k] = append(x.by[k], i)
		}
		start = int(end)
	}
	x.cursor = 0
}

// of is the servers listed under tenant, after reading the log (the
// index's own slice: read before any change).
func (x *tenantIndex) of(rk *ranking, c *cluster, tenant string) []int {
	end := rk.base + len(rk.log)
	for _, i := range rk.log[x.cursor-rk.base:] {
		x.set(i, c.servers[i])
	}
	x.cursor = end
	return x.by[tenant]
}

// rowOf is the score cache's row of shape id, one entry per server.
func (sc *scoring) rowOf(id int) []scoreEntry {
	for id >= len(sc.cache) {
		sc.cache = append(sc.cache, nil)
	}
	if sc.cache[id] == nil {
		if row := sc.spareRow(); row != nil {
			sc.cache[id] = row
		} else {
			sc.cache[id] = make([]scoreEntry, sc.servers)
		}
	}
	return sc.cache[id]
}

// spareRow is an emptied row of a Carry's last cycle, nil if none fits.
func (sc *scoring) spareRow() []scoreEntry {
	if sc.spare == nil {
		return nil
	}
	for l := *sc.spare; len(l) > 0; l = *sc.spare {
		row := l[len(l)-1]
		l[len(l)-1] = nil
		*sc.spare = l[:len(l)-1]
		if len(row) == sc.servers {
			clear(row)
			return row
		}
	}
	return nil
}

// giveRows hands the rows back to the Carry's spares, for its next
// cycle: the cycle is over.
func (sc *scoring) giveRows() {
	if sc.spare == nil {
		return
	}
	for _, row := range sc.cache {
		if row != nil {
			*sc.spare = append(*sc.spare, row)
		}
	}
	clear(sc.cache)
}

// rowIfAny is the score cache's row of shape id if one was made, else nil.
func (sc *scoring) rowIfAny(id int) []scoreEntry {
	if id < len(sc.cache) {
		return sc.cache[id]
	}
	return nil
}

// rateIn is server v's rating for j (request r) and the GPU the scorer
// chose, -2 when j does not fit there; from row (nil: no cache) while v
// has not changed since it was rated.
func (c *cluster) rateIn(row []scoreEntry, v *server, j *domain.Job, r Request) (float64, int) {
	var e *scoreEntry
	if row != nil {
		e = &row[v.idx]
		if e.ok && e.ver == v.ver {
			return e.score, int(e.gpu)
		}
	}
	h := c.hostOf(v, j)
	feasible := r.GPUs == 0
	if r.GPUs > 0 {
		n := 0
		for _, f := range h.Free {
			if f >= r.Milli {
				n++
			}
		}
		feasible = n >= r.GPUs
	}
	score, gpu := 0.0, -2
	if feasible {
		// The scoring's request, not r: handed to an interface, r
		// escaped, one allocation a rating (12,000 a burst cycle at
		// 100,000 GPUs).
		c.sc.req = r
		score, gpu = c.sc.scorer.Score(h, &c.sc.req)
		if r.Share() && (gpu < 0 || gpu >= len(h.Free) || h.Free[gpu] < r.Milli) {
			gpu = firstFit(h.Free, r.Milli)
		}
	}
	if e != nil {
		*e = scoreEntry{ver: v.ver, ok: true, score: score, gpu: int16(gpu)}
	}
	return score, gpu
}
