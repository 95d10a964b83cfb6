package render

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// renderEOS writes Arista EOS configuration in the shape of AVD's
// single-dc-l3ls example: routed server ports in "vrf", "vxlan vrf X vni N"
// on Vxlan1, and per VRF under router bgp an RD of loopback:vrf-id with
// explicit EVPN route targets. Vlan-aware tenants get one vlan-aware-bundle
// each and a virtual-router anycast gateway per link VLAN. EOS here has no
// group policy, so job segmentation is rendered as per-interface ACLs.
func renderEOS(d *fabric.Device) ([]File, error) {
	var w lines
	leaf := d.Role == fabric.RoleLeaf
	w.b.WriteString(header("!", d, "EOS configuration"))
	w.add(0, "hostname %s", d.Name)
	w.add(0, "!")
	w.add(0, "service routing protocols model multi-agent")
	w.add(0, "!")
	// Sub-port speeds first: every later line may name a sub-port.
	eosBreakouts(&w, d)
	if d.AnycastMAC != "" {
		w.add(0, "ip virtual-router mac-address %s", d.AnycastMAC)
		w.add(0, "!")
	}
	if leaf {
		for i := range d.Ports {
			p := &d.Ports[i]
			if p.Assigned() && p.VLANAware() {
				w.add(0, "vlan %d", p.VLAN)
				w.add(3, "name %s-%s", p.Tenant, sanitize(p.Name))
				w.add(0, "!")
			}
		}
		for i := range d.VRFs {
			w.add(0, "vrf instance %s", d.VRFs[i].Name)
			w.add(3, "description tenant %s", d.VRFs[i].Tenant)
			w.add(0, "!")
		}
		eosACLs(&w, d)
	}

	w.add(0, "interface Loopback0")
	w.add(3, "description router ID%s", map[bool]string{true: " and VTEP source", false: ""}[leaf])
	w.add(3, "ip address %s/32", d.Loopback)
	w.add(0, "!")
	for _, ph := range physicalPorts(d) {
		if u := ph.up; u != nil {
			w.add(0, "interface %s", u.Port)
			w.add(3, "description %s", uplinkDescription(*u))
			w.add(3, "mtu 9214")
			w.add(3, "no switchport")
			if u.Unnumbered() {
				w.add(3, "ipv6 enable")
			} else {
				w.add(3, "ip address %s", u.Address)
			}
			w.add(0, "!")
			continue
		}
		p := ph.port
		w.add(0, "interface %s", p.Name)
		w.add(3, "description %s", portDescription(p))
		switch {
		case !p.Assigned():
			// Routed, no address, no VRF, quarantined: down.
			w.add(3, "no switchport")
			if p.Quarantined {
				w.add(3, "shutdown")
			}
		case p.VLANAware():
			w.add(3, "mtu 9214")
			w.add(3, "switchport access vlan %d", p.VLAN)
		default:
			w.add(3, "mtu 9214")
			w.add(3, "no switchport")
			w.add(3, "vrf %s", p.VRF)
			eosAddrs(&w, "", p.IPv4, p.IPv6)
			eosAccessGroups(&w, d, p)
		}
		w.add(0, "!")
	}
	if leaf {
		for i := range d.Ports {
			p := &d.Ports[i]
			if !p.Assigned() || !p.VLANAware() {
				continue
			}
			w.add(0, "interface Vlan%d", p.VLAN)
			w.add(3, "description gateway of %s", portDescription(p))
			w.add(3, "vrf %s", p.VRF)
			eosAddrs(&w, " virtual", p.Gateway4, p.Gateway6)
			eosAccessGroups(&w, d, p)
			w.add(0, "!")
		}
		if len(d.VRFs) > 0 {
			w.add(0, "interface Vxlan1")
			w.add(3, "vxlan source-interface Loopback0")
			w.add(3, "vxlan udp-port 4789")
			for i := range d.Ports {
				p := &d.Ports[i]
				if p.Assigned() && p.VLANAware() {
					w.add(3, "vxlan vlan %d vni %d", p.VLAN, p.L2VNI)
				}
			}
			for i := range d.VRFs {
				w.add(3, "vxlan vrf %s vni %d", d.VRFs[i].Name, d.VRFs[i].L3VNI)
			}
			w.add(0, "!")
		}
	}
	w.add(0, "ip routing")
	for i := range d.VRFs {
		w.add(0, "ip routing vrf %s", d.VRFs[i].Name)
	}
	w.add(0, "ipv6 unicast-routing")
	for i := range d.VRFs {
		w.add(0, "ipv6 unicast-routing vrf %s", d.VRFs[i].Name)
	}
	for _, u := range d.Uplinks {
		if u.Unnumbered() {
			// IPv4 routes over IPv6 link-local next hops (RFC 5549).
			w.add(0, "ip routing ipv6 interfaces")
			break
		}
	}
	w.add(0, "!")
	eosBGP(&w, d)
	return []File{{Name: "eos.cfg", Content: w.String()}}, nil
}

func eosAddrs(w *lines, virtual string, v4, v6 netip.Prefix) {
	if v4.IsValid() {
		w.add(3, "ip address%s %s", virtual, v4)
	}
	if v6.IsValid() {
		// An SVI with only `ipv6 address virtual` has no IPv6 of its own
		// (no link-local, no ND) until IPv6 is enabled on it.
		w.add(3, "ipv6 enable")
		w.add(3, "ipv6 address%s %s", virtual, v6)
	}
}

func eosACLName(p *fabric.Port, v6 bool) string {
	n := "JF-" + sanitize(p.Name) + "-IN"
	if v6 {
		n += "6"
	}
	return n
}

func eosAccessGroups(w *lines, d *fabric.Device, p *fabric.Port) {
	if _, _, ok := portACL(d, p, false, true); !ok {
		return
	}
	w.add(3, "ip access-group %s in", eosACLName(p, false))
	w.add(3, "ipv6 access-group %s in", eosACLName(p, true))
}

// eosACLs renders every assigned port's inbound ACLs: the server-port
// guard, then (segmented VRFs) the job's allow-list.
func eosACLs(w *lines, d *fabric.Device) {
	w.add(0, "! Server-port guard: nothing to the fabric's underlay; only ICMP to the switch's own addresses.")
	if hasSegmented(d) {
		w.add(0, "! Job segmentation: EOS here has no VXLAN group policy, so every port of a segmented")
		w.add(0, "! VRF's ACL then allows only its job's (and contracted groups') prefixes.")
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		for _, fam := range []struct {
			kw, proto, icmp string
			v6              bool
		}{{"ip", "ip", "icmp", false}, {"ipv6", "ipv6", "icmpv6", true}} {
			entries, permitRest, ok := portACL(d, p, fam.v6, true)
			if !ok {
				break
			}
			numberedACL(w, 3, fam.kw, eosACLName(p, fam.v6), fam.proto, fam.icmp, entries, permitRest)
		}
	}
}

func eosBGP(w *lines, d *fabric.Device) {
	w.add(0, "router bgp %d", d.ASN)
	w.add(3, "router-id %s", d.Loopback)
	w.add(3, "no bgp default ipv4-unicast")
	w.add(3, "maximum-paths 64")
	w.add(3, "neighbor UNDERLAY peer group")
	w.add(3, "neighbor UNDERLAY send-community extended")
	multihop := false
	for _, s := range d.Sessions {
		if s.Multihop {
			multihop = true
		}
	}
	if multihop {
		w.add(3, "neighbor OVERLAY peer group")
		w.add(3, "neighbor OVERLAY update-source Loopback0")
		w.add(3, "neighbor OVERLAY ebgp-multihop 2")
		w.add(3, "neighbor OVERLAY send-community extended")
	}
	evpnGroups := map[string]bool{}
	nhu := map[string]bool{}
	for _, s := range d.Sessions {
		pg := "UNDERLAY"
		if s.Multihop {
			pg = "OVERLAY"
		}
		if s.EVPN {
			evpnGroups[pg] = true
			nhu[pg] = nhu[pg] || s.NextHopUnchanged
		}
		if s.Unnumbered() {
			// The interface form keeps the hyphen ("peer-group"), as in
			// every published design (AVD's rfc5549 underlay, netlab):
			// https://avd.arista.com/stable/roles/eos_cli_config_gen/docs/tables/router-bgp.html (neighbor_interfaces)
			w.add(3, "neighbor interface %s peer-group %s remote-as %d", s.Interface, pg, s.PeerASN)
			continue
		}
		w.add(3, "neighbor %s peer group %s", s.Address, pg)
		w.add(3, "neighbor %s remote-as %d", s.Address, s.PeerASN)
		w.add(3, "neighbor %s description %s", s.Address, s.Peer)
	}
	w.add(3, "!")
	w.add(3, "address-family evpn")
	for _, pg := range []string{"OVERLAY", "UNDERLAY"} {
		if evpnGroups[pg] {
			w.add(6, "neighbor %s activate", pg)
			if nhu[pg] {
				w.add(6, "neighbor %s next-hop-unchanged", pg)
			}
		}
	}
	w.add(3, "!")
	w.add(3, "address-family ipv4")
	w.add(6, "neighbor UNDERLAY activate")
	if slices.ContainsFunc(d.Sessions, fabric.Session.Unnumbered) {
		// IPv4 loopbacks over IPv6 link-local sessions (RFC 5549): without
		// this the session comes up and exchanges no IPv4 route. Arista
		// AVD's rfc5549 designs set it on the underlay peer group:
		// https://avd.arista.com/stable/roles/eos_designs/docs/input-variables.html (underlay_rfc5549)
		w.add(6, "neighbor UNDERLAY next-hop address-family ipv6 originate")
	}
	w.add(6, "network %s/32", d.Loopback)
	w.add(3, "!")
	// One vlan-aware bundle per vlan-aware tenant: one EVI, one RD and
	// target, all the tenant's link VLANs on this leaf.
	for i := range d.VRFs {
		v := &d.VRFs[i]
		if v.MAC == nil {
			continue
		}
		var vlans []string
		for _, p := range vrfPorts(d, v.Name) {
			if p.VLANAware() {
				vlans = append(vlans, strconv.Itoa(int(p.VLAN)))
			}
		}
		if len(vlans) == 0 {
			continue
		}
		w.add(3, "vlan-aware-bundle %s", v.Name)
		w.add(6, "rd %s", v.MAC.RD)
		w.add(6, "route-target both %s", v.MAC.RT)
		w.add(6, "redistribute learned")
		w.add(6, "vlan %s", strings.Join(vlans, ","))
		w.add(3, "!")
	}
	for i := range d.VRFs {
		v := &d.VRFs[i]
		w.add(3, "vrf %s", v.Name)
		w.add(6, "rd %s", v.RD)
		w.add(6, "route-target import evpn %s", v.RT)
		w.add(6, "route-target export evpn %s", v.RT)
		w.add(6, "redistribute connected")
		w.add(3, "!")
	}
	w.add(0, "!")
	w.add(0, "end")
}
