package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

func idle(name, model string, gpus int, cpu, mem int64) *Host {
	free := make([]int, gpus)
	for i := range free {
		free[i] = 1000
	}
	return &Host{Name: name, Model: model, Free: free, CPUMilli: cpu, CPUFree: cpu, MemoryMiB: mem, MemFree: mem}
}

// TestJobFabricTieBreaks: on FGD's rating ties the policy keeps idle
// servers whole, then prefers the smaller server; the rating itself still
// comes first. The old tie-break (stranded capacity alone) sent a 1-GPU job
// to the idle 128-CPU server below, the only one an 8-GPU job of 120 CPUs
// fits on.
func TestJobFabricTieBreaks(t *testing.T) {
	// One shape: 1 GPU, 4 CPUs (a single shape rates every placement that
	// leaves whole GPUs behind alike).
	shapes := []Shape{{CPUMilli: 4000, MemoryMiB: 1024, GPUs: 1, Milli: 1000, Freq: 1}}
	used := idle("used", "G2", 8, 96000, 393216)
	used.Free[0], used.CPUFree = 0, 90000
	tests := []struct {
		name  string
		hosts []*Host
		req   Request
		want  string
	}{
		{"a used server before an idle one", []*Host{idle("idle-small", "G2", 8, 96000, 393216), used}, Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}, "used"},
		{"the smaller of two idle servers", []*Host{idle("big", "G3", 8, 128000, 786432), idle("small", "G2", 8, 96000, 393216)}, Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}, "small"},
		{"a whole-server job takes the smaller idle server", []*Host{idle("big", "G3", 8, 128000, 786432), idle("small", "G2", 8, 96000, 393216)}, Request{GPUs: 8, Milli: 1000, CPUMilli: 8000, MemoryMiB: 1024}, "small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewJobFabric(shapes)
			best, got := math.Inf(-1), ""
			for _, h := range tt.hosts {
				if s, _ := p.Score(h, &tt.req); s > best {
					best, got = s, h.Name
				}
			}
			if got != tt.want {
				t.Fatalf("placed on %s, want %s", got, tt.want)
			}
		})
	}
	// Where shapes name GPU models the same rules apply (before the
	// weights, only the first did): the smaller of two idle servers.
	bound := NewJobFabric([]Shape{shapes[0], {CPUMilli: 4000, GPUs: 1, Milli: 1000, Models: []string{"P100"}, Freq: 0.5}})
	r1 := Request{GPUs: 1, Milli: 1000, CPUMilli: 4000, MemoryMiB: 1024}
	sBig, _ := bound.Score(idle("big", "G3", 8, 128000, 786432), &r1)
	sSmall, _ := bound.Score(idle("small", "G3", 2, 16000, 122880), &r1)
	if !(sSmall > sBig) {
		t.Fatalf("model-bound shapes: big server %v, small %v: want the small one", sBig, sSmall)
	}
	sUsed, _ := bound.Score(used, &r1)
	if !(sUsed > sBig) {
		t.Fatalf("model-bound shapes: used server %v, idle %v: want the used one", sUsed, sBig)
	}

	// The rating comes first: a placement that fragments less wins over
	// keeping a server whole. A share on the used server's last half GPU
	// leaves nothing stranded; on an idle server it strands a half GPU.
	half := idle("half", "G2", 1, 96000, 393216)
	half.Free[0] = 500
	p := NewJobFabric([]Shape{{CPUMilli: 1000, GPUs: 1, Milli: 500, Freq: 1}})
	r := Request{GPUs: 1, Milli: 500, CPUMilli: 1000}
	sHalf, _ := p.Score(half, &r)
	sIdle, _ := p.Score(idle("idle", "G2", 1, 96000, 393216), &r)
	if !(sHalf > sIdle) {
		t.Fatalf("rating %v on the half-used GPU, %v on an idle one: want the half-used one", sHalf, sIdle)
	}
}

// TestJobFabricSparesScarceServers is openb multigpu50's early refusals
// in small: a 4-GPU job of 60 CPUs and 313 GiB fits a 96-CPU, 384 GiB
// server already running a 1-GPU job, or the idle 128-CPU, 768 GiB one,
// the only server an 8-GPU job of 120 CPUs fits. Counting memory, the
// 96-CPU server is left with 23 GiB and strands its last 3 GPUs, so a
// rating that weighs each shape by how often it arrives takes the big
// server (rating 40 against 9). Weighed by how few servers can take each
// shape too, the big server's fit counts for what the 8-GPU jobs would
// lose: the job goes to a 96-CPU server.
func TestJobFabricSparesScarceServers(t *testing.T) {
	const gib = 1024
	shapes := []Shape{
		{CPUMilli: 12000, MemoryMiB: 48 * gib, GPUs: 1, Milli: 1000, Freq: 0.6},
		{CPUMilli: 60000, MemoryMiB: 313 * gib, GPUs: 4, Milli: 1000, Freq: 0.3},
		{CPUMilli: 120000, MemoryMiB: 720 * gib, GPUs: 8, Milli: 1000, Freq: 0.1},
	}
	servers := []domain.Server{{Name: "a-big", GPUModel: "G3", GPUs: 8, CPUMilli: 128000, MemoryMiB: 768 * gib}}
	var jobs []*domain.Job
	for i := range 20 {
		name := fmt.Sprintf("mid-%02d", i)
		servers = append(servers, domain.Server{Name: name, GPUModel: "G2", GPUs: 8, CPUMilli: 96000, MemoryMiB: 384 * gib})
		jobs = append(jobs, &domain.Job{ID: uint64(i + 1), State: domain.JobRunning,
			JobSpec:   domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 1, CPUMilli: 12000, MemoryMiB: 48 * gib},
			Placement: []domain.Placement{{Server: name, GPUs: []int{0}}}})
	}
	topo := &domain.Topology{Sites: []domain.Site{{Name: "s", Fabrics: []domain.Fabric{{Name: "f", Servers: servers}}}}}
	four := &domain.Job{ID: 100, JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 4, CPUMilli: 60000, MemoryMiB: 313 * gib}}
	pl := NewPlacer(&Snapshot{Topology: topo, Jobs: jobs, Scorer: NewJobFabric(shapes)})
	got, r := pl.Place(four)
	if got == nil {
		t.Fatalf("not placed: %s", r.Message)
	}
	if got[0].Server == "a-big" {
		t.Fatalf("the 4-GPU job took a-big, the only server the 8-GPU jobs of 120 CPUs fit")
	}
	// The rating by frequency alone (the policy before weights) takes it.
	p := NewJobFabric(shapes)
	mid := idle("mid", "G2", 8, 96000, 384*gib)
	mid.Free[0], mid.CPUFree, mid.MemFree = 0, 84000, 336*gib
	req := request(four)
	sBig, _ := p.Score(idle("big", "G3", 8, 128000, 768*gib), &req)
	sMid, _ := p.Score(mid, &req)
	if !(sBig > sMid) {
		t.Fatalf("unweighed: big %v, mid %v: the case no longer shows the cause", sBig, sMid)
	}
}

// TestJobFabricWeighsWhatIsLeft: a shape's weight follows how much of the
// cluster can still take it. With every 8-GPU server idle, 8-GPU jobs can
// take all of it; with one left, spoiling it costs more.
func TestJobFabricWeighsWhatIsLeft(t *testing.T) {
	shapes := []Shape{
		{CPUMilli: 4000, GPUs: 1, Milli: 1000, Freq: 0.9},
		{CPUMilli: 8000, GPUs: 8, Milli: 1000, Freq: 0.1},
		{CPUMilli: 2000, Freq: 0.1},
	}
	hosts := func(used int) func(func(*Host) bool) {
		return func(yield func(*Host) bool) {
			for i := range 10 {
				h := idle(fmt.Sprint(i), "G2", 8, 96000, 0)
				if i < used {
					h.Free[0], h.CPUFree = 0, 92000
				}
				if !yield(h) {
					return
				}
			}
		}
	}
	p := NewJobFabric(shapes)
	p.weigh(hosts(0))
	idleW := p.rated.shapes[1].Freq
	if math.Abs(idleW-0.1) > 1e-9 || math.Abs(p.rated.shapes[2].Freq-0.1) > 1e-9 {
		t.Fatalf("weights on an idle cluster %v, %v: want the frequencies (every shape fits everywhere)", idleW, p.rated.shapes[2].Freq)
	}
	p.weigh(hosts(9))
	if w := p.rated.shapes[1].Freq; !(w > 2*idleW) {
		t.Fatalf("8-GPU shape with one server of ten left: weight %v, want more than twice %v", w, idleW)
	}
	sum := 0.0
	for _, s := range p.rated.shapes {
		sum += s.Freq
	}
	if math.Abs(sum-1.1) > 1e-9 {
		t.Fatalf("weights sum to %v, want the frequencies' 1.1", sum)
	}
	p.weigh(hosts(10))
	if w := p.rated.shapes[1].Freq; w != 0 {
		t.Fatalf("8-GPU shape no server can take: weight %v, want 0", w)
	}
}

// TestJobFabricCPUOnlyKeepsGPUsUsable is openb cpu300's lost GPU work in
// small: where CPU runs out before GPUs, a CPU-only job should take CPU no
// idle GPU needs. mid has 7 idle GPUs and 40 CPUs, so 2 more 1-GPU jobs of
// 16 CPUs; full has every GPU busy and 64 CPUs. A CPU-only job of 16 CPUs
// on mid leaves one copy of the 1-GPU shape, which FGD's measure counts as
// fitting: it rates both servers alike and the tie goes to the smaller
// server, mid, stranding a GPU. Counted in copies, mid loses one.
func TestJobFabricCPUOnlyKeepsGPUsUsable(t *testing.T) {
	const gib = 1024
	shapes := []Shape{
		{CPUMilli: 16000, MemoryMiB: 32 * gib, GPUs: 1, Milli: 1000, Freq: 0.6},
		{CPUMilli: 16000, MemoryMiB: 32 * gib, Freq: 0.4},
	}
	servers := []domain.Server{
		{Name: "a-mid", GPUModel: "G2", GPUs: 8, CPUMilli: 96000, MemoryMiB: 384 * gib},
		{Name: "b-full", GPUModel: "G3", GPUs: 8, CPUMilli: 128000, MemoryMiB: 768 * gib},
	}
	job := func(id uint64, server string, gpus []int, cpu int64) *domain.Job {
		return &domain.Job{ID: id, State: domain.JobRunning,
			JobSpec:   domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: len(gpus), CPUMilli: cpu, MemoryMiB: 32 * gib},
			Placement: []domain.Placement{{Server: server, GPUs: gpus}}}
	}
	jobs := []*domain.Job{job(1, "a-mid", []int{0}, 16000), job(2, "a-mid", nil, 40000)}
	for g := range 8 {
		jobs = append(jobs, job(uint64(3+g), "b-full", []int{g}, 8000))
	}
	topo := &domain.Topology{Sites: []domain.Site{{Name: "s", Fabrics: []domain.Fabric{{Name: "f", Servers: servers}}}}}
	cpuOnly := &domain.Job{ID: 100, JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", CPUMilli: 16000, MemoryMiB: 32 * gib}}
	pl := NewPlacer(&Snapshot{Topology: topo, Jobs: jobs, Scorer: NewJobFabric(shapes)})
	got, r := pl.Place(cpuOnly)
	if got == nil {
		t.Fatalf("not placed: %s", r.Message)
	}
	if got[0].Server != "b-full" {
		t.Fatalf("the CPU-only job took %s, stranding one of its idle GPUs; want b-full, whose GPUs are all busy", got[0].Server)
	}
	// FGD's measure sees no change on mid: the case shows the cause.
	set := newShapeSet(shapes)
	free := []int{0, 1000, 1000, 1000, 1000, 1000, 1000, 1000}
	before := frag(set, "G2", free, true, 40000, true, 320*gib)
	after := frag(set, "G2", free, true, 24000, true, 288*gib)
	if before != after {
		t.Fatalf("FGD's measure on mid %v -> %v: the case no longer shows the cause", before, after)
	}
}

// TestJobFabricMemoAsRated: the memo of ratings (JobFabric.memo) answers
// as the rating worked out, over hosts drawn from few states (so the memo
// is hit) that differ in every field a rating reads, and across weighings
// that change the weights. It fails if weigh keeps the old ratings, or if
// the memo's key leaves out a field the rating reads (model, a GPU's free
// capacity, CPU or memory, capacity or free, any of the request's).
func TestJobFabricMemoAsRated(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 7))
	shapes := []Shape{
		{CPUMilli: 4000, MemoryMiB: 16384, GPUs: 1, Milli: 1000, Freq: 0.4},
		{CPUMilli: 32000, MemoryMiB: 262144, GPUs: 4, Milli: 1000, Freq: 0.2},
		{CPUMilli: 2000, MemoryMiB: 8192, GPUs: 1, Milli: 250, Freq: 0.2},
		{CPUMilli: 8000, GPUs: 2, Milli: 1000, Models: []string{"H100"}, Freq: 0.1},
		{CPUMilli: 16000, MemoryMiB: 65536, Freq: 0.1},
	}
	pick := func(xs ...int64) int64 { return xs[rng.IntN(len(xs))] }
	fresh := func() *Host {
		n := []int{4, 8}[rng.IntN(2)]
		free := make([]int, n)
		for g := range free {
			free[g] = int(pick(0, 1000, 1000, 750, 500))
		}
		cpu, mem := pick(0, 96000, 128000), pick(0, 393216, 786432)
		return &Host{Name: fmt.Sprint("h", rng.IntN(1000)), Model: []string{"H100", "A100"}[rng.IntN(2)], Free: free,
			CPUMilli: cpu, CPUFree: cpu - pick(0, 8000, 32000, 90000), MemoryMiB: mem, MemFree: mem - pick(0, 65536, 200000, 350000)}
	}
	bases := make([]*Host, 12)
	for i := range bases {
		bases[i] = fresh()
	}
	// A host is one of the bases, or one with a single field changed:
	// the memo must tell the two apart.
	host := func() *Host {
		b := bases[rng.IntN(len(bases))]
		h := *b
		h.Free = slices.Clone(b.Free)
		switch rng.IntN(9) {
		case 0:
			h.Model = map[string]string{"H100": "A100", "A100": "H100"}[h.Model]
		case 1:
			h.Free = append(h.Free, 0, 0, 0, 0) // more GPUs, none of them free
		case 2:
			h.Free[rng.IntN(len(h.Free))] = int(pick(0, 250, 1000))
		case 3:
			h.CPUMilli = pick(0, 64000, 256000)
		case 4:
			h.CPUFree = pick(0, 4000, 60000)
		case 5:
			h.MemoryMiB = pick(0, 131072, 1048576)
		case 6:
			h.MemFree = pick(0, 16384, 300000)
		}
		return &h
	}
	request := func() Request {
		switch rng.IntN(3) {
		case 0:
			return Request{GPUs: 1, Milli: int(pick(250, 500)), CPUMilli: pick(0, 2000), MemoryMiB: pick(0, 8192)}
		case 1:
			return Request{CPUMilli: pick(4000, 16000), MemoryMiB: pick(0, 65536)}
		}
		return Request{GPUs: int(pick(1, 2, 4)), Milli: 1000, CPUMilli: pick(0, 4000, 32000), MemoryMiB: pick(0, 16384, 262144)}
	}
	p := NewJobFabric(shapes)
	calls, hits := 0, 0
	for round := range 6 {
		if round > 0 {
			// Weighed on other hosts: other weights, other ratings.
			hs := make([]*Host, 1+rng.IntN(20))
			for i := range hs {
				hs[i] = host()
			}
			p.weigh(slices.Values(hs))
		}
		for range 3000 {
			h, r := host(), request()
			k, _ := memoKeyOf(h, &r)
			if _, ok := p.memo[k]; ok {
				hits++
			}
			calls++
			gs, gg := p.Score(h, &r)
			ws, wg := p.score(h, &r)
			if gs != ws || gg != wg {
				t.Fatalf("round %d: %+v for %+v: memo says (%v, %d), the rating (%v, %d)", round, *h, r, gs, gg, ws, wg)
			}
		}
	}
	if hits == 0 || hits == calls {
		t.Fatalf("%d of %d ratings from the memo: the test does not exercise it", hits, calls)
	}
}
