package fabric

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Intent is the desired state of every switch of the fabric, independent of
// any NOS. Slices are sorted (devices by name, ports by port number, VRFs by
// name), so the same Input always gives the same Intent, byte for byte once
// marshalled. Prefix slices may be shared between ports: treat an Intent as
// read-only.
type Intent struct {
	Devices []Device `json:"devices"`
	// Warnings are things the compiler accepted but an operator should know
	// (two jobs sharing a NIC cannot be separated by the network).
	Warnings []string `json:"warnings,omitempty"`
}

// Device returns the named device, or nil.
func (in *Intent) Device(name string) *Device {
	i, ok := slices.BinarySearchFunc(in.Devices, name, func(d Device, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil
	}
	return &in.Devices[i]
}

// Role is a switch's place in the Clos.
type Role string

// Roles.
const (
	RoleLeaf  Role = "leaf"
	RoleSpine Role = "spine"
	// RoleSuperSpine joins the pods of a three-tier fabric.
	RoleSuperSpine Role = "super-spine"
)

// Transit reports whether the role only carries routes between other
// switches: a spine or super-spine, an EVPN route server that keeps the
// originating VTEP as next hop and holds no VRF.
func (r Role) Transit() bool { return r == RoleSpine || r == RoleSuperSpine }

// Device is the desired state of one switch.
type Device struct {
	Name   string `json:"name"`
	Role   Role   `json:"role"`
	NOS    string `json:"nos"`
	Site   string `json:"site"`
	Fabric string `json:"fabric"`
	// Pod is the pod of a leaf or spine of a three-tier fabric; 0 otherwise.
	Pod int    `json:"pod,omitempty"`
	ASN uint32 `json:"asn"`
	// Loopback is the router ID and, on leaves, the VTEP source address.
	Loopback netip.Addr `json:"loopback"`
	// Platform is the switch's model and NOS release, nil for the generic
	// Linux platform, whose ports are PortPrefix1..PortPrefix<PortCount>;
	// Breakouts are its split ports. Port names in the device are the
	// platform's; the renderers check the release and, rendering for
	// another NOS, rename the ports (internal/fabric/platform).
	Platform   *domain.Platform  `json:"platform,omitempty"`
	Breakouts  []domain.Breakout `json:"breakouts,omitempty"`
	PortPrefix string            `json:"portPrefix,omitempty"`
	PortCount  int               `json:"portCount,omitempty"`
	// Uplinks are the fabric links: to the spines on a leaf; to the leaves
	// (and super-spines) on a spine; to the spines on a super-spine.
	Uplinks []Uplink `json:"uplinks"`
	// Sessions are the eBGP sessions, sorted by interface then address.
	Sessions []Session `json:"sessions"`
	// AnycastMAC is the IRB gateway MAC, set on leaves that carry a
	// vlan-aware VRF.
	AnycastMAC string `json:"anycastMac,omitempty"`
	VRFs       []VRF  `json:"vrfs,omitempty"`
	// Ports are the leaf's server ports, every one of them: a port no tenant
	// owns is in no VRF, has no address and is quarantined (admin-down).
	Ports []Port `json:"ports,omitempty"`
	// Underlay is what no server port of a leaf may reach, whatever VRF it
	// is in: every loopback (router ID, VTEP) and uplink prefix of the
	// fabric, summarised. Guarded ports drop traffic to it on ingress, so
	// a server can neither reach a BGP peer nor hand a VTEP a crafted
	// VXLAN packet. Shared by every leaf: read-only.
	Underlay []netip.Prefix `json:"underlay,omitempty"`
}

// VRF returns the named VRF of the device, or nil.
func (d *Device) VRF(name string) *VRF {
	for i := range d.VRFs {
		if d.VRFs[i].Name == name {
			return &d.VRFs[i]
		}
	}
	return nil
}

// Port returns the named server port, or nil.
func (d *Device) Port(name string) *Port {
	for i := range d.Ports {
		if d.Ports[i].Name == name {
			return &d.Ports[i]
		}
	}
	return nil
}

// Uplink is one fabric link (leaf-spine or spine-super-spine) seen from
// this device.
type Uplink struct {
	Port     string `json:"port"`
	Peer     string `json:"peer"`
	PeerPort string `json:"peerPort"`
	// Address is this end's address on a numbered link (the upper tier
	// takes the first address of the /31, the lower the second); invalid on an
	// unnumbered link, which runs BGP over IPv6 link-local (RFC 5549).
	Address netip.Prefix `json:"address,omitzero"`
}

// Unnumbered reports whether the link has no IPv4 address.
func (u Uplink) Unnumbered() bool { return !u.Address.IsValid() }

// Session is one eBGP session.
type Session struct {
	Peer    string `json:"peer"`
	PeerASN uint32 `json:"peerAsn"`
	// Interface is the local port of a link session; empty for a loopback
	// (multihop) session.
	Interface string `json:"interface,omitempty"`
	// Address is the peer's address: its link address on a numbered link,
	// its loopback on a multihop session; invalid on an unnumbered link
	// (the peer is found by IPv6 neighbor discovery on Interface).
	Address netip.Addr `json:"address,omitzero"`
	// Multihop: a loopback-to-loopback session (update source = loopback).
	Multihop bool `json:"multihop,omitempty"`
	// Unicast: the session carries IPv4 unicast (loopback reachability).
	Unicast bool `json:"unicast,omitempty"`
	// EVPN: the session carries the l2vpn evpn family.
	EVPN bool `json:"evpn,omitempty"`
	// NextHopUnchanged: a spine or super-spine re-advertises EVPN routes
	// with the originating VTEP as next hop (the route-server role);
	// otherwise traffic would be tunnelled to the spine. Set on every
	// session of a transit switch: toward leaves, spines and super-spines.
	NextHopUnchanged bool `json:"nextHopUnchanged,omitempty"`
}

// Unnumbered reports whether the session is an interface (RFC 5549) session.
func (s Session) Unnumbered() bool { return !s.Multihop && !s.Address.IsValid() }

// RD is a type-1 route distinguisher: loopback:number.
type RD struct {
	Addr netip.Addr `json:"addr"`
	Num  uint16     `json:"num"`
}

func (r RD) String() string { return fmt.Sprintf("%s:%d", r.Addr, r.Num) }

// MarshalText writes the RD as text ("10.254.1.1:5").
func (r RD) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (r *RD) UnmarshalText(b []byte) error {
	s := string(b)
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return fmt.Errorf("route distinguisher %q is not address:number", s)
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil {
		return fmt.Errorf("route distinguisher %q: %w", s, err)
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 16)
	if err != nil {
		return fmt.Errorf("route distinguisher %q: %w", s, err)
	}
	r.Addr, r.Num = a, uint16(n)
	return nil
}

// RouteTarget is an explicit route target ASN:value, the same on every leaf.
type RouteTarget struct {
	ASN   uint32 `json:"asn"`
	Value uint32 `json:"value"`
}

func (r RouteTarget) String() string { return fmt.Sprintf("%d:%d", r.ASN, r.Value) }

// MarshalText writes the RT as text ("65000:10001").
func (r RouteTarget) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (r *RouteTarget) UnmarshalText(b []byte) error {
	asn, val, ok := strings.Cut(string(b), ":")
	a, err1 := strconv.ParseUint(asn, 10, 32)
	v, err2 := strconv.ParseUint(val, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("route target %q is not asn:value", b)
	}
	r.ASN, r.Value = uint32(a), uint32(v)
	return nil
}

// VRF is one tenant's IP-VRF on one leaf.
type VRF struct {
	// Name is the tenant's name, or "T<VRF id>" when the name is reserved
	// by some NOS (default, master, mgmt, management, global) or longer
	// than a Linux interface name allows (15).
	Name   string              `json:"name"`
	Tenant string              `json:"tenant"`
	Model  domain.NetworkModel `json:"model"`
	L3VNI  uint32              `json:"l3vni"`
	// L3VLAN carries the L3VNI on NX-OS and SONiC; 0 when none was given.
	L3VLAN uint16      `json:"l3vlan,omitempty"`
	RD     RD          `json:"rd"`
	RT     RouteTarget `json:"rt"` // import and export
	// Imports are route targets imported besides RT. Compile sets none: a
	// tenant imports only its own target. The field lets an intent that
	// was edited, or read back from a device, say that it leaks, so the
	// verifier (internal/fabric/verify) can catch it.
	Imports []RouteTarget `json:"imports,omitempty"`
	// MAC is the tenant's MAC-VRF (vlan-aware tenants).
	MAC *MACVRF `json:"mac,omitempty"`
	// Policy is the job segmentation of the VRF (segmented tenants).
	Policy *Policy `json:"policy,omitempty"`
}

// MACVRF is a vlan-aware tenant's MAC-VRF on one leaf: one EVPN instance
// holding every link VLAN of the tenant on this leaf.
type MACVRF struct {
	Name string      `json:"name"` // VRF name + "-mac"
	RD   RD          `json:"rd"`
	RT   RouteTarget `json:"rt"`
}

// Policy is a segmented VRF's group policy on one leaf: the groups with a
// member port on this leaf, the groups contracted with them, and the
// contracts. Traffic within a group is allowed, between groups denied unless
// a contract allows it.
type Policy struct {
	// Unclassified is the group of traffic no group claims (0: not given).
	Unclassified uint16 `json:"unclassified,omitempty"`
	// Switch is the group the leaf puts on packets it originates itself in
	// the VRF (ICMP errors: TTL exceeded, fragmentation needed / packet too
	// big; echo replies), and that egress policy lets through to every
	// port, so path-MTU discovery and traceroute work inside a job. Only a
	// switch can send it: ingress sets a server's group from its port.
	// SwitchGroup, or 0 when the policy lets no switch traffic through.
	Switch    uint16           `json:"switch,omitempty"`
	Groups    []PolicyGroup    `json:"groups,omitempty"`
	Contracts []PolicyContract `json:"contracts,omitempty"`
}

// PolicyGroup is one group as this leaf sees it.
type PolicyGroup struct {
	ID   uint16 `json:"id"`
	Name string `json:"name"`
	Job  string `json:"job,omitempty"`
	// Ports are the member ports on this leaf, and Prefixes their link
	// prefixes: what this leaf classifies into the group.
	Ports    []string       `json:"ports,omitempty"`
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
	// External are members that are not server links (Group.Prefixes).
	External []netip.Prefix `json:"external,omitempty"`
}

// PolicyContract allows traffic between groups A and B (A < B), both ways.
type PolicyContract struct {
	A uint16 `json:"a"`
	B uint16 `json:"b"`
}

// SwitchGroup is the group ID reserved for packets a leaf originates in a
// segmented VRF (Policy.Switch). No group of the input may use it; the
// group pool hands out IDs below it.
const SwitchGroup uint16 = 65535

const switchGroupOwner = "the switches' own traffic (reserved)"

// Port is one server port of a leaf.
type Port struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	NIC    string `json:"nic"`
	Rail   int    `json:"rail"`
	GPU    int    `json:"gpu"` // NIC.GPU; -1 when the NIC serves no GPU of its own
	// IPv4 and IPv6 are the cable's link prefixes (/31, /127); the leaf
	// takes the first address, the server the second. They are a property
	// of the cable, never of the tenant, so a port moving between tenants
	// keeps its addresses. Pure type-5 ports carry them; vlan-aware ports
	// use Gateway4/Gateway6 instead.
	IPv4 netip.Prefix `json:"ipv4,omitzero"`
	IPv6 netip.Prefix `json:"ipv6,omitzero"`
	// VRF is the VRF the port belongs to; empty when no tenant owns it.
	VRF    string   `json:"vrf,omitempty"`
	Tenant string   `json:"tenant,omitempty"`
	Jobs   []string `json:"jobs,omitempty"`
	// Vlan-aware ports: the link's own VLAN and L2VNI, and the anycast
	// gateway (the same address and MAC on whichever leaf serves the link).
	VLAN     uint16       `json:"vlan,omitempty"`
	L2VNI    uint32       `json:"l2vni,omitempty"`
	Gateway4 netip.Prefix `json:"gateway4,omitzero"`
	Gateway6 netip.Prefix `json:"gateway6,omitzero"`
	// Group is the port's policy group (0: none) in a segmented VRF.
	Group uint16 `json:"group,omitempty"`
	// Quarantined ports are administratively down: no tenant owns them, and
	// down is the one state every NOS agrees forwards, answers and punts
	// nothing (no ND, ARP or LLDP, no link-local address, no control
	// plane). Set on every unassigned port.
	Quarantined bool `json:"quarantined,omitempty"`
	// Guarded ports carry the server-port guard on ingress: nothing to the
	// device's Underlay, and to the switch's own addresses in the port's
	// VRF nothing but ICMP (which then meets the port's group policy like
	// traffic to the server behind that address). Set on every port.
	Guarded bool `json:"guarded,omitempty"`
	// Sources are the only source addresses the port's ingress accepts
	// (source-address validation, BCP 38): the server's own addresses on
	// the link, a /32 and a /128 on a pure type-5 port (never the leaf's
	// end of the cable), the gateway subnets of a vlan-aware one. IPv6
	// link-local sources (fe80::/10, neighbour discovery) pass besides.
	// Without it a server could send as another tenant's or job's server,
	// or a switch: the reply goes to the victim, but the peer logs, trusts
	// and answers the victim. Set on every assigned port; empty: any
	// source passes.
	Sources []netip.Prefix `json:"sources,omitempty"`
	// ACL is the fallback form of the group policy for switches without
	// group policy: the destinations traffic entering this port may reach
	// (everything else is dropped). Set on every port of a segmented VRF; a
	// port in no group gets an empty list and reaches nothing.
	ACL *ACL `json:"acl,omitempty"`
}

// Assigned reports whether a tenant owns the port.
func (p *Port) Assigned() bool { return p.VRF != "" }

// VLANAware reports whether the port is a vlan-aware tenant's link.
func (p *Port) VLANAware() bool { return p.VLAN != 0 }

// Prefixes are what identifies the port's server in its VRF: the link
// prefixes of a pure type-5 port, the gateway subnets of a vlan-aware one.
func (p *Port) Prefixes() []netip.Prefix {
	return linkPrefixes(p.VLANAware(), p.IPv4, p.IPv6, p.Gateway4, p.Gateway6)
}

func linkPrefixes(vlanAware bool, ipv4, ipv6, gw4, gw6 netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	if vlanAware {
		ipv4, ipv6 = gw4.Masked(), gw6.Masked()
	}
	for _, l := range []netip.Prefix{ipv4, ipv6} {
		if l.IsValid() {
			out = append(out, l)
		}
	}
	return out
}

// ServerAddrs are the server's addresses on the link (the second address of
// a link prefix, the .2 / ::2 of a gateway subnet), for host binding.
func (p *Port) ServerAddrs() []netip.Prefix {
	var out []netip.Prefix
	if p.VLANAware() {
		for _, g := range []netip.Prefix{p.Gateway4, p.Gateway6} {
			if g.IsValid() {
				out = append(out, netip.PrefixFrom(g.Masked().Addr().Next().Next(), g.Bits()))
			}
		}
		return out
	}
	for _, l := range []netip.Prefix{p.IPv4, p.IPv6} {
		if l.IsValid() {
			out = append(out, netip.PrefixFrom(l.Addr().Next(), l.Bits()))
		}
	}
	return out
}

// OwnSources are the source addresses the port's server may send from
// (what Sources should hold): the second address of each link prefix, as a
// host prefix, on a pure type-5 port; the gateway subnets on a vlan-aware
// one.
func (p *Port) OwnSources() []netip.Prefix {
	if p.VLANAware() {
		return p.Prefixes()
	}
	var out []netip.Prefix
	for _, a := range p.ServerAddrs() {
		out = append(out, netip.PrefixFrom(a.Addr(), a.Addr().BitLen()))
	}
	return out
}

// ACL is a port's allow-list: destination prefixes, IPv4 first, sorted.
type ACL struct {
	Allow []netip.Prefix `json:"allow"`
}

// InUse lists the pool ids an intent's configurations carry; the caller
// passes it to pool.State.SetDeployed once the intent is deployed.
type InUse struct {
	VNIs    []uint32 `json:"vnis"`
	VRFIDs  []uint32 `json:"vrfIds"`
	RTs     []uint32 `json:"rts"`
	Groups  []uint32 `json:"groups"`
	L3VLANs []uint32 `json:"l3vlans"`
	// LeafL3VLANs are the L3 VLANs per leaf (pool.LeafL3VLAN(leaf)).
	LeafL3VLANs map[string][]uint32 `json:"leafL3vlans,omitempty"`
	// LinkVLANs are per leaf (pool.LinkVLAN(leaf)).
	LinkVLANs map[string][]uint32 `json:"linkVlans"`
}

// InUse collects the ids the intent renders, sorted and without duplicates.
func (in *Intent) InUse() InUse {
	var u InUse
	u.LinkVLANs = map[string][]uint32{}
	u.LeafL3VLANs = map[string][]uint32{}
	for i := range in.Devices {
		d := &in.Devices[i]
		for _, v := range d.VRFs {
			u.VNIs = append(u.VNIs, v.L3VNI)
			u.VRFIDs = append(u.VRFIDs, uint32(v.RD.Num))
			u.RTs = append(u.RTs, v.RT.Value)
			if v.L3VLAN != 0 {
				u.L3VLANs = append(u.L3VLANs, uint32(v.L3VLAN))
				u.LeafL3VLANs[d.Name] = append(u.LeafL3VLANs[d.Name], uint32(v.L3VLAN))
			}
			if v.MAC != nil {
				u.VRFIDs = append(u.VRFIDs, uint32(v.MAC.RD.Num))
				u.RTs = append(u.RTs, v.MAC.RT.Value)
			}
			if v.Policy != nil {
				if v.Policy.Unclassified != 0 {
					u.Groups = append(u.Groups, uint32(v.Policy.Unclassified))
				}
				for _, g := range v.Policy.Groups {
					u.Groups = append(u.Groups, uint32(g.ID))
				}
			}
		}
		for _, p := range d.Ports {
			if p.L2VNI != 0 {
				u.VNIs = append(u.VNIs, p.L2VNI)
			}
			if p.VLAN != 0 {
				u.LinkVLANs[d.Name] = append(u.LinkVLANs[d.Name], uint32(p.VLAN))
			}
		}
	}
	for _, s := range []*[]uint32{&u.VNIs, &u.VRFIDs, &u.RTs, &u.Groups, &u.L3VLANs} {
		*s = sortedSet(*s)
	}
	for k, v := range u.LinkVLANs {
		u.LinkVLANs[k] = sortedSet(v)
	}
	for k, v := range u.LeafL3VLANs {
		u.LeafL3VLANs[k] = sortedSet(v)
	}
	return u
}

func sortedSet(s []uint32) []uint32 {
	slices.Sort(s)
	return slices.Compact(s)
}
