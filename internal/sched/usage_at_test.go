package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestAddJobAtAsAddJob applies the same random placements and releases to
// two usages, one by addJob (the ref looked up) and one by addJobAt with
// the indices the step loop has (ix.of of the job's tenant and
// workspace), and wants every figure equal after each: workspaces and
// tenants known and unknown, with and without quotas, a workspace filed
// under a ref that is not its own, and with model quotas (the per-model
// figures) and without. It fails when addAt skips the protection's
// update, reads a tenant index for a workspace's, or updates the
// tenant's withheld share for a workspace the index does not know.
func TestAddJobAtAsAddJob(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	servers := topo.Servers()
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 15))
		models := seed%2 == 0
		s, pairs := randomTenancy(rng, topo, models)
		s.Workspaces["c/w"] = &domain.Workspace{Tenant: "b", Name: "x", Guaranteed: 4, BorrowLimit: 4, LendLimit: 2}
		pairs = append(pairs, tenancyPair{"b", "x"}, tenancyPair{"zz", "w"})
		c := buildCluster(s)
		byRef, byAt := buildUsage(s, c), buildUsage(s, c)
		if got := byRef.tracksModels(); got != models && seed > 2 {
			t.Fatalf("seed %d: tracks models %v, want %v", seed, got, models)
		}
		for k := 0; k < 300; k++ {
			p := pairs[rng.IntN(len(pairs))]
			j := &domain.Job{JobSpec: domain.JobSpec{Tenant: p.tenant, Workspace: p.ws}}
			pl := []domain.Placement{{Server: servers[rng.IntN(len(servers))].Name, GPUs: make([]int, 1+rng.IntN(8))}}
			if rng.IntN(3) == 0 {
				pl = append(pl, domain.Placement{Server: servers[rng.IntN(len(servers))].Name, GPUs: make([]int, 1+rng.IntN(8))})
			}
			sign := 1 - 2*rng.IntN(2)
			byRef.addJob(j, pl, sign)
			ri, ti := byAt.ix.of(p.tenant, p.ws)
			byAt.addJobAt(j, pl, sign, ri, ti)
			if !reflect.DeepEqual(usageFigures(byAt), usageFigures(byRef)) {
				t.Fatalf("seed %d, change %d (%s/%s, %+d): by index %+v, by ref %+v", seed, k, p.tenant, p.ws, sign, usageFigures(byAt), usageFigures(byRef))
			}
		}
	}
}

// tenancyPair is a tenant and a workspace name a random job names.
type tenancyPair struct{ tenant, ws string }

// randomTenancy is a snapshot of topo with tenants a, a/b and b, about half
// with quotas, and workspaces b/c, c and w of each of a, a/b, b and c, a
// quarter of them not filed (and, with models, half with a quota of the
// first server's model), and every pair a job may name: the random
// tenancy TestAddJobAtAsAddJob and TestQuotaAtAsByRef change usage over.
func randomTenancy(rng *rand.Rand, topo *domain.Topology, models bool) (*Snapshot, []tenancyPair) {
	servers := topo.Servers()
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	names := []string{"a", "a/b", "b", "c"}
	for _, tn := range names[:3] {
		tt := &domain.Tenant{Name: tn}
		if rng.IntN(2) == 0 {
			g := rng.IntN(24)
			tt.Quota = &domain.TenantQuota{Guaranteed: g, BorrowLimit: rng.IntN(24), LendLimit: rng.IntN(g + 1)}
		}
		s.Tenants[tn] = tt
	}
	var pairs []tenancyPair
	for _, tn := range names {
		for _, wn := range []string{"b/c", "c", "w"} {
			g := rng.IntN(16)
			w := &domain.Workspace{Tenant: tn, Name: wn, Guaranteed: g, BorrowLimit: rng.IntN(32), LendLimit: rng.IntN(g + 1)}
			if models && rng.IntN(2) == 0 {
				w.Models = []domain.ModelQuota{{Model: servers[0].GPUModel, Guaranteed: min(g, 4), BorrowLimit: 8}}
			}
			if rng.IntN(4) > 0 {
				s.Workspaces[w.Ref()] = w
			}
			pairs = append(pairs, tenancyPair{tn, wn})
		}
	}
	return s, pairs
}

// usageFigures is everything addJob changes in u.
func usageFigures(u *usage) []any {
	return []any{u.used, u.prot, u.tUsed, u.tProtWs, u.tProt, u.protTotal, u.usedTotal, u.mUsed, u.usedModel}
}
