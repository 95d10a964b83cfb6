package sched

import (
	"math/rand/v2"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestNoServerKeptAsScan asks noServer, which keeps its answers for the
// cycle, and the scan it replaces the same questions in random order with
// repeats: jobs of every model and driver asked, tenants with and without
// sites of each isolation, servers cordoned, jobs of a pool, of one of
// servers the inventory lacks and of one that does not exist, and each of
// noServer's wordings (no model, none schedulable, none in the sites, none
// with the driver, isolation, and the pools').
func TestNoServerKeptAsScan(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range topo.Servers() {
		v.Driver = []string{"535.104.05", "550.54.14"}[i%2]
	}
	site := NewStatic(topo).servers[0].site
	// Pools: p (the second stripe), far (servers the inventory lacks).
	var second []string
	for _, v := range topo.Servers()[4:] {
		second = append(second, v.Name)
	}
	s := &Snapshot{Topology: topo, Static: NewStatic(topo), Nodes: map[string]domain.NodeCondition{},
		Pools: map[string]*domain.ServerPool{"p": {Name: "p", Servers: second}, "far": {Name: "far", Servers: []string{"elsewhere1"}}}}
	for _, v := range topo.Servers()[:3] {
		s.Nodes[v.Name] = domain.NodeCondition{Server: v.Name, Cordoned: true}
	}
	tenants := []*domain.Tenant{
		{Name: "a", Isolation: domain.IsolationGPU},
		{Name: "b", Isolation: domain.IsolationServer},
		{Name: "c", Isolation: domain.IsolationGPU, Sites: []string{"elsewhere"}},
		{Name: "d", Isolation: domain.IsolationServer, Sites: []string{site}},
		{Name: "e", Isolation: domain.IsolationGPU, Sites: []string{site, "elsewhere"}},
	}
	jobs := []*domain.Job{
		{JobSpec: domain.JobSpec{GPUs: 8}},
		{JobSpec: domain.JobSpec{GPUs: 8, GPUModel: "H100-80GB"}},
		{JobSpec: domain.JobSpec{GPUs: 8, GPUModel: "A100-80GB"}},
		{JobSpec: domain.JobSpec{GPUs: 8, MinDriver: "550.0"}},
		{JobSpec: domain.JobSpec{GPUs: 8, MinDriver: "560.0"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Driver: "535.104.05"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Driver: "535.0"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Pool: "p"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Pool: "p", GPUModel: "A100-80GB"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Pool: "p", Driver: "535.0"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Pool: "far"}},
		{JobSpec: domain.JobSpec{GPUs: 8, Pool: "gone"}},
	}
	models := []string{"GPUs", "H100-80GB GPUs", "MIG-capable GPUs"}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		c := buildCluster(s)
		if seed%2 == 0 {
			// Every server cordoned: none schedulable.
			all := map[string]domain.NodeCondition{}
			for _, v := range topo.Servers() {
				all[v.Name] = domain.NodeCondition{Server: v.Name, Cordoned: true}
			}
			c.nodes = all
		}
		wordings := map[string]bool{}
		for range 300 {
			j, tn, m := jobs[rng.IntN(len(jobs))], tenants[rng.IntN(len(tenants))], models[rng.IntN(len(models))]
			got, want := c.noServer(j, tn, m), c.noServerScan(j, tn, m)
			if got != want {
				t.Fatalf("seed %d: noServer(%+v, %s %v, %s) = %q, the scan says %q", seed, j.JobSpec, tn.Name, tn.Sites, m, got, want)
			}
			wordings[want] = true
		}
		if least := 12 - 6*int(seed%2^1); len(wordings) < least { // cordoned: "no model" and "none schedulable" only
			t.Fatalf("seed %d: %d distinct answers: not the mix this test is for", seed, len(wordings))
		}
	}
}
