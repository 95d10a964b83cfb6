package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestOwnerIndexAsScan compares the servers ownedBy lists for each tenant
// with a scan of every server (its first holder if server-isolated, else
// with no holder its exclusive tenant), on an index built over servers
// held in runs of one tenant (server-isolated or not), a tenant's runs
// apart, single servers and unheld ones, then after each of many holds
// and releases (the index kept up to date server by server). It fails if
// the build loses a run (the last, or a tenant's earlier one when a later
// run of it starts), a position (pos) no longer names its server, or a
// server whose first holder is not server-isolated is indexed.
func TestOwnerIndexAsScan(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		s := &Snapshot{Topology: topo}
		c := buildCluster(s)
		tenants := make([]string, 6)
		for i := range tenants {
			tenants[i] = fmt.Sprintf("t%d", i)
		}
		iso := &domain.Tenant{Isolation: domain.IsolationServer}
		// Runs of servers held by one tenant, and gaps.
		for i := 0; i < len(c.servers); {
			n := 1 + rng.IntN(5)
			tn := tenants[rng.IntN(len(tenants))]
			// Held by a server-isolated tenant (indexed), a GPU-isolated
			// one (not), or none.
			hold := rng.IntN(4)
			for ; n > 0 && i < len(c.servers); n, i = n-1, i+1 {
				switch hold {
				case 1:
					c.hold(c.servers[i], tn, nil)
				case 2, 3:
					c.hold(c.servers[i], tn, iso)
				}
			}
		}
		check := func(when string) {
			t.Helper()
			for _, tn := range append(tenants, "") {
				var want []int
				for i, v := range c.servers {
					// The servers tn could be alone on if server-isolated:
					// its first hold server-isolated, or no holder and tn
					// the exclusive tenant.
					first := v.exclusive
					if len(v.holders) > 0 {
						first = ""
						if v.holders[0].exclusive {
							first = v.holders[0].tenant
						}
					}
					if first == tn && tn != "" {
						want = append(want, i)
					}
				}
				got := slices.Sorted(slices.Values(c.ownedBy(tn)))
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d, %s: ownedBy(%q) = %v, a scan finds %v", seed, when, tn, got, want)
				}
			}
			o := c.owners
			for i, k := range o.key {
				if k != "" && o.by[k][o.pos[i]] != i {
					t.Fatalf("seed %d, %s: server %d is at %d of %q's list, which holds %d there", seed, when, i, o.pos[i], k, o.by[k][o.pos[i]])
				}
			}
		}
		check("built")
		for change := 0; change < 300; change++ {
			v := c.mut(c.servers[rng.IntN(len(c.servers))].s.Name)
			tn := tenants[rng.IntN(len(tenants))]
			switch {
			case len(v.holders) > 0 && rng.IntN(2) == 0:
				v.unhold(v.holders[rng.IntN(len(v.holders))].tenant)
			case rng.IntN(5) == 0:
				c.hold(v, tn, iso)
			default:
				c.hold(v, tn, nil)
			}
			if change%10 == 0 {
				check(fmt.Sprintf("change %d", change))
			}
		}
		check("changed")
	}
}
