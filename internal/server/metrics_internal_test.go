package server

import (
	"iter"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// quotaView is the part of state.View quotaUse reads.
type quotaView struct {
	state.View
	topo *domain.Topology
	ws   []*domain.Workspace
	jobs []*domain.Job
}

func (v quotaView) Topology() *domain.Topology              { return v.topo }
func (v quotaView) Workspaces() iter.Seq[*domain.Workspace] { return slices.Values(v.ws) }
func (v quotaView) LiveJobs() iter.Seq[*domain.Job]         { return slices.Values(v.jobs) }

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
	for _, u := range quotaUse(v) {
		got[u.w.Ref()] = [3]float64{u.guaranteed, u.borrowed, u.lent}
	}
	want := map[string][3]float64{"a/lender": {0, 0, 4}, "b/borrower": {4, 8, 0}, "c/keeper": {0, 0, 0}}
	for ref, w := range want {
		if got[ref] != w {
			t.Errorf("%s: guaranteed, borrowed, lent = %v, want %v", ref, got[ref], w)
		}
	}
}
