package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTenantIndexFillAsSet compares the index of servers by share tenant
// made in one pass (fill, a cycle's first ranking) with the one made
// server by server (set, as it was), then after random changes set on
// both: servers with no share, one, several tenants and one tenant on
// several GPUs. It fails when fill hands keys what the servers before
// put in its array (a tenant already listed for another server is left
// out) and when a server's list is not capped at its end (set's append
// writes over the next server's), each tried.
func TestTenantIndexFillAsSet(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 15))
		n := 1 + rng.IntN(120)
		servers := make([]*server, n)
		reshare := func(v *server) {
			v.share, v.shareTenant = nil, nil
			for g := range rng.IntN(5) {
				if v.share == nil {
					v.share, v.shareTenant = map[int]int{}, map[int]string{}
				}
				v.share[g] = rng.IntN(3) // 0: the GPU's shares are gone
				v.shareTenant[g] = fmt.Sprintf("t%d", rng.IntN(6))
			}
		}
		for i := range servers {
			servers[i] = &server{idx: i}
			reshare(servers[i])
		}
		want, got := newTenantIndex(n, shareTenants), newTenantIndex(n, shareTenants)
		for i, v := range servers {
			want.set(i, v)
		}
		got.fill(servers)
		sameTenantIndex(t, seed, -1, got, want)
		for k := range 60 {
			i := rng.IntN(n)
			reshare(servers[i])
			want.set(i, servers[i])
			got.set(i, servers[i])
			sameTenantIndex(t, seed, k, got, want)
		}
	}
}

func sameTenantIndex(t *testing.T, seed uint64, change int, got, want *tenantIndex) {
	t.Helper()
	for i := range want.on {
		g, w := slices.Sorted(slices.Values(got.on[i])), slices.Sorted(slices.Values(want.on[i]))
		if !slices.Equal(g, w) {
			t.Fatalf("seed %d, change %d: server %d listed under %v, set by set %v", seed, change, i, g, w)
		}
	}
	if len(got.by) != len(want.by) {
		t.Fatalf("seed %d, change %d: %d tenants, set by set %d", seed, change, len(got.by), len(want.by))
	}
	for k, w := range want.by {
		g := slices.Sorted(slices.Values(got.by[k]))
		if !slices.Equal(g, slices.Sorted(slices.Values(w))) {
			t.Fatalf("seed %d, change %d: tenant %s on %v, set by set %v", seed, change, k, g, w)
		}
	}
}
