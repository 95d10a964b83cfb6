package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// The checks below model every server port as an attacker: whoever is
// behind it, tenant or not, sends whatever it likes (any destination, a
// static neighbour entry, crafted VXLAN frames). What stops it is in the
// intent: a quarantined port is down and carries nothing; a port in a VRF
// routes only in its VRF, and its guard drops what it sends to the
// device's Underlay list and to the switch itself (ICMP aside). A port that
// is up in no VRF is in the default table: it reaches everything there.

// --- server ports -----------------------------------------------------------

func (v *verifier) serverPorts() Check {
	cb := newCheck(CheckServerPorts, "every server port in no tenant VRF is quarantined (admin-down), every server port carries the ingress guard, every assigned port accepts only its server's own source addresses")
	m := v.m
	for ei := range m.eps {
		e := &m.eps[ei]
		for _, p := range e.ports {
			if p.Assigned() {
				v.portSources(cb, int32(ei), p)
			}
			switch {
			case p.VRF == "" && !p.Quarantined:
				cb.fail(RulePortQuarantine, e.ref.Leaf, e.ref.Port, "is in no VRF but not quarantined: it is up in the default table")
			case p.VRF != "" && p.Quarantined:
				cb.fail(RulePortQuarantine, e.ref.Leaf, e.ref.Port, "is in VRF %s but quarantined: its server's link is down", p.VRF)
			}
			if !p.Guarded {
				cb.fail(RulePortGuard, e.ref.Leaf, e.ref.Port, "has no ingress guard: nothing stops it from addressing the underlay or the switch itself")
			}
		}
	}
	return cb.done()
}

// portSources checks a bound port's source-address validation. The
// attacker behind a port sends from any source it likes; what the port
// accepts must be its server's own addresses (Port.OwnSources, derived
// here from the link's prefixes), or the peer it reaches sees packets
// "from" another server or a switch: IP-based trust, logs and telemetry
// blame the victim, and replies reflect to it.
func (v *verifier) portSources(cb *checkBuilder, ei int32, p *fabric.Port) {
	e := &v.m.eps[ei]
	if len(p.Sources) == 0 {
		cb.fail(RulePortSource, e.ref.Leaf, e.ref.Port, "(%s) accepts any source address: its server can send as another tenant's or job's server, or as a switch", describeOwner(v.ownerName(ei)))
		return
	}
	own := p.OwnSources()
	for _, s := range p.Sources {
		if slices.ContainsFunc(own, func(o netip.Prefix) bool { return s.Bits() >= o.Bits() && o.Contains(s.Addr()) }) {
			continue
		}
		cb.fail(RulePortSource, e.ref.Leaf, e.ref.Port, "(%s) accepts source %s, beyond its server's own %s%s", describeOwner(v.ownerName(ei)), s, joinPrefixes(own), v.spoofable(ei, s))
	}
}

// spoofable names what a source prefix covers besides the port's server:
// another endpoint's link, or a switch's own address.
func (v *verifier) spoofable(ei int32, s netip.Prefix) string {
	for oi := range v.m.eps {
		o := &v.m.eps[oi]
		if int32(oi) == ei {
			continue
		}
		if slices.ContainsFunc(o.prefixes, func(q netip.Prefix) bool { return q.Overlaps(s) }) {
			return fmt.Sprintf(": the server of %s (%s) included", o.ref.Leaf+"/"+o.ref.Port, describeOwner(v.ownerName(int32(oi))))
		}
	}
	for _, t := range v.m.underlayTargets() {
		if s.Contains(t.addr) {
			return fmt.Sprintf(": %s (%s) included", t.addr, t.what())
		}
	}
	return ""
}

func joinPrefixes(ps []netip.Prefix) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ", ")
}

// --- underlay ---------------------------------------------------------------

// target is an underlay address a server port must not reach.
type target struct {
	addr netip.Addr
	kind string         // "VTEP", "loopback", "uplink", "BGP peer"
	dev  *fabric.Device // whose address it is (or who peers with it)
	obj  string         // the uplink port, or the peer's name
	leaf *fabric.Device // the VTEP's device when addr is a leaf's loopback
}

// what names the target for a failure (built only then: a large fabric has
// tens of thousands of them).
func (t *target) what() string {
	switch t.kind {
	case "uplink":
		return "uplink " + t.dev.Name + "/" + t.obj
	case "BGP peer":
		return "BGP peer " + t.obj + " of " + t.dev.Name
	}
	return t.kind + " of " + t.dev.Name
}

// underlayTargets lists every underlay address of the intent, read from
// the devices themselves (not from their Underlay lists): loopbacks (VTEPs
// on leaves), numbered uplink ends and BGP peer addresses, each once.
func (m *model) underlayTargets() []target {
	var out []target
	seen := map[netip.Addr]bool{}
	add := func(t target) {
		if t.addr.IsValid() && !seen[t.addr] {
			seen[t.addr] = true
			out = append(out, t)
		}
	}
	for _, d := range m.devs {
		if d.Role == fabric.RoleLeaf {
			add(target{addr: d.Loopback, kind: "VTEP", dev: d, leaf: d})
		} else {
			add(target{addr: d.Loopback, kind: "loopback", dev: d})
		}
	}
	for _, d := range m.devs {
		for _, u := range d.Uplinks {
			add(target{addr: u.Address.Addr(), kind: "uplink", dev: d, obj: u.Port})
		}
		for _, s := range d.Sessions {
			add(target{addr: s.Address, kind: "BGP peer", dev: d, obj: s.Peer})
		}
	}
	return out
}

// underlayIsolation walks every server port as an attacker: which
// underlay addresses it reaches, whether its leaf's control plane answers
// it, and, for every VTEP it reaches, which VNIs and groups a crafted VXLAN
// packet from it would be decapsulated into.
func (v *verifier) underlayIsolation() Check {
	cb := newCheck(CheckUnderlay, "no server port reaches an underlay address (loopback, VTEP, uplink, BGP peer) or its switch's control plane, or gets a VXLAN packet decapsulated into any VNI or group")
	m := v.m
	targets := m.underlayTargets()
	// What a guard lets through depends only on the device's Underlay
	// list, which compiled intents share between devices.
	open := map[*netip.Prefix][]int{}
	var openNone []int // a device with an empty list guards nothing
	for i := range targets {
		openNone = append(openNone, i)
	}
	openOf := func(d *fabric.Device) []int {
		if len(d.Underlay) == 0 {
			return openNone
		}
		k := &d.Underlay[0]
		if o, ok := open[k]; ok {
			return o
		}
		var o []int
		for i, t := range targets {
			if !slices.ContainsFunc(d.Underlay, func(p netip.Prefix) bool { return p.Contains(t.addr) }) {
				o = append(o, i)
			}
		}
		open[k] = o
		return o
	}
	for ei := range m.eps {
		e := &m.eps[ei]
		if e.quarantined() {
			continue
		}
		var reach []int
		var why string
		switch {
		case len(e.inst) == 0:
			reach, why = openNone, "up in the default table"
			cb.fail(RuleReachControlPlane, e.ref.Leaf, e.ref.Port, "is up in the default table: %s answers it on its link-local address, bgpd included (TCP 179)", e.dev.Name)
		case !e.guarded():
			reach, why = openNone, "not guarded"
			cb.fail(RuleReachControlPlane, e.ref.Leaf, e.ref.Port, "has no guard: %s's own address on the link answers it on any port, bgpd's listener in VRF %s included (TCP 179)", e.dev.Name, m.insts[e.inst[0]].vrf.Name)
		default:
			reach = openOf(e.dev)
			why = "" // spelled out below, only when it reaches something
		}
		if len(reach) == 0 {
			continue
		}
		if why == "" {
			why = "not in " + e.dev.Name + "'s underlay guard"
		}
		var names []string
		var vteps []*fabric.Device
		for _, ti := range reach {
			names = append(names, fmt.Sprintf("%s (%s)", targets[ti].addr, targets[ti].what()))
			if targets[ti].leaf != nil {
				vteps = append(vteps, targets[ti].leaf)
			}
		}
		cb.fail(RuleReachUnderlay, e.ref.Leaf, e.ref.Port, "(%s) reaches %d underlay addresses, %s: %s", describeOwner(v.ownerName(int32(ei))), len(names), why, abbreviate(names, 4))
		for _, l := range vteps {
			vnis, groups := decapsulates(l)
			if len(vnis) == 0 {
				continue
			}
			cb.fail(RuleReachVNI, e.ref.Leaf, e.ref.Port, "can send VXLAN to VTEP %s (%s), which decapsulates VNIs %s%s",
				l.Loopback, l.Name, joinU32(vnis), groupsSuffix(groups))
		}
	}
	return cb.done()
}

// decapsulates lists the VNIs a leaf's VTEP decapsulates (L3VNIs, L2VNIs)
// and the groups its policies know: what a crafted packet could claim.
func decapsulates(d *fabric.Device) (vnis []uint32, groups []uint16) {
	for _, vr := range d.VRFs {
		vnis = append(vnis, vr.L3VNI)
		if vr.Policy != nil {
			for _, g := range vr.Policy.Groups {
				groups = append(groups, g.ID)
			}
		}
	}
	for _, p := range d.Ports {
		if p.L2VNI != 0 {
			vnis = append(vnis, p.L2VNI)
		}
	}
	slices.Sort(vnis)
	slices.Sort(groups)
	return slices.Compact(vnis), slices.Compact(groups)
}

func groupsSuffix(g []uint16) string {
	if len(g) == 0 {
		return ""
	}
	s := make([]string, len(g))
	for i, id := range g {
		s[i] = fmt.Sprint(id)
	}
	return " and groups " + abbreviate(s, 8)
}

func joinU32(v []uint32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return abbreviate(s, 8)
}

func abbreviate(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:n], ", "), len(s)-n)
}

// --- switch traffic -----------------------------------------------------------

// switchGroupNOS reports whether the renderers mark a NOS's own packets
// with the switches' group (FRR/Linux: an nftables output hook).
func switchGroupNOS(nos string) bool { return nos == "frr" }

// switchTraffic checks the reserved group of the leaves' own packets: a
// segmented VRF on a leaf that enforces group policy by packet mark lets
// it through (else the far leaf's ICMP errors, TTL exceeded and packet too
// big, are dropped and path-MTU discovery fails inside a job), and no
// server or group can carry it (else it would pass every policy).
func (v *verifier) switchTraffic() Check {
	cb := newCheck(CheckSwitchTraffic, "the leaves' own ICMP errors reach every port of a segmented VRF (the switches' group), and no server or group carries that group")
	m := v.m
	for ii := range m.insts {
		in := &m.insts[ii]
		pol := in.vrf.Policy
		if pol == nil {
			continue
		}
		if pol.Switch == 0 {
			if switchGroupNOS(in.dev.NOS) {
				cb.fail(RuleICMPSwitchGroup, in.dev.Name, "vrf "+in.vrf.Name, "has no switch group: the leaves' ICMP errors (TTL exceeded, packet too big) carry no group and are dropped at egress, so path-MTU discovery and traceroute fail inside jobs")
			}
			continue
		}
		if pol.Unclassified == pol.Switch {
			cb.fail(RuleSwitchGroupForged, in.dev.Name, "vrf "+in.vrf.Name, "unclassified traffic carries the switch group %d: every server in no group passes every egress policy", pol.Switch)
		}
		for _, g := range pol.Groups {
			if g.ID == pol.Switch {
				cb.fail(RuleSwitchGroupForged, in.dev.Name, "vrf "+in.vrf.Name, "group %s has the switch group's ID %d: its members pass every egress policy", g.Name, g.ID)
			}
		}
		for _, ei := range in.eps {
			if slices.Contains(m.eps[ei].groups, pol.Switch) {
				cb.fail(RuleSwitchGroupForged, m.eps[ei].ref.Leaf, m.eps[ei].ref.Port, "is classified into the switch group %d of VRF %s: its server passes every egress policy", pol.Switch, in.vrf.Name)
			}
		}
	}
	return cb.done()
}
