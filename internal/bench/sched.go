package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"syscall"
	"time"
	"unsafe"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// SchedOptions sizes the scheduler benchmark.
type SchedOptions struct {
	Stripes, ServersPerStripe int // default 32 x 64 = 2,048 servers of 8 GPUs
	Tenants, Workspaces       int // default 50 tenants, 200 workspaces
	Jobs                      int // pending jobs, default 10,000
	Seed                      uint64
	// MaxCycles bounds the drain (default 2,000 cycles): at 100,000 jobs
	// a profile needs only the first cycles.
	MaxCycles int
	// Digest hashes every cycle's whole plan (SchedResult.PlanDigest), so
	// two builds of the scheduler can be shown to decide alike.
	Digest bool
	// NoCarry decides every cycle with sched.Schedule, summing over every
	// job each cycle, instead of through a sched.Carry (the sums kept
	// from the cycle before): the two decide alike. The 64-GPU gang
	// probe too (a Carry of its own otherwise).
	NoCarry bool
	// Pools, when above 0, splits the stripes into that many server
	// pools of consecutive stripes (as a Slurm cluster's partitions) and
	// gives job i the pool i mod Pools; the job stream is otherwise the
	// same.
	Pools int
	// Trace, when set, receives a Go execution trace of the cycles (the
	// fill and every cycle after it; each cycle a trace region named
	// "cycle N"): where a cycle's wall time went that its CPU time does
	// not show (the collector's workers on its processor, for one).
	Trace io.Writer
}

// SchedResult is what the scheduler benchmark measured.
type SchedResult struct {
	Servers, GPUs, Tenants, Workspaces, Jobs int
	Cycles                                   int     `json:"cycles"`
	Placements                               int     `json:"placements"`
	Preemptions                              int     `json:"preemptions"`
	ScheduleSeconds                          float64 `json:"scheduleSeconds"` // time inside sched.Schedule
	PlacementsPerSecond                      float64 `json:"placementsPerSecond"`
	// CycleP50ms, CycleP99ms and CycleMaxms are one sched.Schedule call
	// of the drain (the leader's cycle, without its commit), every cycle
	// but the first; FirstCyclems is the first, which fills the empty
	// cluster (a burst no running leader meets: it places as jobs come).
	FirstCyclems float64 `json:"firstCycleMs"`
	// The same in CPU time of the thread that runs the cycle (Linux;
	// zero elsewhere): on a shared machine, wall time measures the
	// machine's other load as much as the scheduler.
	FirstCycleCPUms        float64 `json:"firstCycleCPUms"`
	CycleCPUP50ms          float64 `json:"cycleCPUp50ms"`
	CycleCPUP99ms          float64 `json:"cycleCPUp99ms"`
	PlacementsPerCPUSecond float64 `json:"placementsPerCPUSecond"`
	CycleP50ms             float64 `json:"cycleP50ms"`
	CycleP99ms             float64 `json:"cycleP99ms"`
	CycleMaxms             float64 `json:"cycleMaxms"`
	Gang64P50ms            float64 `json:"gang64P50ms"`
	Gang64P99ms            float64 `json:"gang64P99ms"`
	Gang64Trials           int     `json:"gang64Trials"`
	PeakRSSMiB             float64 `json:"peakRSSMiB"`
	PeakHeapMiB            float64 `json:"peakHeapMiB"`
	// Unplaced jobs never fit (e.g. larger than their workspace may use).
	Unplaced int `json:"unplaced"`
	// PlanDigest is the SHA-256 of every cycle's plan as JSON, in turn
	// (SchedOptions.Digest; hashed outside the timed cycle).
	PlanDigest string `json:"planDigest,omitempty"`
	// PerCycle is every cycle in turn, the first included, so the burst
	// cycles (many placements after a tenth of the running jobs ended)
	// are told from the quiet ones the percentiles mix them with.
	PerCycle []SchedCycle `json:"perCycle"`
}

// SchedCycle is one cycle of the scheduler benchmark's drain.
type SchedCycle struct {
	// Placements and Preemptions are the cycle's plan's.
	Placements  int `json:"placements"`
	Preemptions int `json:"preemptions"`
	// Pending is the jobs left pending once the plan is committed and
	// some running jobs have ended.
	Pending int `json:"pending"`
	// CPUms is the CPU time of the cycle's thread, Wallms the wall time
	// of the sched.Schedule call.
	CPUms  float64 `json:"cpuMs"`
	Wallms float64 `json:"wallMs"`
	// AllocMiB is what the cycle allocated on the heap, GCs the
	// collections that ended during it: wall time above CPU time is
	// mostly the collector's, and a cycle's garbage paces it.
	AllocMiB float64 `json:"allocMiB"`
	GCs      int     `json:"gcs"`
}

// Sched drains a queue of mixed jobs through the real scheduler the way the
// leader does (commit each plan, let some running jobs finish between
// cycles), and times a 64-GPU gang decision against the cluster as it
// fills. The job stream is seeded: the same options give the same run.
func Sched(o SchedOptions) (*SchedResult, error) {
	if o.Stripes == 0 {
		o.Stripes = 32
	}
	if o.ServersPerStripe == 0 {
		o.ServersPerStripe = 64
	}
	if o.Tenants == 0 {
		o.Tenants = 50
	}
	if o.Workspaces == 0 {
		o.Workspaces = 200
	}
	if o.Jobs == 0 {
		o.Jobs = 10_000
	}
	if o.MaxCycles == 0 {
		o.MaxCycles = 2000
	}
	if o.Workspaces < o.Tenants {
		return nil, domain.Invalid("workspaces", "workspaces %d must be at least tenants %d", o.Workspaces, o.Tenants)
	}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: o.Stripes, ServersPerStripe: o.ServersPerStripe, GPUsPerServer: 8})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 42))
	totalGPUs := o.Stripes * o.ServersPerStripe * 8
	// Like the server, index the topology once, not every cycle.
	s := &sched.Snapshot{Topology: topo, Static: sched.NewStatic(topo), Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	var refs []string
	g := totalGPUs * 3 / 4 / o.Workspaces // guarantees cover 3/4 of the cluster
	for i := 0; i < o.Workspaces; i++ {
		tn := fmt.Sprintf("t%02d", i%o.Tenants)
		if _, ok := s.Tenants[tn]; !ok {
			iso := domain.IsolationGPU
			if i%5 == 0 {
				iso = domain.IsolationServer
			}
			s.Tenants[tn] = &domain.Tenant{Name: tn, Isolation: iso}
		}
		w := &domain.Workspace{Tenant: tn, Name: fmt.Sprintf("w%03d", i), Guaranteed: g, BorrowLimit: 1024, LendLimit: g / 2, Weight: 1 + i%3}
		s.Workspaces[w.Ref()] = w
		refs = append(refs, w.Ref())
	}
	if o.Pools > 0 {
		if o.Pools > o.Stripes {
			return nil, domain.Invalid("pools", "pools %d exceeds the stripes %d (a pool is at least one stripe)", o.Pools, o.Stripes)
		}
		s.Pools = benchPools(topo, o.Stripes, o.Pools)
	}
	for id := 1; id <= o.Jobs; id++ {
		w := s.Workspaces[refs[rng.IntN(len(refs))]]
		spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: rng.IntN(2) == 0}
		switch r := rng.IntN(100); {
		case r < 5:
			spec.MIGProfile, spec.MIGCount = []string{"1g.10gb", "3g.40gb"}[rng.IntN(2)], 1+rng.IntN(2)
		case r < 10:
			spec.Share = 0.25
		case r < 70:
			spec.GPUs = []int{1, 2, 4, 8}[rng.IntN(4)]
		case r < 95:
			spec.GPUs, spec.GPUsPerNode = []int{16, 32, 64}[rng.IntN(3)], 8
		default:
			spec.GPUs, spec.GPUsPerNode = []int{128, 256, 512}[rng.IntN(3)], 8
		}
		if o.Pools > 0 {
			spec.Pool = fmt.Sprintf("bench:p%d", id%o.Pools)
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: uint64(id), JobSpec: spec, State: domain.JobPending})
	}
	res := &SchedResult{Servers: len(topo.Servers()), GPUs: totalGPUs, Tenants: len(s.Tenants), Workspaces: len(s.Workspaces), Jobs: o.Jobs}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var gang, cycles, cpu []time.Duration
	// The cycles run on this thread, so its CPU time is theirs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var peakHeap uint64
	var digest hash.Hash
	if o.Digest {
		digest = sha256.New()
	}
	var spent time.Duration
	idle := 0
	// Jobs change by copy, as the state's Snapshotter hands them out, so
	// the Carry finds what changed without reading every job.
	var carry *sched.Carry
	if !o.NoCarry {
		carry = &sched.Carry{}
	}
	probe := &sched.Snapshot{Topology: topo, Static: s.Static, Tenants: s.Tenants, Workspaces: s.Workspaces, Pools: s.Pools}
	var probeCarry *sched.Carry
	if !o.NoCarry {
		probeCarry = &sched.Carry{}
	}
	decide := func() *sched.Plan {
		if carry != nil {
			return carry.Schedule(s, now)
		}
		return sched.Schedule(s, now)
	}
	if o.Trace != nil {
		if err := trace.Start(o.Trace); err != nil {
			return nil, fmt.Errorf("start the execution trace: %w", err)
		}
		defer trace.Stop()
	}
	for cycle := 0; cycle < o.MaxCycles; cycle++ {
		res.Cycles++
		a0, g0 := heapCounts()
		c0, t0 := threadCPU(), time.Now()
		var plan *sched.Plan
		// Labelled so a profile (--cpuprofile) tells the first cycle,
		// which fills the empty cluster, from the later ones: "one" the
		// cycle after it (the Carry's patch of the fill), "burst" 2 to 9
		// (thousands of placements each), "later" the rest.
		label := "later"
		switch {
		case cycle == 0:
			label = "first"
		case cycle == 1:
			label = "one"
		case cycle < 10:
			label = "burst"
		}
		pprof.Do(context.Background(), pprof.Labels("cycle", label), func(ctx context.Context) {
			trace.WithRegion(ctx, fmt.Sprintf("cycle %d", cycle), func() { plan = decide() })
		})
		took := time.Since(t0)
		c1 := threadCPU()
		a1, g1 := heapCounts()

		spent += took
		cycles = append(cycles, took)
		cpu = append(cpu, c1-c0)
		if digest != nil {
			if err := json.NewEncoder(digest).Encode(plan); err != nil {
				return nil, fmt.Errorf("hashing the plan of cycle %d: %w", cycle, err)
			}
		}
		// Commit the plan as the state machine does: releases end
		// allocations (a preempted job is requeued), preemptions start
		// the grace period, placements start jobs.
		placed, released, stopping := plan.ByJob()
		res.Placements += len(plan.Placements)
		res.Preemptions += len(plan.Preemptions)
		pending := 0
		// Sized once: grown by doubling it was 3 MB of the harness's garbage a cycle.
		live := make([]*domain.Job, 0, len(s.Jobs))
		for _, j := range s.Jobs {
			_, stops := stopping[j.ID]
			if _, places := placed[j.ID]; released[j.ID] || stops || places {
				cp := *j // the cycle's copy stays as it decided it
				j = &cp
			}
			if released[j.ID] {
				j.State, j.Placement, j.PlacedAt, j.StopDeadline, j.PreemptedFor = domain.JobPending, nil, nil, nil, 0
			}
			if p, ok := stopping[j.ID]; ok {
				d := p.Deadline
				j.State, j.StopDeadline, j.PreemptedFor, j.BorrowNotBefore = domain.JobPreempting, &d, p.ForJob, p.BorrowBackoff
			}
			if pl, ok := placed[j.ID]; ok {
				t := now
				j.State, j.Placement, j.PlacedAt = domain.JobRunning, pl, &t
			}
			// Between cycles a tenth of the running jobs finish.
			if j.State == domain.JobRunning && rng.IntN(10) == 0 && len(placed[j.ID]) == 0 {
				continue
			}
			if j.State == domain.JobPending {
				pending++
			}
			live = append(live, j)
		}
		s.Jobs = live
		// A 64-GPU gang decided against the cluster as it is now: the
		// running jobs and the gang, which comes last by ID. Through a
		// Carry of its own (as a leader decides), unless --no-carry: the
		// probe's sched.Schedule summed over every running job each cycle,
		// 18 MB of garbage a cycle at 100,000 GPUs, as much as the
		// measured cycle's own, and that paced the collector under the
		// measured cycles as no leader's garbage does.
		probe.Jobs = probe.Jobs[:0]
		for _, j := range s.Jobs {
			if len(j.Placement) > 0 {
				probe.Jobs = append(probe.Jobs, j)
			}
		}
		w := s.Workspaces[refs[cycle%len(refs)]]
		probe.Jobs = append(probe.Jobs, &domain.Job{ID: 1 << 62, JobSpec: domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, GPUs: 64, GPUsPerNode: 8}, State: domain.JobPending})
		t1 := time.Now()
		if probeCarry != nil {
			probeCarry.Schedule(probe, now)
		} else {
			sched.Schedule(probe, now)
		}
		gang = append(gang, time.Since(t1))
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapAlloc)
		now = now.Add(10 * time.Second)
		running := len(s.Jobs) - pending
		if len(plan.Placements) == 0 && running == 0 {
			idle++
		} else {
			idle = 0
		}
		res.Unplaced = pending
		res.PerCycle = append(res.PerCycle, SchedCycle{Placements: len(plan.Placements), Preemptions: len(plan.Preemptions), Pending: pending,
			CPUms: float64(cpu[len(cpu)-1].Microseconds()) / 1000, Wallms: float64(took.Microseconds()) / 1000,
			AllocMiB: float64(a1-a0) / (1 << 20), GCs: int(g1 - g0)})
		if pending == 0 || idle > 3 {
			break
		}
	}
	if digest != nil {
		res.PlanDigest = hex.EncodeToString(digest.Sum(nil))
	}
	res.ScheduleSeconds = spent.Seconds()
	res.PlacementsPerSecond = float64(res.Placements) / spent.Seconds()
	res.Gang64Trials = len(gang)
	res.Gang64P50ms, res.Gang64P99ms, _ = percentiles(gang)
	res.FirstCyclems = float64(cycles[0].Microseconds()) / 1000
	res.FirstCycleCPUms = float64(cpu[0].Microseconds()) / 1000
	var cpuSum time.Duration
	for _, d := range cpu {
		cpuSum += d
	}
	if cpuSum > 0 {
		res.PlacementsPerCPUSecond = float64(res.Placements) / cpuSum.Seconds()
	}
	res.CycleP50ms, res.CycleP99ms, res.CycleMaxms = percentiles(cycles[1:])
	res.CycleCPUP50ms, res.CycleCPUP99ms, _ = percentiles(cpu[1:])
	res.PeakHeapMiB = float64(peakHeap) / (1 << 20)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.PeakRSSMiB = float64(ru.Maxrss) / 1024 // Linux reports KiB
	}
	return res, nil
}

// percentiles are the median, the 99th percentile and the maximum of ds,
// in milliseconds (ds is sorted in place).
func percentiles(ds []time.Duration) (p50, p99, maxms float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(ds[len(ds)/2]), ms(ds[(len(ds)*99)/100]), ms(ds[len(ds)-1])
}

// heapCounts are the bytes allocated on the heap and the collections
// ended so far, process-wide (a cycle runs alone, so the difference over
// one is the cycle's).
func heapCounts() (allocs, gcs uint64) {
	ms := [2]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(ms[:])
	return ms[0].Value.Uint64(), ms[1].Value.Uint64()
}

// threadCPU is the CPU time of the calling OS thread
// (CLOCK_THREAD_CPUTIME_ID, Linux); zero where it cannot be read.
func threadCPU() time.Duration {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// benchPools splits the stripes (numbered from 1) into n pools of
// consecutive stripes, bench:p0 to bench:p(n-1).
func benchPools(topo *domain.Topology, stripes, n int) map[string]*domain.ServerPool {
	out := make(map[string]*domain.ServerPool, n)
	for _, srv := range topo.Servers() {
		name := fmt.Sprintf("bench:p%d", (srv.Stripe-1)*n/stripes)
		if out[name] == nil {
			out[name] = &domain.ServerPool{Name: name}
		}
		out[name].Servers = append(out[name].Servers, srv.Name)
	}
	return out
}
