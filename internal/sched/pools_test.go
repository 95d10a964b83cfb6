package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestPoolJobsOfEveryShape: whole GPUs, a gang, a share, MIG slices and a
// CPU-only job of a pool are placed on the pool's servers only, and each
// kind waits naming its pool when the pool does not exist; jobs without a
// pool still use every server.
func TestPoolJobsOfEveryShape(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	var pool []string
	for _, v := range topo.Servers()[4:] {
		in[v.Name] = true
		pool = append(pool, v.Name)
	}
	specs := []domain.JobSpec{
		{GPUs: 1}, {GPUs: 16, GPUsPerNode: 8}, {Share: 0.25}, {MIGProfile: "1g.10gb", MIGCount: 1}, {CPUMilli: 1000},
	}
	for _, poolName := range []string{"p", "gone"} {
		s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{"t": {Name: "t", Isolation: domain.IsolationGPU}},
			Workspaces: map[string]*domain.Workspace{"t/w": {Tenant: "t", Name: "w", Guaranteed: 64}},
			Pools:      map[string]*domain.ServerPool{"p": {Name: "p", Servers: pool}}}
		for i, sp := range specs {
			sp.Tenant, sp.Workspace, sp.Pool = "t", "w", poolName
			s.Jobs = append(s.Jobs, &domain.Job{ID: uint64(i + 1), JobSpec: sp, State: domain.JobPending})
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: 99, JobSpec: domain.JobSpec{Tenant: "t", Workspace: "w", GPUs: 8}, State: domain.JobPending})
		plan := Schedule(s, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
		placed, _, _ := plan.ByJob()
		for i, sp := range specs {
			id := uint64(i + 1)
			switch {
			case poolName == "p" && len(placed[id]) == 0:
				t.Errorf("%+v of pool p: not placed: %v", sp, plan.Pending.Of(id))
			case poolName == "p":
				for _, pl := range placed[id] {
					if !in[pl.Server] {
						t.Errorf("%+v of pool p placed on %s, outside %v", sp, pl.Server, pool)
					}
				}
			case len(placed[id]) > 0:
				t.Errorf("%+v of a pool that does not exist placed on %v", sp, placed[id])
			case !strings.Contains(plan.Pending.Of(id).Message, "pool gone does not exist"):
				t.Errorf("%+v of a pool that does not exist waits with %q", sp, plan.Pending.Of(id).Message)
			}
		}
		if len(placed[99]) == 0 {
			t.Errorf("a job without a pool was not placed: %v", plan.Pending.Of(99))
		}
	}
}
