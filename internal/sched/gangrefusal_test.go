package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestGangRefusalAsFullEvaluation asks placeGang of the base cluster (its
// count of servers by free GPUs refusing a gang that has too few servers
// with room, the scan cache, the kept wordings) and of the same cluster
// decided by full scans the same gangs, on random states: servers filled,
// emptied and held by server-isolated tenants as placements are committed
// and released on both, some cordoned. Placement, level and reason must be
// the same. The states must include gangs that fit with exactly as many
// servers with room as they need (a count one too low refuses them) and
// gangs refused with one server short.
func TestGangRefusalAsFullEvaluation(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 3, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	tenants := []*domain.Tenant{
		{Name: "a", Isolation: domain.IsolationGPU},
		{Name: "b", Isolation: domain.IsolationServer},
		{Name: "c", Isolation: domain.IsolationGPU},
		{Name: "d", Isolation: domain.IsolationServer},
	}
	var fitExact, refusedShort, asked int
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		s := &Snapshot{Topology: topo, Static: NewStatic(topo), Nodes: map[string]domain.NodeCondition{}}
		if seed%3 == 0 {
			v := topo.Servers()[rng.IntN(len(topo.Servers()))]
			s.Nodes[v.Name] = domain.NodeCondition{Server: v.Name, Cordoned: true}
		}
		ex := *s
		ex.exhaustive = true
		fast, full := buildCluster(s), buildCluster(&ex)
		type held struct {
			j  *domain.Job
			pl []domain.Placement
		}
		var live []held
		for id := uint64(1); id <= 400; id++ {
			tn := tenants[rng.IntN(len(tenants))]
			spec := domain.JobSpec{Tenant: tn.Name, Workspace: "w"}
			if rng.IntN(3) == 0 {
				spec.GPUs = []int{1, 2, 3, 4, 8}[rng.IntN(5)] // filler on one server
			} else {
				per := []int{1, 2, 4, 8}[rng.IntN(4)]
				spec.GPUs, spec.GPUsPerNode = per*(2+rng.IntN(4)), per
				if rng.IntN(4) == 0 {
					spec.GPUsPerNode = 0 // shaped from the largest server
				}
			}
			j := &domain.Job{ID: id, JobSpec: spec, State: domain.JobPending}
			nodes, per, _ := shape(j, fast.largestServer(j, tn))
			room := fast.atLeast(per)
			gotPl, gotLevel, gotR := fast.placeGang(j, tn)
			wantPl, wantLevel, wantR := full.placeGang(j, tn)
			asked++
			if !reflect.DeepEqual(gotPl, wantPl) || gotLevel != wantLevel || gotR != wantR {
				t.Fatalf("seed %d job %d (%d GPUs, %d per node, tenant %s; %d servers with %d free): fast %v %q %+v, full evaluation %v %q %+v",
					seed, id, spec.GPUs, spec.GPUsPerNode, tn.Name, room, per, gotPl, gotLevel, gotR, wantPl, wantLevel, wantR)
			}
			if nodes > 1 && room == nodes && wantPl != nil {
				fitExact++
			}
			if nodes > 1 && room == nodes-1 {
				refusedShort++
			}
			if wantPl != nil && rng.IntN(4) != 0 {
				fast.commit(j, tn, wantPl)
				full.commit(j, tn, wantPl)
				j.Placement = wantPl
				live = append(live, held{j, wantPl})
			}
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				fast.release(live[k].j)
				full.release(live[k].j)
				live = append(live[:k], live[k+1:]...)
			}
		}
	}
	if fitExact < 20 || refusedShort < 20 {
		t.Fatalf("%d gangs asked, %d fit with exactly the servers they need, %d had one too few: not the boundary this test is for", asked, fitExact, refusedShort)
	}
	t.Logf("%d gangs asked, %d fit exactly, %d one server short", asked, fitExact, refusedShort)
}
