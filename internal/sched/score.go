package sched

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Placement scoring. A job that fits on one server (whole GPUs on one
// server, a time-sliced share, or CPU and memory only) can be placed by a
// Scorer: every server that may hold it (eligibility, isolation, GPU model,
// free GPUs, CPU and memory) is rated, the highest rating wins, and ties go
// to the earliest server in topology order. Gangs over several servers and
// MIG slices keep the built-in packing (pack, placeMIG).
//
// A snapshot without a Scorer is rated by the JobFabric policy over its
// live jobs' mix (ShapesOf), made on the cycle's first such placement.
// With no jobs to weigh, and for every job no server fits (its reason),
// the built-in path places: fullest servers first (fewest free GPUs, then
// topology order), shares on the fullest GPU the tenant already
// time-slices.

// epochShare: a Placer's JobFabric weights (JobFabric.weigh) are set
// again once jobs have taken or given back 1/epochShare of the cluster's
// GPUs: often enough to follow the cluster as it fills (openb: 130
// times a run), rarely enough that the cached ratings they drop are
// mostly used first.
const epochShare = 100

// Milli is one thousandth of a GPU, the unit scorers see (a capacity unit
// is 1/7000 GPU: 7 units per milli).
const Milli = unit / 1000

// Host is what a scorer sees of one server.
type Host struct {
	Name  string
	Model string
	// Free is each GPU's idle capacity in milli-GPU (1000: wholly free):
	// a GPU with MIG instances counts 0, a time-sliced one what is left of
	// it, and for a share 0 when another tenant time-slices it.
	Free []int
	// CPU and memory: capacity and what is left (capacity 0: not tracked,
	// and the free figure is then the job's own request).
	CPUMilli, CPUFree  int64
	MemoryMiB, MemFree int64
	// Jobs counts the jobs holding GPUs here by kind: key 0 for shares, n
	// for jobs of n whole GPUs.
	Jobs map[int]int
}

// FreeMilli is the idle milli-GPU of the host.
func (h *Host) FreeMilli() int {
	n := 0
	for _, f := range h.Free {
		n += f
	}
	return n
}

// FullyFree counts the wholly free GPUs.
func (h *Host) FullyFree() int {
	n := 0
	for _, f := range h.Free {
		if f == 1000 {
			n++
		}
	}
	return n
}

// Request is a single-server job as scorers see it.
type Request struct {
	// GPUs is how many GPUs it uses (1 for a share, 0 CPU-only); Milli is
	// what it takes of each (1000 for whole GPUs).
	GPUs, Milli         int
	CPUMilli, MemoryMiB int64
}

// Share reports whether the request is a fraction of one GPU.
func (r *Request) Share() bool { return r.GPUs == 1 && r.Milli < 1000 }

// Scorer rates a feasible server for a request; higher is better. For a
// share it also picks the GPU (an index of h.Free with room); whole GPUs
// always take the lowest-indexed free ones, so gpu is ignored for them.
// Scores of one server for one request shape are cached until the server
// changes, unless the scorer implements Uncached. h and r are the
// caller's, reused from one call to the next: a scorer keeps neither.
type Scorer interface {
	Name() string
	Score(h *Host, r *Request) (score float64, gpu int)
}

// Uncached is implemented by scorers whose score is not a function of the
// server and the request alone (Random).
type Uncached interface{ Uncached() }

// scoring is a cluster's scorer and its cache.
type scoring struct {
	scorer Scorer
	// build makes the scorer on first use (the default policy: a cycle
	// that places no single-server job never weighs its workload).
	build  func() Scorer
	cached bool
	// tally: keep jobs (Host.Jobs) up to date; the default policy does
	// not read it, and a cycle's tally was a fifth of building its view.
	tally  bool
	shapes map[scoreKey]int
	// cache is by shape id, then server index: a placement reads one
	// shape's entries for every server in order, so they sit together.
	cache   [][]scoreEntry
	servers int
	// spare is a Carry's rows from the cycle before (rowOf takes them
	// emptied), nil without one.
	spare   *[][]scoreEntry
	host    Host
	req     Request       // the request rateIn hands the scorer, as host its host
	jobs    []map[int]int // by server index; nil without a tally
	scratch []int
	// dyn is the JobFabric scorer of a Placer (epochs): weighed on the
	// snapshot (Snapshot.scoring), then again before the first rating
	// after jobs have taken or given back 1/epochShare of the GPUs (moved
	// counts them; stale: that many have). A cycle's (Schedule) is
	// weighed once, on its snapshot: its decisions must not depend on
	// when it first rates (the scan cache changes that).
	dyn    *JobFabric
	epochs bool
	moved  int
	stale  bool
}

type scoreEntry struct {
	score float64
	ver   uint32
	gpu   int16 // -2: infeasible
	ok    bool  // the entry is valid
}

func newScoring(s Scorer, n int) *scoring {
	_, unc := s.(Uncached)
	return &scoring{scorer: s, cached: !unc, tally: true, shapes: map[scoreKey]int{}, servers: n, jobs: make([]map[int]int, n)}
}

// follow makes a JobFabric scorer's weights follow the cluster's state
// (a Placer's): weighed again each epoch.
func (sc *scoring) follow() {
	if p, ok := sc.scorer.(*JobFabric); ok && len(p.Shapes) > 0 {
		sc.dyn = p
	}
}

// reweigh sets the dynamic scorer's weights from the schedulable servers
// as they are now, and drops the ratings cached with the old ones.
func (c *cluster) reweigh() {
	sc := c.sc
	j := &domain.Job{}
	sc.dyn.weigh(func(yield func(*Host) bool) {
		for _, v := range c.servers {
			if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
				continue
			}
			if !yield(c.hostOf(v, j)) {
				return
			}
		}
	})
	for i := range sc.cache {
		clear(sc.cache[i])
	}
	// The ranked trees hold ratings too: dropped, rebuilt when next asked.
	if c.rank != nil {
		clear(c.rank.trees)
	}
	sc.moved, sc.stale = 0, false
}

// lazyScoring is a scoring whose scorer build makes when first needed
// (nil then: the built-in path places). Its Host.Jobs stay nil.
func lazyScoring(build func() Scorer, n int) *scoring {
	// No jobs: it keeps no tally (a slot per server was 0.1 MB of
	// pointers a cycle at 100,000 GPUs).
	return &scoring{build: build, shapes: map[scoreKey]int{}, servers: n}
}

// active reports whether a scorer places single-server jobs, making it if
// it is made lazily.
func (sc *scoring) active() bool {
	if sc.build != nil {
		sc.scorer, sc.build = sc.build(), nil
		_, unc := sc.scorer.(Uncached)
		sc.cached = !unc
		if sc.epochs {
			sc.follow()
		}
	}
	return sc.scorer != nil
}

// account records j's use of CPU, memory and job kinds on v (sign 1: takes,
// -1: gives back) and marks v changed for the scorers' cache.
func (c *cluster) account(v *server, j *domain.Job, sign int) {
	v.ver++
	if c.sc != nil && c.sc.epochs && c.sc.dyn != nil && !c.cow {
		c.sc.moved += j.GPUs*unit + domain.ShareUnits(j.Share)
		if c.sc.moved*epochShare >= c.total {
			c.sc.stale = true
		}
	}
	if j.CPUMilli != 0 || j.MemoryMiB != 0 {
		v.cpuUsed += int64(sign) * j.CPUMilli
		v.memUsed += int64(sign) * j.MemoryMiB
	}
	if c.sc != nil && c.sc.tally && !c.cow { // what-if views leave the shared tally alone
		k, ok := jobKind(j)
		if !ok {
			return
		}
		m := c.sc.jobs[v.idx]
		if m == nil {
			m = map[int]int{}
			c.sc.jobs[v.idx] = m
		}
		if m[k] += sign; m[k] <= 0 {
			delete(m, k)
		}
	}
}

// jobKind is the Host.Jobs key of a job: 0 for a share, n for n whole GPUs.
func jobKind(j *domain.Job) (int, bool) {
	switch {
	case j.Share > 0:
		return 0, true
	case j.GPUs > 0 && j.MIGProfile == "":
		return j.GPUs, true
	}
	return 0, false
}

// fitsHost reports whether v has the CPU and memory j needs (untracked
// capacity always fits).
func (v *server) fitsHost(j *domain.Job) bool {
	return (j.CPUMilli == 0 || v.cpuCap == 0 || v.cpuUsed+j.CPUMilli <= v.cpuCap) &&
		(j.MemoryMiB == 0 || v.memCap == 0 || v.memUsed+j.MemoryMiB <= v.memCap)
}

// scorable reports whether a scorer places j: one server, whole GPUs, a
// share, or CPU only.
func scorable(j *domain.Job, size int) bool {
	switch {
	case j.MIGProfile != "" || j.MIGCount != 0:
		return false
	case j.Share > 0 || j.CPUOnly():
		return true
	}
	if j.GPUsPerNode > 0 && j.GPUsPerNode != j.GPUs {
		return false
	}
	return j.GPUs <= size
}

// placeCPU puts a CPU-only job on the first eligible server with the CPU
// and memory (the built-in path; a scorer decides otherwise).
func (c *cluster) placeCPU(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	for _, v := range c.servers {
		if c.eligible(v, j, t) && v.fitsHost(j) {
			return []domain.Placement{{Server: v.s.Name, NVLinkDomain: v.domain}}, LevelServer, domain.Reason{}
		}
	}
	return nil, "", domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf("no eligible server has %d milli-CPU and %d MiB of memory free", j.CPUMilli, j.MemoryMiB)}
}

// request is j as scorers see it.
func request(j *domain.Job) Request {
	r := Request{CPUMilli: j.CPUMilli, MemoryMiB: j.MemoryMiB}
	switch {
	case j.Share > 0:
		r.GPUs, r.Milli = 1, domain.ShareUnits(j.Share)/Milli
	case j.GPUs > 0:
		r.GPUs, r.Milli = j.GPUs, 1000
	}
	return r
}

// hostOf fills the scoring host buffer with v as j may use it.
func (c *cluster) hostOf(v *server, j *domain.Job) *Host {
	h := &c.sc.host
	h.Name, h.Model = v.s.Name, v.s.GPUModel
	h.Free = h.Free[:0]
	// Without time-sliced GPUs a GPU not wholly free is not usable: the
	// maps are not asked (two look-ups per busy GPU were half of rating a
	// full server).
	shared := len(v.share) > 0
	for g := range v.free {
		f := 0
		switch {
		case v.free[g]:
			f = 1000
		case shared && v.share[g] > 0 && len(v.mig[g]) == 0 && (j.Share == 0 || v.shareTenant[g] == j.Tenant):
			// A share sees only its tenant's time-sliced GPUs; a job of
			// whole GPUs cannot use any of them, and rates a server by
			// what is left of them to whoever may.
			f = (unit - v.share[g]) / Milli
		}
		h.Free = append(h.Free, f)
	}
	h.CPUMilli, h.MemoryMiB = v.s.CPUMilli, v.s.MemoryMiB
	h.CPUFree, h.MemFree = v.s.CPUMilli-v.cpuUsed, v.s.MemoryMiB-v.memUsed
	if v.s.CPUMilli == 0 {
		h.CPUFree = j.CPUMilli
	}
	if v.s.MemoryMiB == 0 {
		h.MemFree = j.MemoryMiB
	}
	h.Jobs = nil
	if c.sc.jobs != nil {
		h.Jobs = c.sc.jobs[v.idx]
	}
	return h
}

// scoreKey is what a cached rating depends on besides the server.
type scoreKey struct {
	tenant   string
	gpus     int
	share    float64
	cpu, mem int64
	models   string
}

// shapeID numbers the request shapes a cache entry is valid for.
func (sc *scoring) shapeID(j *domain.Job, models []string) int {
	// Only a share's rating depends on its tenant (hostOf).
	key := scoreKey{gpus: j.GPUs, share: j.Share, cpu: j.CPUMilli, mem: j.MemoryMiB}
	if j.Share > 0 {
		key.tenant = j.Tenant
	}
	if len(models) > 0 {
		key.models = strings.Join(models, ",")
	}
	id, ok := sc.shapes[key]
	if !ok {
		id = len(sc.shapes)
		sc.shapes[key] = id
	}
	return id
}

// placeScored places a single-server job where the scorer rates highest
// (ties: topology order). models limits the GPU models (nil: any).
func (c *cluster) placeScored(j *domain.Job, t *domain.Tenant, models []string) ([]domain.Placement, string, domain.Reason) {
	sc := c.sc
	jm := j
	if j.GPUModel != "" || len(j.GPUModels) > 0 {
		cp := *j
		cp.GPUModel, cp.GPUModels = "", nil
		jm = &cp
	}
	if sc.dyn != nil && sc.stale && !c.cow {
		c.reweigh()
	}
	r := request(j)
	var best *server
	var bestGPU int
	// The base cluster keeps the servers ranked per shape (ranked.go).
	if v, gpu, ok := c.ranked(j, jm, t, models, r); ok {
		best, bestGPU = v, gpu
	} else {
		// The score row only where the scan reads it: a share's is its
		// tenant's (shapeID), a row of every server made for each tenant
		// with a share placed in the cycle, and the trees read their own.
		var row []scoreEntry
		if sc.cached && !c.cow {
			row = sc.rowOf(sc.shapeID(j, models))
		}
		best, bestGPU = c.scanScored(j, jm, t, models, r, row)
	}
	if best == nil {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.scoredMiss(j, r)}
	}
	p := domain.Placement{Server: best.s.Name, NVLinkDomain: best.domain}
	switch {
	case r.Share():
		p.GPUs, p.Share = []int{bestGPU}, j.Share
	case r.GPUs > 0:
		p.GPUs = wholeGPUs(best, r.GPUs)
	}
	for _, g := range p.GPUs {
		if l := best.leafOf[g]; l != "" {
			p.Leaves = append(p.Leaves, l)
		}
	}
	return []domain.Placement{p}, LevelServer, domain.Reason{}
}

// scanScored is placeScored's scan of every server with room: the best
// one and the GPU its scorer chose (nil: none fits).
func (c *cluster) scanScored(j, jm *domain.Job, t *domain.Tenant, models []string, r Request, row []scoreEntry) (*server, int) {
	sc := c.sc
	var best *server
	bestScore, bestGPU := 0.0, -1
	// Idle servers alike (model, CPU, memory, GPUs) rate alike: once one
	// was rated, the later ones cannot win the tie, and are not looked at
	// (most servers of a cluster are alike, and idle early on).
	var seen [8]int32
	idle := seen[:0] // the idle signatures rated (sigID)
	// A job of whole GPUs visits only the servers with that many free
	// (the base cluster's free-GPU sets), in the same order as the scan.
	// A job of a pool visits only its pool's servers (poolMask).
	var room []uint64
	if r.Milli == 1000 {
		room = c.roomFor(r.GPUs)
	}
	pool := c.poolMask(j)
	if room == nil {
		room, pool = pool, nil
	}
	for i := 0; i < len(c.servers); i++ {
		if room != nil {
			w := i >> 6
			m := room[w]
			if pool != nil {
				m &= pool[w]
			}
			m >>= i & 63
			if m == 0 {
				i = w<<6 + 63 // the next word
				continue
			}
			i += bits.TrailingZeros64(m)
			if i >= len(c.servers) {
				break
			}
		}
		v := c.servers[i]
		if v.nfree < r.GPUs && r.Milli == 1000 {
			continue
		}
		if len(models) > 0 && !slices.Contains(models, v.model) {
			continue
		}
		sig, isIdle := int32(0), false
		if sc.cached && v.nfree == len(v.free) && v.cpuUsed == 0 && v.memUsed == 0 {
			sig, isIdle = v.sigID, true
			if slices.Contains(idle, sig) {
				continue
			}
		}
		if !v.fitsHost(j) || !c.eligible(v, jm, t) {
			continue
		}
		score, gpu := c.rateIn(row, v, j, r)
		if gpu == -2 {
			continue // infeasible
		}
		if isIdle {
			idle = append(idle, sig)
		}
		if best == nil || score > bestScore {
			best, bestScore, bestGPU = v, score, gpu
		}
	}
	return best, bestGPU
}

// idleSig is what an idle server's rating depends on; servers of equal
// signatures share a sigID (buildCluster), compared instead: comparing the
// signatures, model strings and all, was a fifth of a cycle that fills an
// empty cluster.
type idleSig struct {
	model    string
	cpu, mem int64
	gpus     int
}

// wholeGPUs picks n free GPUs of v: the first aligned or contiguous set
// (rails and NVLink stay aligned), else the lowest-indexed free GPUs.
func wholeGPUs(v *server, n int) []int {
	// indexSets' windows in its order (aligned starts, then the others),
	// tried in place: listing them all, with a map of the starts seen,
	// was a dozen allocations per placement.
	size := len(v.free)
	window := func(start int) bool {
		for g := start; g < start+n; g++ {
			if !v.free[g] {
				return false
			}
		}
		return true
	}
	pick := func(start int) []int {
		set := make([]int, n)
		for i := range set {
			set[i] = start + i
		}
		return set
	}
	if n > 0 {
		for start := 0; start+n <= size; start += n {
			if window(start) {
				return pick(start)
			}
		}
		for start := 0; start+n <= size; start++ {
			if start%n != 0 && window(start) {
				return pick(start)
			}
		}
	}
	out := make([]int, 0, n)
	for g, f := range v.free {
		if f && len(out) < n {
			out = append(out, g)
		}
	}
	return out
}

// firstFit is the lowest-indexed GPU with milli free, -1 if none.
func firstFit(free []int, milli int) int {
	for g, f := range free {
		if f >= milli {
			return g
		}
	}
	return -1
}

func (c *cluster) scoredMiss(j *domain.Job, r Request) string {
	what := fmt.Sprintf("%d free GPUs", r.GPUs)
	switch {
	case r.Share():
		what = fmt.Sprintf("a GPU with %d milli-GPU free", r.Milli)
	case r.GPUs == 0:
		what = "room"
	}
	if j.CPUMilli > 0 || j.MemoryMiB > 0 {
		what += fmt.Sprintf(" and %d milli-CPU, %d MiB of memory", j.CPUMilli, j.MemoryMiB)
	}
	return "no eligible server has " + what + " now"
}
