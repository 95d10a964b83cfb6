package lint

import (
	"strconv"
	"strings"
)

// Vendor documents the EOS rules come from.
const (
	// Arista EOS User Manual, "Border Gateway Protocol (BGP)": peer
	// groups are created (`neighbor G peer group`) before neighbors join
	// them; IPv4 NLRI with IPv6 next hops (RFC 5549) needs `neighbor G
	// next-hop address-family ipv6 originate` in address-family ipv4 and
	// `ip routing ipv6 interfaces`.
	aristaBGP = "https://www.arista.com/en/um-eos/eos-border-gateway-protocol-bgp"
	// Arista AVD eos_designs (single-dc-l3ls example, underlay_rfc5549):
	// the published EVPN designs' shapes: vrf instance before use, the
	// multi-agent routing model for EVPN, ipv6 enable on unnumbered
	// uplinks and on SVIs with `ipv6 address virtual`.
	aristaAVD = "https://avd.arista.com/stable/ansible_collections/arista/avd/examples/single-dc-l3ls/index.html"
	// Interface EBGP sessions on Arista EOS (ipSpace, checked on cEOS
	// 4.31.2F): ipv6 enable on the interface and ipv6 unicast-routing.
	ipspaceEOS = "https://blog.ipspace.net/2024/03/arista-interface-ebgp.html"
	// Arista AVD eos_cli_config_gen, router bgp neighbor_interfaces: the
	// rendered form is `neighbor interface <if> peer-group <pg>
	// remote-as <asn>`.
	aristaAVDBGP = "https://avd.arista.com/stable/roles/eos_cli_config_gen/docs/tables/router-bgp.html"
	// Arista EOS User Manual, "Layer 1 Profiles": a multi-lane port
	// exposes one interface per lane (Ethernet1/1..1/8 on an OSFP); a
	// lane's interface carries traffic only once the port is broken out
	// (the sub-ports' speeds with their lane counts).
	aristaL1 = "https://www.arista.com/jp/um-eos/eos-layer-1-profiles"
)

func eos(device string, f File) *report {
	r := newReport(device, f.Name)
	lines := indented(f.Content)
	vrfs := map[string]bool{}
	acls := map[string]bool{}
	vlans := map[string]bool{}
	peerGroups := map[string]bool{}
	global := map[string]bool{}
	ipv6Enabled := map[string]bool{} // interface -> ipv6 enable
	originate := map[string]bool{}   // peer group -> next-hop af ipv6 originate under af ipv4
	var unnumbered []line            // neighbor interface ... peer group G lines
	var virtual6 []line              // ipv6 address virtual lines
	evpn := 0
	speeds := map[string]bool{} // interfaces with a speed above
	reportedLane := map[string]bool{}
	need := func(l line, set map[string]bool, name, what, doc string) {
		if !set[name] {
			r.add(l.n, "eos/define-before-use", "%q uses %s %s, not defined above it (%s)", l.text, what, name, doc)
		}
	}
	for _, l := range lines {
		t := l.text
		ws := words{s: t}
		if l.indent == 0 {
			global[t] = true
		}
		switch {
		case l.indent == 0 && strings.HasPrefix(t, "interface "):
			r.iface(l.n, strings.TrimPrefix(t, "interface "))
		case l.indent == 0 && strings.HasPrefix(t, "vrf instance "):
			vrfs[ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "ip access-list "):
			acls["ip "+ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "ipv6 access-list "):
			acls["ipv6 "+ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "vlan "):
			vlans[ws.at(1)] = true
		case l.indent == 0 && strings.HasPrefix(t, "ip routing vrf "), l.indent == 0 && strings.HasPrefix(t, "ipv6 unicast-routing vrf "):
			need(l, vrfs, ws.at(3), "VRF", aristaAVD)
		}
		if l.indent == 0 {
			continue
		}
		top := l.top()
		if ifc, ok := strings.CutPrefix(top, "interface "); ok && eosLane(ifc) {
			switch {
			case strings.HasPrefix(t, "speed "):
				speeds[ifc] = true
			case !speeds[ifc] && !reportedLane[ifc]:
				reportedLane[ifc] = true
				r.add(l.n, "eos/breakout-before-use", "interface %s is a lane of a multi-lane port with no speed above this line: it stays inactive until the port is broken out (give each sub-port its `speed <G>g-<lanes>` first; %s)", ifc, aristaL1)
			}
		}
		switch {
		case strings.HasPrefix(top, "interface ") && strings.HasPrefix(t, "vrf "):
			need(l, vrfs, ws.at(1), "VRF", aristaAVD)
		case strings.HasPrefix(t, "ip access-group "):
			need(l, acls, "ip "+ws.at(2), "IPv4 ACL", aristaAVD)
		case strings.HasPrefix(t, "ipv6 access-group "):
			need(l, acls, "ipv6 "+ws.at(2), "IPv6 ACL", aristaAVD)
		case strings.HasPrefix(t, "switchport access vlan "):
			need(l, vlans, ws.at(3), "VLAN", aristaAVD)
		case strings.HasPrefix(t, "vxlan vrf "):
			need(l, vrfs, ws.at(2), "VRF", aristaAVD)
		case strings.HasPrefix(t, "vxlan vlan "):
			need(l, vlans, ws.at(2), "VLAN", aristaAVD)
		case t == "ipv6 enable" && strings.HasPrefix(top, "interface "):
			ipv6Enabled[strings.TrimPrefix(top, "interface ")] = true
		case strings.HasPrefix(t, "ipv6 address virtual "):
			virtual6 = append(virtual6, l)
		case strings.HasPrefix(top, "router bgp "):
			eosBGPLine(r, l, peerGroups, vlans, originate, &unnumbered, &evpn, need)
		}
	}
	if evpn > 0 {
		r.feature(evpn, FeatureEOSEVPN)
		// EVPN runs in the multi-agent routing model only.
		if !global["service routing protocols model multi-agent"] {
			r.add(evpn, "eos/required", "address-family evpn needs `service routing protocols model multi-agent` (%s)", aristaAVD)
		}
	}
	for _, l := range virtual6 {
		ifc := strings.TrimPrefix(l.top(), "interface ")
		if !ipv6Enabled[ifc] {
			r.add(l.n, "eos/required", "interface %s has %q but no `ipv6 enable`: the SVI has no IPv6 of its own, no link-local address and no neighbor discovery (%s)", ifc, l.text, aristaAVD)
		}
	}
	reported := map[string]bool{}
	for _, l := range unnumbered {
		r.feature(l.n, FeatureEOSRFC5549)
		ifc, pg := word(l.text, 2), after(l.text, "peer-group")
		if !ipv6Enabled[ifc] {
			r.add(l.n, "eos/required", "BGP runs over the IPv6 link-local address of %s, which has no `ipv6 enable` (%s)", ifc, ipspaceEOS)
		}
		if reported[pg] {
			continue // the rest is said once per peer group
		}
		reported[pg] = true
		if !originate[pg] {
			r.add(l.n, "eos/required", "peer group %s peers over IPv6 link-local addresses but address-family ipv4 lacks `neighbor %s next-hop address-family ipv6 originate`: no IPv4 route (no loopback) is sent, the fabric does not come up (%s)", pg, pg, aristaBGP)
		}
		for _, g := range []string{"ip routing ipv6 interfaces", "ipv6 unicast-routing"} {
			if !global[g] {
				r.add(l.n, "eos/required", "BGP over IPv6 link-local sessions needs %q (%s)", g, ipspaceEOS)
			}
		}
	}
	return r
}

func eosBGPLine(r *report, l line, peerGroups, vlans, originate map[string]bool, unnumbered *[]line, evpn *int, need func(line, map[string]bool, string, string, string)) {
	t := l.text
	ws := words{s: t}
	switch {
	case strings.HasPrefix(t, "neighbor ") && strings.HasSuffix(t, " peer group") && ws.len() == 4:
		peerGroups[ws.at(1)] = true
	case strings.HasPrefix(t, "neighbor interface "):
		// `neighbor interface I peer-group G remote-as N`: the published
		// designs' form (AVD, netlab); the spaced "peer group" of IP
		// neighbors is not the interface neighbor's.
		if ws.after("peer-group") == "" {
			r.add(l.n, "eos/syntax", "%q is not the interface neighbor's form in the published designs, `neighbor interface I peer-group G remote-as N` (%s)", t, aristaAVDBGP)
			break
		}
		need(l, peerGroups, ws.after("peer-group"), "peer group", aristaBGP)
		*unnumbered = append(*unnumbered, l)
	case strings.HasPrefix(t, "neighbor ") && strings.Contains(t, " peer group "):
		need(l, peerGroups, ws.after("group"), "peer group", aristaBGP)
	case t == "address-family evpn" && *evpn == 0:
		*evpn = l.n
	case strings.HasPrefix(t, "neighbor ") && strings.HasSuffix(t, " next-hop address-family ipv6 originate"):
		if af, ok := l.in("address-family "); ok && af == "address-family ipv4" {
			originate[ws.at(1)] = true
		}
	case strings.HasPrefix(t, "vlan ") && strings.HasPrefix(l.parents[len(l.parents)-1], "vlan-aware-bundle "):
		for _, v := range strings.Split(ws.at(1), ",") {
			need(l, vlans, v, "VLAN", aristaAVD)
		}
	case strings.HasPrefix(t, "route-target "):
		rt := ws.at(2)
		if rt == "evpn" {
			rt = ws.at(3)
		}
		parent := l.parents[len(l.parents)-1]
		switch {
		case strings.HasPrefix(parent, "vrf "):
			r.rt(l.n, "vrf", word(parent, 1), rt)
		case strings.HasPrefix(parent, "vlan-aware-bundle "):
			r.rt(l.n, "mac-vrf", word(parent, 1), rt)
		case strings.HasPrefix(parent, "vlan "):
			r.rt(l.n, "l2vni", "vlan "+word(parent, 1), rt)
		}
	}
}

// eosLane reports whether an interface name is a lane other than the first
// of a multi-lane port (Ethernet1/3): it is a sub-port, used only when the
// port is broken out. The first lane (Ethernet1/1) is also the whole port's
// name, so its use says nothing.
func eosLane(name string) bool {
	rest, ok := strings.CutPrefix(name, "Ethernet")
	if !ok {
		return false
	}
	port, lane, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(lane, "/") || strings.Contains(lane, ".") {
		return false
	}
	_, err := strconv.Atoi(port)
	n, err2 := strconv.Atoi(lane)
	return err == nil && err2 == nil && n > 1
}
