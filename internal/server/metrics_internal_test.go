package server

import (
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// quotaView is the part of state.View quotaUse and pendingByReason read:
// the tallies are summed from jobs once (tally), as apply keeps them.
type quotaView struct {
	state.View
	topo    *domain.Topology
	ws      []*domain.Workspace
	jobs    []*domain.Job
	tallies []*state.WorkspaceTally
}

func (v quotaView) Topology() *domain.Topology               { return v.topo }
func (v quotaView) Workspaces() iter.Seq[*domain.Workspace]  { return slices.Values(v.ws) }
func (v quotaView) Tallies() iter.Seq[*state.WorkspaceTally] { return slices.Values(v.tallies) }

// tally sums the jobs up by workspace, the part of state.WorkspaceTally
// these tests read.
func (v quotaView) tally() quotaView {
	by := map[string]*state.WorkspaceTally{}
	v.tallies = nil
	for _, j := range v.jobs {
		t := by[j.Tenant+"/"+j.Workspace]
		if t == nil {
			t = &state.WorkspaceTally{Tenant: j.Tenant, Workspace: j.Workspace, PendingBy: map[string]int{}}
			by[j.Tenant+"/"+j.Workspace] = t
			v.tallies = append(v.tallies, t)
		}
		t.Live++
		t.Held += sched.Held(j.Placement)
		if j.State == domain.JobPending {
			code := ""
			if j.Reason != nil {
				code = j.Reason.Code
			}
			t.Pending++
			t.PendingBy[code]++
		}
	}
	return v
}

// TestQuotaUseLent: 16 GPUs, 12 guaranteed; b/borrower holds 12 on a
// guarantee of 4, so it borrows 8: 4 from the unreserved GPUs and 4 from
// a/lender's idle guarantee (it may lend 6). c/keeper lends nothing.
func TestQuotaUseLent(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	srv := topo.Servers()
	v := quotaView{topo: topo,
		ws: []*domain.Workspace{
			{Tenant: "a", Name: "lender", Guaranteed: 6, LendLimit: 6},
			{Tenant: "b", Name: "borrower", Guaranteed: 4, BorrowLimit: 12},
			{Tenant: "c", Name: "keeper", Guaranteed: 2},
		},
		jobs: []*domain.Job{{ID: 1, JobSpec: domain.JobSpec{Tenant: "b", Workspace: "borrower", GPUs: 12}, State: domain.JobRunning,
			Placement: []domain.Placement{{Server: srv[0].Name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Server: srv[1].Name, GPUs: []int{0, 1, 2, 3}}}}},
	}
	got := map[string][3]float64{}
	for _, u := range quotaUse(v.tally()) {
		got[u.w.Ref()] = [3]float64{u.guaranteed, u.borrowed, u.lent}
	}
	want := map[string][3]float64{"a/lender": {0, 0, 4}, "b/borrower": {4, 8, 0}, "c/keeper": {0, 0, 0}}
	for ref, w := range want {
		if got[ref] != w {
			t.Errorf("%s: guaranteed, borrowed, lent = %v, want %v", ref, got[ref], w)
		}
	}
}

// BenchmarkScrapeStateRead is what a /metrics scrape does under the state's
// read lock (applies wait meanwhile): pending jobs by workspace and reason,
// and quota use, at 1,000 workspaces and 20,000 live jobs (half placed),
// read from the tallies apply keeps (summed once here, outside the loop).
func BenchmarkScrapeStateRead(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 16, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	srv := topo.Servers()
	v := quotaView{topo: topo}
	reasons := []string{"", "capacity", "workspace_quota", "topology", "queued_behind"}
	for i := range 1000 {
		v.ws = append(v.ws, &domain.Workspace{Tenant: fmt.Sprintf("t%03d", i/10), Name: fmt.Sprintf("w%d", i%10), Guaranteed: 4, BorrowLimit: 8, LendLimit: 2})
	}
	for i := range 20000 {
		w := v.ws[i%len(v.ws)]
		j := &domain.Job{ID: uint64(i + 1), JobSpec: domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, GPUs: 1}, State: domain.JobPending}
		if i%2 == 0 {
			j.State, j.Placement = domain.JobRunning, []domain.Placement{{Server: srv[i%len(srv)].Name, GPUs: []int{i % 8}}}
		} else {
			j.Reason = &domain.Reason{Code: reasons[i%len(reasons)]}
		}
		v.jobs = append(v.jobs, j)
	}
	v = v.tally()
	b.ReportAllocs()
	for b.Loop() {
		if len(pendingByReason(v)) == 0 || len(quotaUse(v)) != 1000 {
			b.Fatal("nothing counted")
		}
	}
}
