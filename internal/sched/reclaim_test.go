package sched

import (
	"sort"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/topology"
)

func victims(p *Plan) []uint64 {
	var out []uint64
	for _, pr := range p.Preemptions {
		out = append(out, pr.JobID)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReclaimBoundDeepQueue: many guaranteed jobs become pending at once on
// a cluster full of borrowed work. Every one of them must be served within
// the grace period and one cycle: all reclaims start in the first cycle
// (the per-cycle search cap is above this depth), and all are placed in the
// cycle at the grace deadline, even when no victim stops early.
func TestReclaimBoundDeepQueue(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 4, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	grace := 30 * time.Second
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{},
		Policy: Policy{Grace: grace, ReclaimBackoff: 5 * time.Minute, HalfLife: time.Hour}}
	s.Tenants["lender"] = &domain.Tenant{Name: "lender", Isolation: domain.IsolationGPU}
	s.Tenants["borrower"] = &domain.Tenant{Name: "borrower", Isolation: domain.IsolationServer}
	s.Workspaces["lender/w"] = &domain.Workspace{Tenant: "lender", Name: "w", Guaranteed: 1024, LendLimit: 1024, Weight: 1}
	s.Workspaces["borrower/w"] = &domain.Workspace{Tenant: "borrower", Name: "w", BorrowLimit: 1024, Weight: 1}
	m := &sim{t: t, s: s, now: now, next: 1, reclaim: map[uint64][]time.Time{}, waiting: map[uint64]time.Time{}}
	for i, srv := range topo.Servers() {
		at := now.Add(-time.Duration(i+1) * time.Minute)
		s.Jobs = append(s.Jobs, &domain.Job{ID: m.next, JobSpec: domain.JobSpec{Tenant: "borrower", Workspace: "w", GPUs: 8, Preemptible: true},
			State: domain.JobRunning, PlacedAt: &at, Placement: []domain.Placement{domaintest.On(srv.Name, domaintest.Seq(0, 8)...)}})
		m.next++
	}
	const depth = 120 // well over the old cap of 32 searches per cycle
	first := m.next
	for i := 0; i < depth; i++ {
		g := []int{1, 4, 8, 16}[i%4]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: m.next, JobSpec: domain.JobSpec{Tenant: "lender", Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		m.next++
	}
	p := Schedule(s, m.now)
	m.commit(p)
	for id := first; id < first+depth; id++ {
		if r := p.Pending.Of(id); r.Code != ReasonReclaim {
			t.Fatalf("job %d after the first cycle: reason %+v, want %s (its reclaim must start now)", id, r, ReasonReclaim)
		}
	}
	// Victims never stop by themselves: the GPUs come back at the deadline.
	deadline := m.now.Add(grace)
	for m.now.Before(deadline.Add(tick)) {
		m.now = m.now.Add(tick)
		m.commit(Schedule(s, m.now))
	}
	for id := first; id < first+depth; id++ {
		if j := m.job(id); j.State != domain.JobRunning {
			t.Errorf("job %d is %s at grace + one cycle (reason %+v), want placed", id, j.State, j.Reason)
		}
	}
	// Reclaim took what was needed, not the whole cluster.
	need := 0
	for i := 0; i < depth; i++ {
		need += []int{1, 4, 8, 16}[i%4]
	}
	freed := 0
	for _, j := range s.Jobs {
		if j.Tenant == "borrower" && j.State != domain.JobRunning {
			freed += 8
		}
	}
	// The borrower is server-isolated: whole servers come back, so up to
	// 7 GPUs per 8 may stay idle; never more than the next server up.
	if freed > (need+7)/8*8 {
		t.Errorf("reclaim freed %d GPUs for %d guaranteed ones", freed, need)
	}
	t.Logf("%d guaranteed jobs (%d GPUs) served by freeing %d GPUs", depth, need, freed)
}
