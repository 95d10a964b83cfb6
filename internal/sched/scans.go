package sched

import (
	"iter"
	mbits "math/bits"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// The base cluster of a cycle answers most jobs of a long queue the same
// way once it is full: no server has the GPUs a job needs, and the reason
// sums the same servers. scanCache keeps what such whole-cluster scans
// found until the cluster changes (any server made writable, any GPU
// flipped: cluster.ver), so a queue of 100,000 jobs costs a scan per
// change, not a scan per job. Only the base cluster caches: a what-if view
// shares servers with the base, which may change under it.
//
// Every cached answer equals the scan it stands in for (Snapshot's
// exhaustive flag turns the cache off; the equivalence test compares).

// scanCache holds the scans of the cluster at version ver.
type scanCache struct {
	ver uint64
	// free holds eligibleFree's sums by class.
	free map[freeKey]freeStats
	// byFree is the servers in bestFit order (nil until asked).
	byFree []*server
	// mig holds migCandidates' counts.
	mig map[migKey]int
}

// migKey is what decides how many servers a MIG job could try.
type migKey struct {
	freeKey
	profile     string
	cpu, memory int64
}

// migCandidates counts the servers placeMIG tries for j: eligible, with
// room for its CPU and memory, and GPUs that have its profile.
func (c *cluster) migCandidates(j *domain.Job, t *domain.Tenant) int {
	sc := c.scans()
	key := migKey{freeKey: freeKey{set: c.statics.of(c, j, t)}, profile: j.MIGProfile, cpu: j.CPUMilli, memory: j.MemoryMiB}
	if t.Isolation == domain.IsolationServer {
		key.tenant = j.Tenant
	}
	if n, ok := sc.mig[key]; ok {
		return n
	}
	n := 0
	for _, v := range c.servers {
		if !c.eligible(v, j, t) || !v.fitsHost(j) {
			continue
		}
		if _, ok := mig.Units(v.s.GPUModel, j.MIGProfile); ok {
			n++
		}
	}
	if sc.mig == nil {
		sc.mig = map[migKey]int{}
	}
	sc.mig[key] = n
	return n
}

// freeKey is what decides which servers a job may use now: its static set
// (model, sites, driver, schedulable), the tenant when server-isolated,
// and the GPUs per server it needs.
type freeKey struct {
	set    *staticSet
	tenant string
	per    int
}

// scans is the cluster's scan cache at its current version, nil for a
// what-if view or when the snapshot asks for exhaustive scans.
func (c *cluster) scans() *scanCache {
	if c.cow || c.exhaustive {
		return nil
	}
	if c.cache == nil || c.cache.ver != c.ver {
		c.cache = &scanCache{ver: c.ver}
	}
	return c.cache
}

// touched notes that server i may change: the version moves, the
// free-GPU histogram recounts i when next asked, and what was found of
// its MIG instances is forgotten.
func (c *cluster) touched(i int) {
	c.ver++
	if c.hist != nil {
		c.hist.dirty = append(c.hist.dirty, i)
	}
	if c.sver != nil {
		c.sver[i]++
	}
	if c.owners != nil {
		c.owners.dirty = append(c.owners.dirty, i)
	}
	if c.sums != nil {
		c.changed = append(c.changed, i)
	}
	if c.mrooms != nil {
		c.mrooms.log = append(c.mrooms.log, i)
	}
	if c.rank != nil && !c.rank.off { // off: no tree is asked again
		c.rank.note(c, i)
	}
}

// migKeyGPU is one GPU's MIG instances asked for one more of a profile.
type migKeyGPU struct {
	server, gpu int
	profile     string
}

// migFull reports whether GPU g of server i was found, since the server
// last changed, to have no room for one more instance of profile; with
// note, it records that it has none. The base cluster only (placeMIG
// asks when its scan cache is on): mig.Place on a GPU full of instances
// was most of a cycle with thousands of MIG jobs on a full cluster.
func (c *cluster) migFull(i, g int, profile string, note bool) bool {
	if c.sver == nil {
		c.sver = make([]uint32, len(c.servers))
		c.migNoRoom = map[migKeyGPU]uint32{}
	}
	k := migKeyGPU{i, g, profile}
	if note {
		c.migNoRoom[k] = c.sver[i] + 1 // +1: the zero value is "never found"
		return true
	}
	v, ok := c.migNoRoom[k]
	return ok && v == c.sver[i]+1
}

// migRooms keeps, per MIG profile asked, the servers with a GPU in MIG
// mode that has room for one more instance of it (mig.Place), a bit per
// server, server by server as the cycle changes them (the log of servers
// touched since). placeMIG's walk of the servers with no free GPU skips
// the others: they could take no instance of the profile, so they could
// not hold the job. In a burst cycle that walk, every GPU in MIG mode of
// hundreds of full servers asked again after each change, was most of a
// MIG placement. The base cluster only.
type migRooms struct {
	log []int
	by  map[string]*migRoomSet
	// held is the servers a server-isolated tenant holds, kept from the
	// same log (heldBy), nil until asked.
	held *heldSet
}

// heldSet is the servers held by a server-isolated tenant (exclusive
// set): a bit per server, each one's tenant, and how many each such
// tenant holds.
type heldSet struct {
	bits []uint64
	of   []string
	n    map[string]int
	at   int // log[:at] is counted
}

// heldByOthers is the set of servers j may not use because a
// server-isolated tenant other than j's holds them, or nil when that
// set is not kept for j: a server-isolated tenant's job (which the
// servers others merely share are closed to as well), or a tenant that
// itself holds a server exclusively (none that is not server-isolated
// does: hold marks a server exclusive for a server-isolated tenant only).
// Eligible is false on every server in it. In a burst cycle placeMIG's
// walk met about 400 such servers per MIG job before one it could use
// (GPU-isolated tenants' jobs past server-isolated tenants' servers with
// MIG room or a few free GPUs): most of a MIG placement.
func (c *cluster) heldByOthers(j *domain.Job, t *domain.Tenant) []uint64 {
	if t.Isolation == domain.IsolationServer {
		return nil
	}
	r := c.mrooms
	if r == nil {
		r = &migRooms{by: map[string]*migRoomSet{}}
		c.mrooms = r
	}
	h := r.held
	if h == nil {
		h = &heldSet{bits: make([]uint64, (len(c.servers)+63)/64), of: make([]string, len(c.servers)), n: map[string]int{}, at: len(r.log)}
		for i, v := range c.servers {
			h.set(i, v.exclusive)
		}
		r.held = h
	}
	for _, i := range r.log[h.at:] {
		h.set(i, c.servers[i].exclusive)
	}
	h.at = len(r.log)
	r.restart()
	if h.n[j.Tenant] > 0 {
		return nil
	}
	return h.bits
}

// set records that server i is held exclusively by tenant ("": none).
func (h *heldSet) set(i int, tenant string) {
	old := h.of[i]
	if old == tenant {
		return
	}
	if old != "" {
		if h.n[old]--; h.n[old] == 0 {
			delete(h.n, old)
		}
	}
	h.of[i] = tenant
	if tenant == "" {
		h.bits[i>>6] &^= 1 << (i & 63)
		return
	}
	h.n[tenant]++
	h.bits[i>>6] |= 1 << (i & 63)
}

// restart empties the log once every set has read it.
func (r *migRooms) restart() {
	for _, o := range r.by {
		if o.at != len(r.log) {
			return
		}
	}
	if r.held != nil {
		if r.held.at != len(r.log) {
			return
		}
		r.held.at = 0
	}
	r.log = r.log[:0]
	for _, o := range r.by {
		o.at = 0
	}
}

type migRoomSet struct {
	bits []uint64
	at   int // log[:at] is counted in bits
}

// migRoom is the set of servers with a GPU in MIG mode with room for one
// more instance of profile, up to date.
func (c *cluster) migRoom(profile string) []uint64 {
	r := c.mrooms
	if r == nil {
		r = &migRooms{by: map[string]*migRoomSet{}}
		c.mrooms = r
	}
	set := r.by[profile]
	if set == nil {
		set = &migRoomSet{bits: make([]uint64, (len(c.servers)+63)/64), at: len(r.log)}
		for i, v := range c.servers {
			if len(v.mig) > 0 && c.serverMIGRoom(v, profile) {
				set.bits[i>>6] |= 1 << (i & 63)
			}
		}
		r.by[profile] = set
	}
	for _, i := range r.log[set.at:] {
		if c.serverMIGRoom(c.servers[i], profile) {
			set.bits[i>>6] |= 1 << (i & 63)
		} else {
			set.bits[i>>6] &^= 1 << (i & 63)
		}
	}
	set.at = len(r.log)
	// Once every set has read the log, it starts again.
	r.restart()
	return set.bits
}

// serverMIGRoom reports whether a GPU of v in MIG mode has room for one
// more instance of profile (mig.Place would place it).
func (c *cluster) serverMIGRoom(v *server, profile string) bool {
	for _, ins := range v.mig {
		if len(ins) == 0 {
			continue
		}
		if _, ok := c.statics.migPlace(v.s.GPUModel, ins, profile); ok {
			return true
		}
	}
	return false
}

// freeHist counts servers by wholly free GPUs, kept up to date server by
// server (a placement changes a few servers; recounting all of them after
// each was most of a cycle on an empty cluster).
type freeHist struct {
	n       []int // n[k]: servers with exactly k free GPUs
	counted []int // counted[i]: server i's free GPUs as counted in n
	dirty   []int // servers that may have changed since
	// room[k] has bit i set when server i has at least k free GPUs
	// (k >= 1), as counted; mig has bit i set when server i has GPUs in
	// MIG mode.
	room [][]uint64
	mig  []uint64
}

// freeHistNow is the histogram, up to date.
func (c *cluster) freeHistNow() *freeHist {
	h := c.hist
	if h == nil {
		size := 0
		for _, v := range c.servers {
			size = max(size, len(v.free))
		}
		h = &freeHist{n: make([]int, size+1), counted: make([]int, len(c.servers)), room: make([][]uint64, size+1), mig: make([]uint64, (len(c.servers)+63)/64)}
		for k := 1; k <= size; k++ {
			h.room[k] = make([]uint64, (len(c.servers)+63)/64)
		}
		for i, v := range c.servers {
			h.n[v.nfree]++
			h.counted[i] = v.nfree
			for k := 1; k <= v.nfree; k++ {
				h.room[k][i>>6] |= 1 << (i & 63)
			}
			if len(v.mig) > 0 {
				h.mig[i>>6] |= 1 << (i & 63)
			}
		}
		c.hist = h
	}
	for _, i := range h.dirty {
		was, now := h.counted[i], c.servers[i].nfree
		h.n[was]--
		h.n[now]++
		h.counted[i] = now
		for k := now + 1; k <= was; k++ {
			h.room[k][i>>6] &^= 1 << (i & 63)
		}
		for k := was + 1; k <= now; k++ {
			h.room[k][i>>6] |= 1 << (i & 63)
		}
		if len(c.servers[i].mig) > 0 {
			h.mig[i>>6] |= 1 << (i & 63)
		} else {
			h.mig[i>>6] &^= 1 << (i & 63)
		}
	}
	h.dirty = h.dirty[:0]
	return h
}

// atLeast counts the servers with at least k wholly free GPUs.
func (c *cluster) atLeast(k int) int {
	h := c.freeHistNow()
	n := 0
	for i := max(k, 0); i < len(h.n); i++ {
		n += h.n[i]
	}
	return n
}

// withRoom yields, in index order, the servers with at least k wholly free
// GPUs on the base cluster (from roomFor's set), every server elsewhere:
// callers still test each server's free GPUs. placeGang's candidate scans
// visited all 12,500 servers of a full cluster for each one-server job of
// a GPU-isolated tenant whose only servers with room are held by
// server-isolated tenants (30 to 600 us a job, hundreds a burst cycle).
//
// A job of a pool visits only its pool's servers (poolMask), in the same
// order: the others are never eligible for it.
func (c *cluster) withRoom(k int, j *domain.Job) iter.Seq[*server] {
	return func(yield func(*server) bool) {
		room, pool := c.roomFor(k), c.poolMask(j)
		if room == nil && pool == nil {
			for _, v := range c.servers {
				if !yield(v) {
					return
				}
			}
			return
		}
		if room == nil {
			room, pool = pool, nil
		}
		for w, m := range room {
			if pool != nil {
				m &= pool[w]
			}
			for m != 0 {
				i := w<<6 + mbits.TrailingZeros64(m)
				m &= m - 1
				if !yield(c.servers[i]) {
					return
				}
			}
		}
	}
}

// roomFor is the set of servers with at least k >= 1 wholly free GPUs, a
// bit per server, for the base cluster (nil for a what-if view, an
// exhaustive snapshot, or k beyond any server): placeScored visits only
// those, in the same order. Read before the cluster changes.
func (c *cluster) roomFor(k int) []uint64 {
	if c.scans() == nil || k < 1 {
		return nil
	}
	h := c.freeHistNow()
	if k >= len(h.room) {
		return nil
	}
	return h.room[k]
}

// aloneStats are freeStats over the servers of a static set that nobody
// holds, with the servers of at least per free GPUs counted by fabric.
type aloneStats struct {
	freeStats
	fabrics map[string]int
}

// aloneFree sums, for the base cluster at its version, the servers of set
// that no tenant holds (no holder, no exclusive tenant): every
// server-isolated tenant may use those, and adds only the servers it is
// alone on.
func (c *cluster) aloneFree(set *staticSet, per int) *aloneStats {
	return c.keptSums(set, per, true)
}

// sumsKey is a class of freeSums: the static set, the GPUs per server,
// and whether only the servers nobody holds count (alone).
type sumsKey struct {
	set   *staticSet
	per   int
	alone bool
}

// freeSums are eligibleFree's sums over one class of servers, kept server
// by server as the servers change (as freeHist is): summing the class
// again after each placement was most of a refused gang's cost. A server
// counts when it is in the static set and nobody holds it exclusively
// (what eligible asks for a tenant that is not server-isolated: only a
// server-isolated tenant is ever a server's exclusive holder), and, when
// alone, nobody holds it at all (aloneFree).
type freeSums struct {
	aloneStats
	key    sumsKey
	cursor int    // the changes read (cluster.changed)
	in     []bool // in[i]: server i counted
	nfree  []int  // nfree[i]: its free GPUs as counted
}

// keptSums is the sums of a class, up to date; most is the largest count
// of servers with per free GPUs in one fabric, as the scan's running
// maximum ends.
func (c *cluster) keptSums(set *staticSet, per int, alone bool) *aloneStats {
	k := sumsKey{set: set, per: per, alone: alone}
	s := c.sums[k]
	if s == nil {
		if c.sums == nil {
			c.sums = map[sumsKey]*freeSums{}
		}
		s = c.newSums(k)
		for i := range c.servers {
			s.count(c, i)
		}
		c.sums[k] = s
	} else {
		if s.cursor == len(c.changed) {
			return &s.aloneStats
		}
		for _, i := range c.changed[s.cursor:] {
			s.uncount(c, i)
			s.count(c, i)
		}
		s.cursor = len(c.changed)
	}
	s.most = 0
	for _, n := range s.fabrics {
		s.most = max(s.most, n)
	}
	return &s.aloneStats
}

// newSums is an empty freeSums of class k, in the arrays of a Carry's
// last cycle when it kept some (count then sets every server's entry):
// two arrays over the servers a class, 0.8 MB a burst cycle at 100,000
// GPUs.
func (c *cluster) newSums(k sumsKey) *freeSums {
	if c.sumsSpare != nil {
		for l := *c.sumsSpare; len(l) > 0; l = *c.sumsSpare {
			s := l[len(l)-1]
			l[len(l)-1] = nil
			*c.sumsSpare = l[:len(l)-1]
			if len(s.in) == len(c.servers) {
				fabrics := s.fabrics
				clear(fabrics)
				*s = freeSums{key: k, cursor: len(c.changed), in: s.in, nfree: s.nfree}
				s.fabrics = fabrics
				return s
			}
		}
	}
	s := &freeSums{key: k, cursor: len(c.changed), in: make([]bool, len(c.servers)), nfree: make([]int, len(c.servers))}
	s.fabrics = map[string]int{}
	return s
}

// giveSums hands the cluster's sums to the Carry's spares for its next
// cycle: the cycle is over.
func (c *cluster) giveSums() {
	if c.sumsSpare == nil {
		return
	}
	for _, s := range c.sums {
		*c.sumsSpare = append(*c.sumsSpare, s)
	}
	clear(c.sums)
}

func (s *freeSums) count(c *cluster, i int) {
	v := c.servers[i]
	in := s.key.set.ok[i] && v.exclusive == "" && (!s.key.alone || len(v.holders) == 0)
	s.in[i], s.nfree[i] = in, v.nfree
	if !in {
		return
	}
	s.eligible++
	s.freeGPUs += v.nfree
	if v.nfree >= s.key.per {
		s.fabrics[v.fabric]++
	}
}

func (s *freeSums) uncount(c *cluster, i int) {
	if !s.in[i] {
		return
	}
	s.eligible--
	s.freeGPUs -= s.nfree[i]
	if s.nfree[i] >= s.key.per {
		s.fabrics[c.servers[i].fabric]--
	}
	s.in[i] = false
}

// isolatedFree is eligibleFree for a server-isolated tenant on the base
// cluster: the servers nobody holds (aloneFree, shared by every tenant)
// and those the tenant may be alone on (ownerIndex), each checked by
// eligible. Every other server fails eligible for the tenant: another
// tenant holds it first, or, held by none, it is another's exclusively.
func (c *cluster) isolatedFree(j *domain.Job, t *domain.Tenant, set *staticSet, per int) freeStats {
	a := c.aloneFree(set, per)
	f := a.freeStats
	var extra map[string]int
	for _, i := range c.ownedBy(j.Tenant) {
		v := c.servers[i]
		if !c.eligible(v, j, t) {
			continue
		}
		f.eligible++
		f.freeGPUs += v.nfree
		if v.nfree >= per {
			if extra == nil {
				extra = map[string]int{}
			}
			extra[v.fabric]++
			f.most = max(f.most, a.fabrics[v.fabric]+extra[v.fabric])
		}
	}
	return f
}

// ownerIndex lists, by server-isolated tenant, the servers only that
// tenant could be alone on: its first holder's, or, with no holder, the
// exclusive tenant's. Kept up to date server by server, as freeHist is.
// Only a server-isolated tenant is ever asked (isolatedFree, ranked), so a
// server whose first holder is not server-isolated (holder.exclusive) is
// indexed under no one: at 100,000 GPUs most held servers, whose runs of
// map operations were most of building the index.
type ownerIndex struct {
	key   []string // key[i]: server i's tenant as indexed ("" none)
	pos   []int    // pos[i]: i's position in by[key[i]]
	by    map[string][]int
	dirty []int
}

// ownerOf is the tenant server v is indexed under.
func ownerOf(v *server) string {
	if len(v.holders) > 0 {
		if !v.holders[0].exclusive {
			return ""
		}
		return v.holders[0].tenant
	}
	return v.exclusive
}

// ownedBy lists the servers indexed under tenant (read before any
// change: the slice is the index's own).
func (c *cluster) ownedBy(tenant string) []int {
	o := c.owners
	if o == nil {
		o = &ownerIndex{key: make([]string, len(c.servers)), pos: make([]int, len(c.servers)), by: map[string][]int{}}
		// add, server by server, with the list of a run of servers
		// indexed under one tenant (a gang's, a tenant's jobs placed
		// together) kept out of the map until the run ends: two map
		// operations a server were most of building the index, once a
		// cycle at 12,500 servers.
		var runKey string
		var run []int
		for i, v := range c.servers {
			k := ownerOf(v)
			o.key[i] = k
			if k == "" {
				continue
			}
			if k != runKey {
				if runKey != "" {
					o.by[runKey] = run
				}
				runKey, run = k, o.by[k]
			}
			o.pos[i] = len(run)
			run = append(run, i)
		}
		if runKey != "" {
			o.by[runKey] = run
		}
		c.owners = o
	}
	for _, i := range o.dirty {
		if k := ownerOf(c.servers[i]); k != o.key[i] {
			o.remove(i)
			o.add(i, k)
		}
	}
	o.dirty = o.dirty[:0]
	return o.by[tenant]
}

func (o *ownerIndex) add(i int, k string) {
	o.key[i] = k
	if k == "" {
		return
	}
	o.pos[i] = len(o.by[k])
	o.by[k] = append(o.by[k], i)
}

func (o *ownerIndex) remove(i int) {
	k := o.key[i]
	if k == "" {
		return
	}
	l := o.by[k]
	last := l[len(l)-1]
	l[o.pos[i]] = last
	o.pos[last] = o.pos[i]
	o.by[k] = l[:len(l)-1]
	o.key[i] = ""
}

// migServers is the servers placeMIG tries, in bestFit order (fewest free
// GPUs first, then topology order). The base cluster yields only those
// with a free GPU or GPUs in MIG mode, from the free-GPU sets, without
// sorting or visiting the others (on a full cluster, nearly all; the sort
// was redone after every placement), and of those with no free GPU only
// the ones in room when room is not nil (migRoom's set), and none of skip
// (nil: none); other views yield bestFit's order.
func (c *cluster) migServers(j *domain.Job, room, skip []uint64) iter.Seq[*server] {
	return func(yield func(*server) bool) {
		if c.scans() == nil || len(c.freeHistNow().room) < 2 {
			for _, v := range c.bestFit(j) {
				if !yield(v) {
					return
				}
			}
			return
		}
		h := c.freeHistNow()
		pool := c.poolMask(j) // a pool job's servers only
		// bits yields the servers of set (minus those of not, if any; of
		// those, only the ones in and, if any) in index order.
		bits := func(set, not, and []uint64) bool {
			for w, m := range set {
				if pool != nil {
					m &= pool[w]
				}
				if skip != nil {
					m &^= skip[w]
				}
				if not != nil {
					m &^= not[w]
				}
				if and != nil {
					m &= and[w]
				}
				for m != 0 {
					i := w<<6 + mbits.TrailingZeros64(m)
					m &= m - 1
					if !yield(c.servers[i]) {
						return false
					}
				}
			}
			return true
		}
		// No free GPU: those in MIG mode.
		if !bits(h.mig, h.room[1], room) {
			return
		}
		for k := 1; k < len(h.room); k++ {
			var next []uint64
			if k+1 < len(h.room) {
				next = h.room[k+1]
			}
			if !bits(h.room[k], next, nil) {
				return
			}
		}
	}
}
