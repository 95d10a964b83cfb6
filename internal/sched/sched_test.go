package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/topology"
)

var now = domaintest.Now

func ints(xs []int) string {
	if len(xs) > 1 && xs[len(xs)-1]-xs[0] == len(xs)-1 {
		return fmt.Sprintf("%d-%d", xs[0], xs[len(xs)-1])
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func TestReasonsNameNoOtherTenant(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).
		Tenant(domaintest.MakeTenant("acme").Isolation(domain.IsolationGPU)).Tenant(domaintest.MakeTenant("secretcorp").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("acme", "w").Borrow(16)).Workspace(domaintest.MakeWorkspace("secretcorp", "hidden").Guaranteed(16)).
		Pending(domaintest.MakeJob("acme/w", 8))
	r := Schedule(snapshotOf(w), now).Pending.Of(1)
	if r.Code != ReasonClusterQuota || strings.Contains(r.Message, "secretcorp") || strings.Contains(r.Message, "hidden") {
		t.Fatalf("reason %+v: want cluster_quota that names no other tenant", r)
	}
	if !strings.Contains(r.Message, "16") {
		t.Fatalf("reason %q does not say how much is protected", r.Message)
	}
}

func BenchmarkSchedule(b *testing.B) {
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 8, ServersPerStripe: 32, GPUsPerServer: 8})
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	for i := 0; i < 8; i++ {
		t := fmt.Sprintf("t%d", i)
		s.Tenants[t] = &domain.Tenant{Name: t, Isolation: domain.IsolationGPU}
		s.Workspaces[t+"/w"] = &domain.Workspace{Tenant: t, Name: "w", Guaranteed: 256, BorrowLimit: 512, LendLimit: 128, Weight: 1}
	}
	id := uint64(1)
	for i := 0; i < 1000; i++ {
		g := []int{1, 2, 4, 8, 16, 32}[i%6]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: fmt.Sprintf("t%d", i%8), Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		id++
	}
	b.ResetTimer()
	for b.Loop() {
		Schedule(s, now)
	}
}

func TestPlacementNamesDomainAndLeaves(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).Tenant(domaintest.MakeTenant("g").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("g", "w").Guaranteed(16)).Pending(domaintest.MakeJob("g/w", 8).PerNode(4))
	plan := Schedule(snapshotOf(w), now)
	if len(plan.Placements) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	for _, p := range plan.Placements[0].Placement {
		if p.NVLinkDomain != p.Server {
			t.Errorf("%s: NVLink domain %q, want the server's own", p.Server, p.NVLinkDomain)
		}
		want := []string{"s1-leaf0", "s1-leaf1", "s1-leaf2", "s1-leaf3"}
		if strings.Join(p.Leaves, ",") != strings.Join(want, ",") {
			t.Errorf("%s: leaves %v, want %v (GPU i on the leaf of rail i)", p.Server, p.Leaves, want)
		}
	}
}

// BenchmarkScheduleReclaim: a full 2,048-GPU cluster lent out to borrowers
// (preemptible 8-GPU jobs), and 200 pending jobs within their guarantees:
// every one needs a reclaim search.
func BenchmarkScheduleReclaim(b *testing.B) {
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 8, ServersPerStripe: 32, GPUsPerServer: 8})
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	s.Tenants["lender"] = &domain.Tenant{Name: "lender", Isolation: domain.IsolationGPU}
	s.Tenants["borrower"] = &domain.Tenant{Name: "borrower", Isolation: domain.IsolationGPU}
	s.Workspaces["lender/w"] = &domain.Workspace{Tenant: "lender", Name: "w", Guaranteed: 2048, LendLimit: 2048, Weight: 1}
	s.Workspaces["borrower/w"] = &domain.Workspace{Tenant: "borrower", Name: "w", BorrowLimit: 2048, Weight: 1}
	id := uint64(1)
	for _, srv := range topo.Servers() {
		t := now.Add(-time.Duration(id) * time.Minute)
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "borrower", Workspace: "w", GPUs: 8, Preemptible: true},
			State: domain.JobRunning, PlacedAt: &t, Placement: []domain.Placement{{Server: srv.Name, GPUs: domaintest.Seq(0, 8)}}})
		id++
	}
	for i := 0; i < 200; i++ {
		g := []int{1, 8, 16}[i%3]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "lender", Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		id++
	}
	b.ResetTimer()
	for b.Loop() {
		p := Schedule(s, now)
		if len(p.Preemptions) == 0 {
			b.Fatal("no reclaim")
		}
	}
}

func fmtFloat(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}
