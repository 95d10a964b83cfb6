package lab_test

import (
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// threeTierTopology is the three-tier lab: 2 pods, each of 1 stripe of 2
// rails (2 leaves) under 1 spine, joined by 2 super-spines; 4 servers of 2
// GPUs per stripe (16 GPU endpoints), every switch running FRR.
func threeTierTopology(t *testing.T) []byte {
	t.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, Pods: 2, SuperSpines: 2, Spines: 1, ServersPerStripe: 4, GPUsPerServer: 2, NOS: "frr"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLabThreeTier proves the three-tier fabric with packets: a jobfabric
// server deploys two pods joined by super-spines (the spines re-advertise
// EVPN to the super-spines, next hop unchanged, and the super-spines to
// the other pod), and pings between every pair of GPU endpoints match
// what the tenants and jobs allow. Stripe 1 is pod 1 and stripe 2 is pod
// 2, so every job below spans the pods: its traffic crosses a
// super-spine, the only way between them.
func TestLabThreeTier(t *testing.T) {
	e, _ := startE2ETopology(t, 5*time.Minute, threeTierTopology)
	if n := len(e.l.Devices); n != 8 {
		t.Fatalf("the lab has %d switches, want 2 super-spines, 2 spines and 4 leaves", n)
	}
	e.createTenants()
	j100 := e.place(domain.JobSpec{Name: "job-100", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	j200 := e.place(domain.JobSpec{Name: "job-200", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 1}, "s1-gpu003", "s2-gpu003")
	e.waitReady(j100, j200)
	e.check("job 100 (tenant A) and job 200 (tenant B), each across both pods")

	// A second job of tenant A across the pods: a group of its own, which
	// reaches its own peers in the other pod and not job 100's.
	j101 := e.place(domain.JobSpec{Name: "job-101", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	e.waitReady(j101)
	e.check("job 101 (tenant A) across both pods")

	e.end(j100)
	e.check("job 100 ended")
	t.Logf("three-tier lab test took %s", time.Since(e.start).Round(time.Millisecond))
}
