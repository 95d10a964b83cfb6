package lint

import (
	"strconv"
	"strings"
)

// Vendor documents the NX-OS rules come from.
const (
	// Cisco Nexus 9000 Series NX-OS VXLAN Configuration Guide, Release
	// 10.x, "Configuring VXLAN BGP EVPN": features (nv overlay,
	// vn-segment-vlan-based, interface-vlan, bgp, fabric forwarding) and
	// `nv overlay evpn` come first; VRFs, VLANs and vn-segments before
	// nve1 members.
	ciscoVXLAN = "https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/104x/configuration/vxlan/cisco-nexus-9000-series-nx-os-vxlan-configuration-guide-release-104x/m_configuring_vxlan_bgp_evpn.html"
	// Cisco, "Microsegmentation for VXLAN fabrics using GPO" (NX-OS
	// 10.6): feature security-group (after `system routing
	// template-security-groups` and a reload), security groups, class and
	// policy maps of type security, then contracts in the VRF.
	ciscoGPO = "https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/106x/configuration/vxlan/cisco-nexus-9000-series-nx-os-vxlan-configuration-guide-release-106x/microsegmentation_for_vxlan_fabrics_using_gpo.html"
	// Cisco Nexus 9000 Series NX-OS Security Configuration Guide,
	// "Configuring IP ACLs": an access group names an existing ACL.
	ciscoACL = "https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/104x/configuration/security/cisco-nexus-9000-series-nx-os-security-configuration-guide-release-104x/m-configuring-ip-acls.html"
	// Cisco Nexus 9000 Series NX-OS Layer 2 Switching Configuration
	// Guide, "Configuring VLANs": VLANs 3968-4094 are reserved for
	// internal use; `system vlan N reserve` (then a reload) moves the 128
	// reserved VLANs to N..N+127, and a reserved VLAN cannot be created.
	ciscoVLANs = "https://www.cisco.com/c/en/us/td/docs/dcn/nx-os/nexus9000/104x/configuration/Layer-2_switching/cisco-nexus-9000-series-nx-os-layer-2-switching-configuration-guide-release-104x/m-configuring-vlans.html"
	// Cisco Nexus-as-Code, "Breakout Interface": `interface breakout
	// module M port P map <map>` splits port P; its sub-ports
	// EthernetM/P/1.. exist only after it.
	ciscoBreakout = "https://netascode.cisco.com/docs/data_models/vxlan/topology/interface/breakout_interface"
)

// nxosFeatures: a line starting with the key needs the global line (a
// feature, or nv overlay evpn) above it. [ciscoVXLAN], [ciscoGPO]
var nxosFeatures = []struct{ use, needs string }{
	{"interface nve", "feature nv overlay"},
	{"vn-segment ", "feature vn-segment-vlan-based"},
	{"interface Vlan", "feature interface-vlan"},
	{"router bgp ", "feature bgp"},
	{"fabric forwarding ", "feature fabric forwarding"},
	{"evpn", "nv overlay evpn"},
	{"address-family l2vpn evpn", "nv overlay evpn"},
	{"security-group ", "feature security-group"},
	{"class-map type security ", "feature security-group"},
	{"policy-map type security ", "feature security-group"},
	{"security enforce ", "feature security-group"},
	{"security contract ", "feature security-group"},
}

func nxos(device string, f File) *report {
	r := newReport(device, f.Name)
	global := map[string]bool{}
	vrfs := map[string]bool{}
	vrfVNIs := map[string]bool{}
	segments := map[string]bool{}
	acls := map[string]bool{}
	groups := map[string]bool{}
	classes := map[string]bool{}
	policies := map[string]bool{}
	routeMaps := map[string]bool{}
	split := map[string]bool{} // "module/port" broken out above
	reservedLo := 3968         // NX-OS's internal VLANs, unless `system vlan N reserve` moves them
	need := func(l line, set map[string]bool, name, what, doc string) {
		if !set[name] {
			r.add(l.n, "nxos/define-before-use", "%q uses %s %s, not defined above it (NX-OS applies a configuration line by line and refuses the reference; %s)", l.text, what, name, doc)
		}
	}
	for _, l := range indented(f.Content) {
		t := l.text
		ws := words{s: t}
		if l.indent == 0 {
			global[t] = true
		}
		for _, ft := range nxosFeatures {
			if (t == ft.use || strings.HasPrefix(t, ft.use)) && t != ft.needs && !global[ft.needs] {
				r.add(l.n, "nxos/feature-order", "%q needs %q above it (%s)", t, ft.needs, ciscoVXLAN)
			}
		}
		switch {
		case l.indent == 0 && strings.HasPrefix(t, "interface breakout module "):
			for _, p := range nxosPortList(ws.after("port")) {
				split[ws.at(3)+"/"+p] = true
			}
		case l.indent == 0 && strings.HasPrefix(t, "interface "):
			name := strings.TrimPrefix(t, "interface ")
			r.iface(l.n, name)
			if mod, port, ok := nxosSubPort(name); ok && !split[mod+"/"+port] {
				r.add(l.n, "nxos/breakout-before-use", "%q names a sub-port of Ethernet%s/%s, which no `interface breakout module %s port %s map ...` above splits: NX-OS refuses the interface (%s)", t, mod, port, mod, port, ciscoBreakout)
			}
		case l.indent == 0 && strings.HasPrefix(t, "vrf context "):
			vrfs[ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "ip access-list "):
			acls["ip "+ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "ipv6 access-list "):
			acls["ipv6 "+ws.at(2)] = true
		case l.indent == 0 && strings.HasPrefix(t, "route-map "):
			routeMaps[ws.at(1)] = true
		case l.indent == 0 && strings.HasPrefix(t, "security-group "):
			r.feature(l.n, FeatureNXOSSecurityGroups)
			groups[ws.at(1)] = true
		case l.indent == 0 && strings.HasPrefix(t, "class-map type security "):
			classes[ws.at(ws.len()-1)] = true
		case l.indent == 0 && strings.HasPrefix(t, "policy-map type security "):
			policies[ws.at(3)] = true
		case l.indent == 0 && t == "nv overlay evpn":
			r.feature(l.n, FeatureNXOSEVPN)
		case l.indent == 0 && strings.HasPrefix(t, "system vlan ") && ws.at(3) == "reserve":
			if n, err := strconv.Atoi(ws.at(2)); err == nil {
				reservedLo = n
			}
		case l.indent == 0 && strings.HasPrefix(t, "vlan "):
			for _, v := range nxosList(ws.at(1)) {
				if v >= reservedLo && v < reservedLo+128 {
					r.add(l.n, "nxos/reserved-vlan", "%q creates VLAN %d, one of the switch's reserved VLANs %d-%d: NX-OS refuses it (move the reserved range with `system vlan N reserve`, or take the tenants' L3 VLANs below it: `jobfabric fabric options --l3-vlans`; %s)", t, v, reservedLo, reservedLo+127, ciscoVLANs)
					break
				}
			}
		}
		if l.indent == 0 {
			continue
		}
		top := l.top()
		switch {
		case strings.HasPrefix(t, "vrf member "):
			need(l, vrfs, ws.at(2), "VRF", ciscoVXLAN)
		case strings.HasPrefix(t, "vni ") && strings.HasPrefix(top, "vrf context "):
			vrfVNIs[ws.at(1)] = true
		case strings.HasPrefix(t, "vn-segment "):
			segments[ws.at(1)] = true
		case strings.HasPrefix(t, "ip access-group "):
			need(l, acls, "ip "+ws.at(2), "IPv4 ACL", ciscoACL)
		case strings.HasPrefix(t, "ipv6 traffic-filter "):
			need(l, acls, "ipv6 "+ws.at(2), "IPv6 ACL", ciscoACL)
		case strings.Contains(t, " route-map ") || strings.HasPrefix(t, "route-map "):
			need(l, routeMaps, ws.after("route-map"), "route map", ciscoVXLAN)
		case strings.HasPrefix(t, "match connected-endpoints vrf ") || strings.HasPrefix(t, "match external-subnets vrf "):
			need(l, vrfs, ws.at(3), "VRF", ciscoGPO)
		case strings.HasPrefix(t, "security contract "):
			for _, g := range []string{ws.after("source"), ws.after("destination")} {
				if g != "any" {
					need(l, groups, g, "security group", ciscoGPO)
				}
			}
			need(l, policies, ws.after("policy"), "security policy map", ciscoGPO)
		case strings.HasPrefix(t, "class ") && strings.HasPrefix(top, "policy-map type security "):
			need(l, classes, ws.at(1), "security class map", ciscoGPO)
		case strings.HasPrefix(top, "class-map type security ") && strings.HasPrefix(t, "match ipv6"):
			// Cisco's GPO guide and examples show `match ipv4` (and its
			// ESG tests `match ip`); `match ipv6` is in no published
			// example, so it is not known to load.
			r.add(l.n, "nxos/security-class-match", "%q is not a confirmed class-map type security match (confirmed: match ip, match ipv4 ...; %s)", t, ciscoGPO)
		case strings.HasPrefix(t, "member vni ") && strings.HasSuffix(t, " associate-vrf"):
			need(l, vrfVNIs, ws.at(2), "L3VNI (vni under a vrf context)", ciscoVXLAN)
			need(l, segments, ws.at(2), "vn-segment", ciscoVXLAN)
		case strings.HasPrefix(t, "member vni "):
			need(l, segments, ws.at(2), "vn-segment", ciscoVXLAN)
		case strings.HasPrefix(t, "vni ") && strings.HasSuffix(t, " l2") && top == "evpn":
			need(l, segments, ws.at(1), "vn-segment", ciscoVXLAN)
		case strings.HasPrefix(t, "route-target "):
			nxosRT(r, l)
		}
	}
	return r
}

// nxosRT records a route target under a vrf context (an IP-VRF) or an
// evpn vni (an L2 EVI). "auto" targets are per device and not compared.
func nxosRT(r *report, l line) {
	rt := word(l.text, 2)
	if rt == "" || rt == "auto" {
		return
	}
	if v, ok := l.in("vrf context "); ok {
		r.rt(l.n, "vrf", word(v, 2), rt)
		return
	}
	if v, ok := l.in("vni "); ok && l.top() == "evpn" {
		r.rt(l.n, "l2vni", word(v, 1), rt)
	}
}

// nxosSubPort splits a breakout sub-port name, EthernetM/P/S, into its
// module and port; ok is false for any other name.
func nxosSubPort(name string) (mod, port string, ok bool) {
	rest, found := strings.CutPrefix(name, "Ethernet")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return "", "", false
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return "", "", false
		}
	}
	return parts[0], parts[1], true
}

// nxosPortList expands a port list of `interface breakout` (1,3-4).
func nxosPortList(s string) []string {
	var out []string
	for _, p := range nxosList(s) {
		out = append(out, strconv.Itoa(p))
	}
	return out
}

// nxosList expands an NX-OS number list ("10", "1,3-4", "10,20-30", as
// breakout ports and VLANs are written); a malformed item, or a range
// wider than a VLAN space, is left out (other rules and the switch judge
// the syntax).
func nxosList(s string) []int {
	var out []int
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 4094 {
				continue
			}
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	return out
}
