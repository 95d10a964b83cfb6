package sched

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestPoolScansVisitThePoolOnly checks the servers the placement scans
// visit for a job of a pool whose servers are not contiguous (every third
// one): in a what-if view (no free-GPU sets), exactly the pool's servers in
// index order (bestFit's order among them for bestFit and migServers); on
// the base cluster, those of them with room. A job of no pool, a pool that
// does not exist, and an exhaustive cycle still visit every server. Before
// the scans took the job, a what-if view visited all 12,500 servers of a
// 100,000-GPU cluster for a job of one pool of 8.
func TestPoolScansVisitThePoolOnly(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 3, ServersPerStripe: 30, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	all := topo.Servers()
	pool := &domain.ServerPool{Name: "p"}
	var inPool []string
	for i, v := range all {
		if i%3 == 1 {
			pool.Servers = append(pool.Servers, v.Name)
			inPool = append(inPool, v.Name)
		}
	}
	var allNames []string
	for _, v := range all {
		allNames = append(allNames, v.Name)
	}
	names := func(seq func(func(*server) bool)) []string {
		var out []string
		for v := range seq {
			out = append(out, v.s.Name)
		}
		return out
	}
	list := func(vs []*server) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.s.Name)
		}
		return out
	}
	for _, exhaustive := range []bool{false, true} {
		s := &Snapshot{Topology: topo, Static: NewStatic(topo), Pools: map[string]*domain.ServerPool{"p": pool}, exhaustive: exhaustive}
		c := buildCluster(s)
		// Some servers of the pool and out of it hold GPUs: bestFit puts
		// them first, and the base cluster's room sets leave full ones out.
		for i, k := range []int{0, 1, 4, 7, 8} {
			v := c.servers[k]
			n := 8
			if i%2 == 0 {
				n = 3
			}
			for g := range n {
				v.free[g] = false
			}
			v.nfree -= n
			c.touched(k)
		}
		view := c.shallow(nil)
		for _, tc := range []struct {
			name string
			job  *domain.Job
			want []string // a what-if view's scans, in index order
		}{
			{"pool", &domain.Job{JobSpec: domain.JobSpec{GPUs: 1, Pool: "p"}}, inPool},
			{"no pool", &domain.Job{JobSpec: domain.JobSpec{GPUs: 1}}, allNames},
			{"missing pool", &domain.Job{JobSpec: domain.JobSpec{GPUs: 1, Pool: "gone"}}, allNames},
		} {
			want := tc.want
			if exhaustive {
				want = allNames
			}
			name := fmt.Sprintf("%s exhaustive=%v", tc.name, exhaustive)
			if got := names(view.withRoom(1, tc.job)); !slices.Equal(got, want) {
				t.Errorf("%s: a view's withRoom visits %v, want %v", name, got, want)
			}
			var fit []*server
			for _, v := range view.servers {
				if slices.Contains(want, v.s.Name) {
					fit = append(fit, v)
				}
			}
			wantFit := list(byFree(fit))
			if got := list(view.bestFit(tc.job)); !slices.Equal(got, wantFit) {
				t.Errorf("%s: a view's bestFit is %v, want %v", name, got, wantFit)
			}
			if got := names(view.migServers(tc.job, nil, nil)); !slices.Equal(got, wantFit) {
				t.Errorf("%s: a view's migServers visits %v, want %v", name, got, wantFit)
			}
			if exhaustive {
				continue // no room sets: the view's scans
			}
			var withRoom []string
			for _, v := range c.servers {
				if v.nfree >= 1 && slices.Contains(want, v.s.Name) {
					withRoom = append(withRoom, v.s.Name)
				}
			}
			if got := names(c.withRoom(1, tc.job)); !slices.Equal(got, withRoom) {
				t.Errorf("%s: the cluster's withRoom visits %v, want %v", name, got, withRoom)
			}
		}
	}
}
