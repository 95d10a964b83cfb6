package sched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// BenchmarkCarryAfterFill is what a Carry does before the cycle after a
// fill decides anything (issue 18, cycle 1 of `bench sched` at 100,000
// GPUs): cycle 0 places some 32,000 of 100,000 jobs, and the Carry is
// brought to the committed snapshot, its sums, table and lists patched by
// the placed jobs' new copies and its view of their servers loaded
// again. Each op goes one way: to the committed snapshot, or back to the
// one before (the same jobs, pending again), so each patches the same
// jobs. The jobs are made as `bench sched` makes them; each way is
// labelled ("way": fill, back) for a profile.
func BenchmarkCarryAfterFill(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 125, ServersPerStripe: 100, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	const nws, njobs = 5000, 100_000
	rng := rand.New(rand.NewPCG(0, 42))
	s := &Snapshot{Topology: topo, Static: NewStatic(topo), Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	var refs []string
	g := len(topo.Servers()) * 8 * 3 / 4 / nws
	for i := range nws {
		tn := fmt.Sprintf("t%02d", i)
		iso := domain.IsolationGPU
		if i%5 == 0 {
			iso = domain.IsolationServer
		}
		s.Tenants[tn] = &domain.Tenant{Name: tn, Isolation: iso}
		w := &domain.Workspace{Tenant: tn, Name: fmt.Sprintf("w%03d", i), Guaranteed: g, BorrowLimit: 1024, LendLimit: g / 2, Weight: 1 + i%3}
		s.Workspaces[w.Ref()] = w
		refs = append(refs, w.Ref())
	}
	for id := 1; id <= njobs; id++ {
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
		s.Jobs = append(s.Jobs, &domain.Job{ID: uint64(id), JobSpec: spec, State: domain.JobPending})
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var cr Carry
	plan := cr.Schedule(s, now)
	placed, _, _ := plan.ByJob()
	after := *s
	after.Jobs = make([]*domain.Job, len(s.Jobs))
	for k, j := range s.Jobs {
		if pl, ok := placed[j.ID]; ok {
			cp := *j
			at := now
			cp.State, cp.Placement, cp.PlacedAt = domain.JobRunning, pl, &at
			j = &cp
		}
		after.Jobs[k] = j
	}
	b.ReportMetric(float64(len(plan.Placements)), "placed")
	// Each way is also timed apart, in CPU time of this thread (the
	// machine is shared: wall time counts the others): fill-cpu-ms the
	// way to the committed snapshot (cycle 1's), back-cpu-ms the way
	// back (32,000 jobs put back on their workspaces' lists).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	b.ResetTimer()
	var fill, back time.Duration
	for i := range b.N {
		to := &after
		if i%2 == 1 {
			to = s
		}
		way := "fill"
		if i%2 == 1 {
			way = "back"
		}
		c0 := threadCPU()
		pprof.Do(context.Background(), pprof.Labels("way", way), func(context.Context) {
			cr.sync(to)
			buildClusterWith(to, &cr)
		})
		if d := threadCPU() - c0; i%2 == 0 {
			fill += d
		} else {
			back += d
		}
	}
	if n := (b.N + 1) / 2; n > 0 {
		b.ReportMetric(float64(fill.Microseconds())/1000/float64(n), "fill-cpu-ms")
	}
	if n := b.N / 2; n > 0 {
		b.ReportMetric(float64(back.Microseconds())/1000/float64(n), "back-cpu-ms")
	}
}

// threadCPU is the CPU time of the calling thread (Linux).
func threadCPU() time.Duration {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// BenchmarkEmptyCluster is the view of the empty cluster the horizon
// reservation builds once a cycle (backfill.go) at issue 18's scale:
// 12,500 servers of 8 GPUs, no job. CPU time of the benchmark's thread
// per op (cpu-us).
func BenchmarkEmptyCluster(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 125, ServersPerStripe: 100, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	s := &Snapshot{Topology: topo, Static: NewStatic(topo), Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := threadCPU()
	for range b.N {
		if c := buildCluster(s); len(c.servers) != 12_500 {
			b.Fatalf("%d servers", len(c.servers))
		}
	}
	b.ReportMetric(float64((threadCPU()-c0).Microseconds())/float64(b.N), "cpu-us")
}
