package sched

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestRankedSharesAcrossCompaction places a tenant's first share by the change
// that compacts the log of touched servers (the log is filled to the
// threshold first), then asks the trees and the scan where the tenant's
// next share goes: the GPU it already time-slices, which the index of
// servers by share tenant (read by the compaction) must list. It failed
// when the compaction ran after the change was logged and before it was
// made: the index read the server as it was, and never again.
func TestRankedSharesAcrossCompaction(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, scorer := range []Scorer{BestFit{}, nil} {
		s := &Snapshot{Topology: topo, Scorer: scorer, Tenants: map[string]*domain.Tenant{}}
		share := func(id uint64, tenant string) *domain.Job {
			return &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: tenant, Workspace: "w", GPUs: 1, Share: 0.25}, State: domain.JobPending}
		}
		s.Jobs = []*domain.Job{share(100, "a")}
		c := buildCluster(s)
		if !c.sc.active() || !c.sc.cached {
			t.Fatal("no cached scorer: nothing ranked")
		}
		r := request(share(0, "a"))
		a := &domain.Tenant{Name: "a", Isolation: domain.IsolationGPU}
		// The share's key asked twice: its tree exists, and the ranking.
		for k := 0; k < 2; k++ {
			c.ranked(share(0, "a"), share(0, "a"), a, nil, r)
		}
		if c.rank == nil {
			t.Fatal("no ranking")
		}
		// Fill the log to each length near the threshold, then place:
		// at one of them the placement's own change compacts it.
		compacted, id := 0, uint64(1)
		for target := 1020; target <= 1030; target++ {
			// Each length a tenant with no share yet: the placement is
			// its first, which the index must see.
			a := &domain.Tenant{Name: fmt.Sprintf("a%d", target), Isolation: domain.IsolationGPU}
			s.Tenants[a.Name] = a
			for len(c.rank.log) < target {
				n := len(c.rank.log)
				c.touched(target % len(c.servers))
				if len(c.rank.log) <= n {
					break // compacted on the way: not this length
				}
			}
			before := len(c.rank.log)
			j := share(id, a.Name)
			id++
			pl, _, _ := c.placeScored(j, a, nil)
			if pl == nil {
				t.Fatal("no room for a share")
			}
			j.Placement = pl
			c.commit(j, a, pl)
			if len(c.rank.log) <= before {
				compacted++
			}
			next := share(id, a.Name)
			id++
			want, wantGPU := c.scanScored(next, next, a, nil, r, nil)
			got, gotGPU, ok := c.ranked(next, next, a, nil, r)
			if !ok {
				t.Fatal("the base cluster did not rank")
			}
			if got != want || gotGPU != wantGPU {
				t.Fatalf("%T log at %d: after %s's share on %s GPU %v: ranked %s GPU %d, scan %s GPU %d", scorer, before, a.Name, pl[0].Server, pl[0].GPUs, name(got), gotGPU, name(want), wantGPU)
			}
		}
		if compacted == 0 {
			t.Fatalf("%T: no placement compacted the log: not the state this test is for", scorer)
		}
	}
}
