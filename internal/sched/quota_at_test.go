package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestQuotaAtAsByRef compares quota read by the indices step looks up once
// per workspace (wsAt, quotaAt) with quota read by ref (quotaByRef, the
// implementation it replaced, kept verbatim), after every one of many
// random changes to the usage: workspaces and tenants known and unknown,
// tenants with and without quotas, guarantees lent and not, a workspace
// filed under a ref that is not its own, pairs whose refs coincide. It
// fails if a figure is read at the wrong index (the job's tenant for the
// workspace's, the ref's for w.Ref()'s) or the indices go stale.
func TestQuotaAtAsByRef(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	servers := topo.Servers()
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		s, pairs := randomTenancy(rng, topo, false)
		// Filed under another's ref: the job names "c/w", the workspace
		// is "b/x" (its tenant is not the job's).
		s.Workspaces["c/w"] = &domain.Workspace{Tenant: "b", Name: "x", Guaranteed: 4, BorrowLimit: 4}
		pairs = append(pairs, tenancyPair{"b", "x"}) // jobs that use b/x
		// And of the job's tenant, another name.
		s.Workspaces["a/w"] = &domain.Workspace{Tenant: "a", Name: "x", Guaranteed: 2, BorrowLimit: 8}
		pairs = append(pairs, tenancyPair{"a", "x"})
		c := buildCluster(s)
		u := buildUsage(s, c)
		ats := map[tenancyPair]wsAt{} // looked up once, before the changes
		for k := 0; k < 400; k++ {
			p := pairs[rng.IntN(len(pairs))]
			ref := p.tenant + "/" + p.ws
			if rng.IntN(2) == 0 {
				// A change: a job of p placed or given back.
				j := &domain.Job{JobSpec: domain.JobSpec{Tenant: p.tenant, Workspace: p.ws}}
				pl := []domain.Placement{{Server: servers[rng.IntN(len(servers))].Name, GPUs: make([]int, 1+rng.IntN(8))}}
				u.addJob(j, pl, 1-2*rng.IntN(2))
				u.usedTotal = max(u.usedTotal, 0)
				continue
			}
			w := s.Workspaces[ref]
			if w == nil {
				continue
			}
			at, ok := ats[p]
			if !ok {
				at = u.ix.at(p.tenant, p.ws, w)
				ats[p] = at
			}
			j := &domain.Job{JobSpec: domain.JobSpec{Tenant: p.tenant, Workspace: p.ws, GPUs: 1 + rng.IntN(16)}}
			gr, gok := quotaAt(j, w, s.Tenants[j.Tenant], u, c, at)
			wr, wok := quotaByRef(j, w, s, u, c)
			if gr != wr || gok != wok {
				t.Fatalf("seed %d, change %d: %s asks %d GPUs: by index (%v, %v), by ref (%v, %v)", seed, k, ref, j.GPUs, gr, gok, wr, wok)
			}
			if got, want := u.usedAt(at.ref), u.usedOf(ref); got != want {
				t.Fatalf("seed %d: %s uses %d by index, %d by ref", seed, ref, got, want)
			}
			// A clone (the future view's usage) shares the index.
			cl := u.clone()
			cl.addJob(j, []domain.Placement{{Server: servers[0].Name, GPUs: []int{0, 1}}}, 1)
			if got, want := cl.usedAt(at.ref), cl.usedOf(ref); got != want {
				t.Fatalf("seed %d: %s uses %d in a clone by index, %d by ref", seed, ref, got, want)
			}
		}
	}
}

// quotaByRef is quota as it was before wsAt, verbatim.
func quotaByRef(j *domain.Job, w *domain.Workspace, s *Snapshot, u *usage, c *cluster) (domain.Reason, bool) {
	need := demand(j)
	used := u.usedOf(w.Ref())
	if limit := (w.Guaranteed + w.BorrowLimit) * unit; used+need > limit {
		return domain.Reason{Code: ReasonWorkspaceQuota, Message: fmt.Sprintf(
			"workspace %s uses %s GPUs; %s more would exceed its limit of %s (guaranteed %d + borrowLimit %d) by %s",
			w.Ref(), gpus(used), gpus(need), gpus(limit), w.Guaranteed, w.BorrowLimit, gpus(used+need-limit))}, false
	}
	tenant := s.Tenants[j.Tenant]
	if tenant != nil && tenant.Quota != nil {
		tUsed := u.tenantUsedOf(j.Tenant)
		if limit := (tenant.Quota.Guaranteed + tenant.Quota.BorrowLimit) * unit; tUsed+need > limit {
			return domain.Reason{Code: ReasonTenantQuota, Message: fmt.Sprintf(
				"tenant %s uses %s GPUs; %s more would exceed its limit of %s (guaranteed %d + borrowLimit %d) by %s",
				j.Tenant, gpus(tUsed), gpus(need), gpus(limit), tenant.Quota.Guaranteed, tenant.Quota.BorrowLimit, gpus(tUsed+need-limit))}, false
		}
	}
	protected := u.protectedFrom(w)
	free := c.total - u.usedTotal
	if need > free {
		return domain.Reason{Code: ReasonCapacity, Message: fmt.Sprintf("needs %s GPUs; %s of the cluster's %s are free", gpus(need), gpus(free), gpus(c.total))}, false
	}
	if avail := free - protected; need > avail {
		// Counts only: other tenants' workspaces are never named.
		return domain.Reason{Code: ReasonClusterQuota, Message: fmt.Sprintf(
			"needs %s GPUs; %s are free but %s of them are other workspaces' guarantees they do not lend, leaving %s",
			gpus(need), gpus(free), gpus(min(protected, free)), gpus(max(0, avail)))}, false
	}
	return domain.Reason{}, true
}
