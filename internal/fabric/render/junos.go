package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// renderJunos writes set-style configuration (load set / load replace is
// up to the deploy driver), following Juniper's EVPN-VXLAN type-5 and
// mac-vrf examples: routing-instances of type vrf with ip-prefix-routes,
// mac-vrf instances of service-type vlan-aware for vlan-aware tenants,
// eBGP underlay with RFC 5549 unnumbered peering where uplinks have no IPv4.
func renderJunos(d *fabric.Device, caps Caps) ([]File, error) {
	var w lines
	w.b.WriteString(header("#", d, "Junos configuration"))
	set := func(format string, args ...any) { w.add(0, "set "+format, args...) }

	set("system host-name %s", d.Name)
	// Junos commits the candidate whole; the channelization comes first
	// all the same, as it would be typed.
	junosBreakouts(set, d)
	set("interfaces lo0 unit 0 family inet address %s/32", d.Loopback)
	set("routing-options router-id %s", d.Loopback)
	set("routing-options autonomous-system %d", d.ASN)
	set("routing-options forwarding-table export JF-ECMP")
	set("policy-options policy-statement JF-ECMP then load-balance per-packet")
	set("policy-options policy-statement JF-LOOPBACK term lo0 from interface lo0.0")
	set("policy-options policy-statement JF-LOOPBACK term lo0 then accept")

	// Underlay: one eBGP group over the uplinks.
	for _, u := range d.Uplinks {
		set("interfaces %s description %q", u.Port, uplinkDescription(u))
		set("interfaces %s mtu 9216", u.Port)
		if u.Unnumbered() {
			set("interfaces %s unit 0 family inet", u.Port)
			set("interfaces %s unit 0 family inet6", u.Port)
			set("protocols router-advertisement interface %s.0", u.Port)
		} else {
			set("interfaces %s unit 0 family inet address %s", u.Port, u.Address)
		}
	}
	const ul = "protocols bgp group underlay "
	set(ul + "type external")
	set(ul + "multipath multiple-as")
	set(ul + "export JF-LOOPBACK")
	unnumbered := false
	linkEVPN := false
	var peerASNs []uint32
	for _, s := range d.Sessions {
		if s.Multihop {
			continue
		}
		if s.EVPN {
			linkEVPN = true
			if s.NextHopUnchanged {
				// Junos keeps a next hop only per session (multihop
				// no-nexthop-change), which would also keep the underlay's.
				return nil, unsupported("a Junos spine cannot keep EVPN next hops on a session that also carries the underlay: compile with overlay %q", fabric.OverlayOnLoopbacks)
			}
		}
		if s.Unnumbered() {
			unnumbered = true
			if !containsU32(peerASNs, s.PeerASN) {
				peerASNs = append(peerASNs, s.PeerASN)
			}
			continue
		}
		set(ul+"neighbor %s description %s", s.Address, s.Peer)
		set(ul+"neighbor %s peer-as %d", s.Address, s.PeerASN)
	}
	if unnumbered {
		set(ul + "family inet unicast extended-nexthop")
		set(ul + "dynamic-neighbor JF-FABRIC peer-auto-discovery family inet6 ipv6-nd")
		for _, s := range d.Sessions {
			if s.Unnumbered() {
				set(ul+"dynamic-neighbor JF-FABRIC peer-auto-discovery interface %s.0", s.Interface)
			}
		}
		for _, a := range peerASNs {
			set("policy-options as-list JF-FABRIC-PEERS members %d", a)
		}
		set(ul + "peer-as-list JF-FABRIC-PEERS")
	} else {
		set(ul + "family inet unicast")
	}
	if linkEVPN {
		set(ul + "family evpn signaling")
	}
	// Overlay: EVPN between loopbacks; spines keep the originating VTEP as
	// next hop and keep every route (they have no VRF importing them).
	const ol = "protocols bgp group overlay "
	overlay := false
	for _, s := range d.Sessions {
		if !s.Multihop {
			continue
		}
		if !overlay {
			overlay = true
			set(ol + "type external")
			set(ol + "local-address " + d.Loopback.String())
			set(ol + "family evpn signaling")
			set(ol + "multipath multiple-as")
			set(ol + "multihop ttl 2")
			if s.NextHopUnchanged {
				set(ol + "multihop no-nexthop-change")
				set(ol + "keep all")
			}
		}
		set(ol+"neighbor %s description %s", s.Address, s.Peer)
		set(ol+"neighbor %s peer-as %d", s.Address, s.PeerASN)
	}

	if d.Role == fabric.RoleLeaf {
		if err := junosLeaf(d, caps, &w, set); err != nil {
			return nil, err
		}
	}
	return []File{{Name: "junos.set", Content: w.String()}}, nil
}

func junosLeaf(d *fabric.Device, caps Caps, w *lines, set func(string, ...any)) error {
	if len(d.VRFs) > 0 {
		set("switch-options vtep-source-interface lo0.0")
	}
	if caps.OverlayECMP && slices.ContainsFunc(d.VRFs, func(v fabric.VRF) bool { return v.MAC == nil }) {
		// Pure type-5 ECMP on these platforms; committing it restarts the
		// forwarding engine (internal/deploy reports it as disruptive).
		set("forwarding-options vxlan-routing overlay-ecmp")
	}
	if len(d.VRFs) > 0 {
		set("policy-options policy-statement JF-T5-EXPORT term direct from protocol direct")
		set("policy-options policy-statement JF-T5-EXPORT term direct then accept")
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		ri := "routing-instances " + v.Name + " "
		set(ri + "instance-type vrf")
		set(ri+"route-distinguisher %s", v.RD)
		set(ri+"vrf-target target:%s", v.RT)
		set(ri + "routing-options multipath")
		set(ri + "protocols evpn ip-prefix-routes advertise direct-nexthop")
		set(ri + "protocols evpn ip-prefix-routes encapsulation vxlan")
		set(ri+"protocols evpn ip-prefix-routes vni %d", v.L3VNI)
		set(ri + "protocols evpn ip-prefix-routes export JF-T5-EXPORT")
		// A MAC-VRF needs a bridge domain: with none of the tenant's
		// VLANs on this leaf, commit fails ("must configure bridge-domain
		// for mac-vrf instance"), so it is not rendered, as on EOS.
		if v.MAC != nil && hasVLANAwarePort(d, v.Name) {
			mi := "routing-instances " + v.MAC.Name + " "
			set(mi + "instance-type mac-vrf")
			set(mi + "service-type vlan-aware")
			set(mi + "protocols evpn encapsulation vxlan")
			set(mi + "protocols evpn default-gateway no-gateway-community")
			set(mi + "protocols evpn extended-vni-list all")
			set(mi + "vtep-source-interface lo0.0")
			set(mi+"route-distinguisher %s", v.MAC.RD)
			set(mi+"vrf-target target:%s", v.MAC.RT)
		}
	}
	gbp := caps.GBP && hasSegmented(d)
	switch {
	case gbp:
		junosGBP(d, caps, w, set)
	case hasSegmented(d):
		w.add(0, "# Job segmentation: this configuration uses no group-based policy, so each port of a")
		w.add(0, "# segmented VRF gets input filters allowing only its job's (and contracted groups') prefixes.")
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		set("interfaces %s description %q", p.Name, portDescription(p))
		if !p.Assigned() {
			// No unit: no address, no VLAN; quarantined, it is down too.
			if p.Quarantined {
				set("interfaces %s disable", p.Name)
			}
			continue
		}
		set("interfaces %s mtu 9216", p.Name)
		v := vrfOf(d, p)
		l3 := p.Name + ".0" // the routed interface that joins the VRF
		if p.VLANAware() {
			vl := fmt.Sprintf("v%d", p.VLAN)
			irb := fmt.Sprintf("irb.%d", p.VLAN)
			set("interfaces %s unit 0 family ethernet-switching interface-mode access", p.Name)
			set("interfaces %s unit 0 family ethernet-switching vlan members %s", p.Name, vl)
			// Anycast gateway: the same address and MAC on every leaf.
			set("interfaces irb unit %d description %q", p.VLAN, "gateway of "+portDescription(p))
			set("interfaces irb unit %d mac %s", p.VLAN, d.AnycastMAC)
			junosAddrs(set, fmt.Sprintf("interfaces irb unit %d", p.VLAN), p.Gateway4, p.Gateway6)
			mi := "routing-instances " + v.MAC.Name + " "
			set(mi+"interface %s.0", p.Name)
			set(mi+"vlans %s vlan-id %d", vl, p.VLAN)
			set(mi+"vlans %s l3-interface %s", vl, irb)
			set(mi+"vlans %s vxlan vni %d", vl, p.L2VNI)
			l3 = irb
		} else {
			junosAddrs(set, "interfaces "+p.Name+" unit 0", p.IPv4, p.IPv6)
		}
		set("routing-instances %s interface %s", v.Name, l3)
		junosFilters(set, d, p, l3, !gbp)
	}
	return nil
}

// junosGBP renders job segmentation as Junos VXLAN group-based policy
// (22.4R1 and later): a micro-segmentation filter tags what enters each
// member port (and the group's external prefixes) with its group, and an
// enforcement filter on the source and destination tags accepts traffic
// within a group and along a contract, both ways; the filter's implicit
// discard ends the rest, the default deny between groups. Syntax: Juniper,
// "Micro and Macro Segmentation using Group Based Policy in a VXLAN":
// https://www.juniper.net/documentation/us/en/software/junos/evpn-vxlan/topics/example/micro-segmentation-using-group-based-policy.html
// and Juniper's Apstra VXLAN GBP configlets (interface- and IP-based
// tagging, the MSEG enforcement filter, vxlan-gbp-profile):
// https://github.com/Juniper-SE/Apstra-configlets/tree/main/Juniper/JUNOS/VXLAN_Interface_Based_GBP
func junosGBP(d *fabric.Device, caps Caps, w *lines, set func(string, ...any)) {
	w.add(0, "# Job segmentation: VXLAN group-based policy, one GBP tag per job group.")
	if caps.GBPProfile {
		// Restarts the forwarding engine when committed (internal/deploy
		// reports it).
		set("chassis forwarding-options vxlan-gbp-profile")
	}
	const tag = "firewall family any filter JF-GBP-TAG "
	const enf = "firewall family any filter JF-GBP "
	ipTags, tagged := false, false
	term := func(name, from string, id uint16) {
		if !tagged {
			tagged = true
			set(tag + "micro-segmentation")
		}
		set(tag+"term %s from %s", name, from)
		set(tag+"term %s then gbp-tag %d", name, id)
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		if v.Policy == nil {
			continue
		}
		for _, g := range v.Policy.Groups {
			for _, port := range g.Ports {
				term(fmt.Sprintf("g%d-%s", g.ID, sanitize(port)), "interface "+port+".0", g.ID)
			}
			for j, x := range g.External {
				ipTags = true
				term(fmt.Sprintf("g%d-ext%d", g.ID, j+1), fmt.Sprintf("ip-version %s address %s", ipFamily(x), x), g.ID)
			}
		}
	}
	if ipTags {
		// IP-based tagging of remote (external) endpoints.
		set("forwarding-options evpn-vxlan gbp mac-ip-inter-tagging")
	}
	allow := func(a, b uint16) {
		t := fmt.Sprintf("g%d-g%d", a, b)
		set(enf+"term %s from gbp-src-tag %d", t, a)
		set(enf+"term %s from gbp-dst-tag %d", t, b)
		set(enf+"term %s then accept", t)
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		if v.Policy == nil {
			continue
		}
		for _, g := range v.Policy.Groups {
			allow(g.ID, g.ID)
		}
		for _, c := range v.Policy.Contracts {
			allow(c.A, c.B)
			allow(c.B, c.A)
		}
	}
}

func junosAddrs(set func(string, ...any), unit string, v4, v6 netip.Prefix) {
	if v4.IsValid() {
		set("%s family inet address %s", unit, v4)
	}
	if v6.IsValid() {
		set("%s family inet6 address %s", unit, v6)
	}
}

// junosFilters renders a port's ingress ACL (portACL: the server-port
// guard, then the job segmentation, which this renderer does not do with
// Junos group-based policy) as input filters on its routed interface, one
// per family. Consecutive entries of one kind share a term.
func junosFilters(set func(string, ...any), d *fabric.Device, p *fabric.Port, l3 string, withAllow bool) {
	unit := "interfaces " + strings.Replace(l3, ".", " unit ", 1)
	for _, fam := range []struct {
		name, suffix, icmp string
		v6                 bool
	}{{"inet", "", "protocol icmp", false}, {"inet6", "6", "next-header icmp6", true}} {
		entries, permitRest, ok := portACL(d, p, fam.v6, withAllow)
		if !ok {
			return
		}
		if fam.v6 && !slices.ContainsFunc(switchAddrs(p), netip.Addr.Is6) {
			// A filter would create family inet6 on the unit, and with it
			// an IPv6 link-local address the port does not have now.
			continue
		}
		f := fmt.Sprintf("jf-%s-in%s", sanitize(l3), fam.suffix)
		fl := "firewall family " + fam.name + " filter " + f + " "
		set(fl + "interface-specific")
		for i := 0; i < len(entries); {
			e := entries[i]
			term := e.kind
			// Entries of one kind share their sources (portACL), so
			// the term's source and destination lists (matched as any
			// of each) say the same as the entries.
			for _, s := range e.src {
				set(fl+"term %s from source-address %s", term, s)
			}
			for ; i < len(entries) && entries[i].kind == e.kind; i++ {
				if entries[i].dst.IsValid() {
					set(fl+"term %s from destination-address %s", term, entries[i].dst)
				}
			}
			if e.icmp {
				set(fl+"term %s from %s", term, fam.icmp)
			}
			set(fl+"term %s then %s", term, map[bool]string{true: "accept", false: "discard"}[e.permit])
		}
		if permitRest {
			set(fl + "term rest then accept")
		} else {
			set(fl + "term rest then discard")
		}
		set("%s family %s filter input %s", unit, fam.name, f)
	}
}

func containsU32(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
