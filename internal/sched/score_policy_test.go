package sched

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestShapesOf: every kind of request counts with its share of the jobs
// and its mean memory; a gang counts once per server; MIG jobs and jobs
// that ask for nothing are left out; the most frequent kind comes first.
func TestShapesOf(t *testing.T) {
	job := func(s domain.JobSpec) *domain.Job { return &domain.Job{JobSpec: s} }
	got := ShapesOf([]*domain.Job{
		job(domain.JobSpec{GPUs: 1, CPUMilli: 4000, MemoryMiB: 1000}),
		job(domain.JobSpec{GPUs: 1, CPUMilli: 4000, MemoryMiB: 3000}),
		job(domain.JobSpec{Share: 0.25, CPUMilli: 2000}),
		job(domain.JobSpec{GPUs: 16, GPUsPerNode: 8, CPUMilli: 100000}),
		job(domain.JobSpec{GPUs: 2, GPUModels: []string{"H100", "A100"}}),
		job(domain.JobSpec{CPUMilli: 8000}),
		job(domain.JobSpec{MIGProfile: "1g.10gb", MIGCount: 1}),
		job(domain.JobSpec{}),
	})
	want := []Shape{
		{CPUMilli: 100000, GPUs: 8, Milli: 1000, Freq: 2.0 / 7},
		{CPUMilli: 4000, MemoryMiB: 2000, GPUs: 1, Milli: 1000, Freq: 2.0 / 7},
		{CPUMilli: 8000, Freq: 1.0 / 7},
		{CPUMilli: 2000, GPUs: 1, Milli: 250, Freq: 1.0 / 7},
		{GPUs: 2, Milli: 1000, Models: []string{"H100", "A100"}, Freq: 1.0 / 7},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d shapes %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.CPUMilli != w.CPUMilli || g.MemoryMiB != w.MemoryMiB || g.GPUs != w.GPUs || g.Milli != w.Milli ||
			len(g.Models) != len(w.Models) || g.Freq < w.Freq-1e-12 || g.Freq > w.Freq+1e-12 {
			t.Errorf("shape %d: got %+v, want %+v", i, g, w)
		}
	}
}

// TestScheduleWeighsTheLiveMix: the production cycle places a
// single-server job with the JobFabric policy over its live jobs. A 4-GPU
// job of 60 CPUs goes to the 96-CPU server, keeping the idle 128-CPU one
// for the 8-GPU jobs of 120 CPUs the cluster runs (only such servers hold
// them); the built-in best fit took the first idle server in topology
// order, the 128-CPU one.
func TestScheduleWeighsTheLiveMix(t *testing.T) {
	srv := func(name string, cpu int64) domain.Server {
		return domain.Server{Name: name, GPUModel: "H100-80GB", GPUs: 8, CPUMilli: cpu}
	}
	topo := &domain.Topology{Sites: []domain.Site{{Name: "s1", Fabrics: []domain.Fabric{{Name: "f",
		Servers: []domain.Server{srv("a-big", 128000), srv("b-small", 96000), srv("c-big", 128000)}}}}}}
	at := now
	big := &domain.Job{ID: 1, State: domain.JobRunning, PlacedAt: &at,
		JobSpec:   domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 8, CPUMilli: 120000},
		Placement: []domain.Placement{{Server: "c-big", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	four := &domain.Job{ID: 2, State: domain.JobPending, JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 4, CPUMilli: 60000}}
	s := &Snapshot{Topology: topo,
		Tenants:    map[string]*domain.Tenant{"t": {Name: "t", Isolation: domain.IsolationGPU}},
		Workspaces: map[string]*domain.Workspace{"t/w": {Tenant: "t", Name: "w", Guaranteed: 24}},
		Jobs:       []*domain.Job{big, four}}
	plan := Schedule(s, now)
	if len(plan.Placements) != 1 || plan.Placements[0].JobID != 2 {
		t.Fatalf("placements %+v, pending %+v: want job 2 placed", plan.Placements, plan.Pending)
	}
	if got := plan.Placements[0].Placement[0].Server; got != "b-small" {
		t.Fatalf("the 4-GPU job went to %s, want b-small (a-big is the only idle server an 8-GPU job of 120 CPUs fits)", got)
	}
}

// TestScheduleCPUOnlyKeepsGPUsUsable: the production cycle rates a CPU-only
// job as the openb Placer does (TestJobFabricCPUOnlyKeepsGPUsUsable), over
// its live jobs' mix: 1-GPU jobs of 8 and 16 CPUs. a-mid has 7 idle GPUs
// and 40 CPUs; taking 16 of them leaves one copy of each 1-GPU shape, which
// FGD's measure counts as fitting, so the smaller server won the tie and
// lost GPUs' worth of copies. b-full's GPUs are all busy.
func TestScheduleCPUOnlyKeepsGPUsUsable(t *testing.T) {
	servers := []domain.Server{
		{Name: "a-mid", GPUModel: "H100-80GB", GPUs: 8, CPUMilli: 96000},
		{Name: "b-full", GPUModel: "H100-80GB", GPUs: 8, CPUMilli: 128000},
	}
	topo := &domain.Topology{Sites: []domain.Site{{Name: "s1", Fabrics: []domain.Fabric{{Name: "f", Servers: servers}}}}}
	at := now
	running := func(id uint64, server string, gpus []int, cpu int64) *domain.Job {
		return &domain.Job{ID: id, State: domain.JobRunning, PlacedAt: &at,
			JobSpec:   domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: len(gpus), CPUMilli: cpu},
			Placement: []domain.Placement{{Server: server, GPUs: gpus}}}
	}
	jobs := []*domain.Job{running(1, "a-mid", []int{0}, 16000), running(2, "a-mid", nil, 40000)}
	for g := range 8 {
		jobs = append(jobs, running(uint64(3+g), "b-full", []int{g}, 8000))
	}
	jobs = append(jobs, &domain.Job{ID: 100, State: domain.JobPending, JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", CPUMilli: 16000}})
	s := &Snapshot{Topology: topo,
		Tenants:    map[string]*domain.Tenant{"t": {Name: "t", Isolation: domain.IsolationGPU}},
		Workspaces: map[string]*domain.Workspace{"t/w": {Tenant: "t", Name: "w", Guaranteed: 16}},
		Jobs:       jobs}
	plan := Schedule(s, now)
	if len(plan.Placements) != 1 || plan.Placements[0].JobID != 100 {
		t.Fatalf("placements %+v, pending %+v: want job 100 placed", plan.Placements, plan.Pending)
	}
	if got := plan.Placements[0].Placement[0].Server; got != "b-full" {
		t.Fatalf("the CPU-only job went to %s, stranding idle GPUs' CPU; want b-full, whose GPUs are all busy", got)
	}
}
