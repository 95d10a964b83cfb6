package render

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// frrStyle is what differs between FRR on a Linux leaf (the lab) and FRR
// inside SONiC: VRF names, and whether frr.conf carries interface addresses
// (SONiC keeps them in CONFIG_DB).
type frrStyle struct {
	vrfName    func(v *fabric.VRF) string
	interfaces bool
}

func renderFRR(d *fabric.Device) ([]File, error) {
	st := frrStyle{vrfName: func(v *fabric.VRF) string { return v.Name }, interfaces: true}
	conf, err := frrConf(d, st)
	if err != nil {
		return nil, err
	}
	files := []File{{Name: "frr.conf", Content: conf}}
	if d.Role == fabric.RoleLeaf && len(d.Ports) > 0 {
		files = append(files, File{Name: "guard.nft", Content: nftGuard(d)})
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		files = append(files, File{Name: "guard-" + v.Name + ".nft", Content: nftVRFGuard(d, v)})
		if v.Policy != nil {
			files = append(files, File{Name: "gbp-" + v.Name + ".nft", Content: nftGBP(d, v)})
		}
	}
	return files, nil
}

// frrConf renders frr.conf the way the reference lab's leaf1-frr.conf and
// spine1-bgpd.conf are written: a VRF stanza with its VNI, one BGP instance
// for the underlay and EVPN, and one per tenant VRF with explicit RD and
// route targets.
func frrConf(d *fabric.Device, st frrStyle) (string, error) {
	var w lines
	w.b.WriteString(header("!", d, "FRR configuration"))
	w.add(0, "frr defaults datacenter")
	w.add(0, "hostname %s", d.Name)
	w.add(0, "log syslog informational")
	w.add(0, "service integrated-vtysh-config")
	w.add(0, "!")
	for i := range d.VRFs {
		v := &d.VRFs[i]
		w.add(0, "vrf %s", st.vrfName(v))
		w.add(1, "vni %d", v.L3VNI)
		w.add(0, "exit-vrf")
		w.add(0, "!")
	}
	if st.interfaces {
		frrInterfaces(&w, d, st)
	}

	w.add(0, "router bgp %d", d.ASN)
	w.add(1, "bgp router-id %s", d.Loopback)
	// The lab runs eBGP without policies; datacenter defaults still ask
	// for them, so say so explicitly.
	w.add(1, "no bgp ebgp-requires-policy")
	w.add(1, "no bgp default ipv4-unicast")
	w.add(1, "bgp bestpath as-path multipath-relax")
	for _, s := range d.Sessions {
		k := peerKey(s)
		if s.Unnumbered() {
			w.add(1, "neighbor %s interface remote-as %d", k, s.PeerASN)
		} else {
			w.add(1, "neighbor %s remote-as %d", k, s.PeerASN)
		}
		w.add(1, "neighbor %s description %s", k, s.Peer)
		if s.Multihop {
			w.add(1, "neighbor %s update-source lo", k)
			w.add(1, "neighbor %s ebgp-multihop 2", k)
		}
	}
	w.add(1, "address-family ipv4 unicast")
	w.add(2, "network %s/32", d.Loopback)
	for _, s := range d.Sessions {
		if s.Unicast {
			w.add(2, "neighbor %s activate", peerKey(s))
		}
	}
	w.add(1, "exit-address-family")
	w.add(1, "address-family l2vpn evpn")
	for _, s := range d.Sessions {
		if s.EVPN {
			w.add(2, "neighbor %s activate", peerKey(s))
		}
	}
	for _, s := range d.Sessions {
		if s.EVPN && s.NextHopUnchanged {
			w.add(2, "neighbor %s attribute-unchanged next-hop", peerKey(s))
		}
	}
	if d.Role == fabric.RoleLeaf {
		w.add(2, "advertise-all-vni")
		// One EVI per L2VNI (FRR has no vlan-aware bundles): the RD stays
		// automatic (router-id:unique number), the route target is the
		// L2VNI's own (l2RT, as on NX-OS), explicit like every other
		// target: a shared one would import every other EVI's routes.
		for i := range d.Ports {
			p := &d.Ports[i]
			if !p.Assigned() || !p.VLANAware() {
				continue
			}
			rt, err := l2RT(vrfOf(d, p), p)
			if err != nil {
				return "", err
			}
			w.add(2, "vni %d", p.L2VNI)
			w.add(3, "route-target import %s", rt)
			w.add(3, "route-target export %s", rt)
			w.add(2, "exit-vni")
		}
	}
	w.add(1, "exit-address-family")
	w.add(0, "exit")
	w.add(0, "!")

	for i := range d.VRFs {
		v := &d.VRFs[i]
		w.add(0, "router bgp %d vrf %s", d.ASN, st.vrfName(v))
		w.add(1, "bgp router-id %s", d.Loopback)
		w.add(1, "no bgp ebgp-requires-policy")
		for _, af := range []string{"ipv4", "ipv6"} {
			w.add(1, "address-family %s unicast", af)
			w.add(2, "redistribute connected")
			w.add(1, "exit-address-family")
		}
		w.add(1, "address-family l2vpn evpn")
		w.add(2, "rd %s", v.RD)
		w.add(2, "route-target import %s", v.RT)
		w.add(2, "route-target export %s", v.RT)
		w.add(2, "advertise ipv4 unicast")
		w.add(2, "advertise ipv6 unicast")
		w.add(1, "exit-address-family")
		w.add(0, "exit")
		w.add(0, "!")
	}
	return w.String(), nil
}

// frrInterfaces renders the interface stanzas of a Linux (FRR-only) switch:
// loopback, uplinks, server ports and the SVIs of vlan-aware links. Ports
// are enslaved to their VRF (or bridge) by the host's network setup; zebra
// sets the addresses.
func frrInterfaces(w *lines, d *fabric.Device, st frrStyle) {
	w.add(0, "interface lo")
	w.add(1, "ip address %s/32", d.Loopback)
	w.add(0, "exit")
	w.add(0, "!")
	for _, ph := range physicalPorts(d) {
		if u := ph.up; u != nil {
			w.add(0, "interface %s", u.Port)
			w.add(1, "description %s", uplinkDescription(*u))
			if u.Unnumbered() {
				// BGP unnumbered finds its peer through router advertisements.
				w.add(1, "ipv6 nd ra-interval 5")
				w.add(1, "no ipv6 nd suppress-ra")
			} else {
				w.add(1, "ip address %s", u.Address)
			}
			w.add(0, "exit")
			w.add(0, "!")
			continue
		}
		p := ph.port
		switch {
		case !p.Assigned():
			w.add(0, "interface %s", p.Name)
			w.add(1, "description %s", portDescription(p))
			if p.Quarantined {
				w.add(1, "shutdown")
			}
		case p.VLANAware():
			// The port is an access member of its own VLAN; the routed
			// interface is the VLAN's SVI, the anycast gateway.
			w.add(0, "interface %s", p.Name)
			w.add(1, "description %s", portDescription(p))
			w.add(0, "exit")
			w.add(0, "!")
			w.add(0, "interface %s vrf %s", sviName(p), st.vrfName(vrfOf(d, p)))
			w.add(1, "description gateway of %s", portDescription(p))
			for _, g := range []fmtPrefix{{p.Gateway4, "ip"}, {p.Gateway6, "ipv6"}} {
				if g.p.IsValid() {
					w.add(1, "%s address %s", g.kw, g.p)
				}
			}
		default:
			w.add(0, "interface %s vrf %s", p.Name, st.vrfName(vrfOf(d, p)))
			w.add(1, "description %s", portDescription(p))
			for _, g := range []fmtPrefix{{p.IPv4, "ip"}, {p.IPv6, "ipv6"}} {
				if g.p.IsValid() {
					w.add(1, "%s address %s", g.kw, g.p)
				}
			}
		}
		w.add(0, "exit")
		w.add(0, "!")
	}
}

// sviName is the Linux name of a vlan-aware link's gateway interface.
func sviName(p *fabric.Port) string { return fmt.Sprintf("vlan%d", p.VLAN) }

// l3vniBridge is the Linux bridge of a VRF's L3VNI (the router-MAC SVI of
// the reference lab, named br<L3VNI> there too).
func l3vniBridge(v *fabric.VRF) string { return fmt.Sprintf("br%d", v.L3VNI) }

// nftGBP renders the group policy of one VRF of a Linux leaf as an nftables
// ruleset, loaded inside the VRF's network namespace (the lab's point 7):
// the VXLAN device runs with the gbp flag, so the packet mark travels as the
// VXLAN group ID. Ingress sets the mark from the server port's group; egress
// to a server port passes only for an allowed (group, port) pair. Traffic
// towards the fabric (the L3VNI bridge) is enforced by the egress leaf.
func nftGBP(d *fabric.Device, v *fabric.VRF) string {
	var w lines
	w.b.WriteString(header("#", d, fmt.Sprintf("VXLAN group-policy rules of VRF %s (tenant %s, L3VNI %d)", v.Name, v.Tenant, v.L3VNI)))
	w.add(0, "# Load inside the VRF's network namespace: nft -f FILE (the file replaces its own table).")
	w.add(0, "# Ingress: the mark of a packet from a server port is the port's group (the VXLAN GBP group ID).")
	w.add(0, "# Egress to a server port: only its own group and groups with a contract pass; default deny.")
	var mapped, allowed []string
	for _, p := range vrfPorts(d, v.Name) {
		if p.Group == 0 {
			continue
		}
		ifn := p.Name
		if p.VLANAware() {
			ifn = sviName(p)
		}
		mapped = append(mapped, fmt.Sprintf("%q : %d", ifn, p.Group))
		allowed = append(allowed, fmt.Sprintf("%d . %q", p.Group, ifn))
		for _, c := range v.Policy.Contracts {
			switch p.Group {
			case c.A:
				allowed = append(allowed, fmt.Sprintf("%d . %q", c.B, ifn))
			case c.B:
				allowed = append(allowed, fmt.Sprintf("%d . %q", c.A, ifn))
			}
		}
	}
	var sw4, sw6 []string
	for _, p := range vrfPorts(d, v.Name) {
		if p.Group == 0 {
			continue
		}
		marks := []uint16{p.Group}
		for _, c := range v.Policy.Contracts {
			switch p.Group {
			case c.A:
				marks = append(marks, c.B)
			case c.B:
				marks = append(marks, c.A)
			}
		}
		for _, a := range switchAddrs(p) {
			for _, m := range marks {
				if a.Is4() {
					sw4 = append(sw4, fmt.Sprintf("%d . %s", m, a))
				} else {
					sw6 = append(sw6, fmt.Sprintf("%d . %s", m, a))
				}
			}
		}
	}
	hasElems := map[string]bool{"switch_allowed4": len(sw4) > 0, "switch_allowed6": len(sw6) > 0}
	for _, g := range v.Policy.Groups {
		w.add(0, "# group %d: %s", g.ID, groupName(v, g))
	}
	if v.Policy.Switch != 0 {
		w.add(0, "# group %d: the switches' own packets (ICMP errors and replies), marked on output", v.Policy.Switch)
	}
	w.tab(0, "table inet jobfabric_gbp")
	w.tab(0, "delete table inet jobfabric_gbp")
	w.tab(0, "table inet jobfabric_gbp {")
	nftCollection(&w, "map port_group", "ifname : mark", mapped)
	nftCollection(&w, "set allowed", "mark . ifname", allowed)
	nftCollection(&w, "set switch_allowed4", "mark . ipv4_addr", sw4)
	nftCollection(&w, "set switch_allowed6", "mark . ipv6_addr", sw6)
	// Chain names must not be nft keywords ("fwd" is one).
	w.tab(1, "chain gbppre {")
	w.tab(2, "type filter hook prerouting priority mangle; policy accept;")
	w.tab(2, "iifname != %q meta mark set iifname map @port_group", l3vniBridge(v))
	w.tab(1, "}")
	w.tab(1, "chain gbpfw {")
	w.tab(2, "type filter hook forward priority filter; policy accept;")
	w.tab(2, "oifname %q accept", l3vniBridge(v))
	if v.Policy.Switch != 0 {
		// ICMP errors and replies of a leaf (TTL exceeded, packet too
		// big): no server can send this group, ingress sets theirs.
		w.tab(2, "meta mark %d accept", v.Policy.Switch)
	}
	w.tab(2, "meta mark . oifname != @allowed counter drop")
	w.tab(1, "}")
	// The switch's own addresses in the VRF answer (ICMP only, see the
	// guard) whoever may reach the server behind that link: its group and
	// contracted groups, from here or over the fabric (the GBP mark).
	w.tab(1, "chain gbpin {")
	w.tab(2, "type filter hook input priority filter; policy accept;")
	w.tab(2, "iifname \"lo\" accept")
	w.tab(2, "ip6 daddr { fe80::/10, ff00::/8 } accept")
	for _, fam := range []struct{ set, kw string }{{"switch_allowed4", "ip"}, {"switch_allowed6", "ip6"}} {
		if hasElems[fam.set] {
			w.tab(2, "meta mark . %s daddr @%s accept", fam.kw, fam.set)
		}
	}
	w.tab(2, "counter drop")
	w.tab(1, "}")
	if v.Policy.Switch != 0 {
		w.tab(1, "chain gbpout {")
		w.tab(2, "type filter hook output priority mangle; policy accept;")
		w.tab(2, "meta mark set %d", v.Policy.Switch)
		w.tab(1, "}")
	}
	w.tab(0, "}")
	return w.String()
}

// switchAddrs are the leaf's own addresses on a server link: the first
// address of a pure type-5 link, the anycast gateway of a vlan-aware one.
func switchAddrs(p *fabric.Port) []netip.Addr {
	var out []netip.Addr
	a4, a6 := p.IPv4, p.IPv6
	if p.VLANAware() {
		a4, a6 = p.Gateway4, p.Gateway6
	}
	for _, a := range []netip.Prefix{a4, a6} {
		if a.IsValid() {
			out = append(out, a.Addr())
		}
	}
	return out
}

// nftGuard is the server-port guard of a Linux leaf's underlay namespace:
// a server port there (unassigned, hence also down, or on its way between
// VRFs) reaches nothing: no local delivery (link-local, ND, bgpd, the VTEP's
// UDP socket) and no routing in the default table, either way.
func nftGuard(d *fabric.Device) string {
	var w lines
	w.b.WriteString(header("#", d, "server-port guard of the underlay (default VRF)"))
	w.add(0, "# Load in the device's own network namespace: nft -f FILE (the file replaces its own table).")
	w.add(0, "# A server port in the default table is quarantined (admin-down); this drops whatever it still")
	w.add(0, "# sends or would be sent: nothing to or from a server port is delivered, answered or routed here.")
	var ports []string
	for i := range d.Ports {
		if d.Ports[i].Guarded {
			ports = append(ports, fmt.Sprintf("%q", d.Ports[i].Name))
		}
	}
	w.tab(0, "table inet jobfabric_guard")
	w.tab(0, "delete table inet jobfabric_guard")
	w.tab(0, "table inet jobfabric_guard {")
	nftCollection(&w, "set server_ports", "ifname", ports)
	for _, c := range []struct{ name, hook, match string }{
		{"guardin", "input", "iifname @server_ports"},
		{"guardfw", "forward", "iifname @server_ports"},
		{"guardfwout", "forward", "oifname @server_ports"},
		{"guardout", "output", "oifname @server_ports"},
	} {
		w.tab(1, "chain %s {", c.name)
		w.tab(2, "type filter hook %s priority filter - 10; policy accept;", c.hook)
		w.tab(2, "%s counter drop", c.match)
		w.tab(1, "}")
	}
	w.tab(0, "}")
	return w.String()
}

// nftVRFGuard is the guard of a tenant VRF's namespace: the switch serves
// nothing in a tenant VRF (no BGP session, no management), so all it
// accepts for itself is what a server needs from its gateway: ICMP echo
// and errors, and neighbour discovery. bgpd's listener in the VRF (TCP
// 179) and everything else is dropped, from a server port or the fabric.
func nftVRFGuard(d *fabric.Device, v *fabric.VRF) string {
	var w lines
	w.b.WriteString(header("#", d, fmt.Sprintf("server-port guard of VRF %s (tenant %s, L3VNI %d)", v.Name, v.Tenant, v.L3VNI)))
	w.add(0, "# Load inside the VRF's network namespace: nft -f FILE (the file replaces its own table).")
	w.add(0, "# What reaches the switch itself in a tenant VRF: ICMP echo and errors, neighbour discovery; nothing else.")
	w.tab(0, "table inet jobfabric_guard")
	w.tab(0, "delete table inet jobfabric_guard")
	w.tab(0, "table inet jobfabric_guard {")
	w.tab(1, "chain guardin {")
	w.tab(2, "type filter hook input priority filter - 10; policy drop;")
	w.tab(2, "iifname \"lo\" accept")
	w.tab(2, "icmp type { echo-request, echo-reply, destination-unreachable, time-exceeded, parameter-problem } accept")
	w.tab(2, "icmpv6 type { echo-request, echo-reply, destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert } accept")
	w.tab(2, "counter drop")
	w.tab(1, "}")
	nftSourceGuard(&w, d, v)
	w.tab(0, "}")
	return w.String()
}

// nftSourceGuard is the source-address validation of a VRF's server ports
// (Port.Sources, BCP 38): before anything else sees a packet (prerouting,
// raw priority: before conntrack and the group policy's mark), a port's
// packets pass only from its server's own addresses and, IPv6, link-local
// ones (neighbour discovery). DAD probes (from ::) are dropped: on a
// point-to-point link nothing could answer them. Vlan-aware links are
// matched on their SVI, where routed traffic enters the VRF. The chain
// has a name of its own so a test can delete just it.
func nftSourceGuard(w *lines, d *fabric.Device, v *fabric.VRF) {
	var rules []string
	for _, p := range vrfPorts(d, v.Name) {
		if len(p.Sources) == 0 {
			continue
		}
		ifn := p.Name
		if p.VLANAware() {
			ifn = sviName(p)
		}
		var s4 []string
		s6 := []string{"fe80::/10"}
		for _, s := range p.Sources {
			a := s.String()
			if s.IsSingleIP() {
				a = s.Addr().String()
			}
			if s.Addr().Is4() {
				s4 = append(s4, a)
			} else {
				s6 = append(s6, a)
			}
		}
		if len(s4) == 0 {
			rules = append(rules, fmt.Sprintf("iifname %q meta nfproto ipv4 counter drop", ifn))
		} else {
			rules = append(rules, fmt.Sprintf("iifname %q ip saddr != { %s } counter drop", ifn, strings.Join(s4, ", ")))
		}
		rules = append(rules, fmt.Sprintf("iifname %q ip6 saddr != { %s } counter drop", ifn, strings.Join(s6, ", ")))
	}
	if len(rules) == 0 {
		return
	}
	w.tab(1, "chain guardsrc {")
	w.tab(2, "type filter hook prerouting priority raw; policy accept;")
	for _, r := range rules {
		w.tab(2, "%s", r)
	}
	w.tab(1, "}")
}

// nftElements writes one element per line (trailing commas are fine in
// nft), so a job starting or stopping changes only its own lines.
// nftCollection declares a set or map ("set NAME", "map NAME") of the given
// type with its elements, inside a table.
func nftCollection(w *lines, decl, typ string, elems []string) {
	w.tab(1, "%s {", decl)
	w.tab(2, "type %s", typ)
	nftElements(w, elems)
	w.tab(1, "}")
}

func nftElements(w *lines, elems []string) {
	if len(elems) == 0 {
		return // nft refuses an empty element list; an empty set is just declared
	}
	w.tab(2, "elements = {")
	for _, e := range elems {
		w.tab(3, "%s,", e)
	}
	w.tab(2, "}")
}
