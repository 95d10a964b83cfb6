package sched

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// Packing levels, tightest first.
const (
	LevelServer       = "server"
	LevelNVLinkDomain = "nvlink-domain"
	LevelStripe       = "stripe"
	LevelFabric       = "fabric"
)

// eligible reports whether j may use GPUs of v at all: the GPU model, and
// isolation (a server-isolated tenant shares a server with no one; nobody
// joins a server a server-isolated tenant holds).
func (c *cluster) eligible(v *server, j *domain.Job, t *domain.Tenant) bool {
	if !c.statics.of(c, j, t).ok[v.idx] {
		return false
	}
	if v.exclusive != "" && v.exclusive != j.Tenant {
		return false
	}
	if t.Isolation == domain.IsolationServer {
		for _, h := range v.holders {
			if h.tenant != j.Tenant {
				return false
			}
		}
	}
	return true
}

// statics caches, per cycle, which servers a job may ever use (its model,
// the tenant's sites, its minimum driver, schedulable) by what that depends
// on; the last job asked is remembered, as place asks for every server.
// Views of a cycle share it: none of these change within a cycle.
type statics struct {
	byKey map[staticKey]*staticSet
	// noServer is noServer's answers, by noServerKey (none kept when the
	// cycle is exhaustive).
	noServer map[string]string
	// gangMsg is gangFailure's wordings by what they read (none kept
	// when the cycle is exhaustive).
	gangMsg map[gangMsgKey]string
	// sets is indexSets' answers by server size and GPUs per server.
	sets map[[2]int][][]int
	// migStarts is mig.Place's answers by what they read (migPlace;
	// none kept when the cycle is exhaustive).
	migStarts map[migPlaceKey]int
	// pack is pack's scratch: a Carry's, kept across cycles (all 0
	// between calls), else the cycle's.
	pack       *packScratch
	exhaustive bool
	// pools are the snapshot's server pools; poolIn their membership by
	// server index, worked out when a job first names one (pool).
	pools  map[string]*domain.ServerPool
	poolIn map[string][]bool
	// poolBits is poolIn as a bit per server (poolMask).
	poolBits map[string][]uint64
	lastJ    *domain.Job
	lastT    *domain.Tenant
	last     *staticSet
}

// staticKey is what a job's static set depends on.
type staticKey struct {
	model, minDriver, driver string
	sites                    string // the tenant's, comma-separated
	pool                     string
}

type staticSet struct {
	ok   []bool // by server index
	size int    // GPUs of the largest such server
}

func (m *statics) of(c *cluster, j *domain.Job, t *domain.Tenant) *staticSet {
	if j == m.lastJ && t == m.lastT && m.last != nil {
		return m.last
	}
	// A struct, not a string built per job: place asks once per job and
	// the concatenations were allocations (issue 18, eleventh pass).
	key := staticKey{model: j.GPUModel, minDriver: j.MinDriver, driver: j.Driver, sites: strings.Join(t.Sites, ","), pool: j.Pool}
	set, ok := m.byKey[key]
	if !ok {
		set = &staticSet{ok: make([]bool, len(c.servers))}
		pool := m.pool(c, j.Pool)
		for i, v := range c.servers {
			if v.staticEligible(j, t, c.nodes, pool) {
				set.ok[i] = true
				set.size = max(set.size, len(v.free))
			}
		}
		m.byKey[key] = set
	}
	m.lastJ, m.lastT, m.last = j, t, set
	return set
}

// pool is the membership of server pool name by server index, worked out
// once per cycle; nil when the pool does not exist (or name is "").
func (m *statics) pool(c *cluster, name string) []bool {
	if name == "" {
		return nil
	}
	if in, ok := m.poolIn[name]; ok {
		return in
	}
	var in []bool
	if p := m.pools[name]; p != nil {
		in = make([]bool, len(c.servers))
		for _, s := range p.Servers {
			if i, ok := c.byName[s]; ok && i < len(in) {
				in[i] = true // servers the inventory lacks are never placed on
			}
		}
	}
	if m.poolIn == nil {
		m.poolIn = map[string][]bool{}
	}
	m.poolIn[name] = in
	return in
}

// poolMask is the servers of j's pool, a bit per server index, for the
// scans to visit only those: a job of a pool is never placed elsewhere
// (staticEligible), and what-if views, which have no free-GPU sets,
// visited every server for it (issue 18: at 100,000 GPUs in 8 pools,
// nine in ten). nil when j names no pool, the pool does not exist (every
// server is ineligible: the scans say why), or the cycle is exhaustive
// (the equivalence tests' reference).
func (c *cluster) poolMask(j *domain.Job) []uint64 {
	m := c.statics
	if j.Pool == "" || m.exhaustive {
		return nil
	}
	if b, ok := m.poolBits[j.Pool]; ok {
		return b
	}
	var b []uint64
	if in := m.pool(c, j.Pool); in != nil {
		b = make([]uint64, (len(c.servers)+63)/64)
		for i, ok := range in {
			if ok {
				b[i>>6] |= 1 << (i & 63)
			}
		}
	}
	if m.poolBits == nil {
		m.poolBits = map[string][]uint64{}
	}
	m.poolBits[j.Pool] = b
	return b
}

// poolServers is c's servers of j's pool in index order (poolMask), nil
// when j may be placed on any.
func (c *cluster) poolServers(j *domain.Job) []*server {
	mask := c.poolMask(j)
	if mask == nil {
		return nil
	}
	out := make([]*server, 0, 64)
	for w, m := range mask {
		for m != 0 {
			out = append(out, c.servers[w<<6+bits.TrailingZeros64(m)])
			m &= m - 1
		}
	}
	return out
}

// staticEligible is eligible without who holds the server now. pool is
// the membership of j's pool (statics.pool): a job that names a pool runs
// only on its servers, none when the pool does not exist.
func (v *server) staticEligible(j *domain.Job, t *domain.Tenant, nodes map[string]domain.NodeCondition, pool []bool) bool {
	if j.GPUModel != "" && v.s.GPUModel != j.GPUModel {
		return false
	}
	if j.Pool != "" && (v.idx >= len(pool) || !pool[v.idx]) {
		return false
	}
	if cond, ok := nodes[v.s.Name]; ok && !cond.Schedulable() {
		return false
	}
	if len(t.Sites) > 0 && !slices.Contains(t.Sites, v.site) {
		return false
	}
	if j.MinDriver != "" {
		if cmp, ok := domain.CompareVersions(v.s.Driver, j.MinDriver); !ok || cmp < 0 {
			return false
		}
	}
	if j.Driver != "" {
		if cmp, ok := domain.CompareVersions(v.s.Driver, j.Driver); !ok || cmp != 0 {
			return false
		}
	}
	return true
}

// shape decides how many servers and how many GPUs on each: the job's
// gpusPerNode, else one server when it fits, else the largest divisor of
// gpus that fits a server (fewest servers, equal share on each).
func shape(j *domain.Job, serverSize int) (nodes, perNode int, ok bool) {
	if j.GPUsPerNode > 0 {
		return j.GPUs / j.GPUsPerNode, j.GPUsPerNode, j.GPUsPerNode <= serverSize
	}
	if j.GPUs <= serverSize {
		return 1, j.GPUs, true
	}
	for d := serverSize; d >= 1; d-- {
		if j.GPUs%d == 0 {
			return j.GPUs / d, d, true
		}
	}
	return 0, 0, false
}

// indexSets lists the GPU index sets of size n a server of size size may
// give, in preference order: aligned blocks first (0-3, 4-7), then every
// other contiguous window. Every server of a gang uses the same set, so
// GPU i of each talks on rail i.
func indexSets(size, n int) [][]int {
	var out [][]int
	seen := map[int]bool{}
	add := func(start int) {
		if start < 0 || start+n > size || seen[start] {
			return
		}
		seen[start] = true
		set := make([]int, n)
		for i := range set {
			set[i] = start + i
		}
		out = append(out, set)
	}
	for start := 0; start+n <= size; start += n {
		add(start)
	}
	for start := 0; start+n <= size; start++ {
		add(start)
	}
	return out
}

// indexSets is indexSets(size, n), worked out once per cycle: placeGang
// asks it for every gang tried, and only reads it (what it returns is
// copied into placements).
func (m *statics) indexSets(size, n int) [][]int {
	k := [2]int{size, n}
	if sets, ok := m.sets[k]; ok {
		return sets
	}
	sets := indexSets(size, n)
	if m.sets == nil {
		m.sets = map[[2]int][][]int{}
	}
	m.sets[k] = sets
	return sets
}

// lowestFree is the n lowest-indexed free GPUs of v (it has them).
func lowestFree(v *server, n int) []int {
	out := make([]int, 0, n)
	for g, f := range v.free {
		if f && len(out) < n {
			out = append(out, g)
		}
	}
	return out
}

func hasAll(v *server, set []int) bool {
	for _, g := range set {
		if g >= len(v.free) || !v.free[g] {
			return false
		}
	}
	return true
}

// place finds a placement for j or explains why there is none.
func (c *cluster) place(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	if c.sc != nil && scorable(j, c.largestServer(j, t)) && c.sc.active() && !c.noWholeRoom(j) {
		// The job's models (placeIn hands over one at a time) bound the
		// servers rated: placeScored rates any model when given none.
		if pl, level, r := c.placeScored(j, t, j.Models()); pl != nil {
			return pl, level, r
		}
		// Nothing fits: the built-in path, under the same fit rules,
		// says what is missing (isolation, models, gang shape).
	}
	switch {
	case j.MIGProfile != "":
		return c.placeMIG(j, t)
	case j.Share > 0:
		pl, level, r := c.placeShare(j, t)
		return pl, level, c.poolReason(j, t, "GPUs", pl, r)
	case j.CPUOnly():
		pl, level, r := c.placeCPU(j, t)
		return pl, level, c.poolReason(j, t, "CPUs", pl, r)
	}
	return c.placeGang(j, t)
}

// poolReason is the reason of a share or CPU-only job left unplaced
// (pl nil): when its pool has no server it may ever use, noServer's
// (the pool does not exist, none of its servers is schedulable...) in
// place of its path's own r, which speaks of free capacity.
func (c *cluster) poolReason(j *domain.Job, t *domain.Tenant, what string, pl []domain.Placement, r domain.Reason) domain.Reason {
	if pl == nil && j.Pool != "" && !slices.Contains(c.statics.of(c, j, t).ok, true) {
		r.Message = c.noServer(j, t, what)
	}
	return r
}

// noWholeRoom reports, from the base cluster's free-GPU histogram, that
// j asks for whole GPUs and no server has that many free: placeScored
// passes over every server with fewer (most of a full cluster's queue) and
// would find nothing, at a scan of the cluster per job. What-if views and
// exhaustive snapshots scan.
func (c *cluster) noWholeRoom(j *domain.Job) bool {
	if c.scans() == nil || j.Share > 0 || j.GPUs <= 0 {
		return false // request(j): only then whole GPUs (Milli 1000)
	}
	return c.atLeast(j.GPUs) == 0
}

// bestFit orders the cluster's servers fullest first (fewest wholly free
// GPUs), keeping topology order among equals: fractional work fills GPUs
// already in use before it breaks a whole one. The base cluster sorts once
// per change, not once per job; callers only read the order.
func (c *cluster) bestFit(j *domain.Job) []*server {
	sc := c.scans()
	if sc == nil {
		// A view sorts for each job: a pool job's pool only (poolMask),
		// in the same order among them.
		if in := c.poolServers(j); in != nil {
			return byFree(in)
		}
		return byFree(c.servers)
	}
	if sc.byFree == nil {
		sc.byFree = byFree(c.servers)
	}
	return sc.byFree
}

// byFree is a stable counting sort by free GPUs: servers have few GPUs, so
// it is linear, where a comparison sort of every server for every
// fractional job was a cycle's largest cost.
func byFree(vs []*server) []*server {
	var count [17]int
	big := false
	for _, v := range vs {
		if v.nfree >= len(count)-1 {
			big = true
			break
		}
		count[v.nfree+1]++
	}
	out := make([]*server, len(vs))
	if big {
		copy(out, vs)
		slices.SortStableFunc(out, func(a, b *server) int { return a.nfree - b.nfree })
		return out
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	for _, v := range vs {
		out[count[v.nfree]] = v
		count[v.nfree]++
	}
	return out
}

// placeMIG puts MIGCount instances of the job's profile on one server,
// within the real placement geometry of each GPU (mig.Place): first on GPUs
// already in MIG mode, then on wholly free GPUs (MIG mode is only enabled
// on an idle GPU). Slices of one GPU may serve several GPU-isolated tenants;
// a server-isolated tenant has its servers to itself anyway.
func (c *cluster) placeMIG(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	tried := 0
	sc := c.scans()
	// A server with no free GPU holds the job only on its GPUs in MIG
	// mode, so only if one has room for an instance of the profile; the
	// others are passed over (tried counts nothing on the base cluster:
	// migCandidates does, below).
	var room, skip []uint64
	if sc != nil && j.MIGCount >= 1 {
		room = c.migRoom(j.MIGProfile)
		skip = c.heldByOthers(j, t)
	}
	for v := range c.migServers(j, room, skip) {
		// A server with neither a free GPU nor a GPU in MIG mode has no
		// GPU to try (on a full cluster, nearly all): the base cluster
		// counts what it would have tried only when it has to explain.
		if sc != nil && v.nfree == 0 && len(v.mig) == 0 {
			continue
		}
		if !c.eligible(v, j, t) || !v.fitsHost(j) {
			continue
		}
		if _, ok := mig.Units(v.s.GPUModel, j.MIGProfile); !ok {
			continue
		}
		tried++
		if v.nfree == 0 && len(v.mig) == 0 {
			continue
		}
		var order []int
		for g := range v.free {
			if len(v.mig[g]) > 0 {
				order = append(order, g)
			}
		}
		for g := range v.free {
			if v.free[g] {
				order = append(order, g)
			}
		}
		var got []domain.MIGSlice
		for _, g := range order {
			if sc != nil && len(v.mig[g]) > 0 && c.migFull(v.idx, g, j.MIGProfile, false) {
				continue // its instances have no room for one more (and have not changed)
			}
			layout := append([]mig.Instance(nil), v.mig[g]...)
			for first := true; len(got) < j.MIGCount; first = false {
				start, ok := c.statics.migPlace(v.s.GPUModel, layout, j.MIGProfile)
				if !ok {
					if first && sc != nil && len(v.mig[g]) > 0 {
						c.migFull(v.idx, g, j.MIGProfile, true)
					}
					break
				}
				layout = append(layout, mig.Instance{Profile: j.MIGProfile, Start: start})
				got = append(got, domain.MIGSlice{GPU: g, Profile: j.MIGProfile, Start: start})
			}
		}
		if len(got) < j.MIGCount {
			continue
		}
		var used []int
		for _, sl := range got {
			if !slices.Contains(used, sl.GPU) {
				used = append(used, sl.GPU)
			}
		}
		sort.Ints(used)
		p := domain.Placement{Server: v.s.Name, GPUs: used, MIG: got, NVLinkDomain: v.domain}
		return []domain.Placement{p}, LevelServer, domain.Reason{}
	}
	if sc != nil {
		tried = c.migCandidates(j, t)
	}
	if tried == 0 {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf("no eligible server has GPUs with MIG profile %s (%s)", j.MIGProfile, c.noServer(j, t, "MIG-capable GPUs"))}
	}
	return nil, "", domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf(
		"no eligible server can create %d x %s now within its GPUs' MIG geometry (%d servers with that profile checked)", j.MIGCount, j.MIGProfile, tried)}
}

// migPlaceKey is what mig.Place reads: the GPU's model, its instances in
// order, and the profile asked.
type migPlaceKey struct {
	model, profile string
	n              int
	ins            [7]mig.Instance // a GPU holds at most 7
}

// migPlace is mig.Place's start for one more instance of profile on a GPU
// of model holding ins, ok false where Place errs, kept per cycle by what
// it reads: a burst cycle asks it of the same few layouts thousands of
// times (ranking the starts is a search of what each leaves creatable).
func (m *statics) migPlace(model string, ins []mig.Instance, profile string) (int, bool) {
	var k migPlaceKey
	memo := !m.exhaustive && len(ins) <= len(k.ins)
	if memo {
		k.model, k.profile, k.n = model, profile, len(ins)
		copy(k.ins[:], ins)
		if start, ok := m.migStarts[k]; ok {
			return start, start >= 0
		}
	}
	start, err := mig.Place(mig.Layout{Model: model, Instances: ins}, profile)
	if err != nil {
		start = -1
	}
	if memo {
		if m.migStarts == nil {
			m.migStarts = map[migPlaceKey]int{}
		}
		m.migStarts[k] = start
	}
	return start, start >= 0
}

// placeShare puts a time-sliced share on one GPU: one the tenant already
// shares with room left (fullest first), else a wholly free GPU. Shares
// never mix tenants on a GPU, nor share a GPU with MIG.
func (c *cluster) placeShare(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	need := domain.ShareUnits(j.Share)
	type spot struct {
		v    *server
		g    int
		used int
	}
	var best *spot
	for _, v := range c.bestFit(j) {
		if len(v.share) == 0 || !c.eligible(v, j, t) || !v.fitsHost(j) {
			continue
		}
		for g, used := range v.share {
			if v.shareTenant[g] != j.Tenant || used+need > unit {
				continue
			}
			// Map order is random: ties go to the lowest GPU index.
			if best == nil || best.used < used || (best.v == v && best.used == used && g < best.g) {
				best = &spot{v, g, used}
			}
		}
	}
	if best == nil {
		for _, v := range c.bestFit(j) {
			if v.nfree == 0 || !c.eligible(v, j, t) || !v.fitsHost(j) {
				continue
			}
			if g := slices.Index(v.free, true); g >= 0 {
				best = &spot{v, g, 0}
				break
			}
		}
	}
	if best == nil {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf(
			"no GPU has %s free for a time-sliced share: shares use a free GPU or one this tenant already shares", gpus(need))}
	}
	p := domain.Placement{Server: best.v.s.Name, GPUs: []int{best.g}, Share: j.Share, NVLinkDomain: best.v.domain}
	if l := best.v.leafOf[best.g]; l != "" {
		p.Leaves = []string{l}
	}
	return []domain.Placement{p}, LevelServer, domain.Reason{}
}

// placeGang finds a gang placement of whole GPUs for j or explains why
// there is none.
func (c *cluster) placeGang(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	model := "GPUs"
	if j.GPUModel != "" {
		model = j.GPUModel + " GPUs"
	}
	// The gang's shape comes from the largest server the job could ever
	// use (model, site, driver, schedulable), not from who holds what now.
	size := c.largestServer(j, t)
	if size == 0 {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.noServer(j, t, model)}
	}
	nodes, per, ok := shape(j, size)
	if !ok {
		return nil, "", domain.Reason{Code: ReasonNoInventory, Message: fmt.Sprintf("%d GPUs per node do not fit the largest eligible server (%d %s)", j.GPUsPerNode, size, model)}
	}
	// Fewer servers with per free GPUs than the gang needs, whoever may
	// use them: no candidate can do, and the scans below would only find
	// that out server by server (most jobs of a full cluster's queue).
	if sc := c.scans(); sc != nil && c.atLeast(per) < nodes {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.gangFailure(j, t, nodes, per, model)}
	}
	sets := c.statics.indexSets(size, per)
	best := (*choice)(nil)
	// Only servers with enough free GPUs are candidates; the cheap count
	// checks go before the eligibility rules.
	cands := c.cands[:0]
	if nodes == 1 {
		// One server: the fullest with enough free GPUs (best fit), in
		// topology order among equals, one with an aligned or contiguous
		// set first; no grouping needed, and a server no fuller than the
		// best so far needs no eligibility check. A job on one server
		// talks over its NVLink domain, not the rails, so any free GPUs
		// serve it: requiring a contiguous set kept guaranteed jobs waiting
		// with GPUs free (issue 14: a 4-GPU job waited 156 s with 15 GPUs
		// free, two servers holding 4 of them in no contiguous set).
		var bv *server
		var bset []int
		aligned := false
		for v := range c.withRoom(per, j) {
			if v.nfree < per || (bv != nil && (v.nfree > bv.nfree || (v.nfree == bv.nfree && aligned))) || !c.eligible(v, j, t) || !v.fitsHost(j) {
				continue
			}
			var set []int
			for _, s := range sets {
				if hasAll(v, s) {
					set = s
					break
				}
			}
			if set != nil {
				bv, bset, aligned = v, set, true
			} else if bv == nil || v.nfree < bv.nfree {
				bv, bset, aligned = v, nil, false
			}
		}
		if bv != nil && bset == nil {
			bset = lowestFree(bv, per)
		}
		if bv != nil {
			best = &choice{servers: []*server{bv}, level: LevelServer, set: bset}
		}
	}
	if nodes > 1 {
		for v := range c.withRoom(per, j) {
			if v.nfree >= per && c.eligible(v, j, t) && v.fitsHost(j) {
				cands = append(cands, v)
			}
		}
	}
	c.cands = cands // reused by the next call: nothing returned aliases it
	if best == nil && len(cands) == 0 {
		if c.cow {
			return nil, "", domain.Reason{Code: ReasonCapacity} // what-if views need no explanation
		}
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.gangFailure(j, t, nodes, per, model)}
	}
	for _, set := range sets {
		if nodes == 1 {
			break
		}
		fit := c.fit[:0]
		for _, v := range cands {
			if v.nfree >= per && hasAll(v, set) {
				fit = append(fit, v)
			}
		}
		c.fit = fit // pack copies what it keeps
		if c.statics.pack == nil {
			c.statics.pack = &packScratch{}
		}
		if ch := pack(fit, nodes, per, c.statics.pack); ch != nil && (best == nil || ch.better(best)) {
			ch.set = set
			best = ch
		}
	}
	if best == nil {
		if c.cow {
			return nil, "", domain.Reason{Code: ReasonCapacity}
		}
		// Some candidates were eligible: the cluster is not empty of them.
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.gangFailure(j, t, nodes, per, model)}
	}
	if req := j.Topology; req != nil && req.Required && best.rank > maxRank(req.Level) {
		return nil, "", domain.Reason{Code: ReasonTopology, Message: fmt.Sprintf(
			"requires one %s; the tightest placement available now spans a %s (%d servers x %d %s)", req.Level, best.level, nodes, per, model)}
	}
	out := make([]domain.Placement, len(best.servers))
	for i, v := range best.servers {
		out[i] = domain.Placement{Server: v.s.Name, GPUs: append([]int(nil), best.set...), NVLinkDomain: v.domain}
		for _, g := range best.set {
			if l := v.leafOf[g]; l != "" {
				out[i].Leaves = append(out[i].Leaves, l)
			}
		}
	}
	return out, best.level, domain.Reason{}
}

// largestServer is the most GPUs a server the job may ever use has: its
// model, the tenant's sites, the job's minimum driver, and schedulable.
func (c *cluster) largestServer(j *domain.Job, t *domain.Tenant) int {
	return c.statics.of(c, j, t).size
}

// maxRank is the loosest packing rank a required topology level accepts
// (0 server, 1 NVLink domain, 2 stripe, 3 fabric). A leaf in a
// rail-optimized fabric serves one rail of one stripe, so a gang under one
// leaf per rail is a gang within one stripe.
func maxRank(level string) int {
	switch level {
	case domain.TopologyNVLinkDomain:
		return 1
	case domain.TopologyLeaf, domain.TopologyStripe:
		return 2
	}
	return 3
}

type choice struct {
	servers []*server
	level   string
	rank    int // lower is tighter
	set     []int
}

// better: a tighter level, then fewer spare GPUs left on the chosen servers
// (best fit keeps whole servers whole); ties keep the earlier, aligned set.
func (c *choice) better(o *choice) bool {
	if c.rank != o.rank {
		return c.rank < o.rank
	}
	return c.spare() < o.spare()
}

func (c *choice) spare() int {
	n := 0
	for _, v := range c.servers {
		n += v.nfree
	}
	return n
}

// pack picks nodes servers among fit, in the tightest group that holds
// them: one server, one NVLink domain, one stripe, one fabric. Within a
// level it takes the group that fits most snugly (fewest spare candidates),
// and within the group the servers with the fewest free GPUs (best fit), so
// the largest free blocks stay whole. scratch counts servers by group ID
// (NewStatic numbers the groups from 1), all 0 before and after: counted
// in a map, the look-ups were most of pack's cost, once per gang tried.
func pack(fit []*server, nodes, per int, scratch *packScratch) *choice {
	if len(fit) < nodes {
		return nil
	}
	sorted := byFree(fit)
	if nodes == 1 {
		return &choice{servers: sorted[:1], level: LevelServer}
	}
	levels := []struct {
		name string
		key  func(*server) int
	}{
		{LevelNVLinkDomain, func(v *server) int { return v.domainID }},
		{LevelStripe, func(v *server) int { return v.stripeID }},
		{LevelFabric, func(v *server) int { return v.fabricID }},
	}
	count := scratch.count
	for rank, lv := range levels {
		keys := scratch.keys[:0] // in order of first appearance
		for _, v := range sorted {
			k := lv.key(v)
			if k >= len(count) {
				count = append(count, make([]int32, k+1-len(count))...)
			}
			if count[k] == 0 {
				keys = append(keys, k)
			}
			count[k]++
		}
		bestKey, bestN := 0, 0
		for _, k := range keys {
			if n := int(count[k]); n >= nodes && (bestN == 0 || n < bestN) {
				bestKey, bestN = k, n
			}
		}
		for _, k := range keys {
			count[k] = 0
		}
		scratch.count, scratch.keys = count, keys
		if bestN == 0 {
			continue
		}
		g := make([]*server, 0, bestN)
		for _, v := range sorted {
			if lv.key(v) == bestKey {
				g = append(g, v)
			}
		}
		if rank > 0 {
			g = fewestSubgroups(g, levels[rank-1].key)
		}
		return &choice{servers: g[:nodes], level: lv.name, rank: rank + 1}
	}
	return nil
}

// packScratch is pack's: count by group ID, all 0 between calls, and the
// groups met, in order (made per gang tried, about 0.4 MB a burst cycle
// at 100,000 GPUs).
type packScratch struct {
	count []int32
	keys  []int
}

// fewestSubgroups reorders servers so that the largest subgroups (by key)
// come first: taking from them spans the fewest NVLink domains or stripes.
func fewestSubgroups(g []*server, key func(*server) int) []*server {
	count := map[int]int{}
	first := map[int]int{}
	for i, v := range g {
		k := key(v)
		if _, ok := first[k]; !ok {
			first[k] = i
		}
		count[k]++
	}
	type keyed struct {
		v            *server
		count, first int
	}
	ks := make([]keyed, len(g))
	for i, v := range g {
		k := key(v)
		ks[i] = keyed{v, count[k], first[k]}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return a.first - b.first
	})
	out := make([]*server, len(g))
	for i := range ks {
		out[i] = ks[i].v
	}
	return out
}

// gangFailure explains why no gang of nodes servers x per GPUs fits j
// now: no eligible server at all (noServer), or what the best placement
// available now could hold, so a user sees how far the request is from
// fitting.
func (c *cluster) gangFailure(j *domain.Job, t *domain.Tenant, nodes, per int, model string) string {
	f := c.eligibleFree(j, t, per)
	if f.eligible == 0 {
		return c.noServer(j, t, model)
	}
	if c.statics.exhaustive {
		return gangMessage(nodes, per, model, f) // the equivalence tests' reference
	}
	// The wording is a function of its five inputs alone, and thousands
	// of blocked gangs a cycle ask it with the same ones (formatting it
	// was half of a refused gang's cost): kept per cycle by those inputs.
	key := gangMsgKey{nodes: nodes, per: per, most: f.most, free: f.freeGPUs, model: model}
	if msg, ok := c.statics.gangMsg[key]; ok {
		return msg
	}
	msg := gangMessage(nodes, per, model, f)
	if c.statics.gangMsg == nil {
		c.statics.gangMsg = map[gangMsgKey]string{}
	}
	c.statics.gangMsg[key] = msg
	return msg
}

// gangMsgKey is everything gangMessage reads.
type gangMsgKey struct {
	nodes, per, most, free int
	model                  string
}

// gangMessage is gangFailure's wording when some server is eligible.
func gangMessage(nodes, per int, model string, f freeStats) string {
	return fmt.Sprintf("needs %d servers with %d free %s each (rail-aligned) in one fabric; %d servers have that now (%d free %s on eligible servers in all)",
		nodes, per, model, f.most, f.freeGPUs, model)
}

// freeStats sums the servers j may use now: how many, their free GPUs,
// and the most of them with per free GPUs in one fabric.
type freeStats struct {
	eligible, freeGPUs, most int
}

// eligibleFree computes freeStats. The base cluster keeps them for j's
// class: the static set (model, sites, driver) and, for a server-isolated
// tenant, the tenant (which servers others hold decides its eligibility),
// in its scan cache; any other tenant is eligible on exactly the servers
// no server-isolated tenant holds, whose sums are kept server by server
// (keptSums).
func (c *cluster) eligibleFree(j *domain.Job, t *domain.Tenant, per int) freeStats {
	if sc := c.scans(); sc != nil {
		key := freeKey{set: c.statics.of(c, j, t), per: per}
		if t.Isolation != domain.IsolationServer {
			return c.keptSums(key.set, per, false).freeStats
		}
		key.tenant = j.Tenant
		if f, ok := sc.free[key]; ok {
			return f
		}
		f := c.isolatedFree(j, t, key.set, per)
		if sc.free == nil {
			sc.free = map[freeKey]freeStats{}
		}
		sc.free[key] = f
		return f
	}
	var f freeStats
	var fabrics map[string]int
	for _, v := range c.servers {
		if !c.eligible(v, j, t) {
			continue
		}
		f.eligible++
		f.freeGPUs += v.nfree
		if v.nfree >= per {
			if fabrics == nil {
				fabrics = map[string]int{}
			}
			fabrics[v.fabric]++
			f.most = max(f.most, fabrics[v.fabric])
		}
	}
	return f
}

// noServer explains why no server is eligible at all, naming the first
// filter that removes the last candidates.
//
// It reads only what does not change within a cycle (the servers'
// models, sites and drivers, node conditions), so its answer is kept per
// cycle by what it depends on: a full cluster's queue asks it for
// thousands of server-isolated tenants' gangs, a scan of every server each.
func (c *cluster) noServer(j *domain.Job, t *domain.Tenant, model string) string {
	if c.statics.exhaustive {
		return c.noServerScan(j, t, model) // the equivalence tests' reference
	}
	key := noServerKey(j, t, model)
	if msg, ok := c.statics.noServer[key]; ok {
		return msg
	}
	msg := c.noServerScan(j, t, model)
	if c.statics.noServer == nil {
		c.statics.noServer = map[string]string{}
	}
	c.statics.noServer[key] = msg
	return msg
}

// noServerKey is what noServer's answer depends on, each part
// length-prefixed (no two inputs share a key).
func noServerKey(j *domain.Job, t *domain.Tenant, model string) string {
	b := make([]byte, 0, 64)
	for _, f := range append([]string{j.GPUModel, j.MinDriver, j.Driver, model, string(t.Isolation), j.Pool}, t.Sites...) {
		b = strconv.AppendInt(b, int64(len(f)), 10)
		b = append(b, ':')
		b = append(b, f...)
	}
	return string(b)
}

// noServerScan is noServer, worked out from every server.
func (c *cluster) noServerScan(j *domain.Job, t *domain.Tenant, model string) string {
	var inPool, withModel, schedulable, inSite, withDriver int
	pool, of := c.statics.pool(c, j.Pool), ""
	if j.Pool != "" {
		if pool == nil {
			return fmt.Sprintf("pool %s does not exist (its runtime or an admin deleted it): the job waits until it does", j.Pool)
		}
		of = " of pool " + j.Pool
	}
	for _, v := range c.servers {
		if j.Pool != "" && !pool[v.idx] {
			continue
		}
		inPool++
		if j.GPUModel != "" && v.s.GPUModel != j.GPUModel {
			continue
		}
		withModel++
		if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
			continue
		}
		schedulable++
		if len(t.Sites) > 0 && !slices.Contains(t.Sites, v.site) {
			continue
		}
		inSite++
		if j.MinDriver != "" {
			if cmp, ok := domain.CompareVersions(v.s.Driver, j.MinDriver); !ok || cmp < 0 {
				continue
			}
		}
		if j.Driver != "" {
			if cmp, ok := domain.CompareVersions(v.s.Driver, j.Driver); !ok || cmp != 0 {
				continue
			}
		}
		withDriver++
	}
	switch {
	case inPool == 0:
		return fmt.Sprintf("no server of pool %s is in the inventory", j.Pool)
	case withModel == 0:
		return fmt.Sprintf("no server%s has %s", of, model)
	case schedulable == 0:
		return fmt.Sprintf("every server%s with %s is cordoned, draining or unhealthy", of, model)
	case inSite == 0:
		return fmt.Sprintf("no schedulable server%s with %s is in the tenant's sites %v", of, model, t.Sites)
	case withDriver == 0:
		if j.Driver != "" {
			return fmt.Sprintf("no schedulable server%s with %s has driver %s (exactly)", of, model, j.Driver)
		}
		return fmt.Sprintf("no schedulable server%s with %s has driver %s or newer", of, model, j.MinDriver)
	}
	return fmt.Sprintf("no server%s with %s is free of other tenants (isolation %s)", of, model, t.Isolation)
}
