package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackAsMapCount compares pack, which counts servers per group in a
// scratch slice kept across calls, with pack counting in a fresh map
// (packByMap, the implementation it replaced, kept verbatim), over many
// calls sharing one scratch: random candidates of random NVLink domains,
// stripes and fabrics (IDs sparse and dense), gangs of 2 to 12 servers.
// It fails if a call leaves counts behind for the next (the reset), or
// if the counts or their order of first appearance differ.
func TestPackAsMapCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 3))
	var scratch packScratch
	for call := 0; call < 3000; call++ {
		n := 1 + rng.IntN(40)
		span := 1 + rng.IntN(12)
		fit := make([]*server, n)
		for i := range fit {
			fab := 1 + rng.IntN(2)
			stripe := 100 + fab*10 + rng.IntN(span)
			fit[i] = &server{idx: i, nfree: rng.IntN(9), static: &static{domainID: 1000 + stripe*8 + rng.IntN(span), stripeID: stripe, fabricID: fab}}
			if call%7 == 0 {
				fit[i].domainID *= 50 // beyond the scratch so far: it grows
			}
		}
		nodes, per := 2+rng.IntN(11), 1+rng.IntN(8)
		got, want := pack(fit, nodes, per, &scratch), packByMap(fit, nodes, per)
		if (got == nil) != (want == nil) {
			t.Fatalf("call %d: pack %v, by map %v", call, got, want)
		}
		if got != nil && (got.level != want.level || got.rank != want.rank || !slices.Equal(got.servers, want.servers)) {
			t.Fatalf("call %d: pack chose %d servers at %s, by map %d at %s", call, len(got.servers), got.level, len(want.servers), want.level)
		}
	}
	for k, c := range scratch.count {
		if c != 0 {
			t.Fatalf("scratch[%d] = %d after the calls, want 0", k, c)
		}
	}
}

// packByMap is pack as it was, counting in a map.
func packByMap(fit []*server, nodes, per int) *choice {
	if len(fit) < nodes {
		return nil
	}
	sorted := byFree(fit)
	if nodes == 1 {
		return &choice{servers: sorted[:1], level: LevelServer}
	}
	levels := []struct {
		name string
		key  func(*server) int
	}{
		{LevelNVLinkDomain, func(v *server) int { return v.domainID }},
		{LevelStripe, func(v *server) int { return v.stripeID }},
		{LevelFabric, func(v *server) int { return v.fabricID }},
	}
	count := map[int]int{}
	for rank, lv := range levels {
		clear(count)
		var keys []int // in order of first appearance
		for _, v := range sorted {
			k := lv.key(v)
			if count[k] == 0 {
				keys = append(keys, k)
			}
			count[k]++
		}
		bestKey, bestN := 0, 0
		for _, k := range keys {
			if n := count[k]; n >= nodes && (bestN == 0 || n < bestN) {
				bestKey, bestN = k, n
			}
		}
		if bestN == 0 {
			continue
		}
		g := make([]*server, 0, bestN)
		for _, v := range sorted {
			if lv.key(v) == bestKey {
				g = append(g, v)
			}
		}
		if rank > 0 {
			g = fewestSubgroups(g, levels[rank-1].key)
		}
		return &choice{servers: g[:nodes], level: lv.name, rank: rank + 1}
	}
	return nil
}
