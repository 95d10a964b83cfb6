package verify

import (
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// The overlay check follows EVPN routes the way BGP would carry them: over
// sessions configured on both ends with the EVPN family and the peer's
// ASN, re-advertised only by transit switches (spines, super-spines), and
// dropped by a switch whose ASN is already on the AS path (eBGP loop
// prevention: the spines of a pod share one ASN, so routes never valley
// through a pod). A route reaches a leaf with the originating VTEP as next
// hop only if every transit switch on the way kept it. In a three-tier
// fabric this is what carries a tenant's routes across pods.

// evpnEdge is one EVPN session that is up: both ends configure it.
type evpnEdge struct {
	to   int
	keep bool // the session keeps the next hop (NextHopUnchanged)
}

// overlay checks that every leaf's EVPN routes reach every other leaf
// carrying a VRF of the same tenant, next hop unchanged.
func (v *verifier) overlay() Check {
	cb := newCheck(CheckOverlay, "every leaf's EVPN routes reach every leaf that shares a tenant with it, across tiers and pods, with the originating VTEP as next hop")
	devs := v.m.devs
	idx := make(map[string]int, len(devs))
	for i, d := range devs {
		idx[d.Name] = i
	}
	// Configured EVPN sessions, then the ones both ends agree on.
	type half struct{ a, b int }
	conf := map[half]bool{}
	for i, d := range devs {
		for _, s := range d.Sessions {
			if j, ok := idx[s.Peer]; ok && s.EVPN && s.PeerASN == devs[j].ASN {
				conf[half{i, j}] = true
			}
		}
	}
	adj := make([][]evpnEdge, len(devs))
	for i, d := range devs {
		for _, s := range d.Sessions {
			j, ok := idx[s.Peer]
			if !ok || !s.EVPN {
				continue
			}
			if _, up := conf[half{j, i}]; up && s.PeerASN == devs[j].ASN && !slices.ContainsFunc(adj[i], func(e evpnEdge) bool { return e.to == j }) {
				adj[i] = append(adj[i], evpnEdge{to: j, keep: s.NextHopUnchanged})
			}
		}
	}
	transitASN := map[uint32]bool{}
	for _, d := range devs {
		if d.Role.Transit() {
			transitASN[d.ASN] = true
		}
	}
	// Leaves carrying each tenant's VRFs.
	byTenant := map[string][]int{}
	for ii := range v.m.insts {
		in := &v.m.insts[ii]
		if j, ok := idx[in.dev.Name]; ok && in.dev.Role == fabric.RoleLeaf {
			if l := byTenant[in.vrf.Tenant]; len(l) == 0 || l[len(l)-1] != j {
				byTenant[in.vrf.Tenant] = append(l, j)
			}
		}
	}
	// Leaves with the same EVPN neighbours (the leaves of a pod) see the
	// same propagation, unless a transit switch shares their ASN: one walk
	// per class.
	type walk struct {
		src     int
		tenant  int // the last tenant (index + 1) that looked at it
		reached []bool
		changed []int32 // the first transit that changed the next hop, -1: none
	}
	walks := map[string]*walk{}
	byLeaf := make([]*walk, len(devs)) // the key depends on the leaf alone
	walkOf := func(l int) *walk {
		if w := byLeaf[l]; w != nil {
			return w
		}
		var key strings.Builder
		for _, e := range adj[l] {
			key.WriteString(devs[e.to].Name + ",")
		}
		if transitASN[devs[l].ASN] {
			key.WriteString("asn" + strconv.FormatUint(uint64(devs[l].ASN), 10))
		}
		if w, ok := walks[key.String()]; ok {
			byLeaf[l] = w
			return w
		}
		w := &walk{src: l, reached: make([]bool, len(devs)), changed: make([]int32, len(devs))}
		evpnWalk(devs, adj, l, w.reached, w.changed)
		walks[key.String()] = w
		byLeaf[l] = w
		return w
	}
	tenants := make([]string, 0, len(byTenant))
	for t := range byTenant {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	seen := map[[2]int]bool{}
	for ti, t := range tenants {
		leaves := byTenant[t]
		for _, l := range leaves {
			w := walkOf(l)
			if w.tenant == ti+1 {
				continue // done for this tenant
			}
			w.tenant = ti + 1
			for _, m := range leaves {
				if m == w.src || seen[[2]int{w.src, m}] {
					continue
				}
				switch {
				case !w.reached[m]:
					seen[[2]int{w.src, m}] = true
					cb.fail(RuleEVPNPath, devs[w.src].Name, "to "+devs[m].Name,
						"the EVPN routes of %s (tenant %s) do not reach %s: no chain of EVPN sessions through spines and super-spines without an AS-path loop", devs[w.src].Name, t, devs[m].Name)
				case w.changed[m] >= 0:
					seen[[2]int{w.src, m}] = true
					cb.fail(RuleEVPNNextHop, devs[w.src].Name, "to "+devs[m].Name,
						"the EVPN routes of %s (tenant %s) reach %s with next hop %s: it re-advertises them without keeping the VTEP's, so traffic is tunnelled to a switch that has no VRF", devs[w.src].Name, t, devs[m].Name, devs[w.changed[m]].Name)
				}
			}
		}
	}
	return cb.done()
}

// evpnWalk is a breadth-first walk of src's EVPN routes: reached says who
// accepts them, changed who first rewrote their next hop on the way.
func evpnWalk(devs []*fabric.Device, adj [][]evpnEdge, src int, reached []bool, changed []int32) {
	parent := make([]int32, len(devs))
	for i := range parent {
		parent[i], changed[i] = -1, -1
	}
	reached[src] = true
	queue := []int{src}
	onPath := func(at int, asn uint32) bool {
		for p := int32(at); p >= 0; p = parent[p] {
			if devs[p].ASN == asn {
				return true
			}
		}
		return false
	}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if x != src && !devs[x].Role.Transit() {
			continue // a leaf keeps what it learns
		}
		for _, e := range adj[x] {
			if reached[e.to] || onPath(x, devs[e.to].ASN) {
				continue
			}
			reached[e.to], parent[e.to] = true, int32(x)
			changed[e.to] = changed[x]
			if x != src && !e.keep && changed[e.to] < 0 {
				changed[e.to] = int32(x)
			}
			queue = append(queue, e.to)
		}
	}
}
