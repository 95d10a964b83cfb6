package sched

import (
	"cmp"
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Shape is a kind of job of a workload and how often it arrives: the
// "typical pods" of fragmentation gradient descent.
type Shape struct {
	CPUMilli  int64
	MemoryMiB int64
	// GPUs and Milli: GPUs used and milli-GPU of each (0, 0: CPU only).
	GPUs, Milli int
	// Models it may run on (empty: any).
	Models []string
	// Freq is its share of arrivals; the shapes of a workload sum to 1.
	Freq float64
}

// fits reports whether shape s can use a server of model with free GPUs.
func (s *Shape) accessible(model string) bool {
	if len(s.Models) == 0 {
		return true
	}
	for _, m := range s.Models {
		if m == model {
			return true
		}
	}
	return false
}

// ParseModels splits an "A|B" GPU model list (empty entries ignored).
func ParseModels(spec string) []string {
	var out []string
	for _, m := range strings.Split(spec, "|") {
		if m != "" {
			out = append(out, m)
		}
	}
	return out
}

// FGD is fragmentation gradient descent (Weng et al., USENIX ATC 2023):
// a server's fragmentation is, over the workload's shapes weighted by
// frequency, the idle GPU capacity that shape could not use there (all of
// it when the shape does not fit the server's CPU or GPUs, or is CPU-only;
// else the GPUs too small for it). A placement is rated
// int(100 x sigmoid((frag before - frag after) / 1000)); a share takes the
// GPU whose use leaves the server least fragmented (first index on ties).
// Memory is ignored, as in the paper.
type FGD struct {
	Shapes []Shape
	set    *shapeSet // Shapes indexed, on first use
}

// Name implements Scorer.
func (*FGD) Name() string { return "fgd" }

// shapeSet is a workload's shapes with the distinct per-GPU sizes they
// ask for: a server's GPUs are counted once per size, not once per shape
// (a trace has up to 300 shapes and about 20 sizes).
type shapeSet struct {
	shapes []Shape
	milli  []int // distinct Milli > 0
	slot   []int // per shape: its index in milli, -1 for CPU-only
	// models numbers the GPU models shapes name; allow is per shape the
	// set of them it may use (bit i: model i; 0 with no Models: any).
	models map[string]int
	allow  []uint64
}

// access is the bit of a server's model in allow (0: a model no shape
// names, or beyond the 64 a mask holds: accessible then says).
func (set *shapeSet) access(model string) uint64 {
	if i, ok := set.models[model]; ok && i < 64 {
		return 1 << i
	}
	return 0
}

// accessible reports whether shape i may use a server whose model has
// bit (access).
func (set *shapeSet) accessible(i int, bit uint64, model string) bool {
	switch s := &set.shapes[i]; {
	case len(s.Models) == 0:
		return true
	case bit != 0:
		return set.allow[i]&bit != 0
	default:
		return s.accessible(model)
	}
}

func newShapeSet(shapes []Shape) *shapeSet {
	set := &shapeSet{shapes: shapes, slot: make([]int, len(shapes)), models: map[string]int{}, allow: make([]uint64, len(shapes))}
	for i, s := range shapes {
		set.slot[i] = -1
		for _, m := range s.Models {
			k, ok := set.models[m]
			if !ok {
				k = len(set.models)
				set.models[m] = k
			}
			if k < 64 {
				set.allow[i] |= 1 << k
			}
		}
		if s.Milli == 0 {
			continue
		}
		k := slices.Index(set.milli, s.Milli)
		if k < 0 {
			k = len(set.milli)
			set.milli = append(set.milli, s.Milli)
		}
		set.slot[i] = k
	}
	return set
}

// gpuFit is how a server's GPUs serve one per-GPU size: GPUs that hold
// it, idle capacity of those that do not, copies that fit in all.
type gpuFit struct{ n, small, copies int }

// fitTable fills buf with the server's gpuFit per size of the set.
func (set *shapeSet) fitTable(free []int, buf []gpuFit) []gpuFit {
	buf = buf[:0]
	for _, m := range set.milli {
		var g gpuFit
		for _, f := range free {
			if f >= m {
				g.n++
				g.copies += f / m
			} else {
				g.small += f
			}
		}
		buf = append(buf, g)
	}
	return buf
}

// frag is the server's fragmentation with free GPUs and cpuFree CPU left;
// memory counts only when mem is set (JobFabric).
func frag(set *shapeSet, model string, free []int, cpuTracked bool, cpuFree int64, memTracked bool, memFree int64) float64 {
	total := 0
	for _, f := range free {
		total += f
	}
	if total == 0 {
		return 0
	}
	var tb [32]gpuFit
	fits := set.fitTable(free, tb[:0])
	bit := set.access(model)
	// The amounts are summed per kind of fit, then the kinds in order, as
	// the paper's simulator does: a rating is truncated to an integer, so
	// a difference in the last bit of a sum (a placement that changes
	// nothing rated 49 instead of 50) changes where pods go.
	var kinds [fragKinds]float64
	for i := range set.shapes {
		s := &set.shapes[i]
		amount, kind := total, fragLackBoth
		res := (!cpuTracked || cpuFree >= s.CPUMilli) && (!memTracked || memFree >= s.MemoryMiB)
		switch {
		case s.Milli == 0 && res:
			kind = fragCPUOnlyFits
		case s.Milli == 0:
			kind = fragCPUOnlyLacks
		case !set.accessible(i, bit, model):
			kind = fragNoAccess
		default:
			g := fits[set.slot[i]]
			switch ok := g.n >= s.GPUs; {
			case ok && res:
				kinds[fragLackGPU] += s.Freq * float64(g.small)
				amount, kind = total-g.small, fragSatisfied
			case ok:
				kind = fragLackCPU
			case res:
				kind = fragLackGPU
			}
		}
		kinds[kind] += s.Freq * float64(amount)
	}
	var out float64
	for k, v := range kinds {
		if k != fragSatisfied {
			out += v
		}
	}
	return out
}

// Kinds of fit of a shape on a server, in the order the paper's simulator
// adds them up: GPUs and CPU both short, GPUs short, fits (its GPUs too
// small for it are still fragmented), CPU (or memory) short, CPU-only
// shape fits, CPU-only shape does not, GPU model refused.
const (
	fragLackBoth = iota
	fragLackGPU
	fragSatisfied
	fragLackCPU
	fragCPUOnlyFits
	fragCPUOnlyLacks
	fragNoAccess
	fragKinds
)

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// after is the free GPU list once r is placed on gpu (a share) or on the
// least-idle GPUs that hold it (whole GPUs), written into buf.
func after(buf, free []int, r *Request, gpu int) []int {
	buf = append(buf[:0], free...)
	switch {
	case r.GPUs == 0:
	case gpu >= 0:
		buf[gpu] -= r.Milli
	default:
		need := r.GPUs
		for need > 0 {
			best := -1
			for g, f := range buf {
				if f >= r.Milli && (best < 0 || f < buf[best]) {
					best = g
				}
			}
			if best < 0 {
				break
			}
			buf[best] -= r.Milli
			need--
		}
	}
	return buf
}

// Score implements Scorer.
func (f *FGD) Score(h *Host, r *Request) (float64, int) {
	if f.set == nil || len(f.set.shapes) != len(f.Shapes) {
		f.set = newShapeSet(f.Shapes)
	}
	tracked := h.CPUMilli > 0
	before := frag(f.set, h.Model, h.Free, tracked, h.CPUFree, false, 0)
	var buf [16]int
	if r.Share() {
		score, gpu := int64(0), -1
		for g, fr := range h.Free {
			if fr < r.Milli {
				continue
			}
			a := frag(f.set, h.Model, after(buf[:0], h.Free, r, g), tracked, h.CPUFree-r.CPUMilli, false, 0)
			s := int64(sigmoid((before-a)/1000) * 100)
			if gpu < 0 || s > score {
				score, gpu = s, g
			}
		}
		return float64(score), gpu
	}
	a := frag(f.set, h.Model, after(buf[:0], h.Free, r, -1), tracked, h.CPUFree-r.CPUMilli, false, 0)
	return float64(int64(sigmoid((before-a)/1000) * 100)), -1
}

// JobFabric is jobfabric's placement policy, the scheduler's default. With
// no workload it is best fit: the server left with the least idle GPU
// capacity (then CPU), a share on the fullest GPU that holds it. Given the
// workload's shapes (ShapesOf: every kind of job, with its memory; FGD
// keeps the most frequent ones covering 95 % of pods, and so never sees
// the rare large pods that only a few servers hold) it rates a placement
// as FGD does, but weighs each shape by how often it arrives and how little
// of the cluster can still take it (weigh; FGD: how often it arrives),
// counts a shape as fitting only where its memory fits too (FGD ignores
// memory), and breaks FGD's many ties (its rating has 100 steps) by keeping idle servers whole, then by preferring smaller servers, then
// by how much of the server's idle GPU capacity copies of the shapes could
// still use once the placement is made, counting CPU and memory: FGD asks
// only whether one copy fits, so a server whose memory or CPU runs out
// first strands GPUs it calls usable. For the same reason a CPU-only job,
// which can spoil only the CPU and memory idle GPUs need, is rated by that
// measure (copies) rather than FGD's.
type JobFabric struct {
	Shapes []Shape
	set    *shapeSet
	// rated is set with the weights of the rating (weigh); nil until
	// weighed: the frequencies.
	rated  *shapeSet
	usable []float64
	// memo is Score's answers by everything they read (memoKey), for
	// the weights of rated: a cycle rates thousands of servers in a few
	// dozen distinct states (an idle server, one with a 4-GPU job...),
	// and a rating was a sixth of placing a job. weigh drops it.
	memo map[memoKey]memoScore
}

// memoKey is everything a JobFabric rating reads of the host and the
// request (not the host's name nor its jobs). Hosts of more than
// len(free) GPUs are rated afresh.
type memoKey struct {
	model                              string
	n                                  int8
	free                               [16]int16
	cpuMilli, memMiB, cpuFree, memFree int64
	req                                Request
}

type memoScore struct {
	score float64
	gpu   int
}

// maxMemo bounds the memo of a scorer never weighed again (a Placer's
// between epochs): past it, it starts over.
const maxMemo = 1 << 16

// memoKeyOf is h and r's key, false when h does not fit one.
func memoKeyOf(h *Host, r *Request) (memoKey, bool) {
	k := memoKey{model: h.Model, n: int8(len(h.Free)), cpuMilli: h.CPUMilli, memMiB: h.MemoryMiB,
		cpuFree: h.CPUFree, memFree: h.MemFree, req: *r}
	if len(h.Free) > len(k.free) {
		return k, false
	}
	for g, f := range h.Free {
		if f != int(int16(f)) {
			return k, false
		}
		k.free[g] = int16(f)
	}
	return k, true
}

// NewJobFabric is the default policy for a workload (nil: best fit).
func NewJobFabric(shapes []Shape) *JobFabric {
	return &JobFabric{Shapes: shapes, set: newShapeSet(shapes)}
}

// Name implements Scorer.
func (*JobFabric) Name() string { return "jobfabric" }

// Score implements Scorer.
func (p *JobFabric) Score(h *Host, r *Request) (float64, int) {
	if len(p.Shapes) == 0 {
		return p.score(h, r)
	}
	k, ok := memoKeyOf(h, r)
	if !ok {
		return p.score(h, r)
	}
	if m, hit := p.memo[k]; hit {
		return m.score, m.gpu
	}
	score, gpu := p.score(h, r)
	if p.memo == nil || len(p.memo) >= maxMemo {
		p.memo = make(map[memoKey]memoScore, 256)
	}
	p.memo[k] = memoScore{score, gpu}
	return score, gpu
}

// score is Score worked out.
func (p *JobFabric) score(h *Host, r *Request) (float64, int) {
	var buf [16]int
	if len(p.Shapes) == 0 {
		// Best fit: least idle GPU left, then least CPU left.
		gpu := bestGPU(h.Free, r.Milli)
		left := h.FreeMilli() - r.GPUs*r.Milli
		return -float64(left) - float64(h.CPUFree-r.CPUMilli)/maxSpecCPU, gpu
	}
	cpuT, memT := h.CPUMilli > 0, h.MemoryMiB > 0
	rs := p.set
	if p.rated != nil {
		rs = p.rated
	}
	// A CPU-only job takes no GPU: all it can spoil is the CPU and memory
	// the server's idle GPUs need, and FGD's measure asks only whether one
	// copy of a shape still fits, so it sees nothing until the last copy
	// is gone (a 128-CPU server with 8 idle GPUs and 20 CPUs left "fits"
	// a 1-GPU job of 16 CPUs, and 7 of its GPUs are stranded). Where CPU
	// runs out before GPUs (openb cpu235/cpu300: CPU-only jobs filled the
	// 128-CPU servers the rating had kept idle, stranding their GPUs) that
	// loses GPU work. Such a job is rated by what copies of the shapes can
	// no longer use (fragCap), with the same weights.
	cpuOnly := r.GPUs == 0
	measures := func(free []int, cpuFree, memFree int64) (rated, capacity float64) {
		if cpuOnly {
			// One pass gives both: only the weights differ.
			capacity, rated = fragCaps(p.set, rs, h.Model, free, cpuT, cpuFree, memT, memFree)
			return rated, capacity
		}
		return frag(rs, h.Model, free, cpuT, cpuFree, memT, memFree), fragCap(p.set, h.Model, free, cpuT, cpuFree, memT, memFree)
	}
	fgdBefore, capBefore := measures(h.Free, h.CPUFree, h.MemFree)
	// Ties on the rating go, in this order, to a placement that leaves a
	// wholly idle server whole (only an idle server takes the largest
	// gangs), then to the smaller server (large CPU, memory and GPU counts
	// are what the largest pods need and only big servers have), then to
	// the least capacity stranded. Without the first two the last one
	// prefers the biggest servers, where CPU and memory never run out,
	// and splits every one of them early: 8-GPU pods were turned away from
	// 15 % of arrived demand on openb. The weights keep the order
	// lexicographic: 0.4 > 0.2 + 0.016 and 0.4 + 0.2 + 0.016 < 1.
	// The rules hold where shapes name GPU models too. Before the rating
	// weighed scarcity only the first did there: the small servers are
	// often the named models' (openb: P100, V100 and T4), and preferring
	// them spent what the constrained pods need (gpuspec10/25, seeds
	// 42-46: mean over columns 0..130 -0.27/-0.17 points against FGD
	// with the size rule, +0.06/-0.01 without). The weights now count
	// what those pods lose (with them, all three rules: +1.13/+1.39;
	// the first only: +1.11/+1.35).
	keep := 0.4
	if h.FullyFree() == len(h.Free) && r.GPUs*r.Milli < len(h.Free)*1000 {
		keep = 0
	}
	size := min(1, 0.5*float64(h.CPUMilli)/maxSpecCPU+0.5*float64(len(h.Free)*1000)/maxSpecGPU)
	smaller := 0.2 * (1 - size)
	rate := func(free []int) float64 {
		fgd, capacity := measures(free, h.CPUFree-r.CPUMilli, h.MemFree-r.MemoryMiB)
		// Stranded capacity is at most 16,000 milli-GPU per server.
		rating := float64(int64(sigmoid((fgdBefore-fgd)/1000) * 100))
		return rating + keep + smaller + 1e-6*(capBefore-capacity)
	}
	if r.Share() {
		best, gpu := 0.0, -1
		for g, fr := range h.Free {
			if fr < r.Milli {
				continue
			}
			if s := rate(after(buf[:0], h.Free, r, g)); gpu < 0 || s > best {
				best, gpu = s, g
			}
		}
		return best, gpu
	}
	return rate(after(buf[:0], h.Free, r, -1)), -1
}

// scarcityExp is how strongly a shape's weight follows its scarcity:
// (capacity / capacity it can take)^0.5. Chosen on the development
// workloads and seeds (docs/benchmarks.md, issue 14, third pass): 1
// protects the scarce servers too hard (gpuspec25: 29 columns more than
// 0.1 below, -0.11 at 130 %), 0 is the earlier policy.
const scarcityExp = 0.5

// weigh sets the weights the rating gives the shapes (rated) from what
// the hosts can still take: each shape's frequency times
// (C / U)^scarcityExp, C the hosts' GPU capacity and U the part of it
// copies of the shape could take now (GPUs, CPU, memory, GPU model);
// renormalised to the frequencies' sum. CPU-only shapes keep their
// frequency (they take no GPU), and a shape no host can take weighs 0
// (no placement can spoil a fit it does not have).
//
// FGD weighs a shape by how often it arrives, server by server; it cannot
// see that the fit a placement spoils is one of few left in the cluster.
// On openb the 8-GPU pods of 120 CPUs fit only the 39 servers of 128
// CPUs, and a memory-heavy 4-GPU pod rated those servers best (they keep
// memory for the pods after it) and took them: the large pods were turned
// away from 81 % of demand, FGD's from 94 % (multigpu50). The weights
// follow the cluster as it fills: when few servers can still take a
// shape, spoiling one of them costs more.
func (p *JobFabric) weigh(hosts iter.Seq[*Host]) {
	p.memo = nil // rated with the old weights
	set := p.set
	if cap(p.usable) < len(set.shapes) {
		p.usable = make([]float64, len(set.shapes))
	}
	usable := p.usable[:len(set.shapes)]
	clear(usable)
	var total float64
	var tb [32]gpuFit
	for h := range hosts {
		total += float64(len(h.Free) * 1000)
		fits := set.fitTable(h.Free, tb[:0])
		bit := set.access(h.Model)
		for i := range set.shapes {
			s := &set.shapes[i]
			if s.Milli == 0 || !set.accessible(i, bit, h.Model) {
				continue
			}
			n := fits[set.slot[i]].copies / s.GPUs
			if h.CPUMilli > 0 && s.CPUMilli > 0 {
				n = min(n, int(max(h.CPUFree, 0)/s.CPUMilli))
			}
			if h.MemoryMiB > 0 && s.MemoryMiB > 0 {
				n = min(n, int(max(h.MemFree, 0)/s.MemoryMiB))
			}
			usable[i] += float64(n * s.GPUs * s.Milli)
		}
	}
	if p.rated == nil {
		p.rated = newShapeSet(slices.Clone(set.shapes))
	}
	w := p.rated.shapes
	sum, orig := 0.0, 0.0
	for i, s := range set.shapes {
		orig += s.Freq
		switch {
		case s.Milli == 0:
			w[i].Freq = s.Freq
		case usable[i] == 0:
			w[i].Freq = 0
		default:
			w[i].Freq = s.Freq * math.Pow(total/usable[i], scarcityExp)
		}
		sum += w[i].Freq
	}
	if sum > 0 {
		for i := range w {
			w[i].Freq *= orig / sum
		}
	}
}

// Fragmentation is FGD's fragmentation of a host (milli-GPU the shapes,
// weighted by frequency, could not use there); memory is ignored.
func Fragmentation(shapes []Shape, h *Host) float64 {
	return frag(newShapeSet(shapes), h.Model, h.Free, h.CPUMilli > 0, h.CPUFree, false, 0)
}

// fragCap is the idle GPU capacity, weighted over the shapes, that copies
// of each shape could not use: all of it for CPU-only shapes and shapes
// the server's model refuses, else what is left once as many copies as the
// GPUs, the CPU and the memory allow are placed.
func fragCap(set *shapeSet, model string, free []int, cpuTracked bool, cpuFree int64, memTracked bool, memFree int64) float64 {
	out, _ := fragCaps(set, nil, model, free, cpuTracked, cpuFree, memTracked, memFree)
	return out
}

// fragCaps is fragCap weighed by set's frequencies and, in the same pass,
// by rated's (the same shapes, other weights; nil: 0).
func fragCaps(set, rated *shapeSet, model string, free []int, cpuTracked bool, cpuFree int64, memTracked bool, memFree int64) (float64, float64) {
	total := 0
	for _, f := range free {
		total += f
	}
	if total == 0 {
		return 0, 0
	}
	var tb [32]gpuFit
	fits := set.fitTable(free, tb[:0])
	bit := set.access(model)
	var out, outRated float64
	for i := range set.shapes {
		s := &set.shapes[i]
		amount := total
		if s.Milli > 0 && set.accessible(i, bit, model) {
			n := fits[set.slot[i]].copies / s.GPUs
			if cpuTracked && s.CPUMilli > 0 {
				n = min(n, int(max(cpuFree, 0)/s.CPUMilli))
			}
			if memTracked && s.MemoryMiB > 0 {
				n = min(n, int(max(memFree, 0)/s.MemoryMiB))
			}
			amount = max(0, total-n*s.GPUs*s.Milli)
		}
		out += s.Freq * float64(amount)
		if rated != nil {
			outRated += rated.shapes[i].Freq * float64(amount)
		}
	}
	return out, outRated
}

// ShapesOf is the workload of jobs as shapes: every kind of request (CPU,
// GPUs, milli-GPU of each, GPU models) with its share of the jobs and the
// mean memory of its jobs, most frequent first. A gang spread GPUsPerNode
// to a server counts as that many single-server requests; MIG jobs are
// left out (no scorer places them). Every kind counts, however rare: the
// rare ones are often the large pods that only a few servers can hold
// (openb: 8-GPU pods of 120 CPUs fit only the 39 128-CPU servers), and a
// placement that takes the last of those servers is what turns them away.
func ShapesOf(jobs []*domain.Job) []Shape {
	count := map[shapeTallyKey]*shapeTally{}
	var keys []shapeTallyKey
	total := 0
	for _, j := range jobs {
		k, n, ok := shapeOfJob(j)
		if !ok {
			continue
		}
		t := count[k]
		if t == nil {
			ms := j.Models()
			if k.gpus == 0 {
				ms = nil
			}
			t = &shapeTally{models: slices.Clone(ms)}
			count[k] = t
			keys = append(keys, k)
		}
		t.n += n
		t.mem += int64(n) * j.MemoryMiB
		total += n
	}
	return shapesFromTally(keys, func(k shapeTallyKey) *shapeTally { return count[k] }, total)
}

// shapeOfJob is the shape j counts as in ShapesOf, and as how many
// requests; false for a job no scorer weighs.
func shapeOfJob(j *domain.Job) (shapeTallyKey, int, bool) {
	k := shapeTallyKey{cpu: j.CPUMilli}
	n := 1
	switch {
	case j.MIGProfile != "" || j.MIGCount != 0:
		return k, 0, false
	case j.Share > 0:
		k.gpus, k.milli = 1, domain.ShareUnits(j.Share)/Milli
	case j.GPUsPerNode > 0 && j.GPUsPerNode < j.GPUs:
		k.gpus, k.milli, n = j.GPUsPerNode, 1000, j.GPUs/j.GPUsPerNode
	case j.GPUs > 0:
		k.gpus, k.milli = j.GPUs, 1000
	case j.CPUMilli == 0:
		return k, 0, false // asks for nothing a scorer weighs
	}
	if k.gpus > 0 {
		if ms := j.Models(); len(ms) == 1 {
			k.models = ms[0]
		} else {
			k.models = strings.Join(ms, "|")
		}
	}
	return k, n, true
}

// shapesFromTally orders the tallied shapes, the most requested first
// (ties by CPU, milli, GPUs, models: the keys are unique, so the order is
// total), with their frequencies among total requests.
func shapesFromTally(keys []shapeTallyKey, tally func(shapeTallyKey) *shapeTally, total int) []Shape {
	slices.SortFunc(keys, func(x, y shapeTallyKey) int {
		tx, ty := tally(x), tally(y)
		switch {
		case tx.n != ty.n:
			return ty.n - tx.n
		case x.cpu != y.cpu:
			return cmp.Compare(y.cpu, x.cpu)
		case x.milli != y.milli:
			return y.milli - x.milli
		case x.gpus != y.gpus:
			return y.gpus - x.gpus
		}
		return strings.Compare(y.models, x.models)
	})
	out := make([]Shape, len(keys))
	for i, k := range keys {
		t := tally(k)
		out[i] = Shape{CPUMilli: k.cpu, MemoryMiB: t.mem / int64(t.n), GPUs: k.gpus, Milli: k.milli, Models: t.models, Freq: float64(t.n) / float64(total)}
	}
	return out
}
