package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
)

// NOS names, as the topology spells them.
const (
	Junos = "junos"
	NXOS  = "nxos"
	EOS   = "eos"
	SONiC = "sonic"
	FRR   = "frr"
)

// NOSes lists the NOSes this package renders, sorted.
func NOSes() []string { return []string{EOS, FRR, Junos, NXOS, SONiC} }

// File is one rendered configuration file of a device.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// DeviceFiles are the files of one device.
type DeviceFiles struct {
	Device string `json:"device"`
	NOS    string `json:"nos"`
	Files  []File `json:"files"`
}

// Caps are what a device's platform (its hardware and NOS release) adds
// to, or needs beyond, what its NOS alone says. The zero value is the
// conservative choice: no platform-only lines, the ACL fallback for group
// policy. By default they come from the switch's platform (its model's
// flags and the feature table: target.caps); Options.Caps overrides them.
type Caps struct {
	// OverlayECMP: Junos on QFX5110, QFX5120 and EX4650 needs
	// `forwarding-options vxlan-routing overlay-ecmp` for ECMP over
	// pure type-5 (EVPN-VXLAN) routes; committing it restarts the
	// forwarding engine (deploy says so). Juniper, "overlay-ecmp":
	// https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/overlay-ecmp-edit-forwarding-options-vxlan-routing.html
	OverlayECMP bool `json:"overlayEcmp,omitempty"`
	// GBP: the platform and release have Junos VXLAN group-based policy
	// (22.4R1 and later on QFX5120, EX4650, EX4400 and others): job
	// segmentation is rendered as GBP tags and an enforcement filter
	// instead of the per-port ACL fallback.
	GBP bool `json:"gbp,omitempty"`
	// GBPProfile: the platform also needs `chassis forwarding-options
	// vxlan-gbp-profile` for GBP, which restarts the forwarding engine
	// when committed. Juniper, "vxlan-gbp-profile":
	// https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/vxlan-gbp-profile.html
	GBPProfile bool `json:"gbpProfile,omitempty"`
}

// Options are what a render needs besides the intent.
type Options struct {
	// Caps returns a device's platform capabilities; nil means what the
	// device's model and release say (platform.Model, platform.Has).
	Caps func(d *fabric.Device) Caps
}

func (o Options) caps(d *fabric.Device, tgt target) Caps {
	if o.Caps == nil {
		return tgt.caps()
	}
	return o.Caps(d)
}

// Render renders one device of an intent for nos ("" means the device's
// own NOS), with the port names of the device's platform (for another NOS:
// of the same ports on a model running it), refusing a configuration that
// needs a feature the switch's NOS release lacks. File names are relative to the device (the deploy driver decides
// where they go). A NOS this package does not know, or an intent the NOS
// cannot express (an NX-OS VRF without an L3 VLAN), is an invalid_argument
// *domain.Error naming the device.
func Render(d *fabric.Device, nos string) ([]File, error) {
	return Options{}.Render(d, nos)
}

// Render is the package's Render with these options.
func (o Options) Render(d *fabric.Device, nos string) ([]File, error) {
	if nos == "" {
		nos = d.NOS
	}
	if !slices.Contains(NOSes(), nos) {
		return nil, domain.Invalid("nos", "device %s: no renderer for NOS %q (known: %s)", d.Name, nos, strings.Join(NOSes(), ", "))
	}
	pd, tgt, err := forPlatform(d, nos)
	if err != nil {
		return nil, fmt.Errorf("device %s (%s): %w", d.Name, nos, err)
	}
	d = pd
	var files []File
	switch nos {
	case Junos:
		files, err = renderJunos(d, o.caps(d, tgt))
	case NXOS:
		files, err = renderNXOS(d)
	case EOS:
		files, err = renderEOS(d)
	case SONiC:
		files, err = renderSONiC(d)
	case FRR:
		files, err = renderFRR(d)
	default:
		return nil, domain.Invalid("nos", "device %s: no renderer for NOS %q (known: %s)", d.Name, nos, strings.Join(NOSes(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("device %s (%s): %w", d.Name, nos, err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// RenderIntent renders every device of an intent for its own NOS, in device
// order.
func RenderIntent(in *fabric.Intent) ([]DeviceFiles, error) {
	return Options{}.RenderIntent(in)
}

// RenderIntent is the package's RenderIntent with these options.
func (o Options) RenderIntent(in *fabric.Intent) ([]DeviceFiles, error) {
	out := make([]DeviceFiles, 0, len(in.Devices))
	for i := range in.Devices {
		d := &in.Devices[i]
		files, err := o.Render(d, "")
		if err != nil {
			return nil, err
		}
		out = append(out, DeviceFiles{Device: d.Name, NOS: d.NOS, Files: files})
	}
	return out, nil
}

// unsupported is the error of an intent a NOS cannot express.
func unsupported(format string, args ...any) error {
	return domain.Invalid("intent", format, args...)
}

// lines builds a configuration text line by line.
type lines struct{ b strings.Builder }

func (w *lines) add(indent int, format string, args ...any) {
	for range indent {
		w.b.WriteByte(' ')
	}
	if len(args) == 0 {
		w.b.WriteString(format)
	} else {
		fmt.Fprintf(&w.b, format, args...)
	}
	w.b.WriteByte('\n')
}

// tab is add with tab indentation (nftables files, as nft itself prints them).
func (w *lines) tab(indent int, format string, args ...any) {
	w.b.WriteString(strings.Repeat("\t", indent))
	w.add(0, format, args...)
}

func (w *lines) String() string { return w.b.String() }

// header is the first comment of every text file: what it is and that it
// is generated.
func header(comment string, d *fabric.Device, what string) string {
	return fmt.Sprintf("%s jobfabric: %s of %s %s (site %s, fabric %s, AS %d).\n%s Generated from the fabric intent; local edits are overwritten by the next deploy.\n",
		comment, what, d.Role, d.Name, d.Site, d.Fabric, d.ASN, comment)
}

// portDescription says who is behind a server port, for `show interfaces`.
func portDescription(p *fabric.Port) string {
	s := p.Server + " " + p.NIC
	switch {
	case !p.Assigned():
		return s + " (unassigned)"
	case len(p.Jobs) > 0:
		return fmt.Sprintf("%s (tenant %s, job %s)", s, p.Tenant, strings.Join(p.Jobs, ","))
	}
	return fmt.Sprintf("%s (tenant %s)", s, p.Tenant)
}

func uplinkDescription(u fabric.Uplink) string { return "to " + u.Peer + " " + u.PeerPort }

// vrfPorts are the assigned ports of one VRF, in port order.
func vrfPorts(d *fabric.Device, vrf string) []*fabric.Port {
	var out []*fabric.Port
	for i := range d.Ports {
		if d.Ports[i].VRF == vrf {
			out = append(out, &d.Ports[i])
		}
	}
	return out
}

// vrfOf returns the VRF of a port.
func vrfOf(d *fabric.Device, p *fabric.Port) *fabric.VRF { return d.VRF(p.VRF) }

// hasSegmented reports whether any VRF of the device has a group policy.
func hasSegmented(d *fabric.Device) bool {
	return slices.ContainsFunc(d.VRFs, func(v fabric.VRF) bool { return v.Policy != nil })
}

func hasVLANAware(d *fabric.Device) bool {
	return slices.ContainsFunc(d.VRFs, func(v fabric.VRF) bool { return v.MAC != nil })
}

// hasVLANAwarePort reports whether a vlan-aware port of VRF vrf is on the
// device: a MAC-VRF without one has nothing to bridge.
func hasVLANAwarePort(d *fabric.Device, vrf string) bool {
	return slices.ContainsFunc(d.Ports, func(p fabric.Port) bool { return p.VRF == vrf && p.VLANAware() })
}

// linkLocalV6 are destinations every ACL permits so that IPv6 neighbor
// discovery on the link keeps working: a port's allow-list is about which
// servers it may reach, not about its own link.
func linkLocalV6() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("ff02::/16")}
}

// sanitize turns a port name into a name usable inside ACL and filter
// names (et-0/0/1 -> et-0-0-1).
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == '.' {
			return '-'
		}
		return r
	}, s)
}

// groupName is how a group is named on the device: tenant-group.
func groupName(v *fabric.VRF, g fabric.PolicyGroup) string { return v.Tenant + "-" + g.Name }

// peerKey is how BGP names a session's peer: the interface of an unnumbered
// session, else the address.
func peerKey(s fabric.Session) string {
	if s.Unnumbered() {
		return s.Interface
	}
	return s.Address.String()
}

// fmtPrefix pairs a prefix with the keyword that introduces it.
type fmtPrefix struct {
	p  netip.Prefix
	kw string
}

// physical is one front-panel port of a device: an uplink or a server port.
type physical struct {
	up   *fabric.Uplink
	port *fabric.Port
}

// physicalPorts lists uplinks and server ports together in port order, the
// order a running configuration shows them in.
func physicalPorts(d *fabric.Device) []physical {
	var out []physical
	for i := range d.Uplinks {
		out = append(out, physical{up: &d.Uplinks[i]})
	}
	for i := range d.Ports {
		out = append(out, physical{port: &d.Ports[i]})
	}
	name := func(p physical) string {
		if p.up != nil {
			return p.up.Port
		}
		return p.port.Name
	}
	slices.SortStableFunc(out, func(a, b physical) int { return fabric.ComparePorts(name(a), name(b)) })
	return out
}

// aclEntry is one entry of a server port's ingress ACL, for the NOSes that
// render the guard (and segmentation) as ACLs: permit or deny traffic to
// dst, of any protocol or only ICMP (ICMPv6 in an IPv6 list).
type aclEntry struct {
	// kind groups entries: underlay, switch-icmp, switch, allow, source.
	kind   string
	permit bool
	icmp   bool
	// dst is the destination; invalid: any.
	dst netip.Prefix
	// src are the sources the entry matches (any of them); nil: any.
	src []netip.Prefix
}

// portACL is the ingress ACL of an assigned server port in one family, in
// order, ending with what everything else gets (permitRest):
//
//  1. the guard (guarded ports): deny the fabric's underlay; to the
//     switch's own addresses in the port's VRF on this leaf (and link-local
//     and multicast destinations) permit ICMP where the port may reach the
//     link behind that address, then deny everything else;
//  2. the job segmentation (withAllow, a port with an allow-list): permit
//     its destinations, deny the rest; without it, permit the rest;
//  3. source-address validation (a port with Sources): every permit entry
//     matches only the server's own sources (and IPv6 link-local, for
//     neighbour discovery), the rest is permitted from them only; a
//     packet from any other source meets the final deny.
//
// Why an ACL and not strict uRPF (NX-OS and EOS `ip verify unicast source
// reachable-via rx`, Junos `rpf-check`): uRPF accepts any source the
// route back to goes through the port, and the connected /31 (and /127)
// holds the leaf's own end of the cable as well as the server's; it also
// costs FIB capacity or is switch-wide on some platforms (Cisco, "Configuring
// Unicast RPF":
// https://developer.cisco.com/docs/nx-os-n3k-n9k-api-ref-7-x/configuring-unicast-rpf-urpf ;
// Juniper, rpf-check on EX applies to all ingress interfaces:
// https://juniper.net/documentation/en_US/junos12.3/topics/reference/configuration-statement/rpf-check-edit-interfaces-unicast-rpf-ex-series.html).
// The port's ingress ACL is there anyway and can name the exact address.
//
// ok is false when the port needs no ACL at all.
func portACL(d *fabric.Device, p *fabric.Port, v6, withAllow bool) (entries []aclEntry, permitRest, ok bool) {
	entries, permitRest, ok = portACLDest(d, p, v6, withAllow)
	if !ok && len(p.Sources) > 0 && p.Assigned() {
		// Source validation alone still needs a list.
		entries, permitRest, ok = nil, true, true
	}
	if !ok || len(p.Sources) == 0 {
		return entries, permitRest, ok
	}
	var src []netip.Prefix
	for _, s := range p.Sources {
		if s.Addr().Is6() == v6 {
			src = append(src, s)
		}
	}
	if v6 {
		src = append(src, netip.MustParsePrefix("fe80::/10"))
	}
	for i := range entries {
		if entries[i].permit {
			entries[i].src = src
		}
	}
	if permitRest {
		entries = append(entries, aclEntry{kind: "source", permit: true, src: src})
	}
	return entries, false, true
}

// portACLDest is portACL by destination only (steps 1 and 2).
func portACLDest(d *fabric.Device, p *fabric.Port, v6, withAllow bool) (entries []aclEntry, permitRest, ok bool) {
	seg := withAllow && p.ACL != nil
	if !p.Assigned() || (!p.Guarded && !seg) {
		return nil, false, false
	}
	fam := func(q netip.Prefix) bool { return q.Addr().Is6() == v6 }
	var allow []netip.Prefix
	if seg {
		for _, a := range p.ACL.Allow {
			if fam(a) {
				allow = append(allow, a)
			}
		}
	}
	if p.Guarded {
		for _, u := range d.Underlay {
			if fam(u) {
				entries = append(entries, aclEntry{kind: "underlay", dst: u})
			}
		}
		// ICMP to a switch address passes where traffic to the server
		// behind it would: anywhere in an unsegmented VRF, the allow-list
		// in a segmented one (link-local and multicast: ND, always).
		icmpOK := func(a netip.Prefix) bool {
			if p.ACL == nil || a.Addr().IsLinkLocalUnicast() || a.Addr().IsMulticast() {
				return true
			}
			for _, x := range p.ACL.Allow {
				if x.Contains(a.Addr()) {
					return true
				}
			}
			return false
		}
		dests := switchDests(p, v6)
		for _, a := range dests {
			if icmpOK(a) {
				entries = append(entries, aclEntry{kind: "switch-icmp", permit: true, icmp: true, dst: a})
			}
		}
		for _, a := range dests {
			entries = append(entries, aclEntry{kind: "switch", dst: a})
		}
	} else if seg && v6 {
		allow = append(linkLocalV6(), allow...)
	}
	if !seg {
		return entries, true, true
	}
	for _, a := range allow {
		entries = append(entries, aclEntry{kind: "allow", permit: true, dst: a})
	}
	return entries, false, true
}

// switchDests are the switch's own destinations a server can address on
// its link: the leaf's address on the link (its gateway), and the
// link-local and multicast ranges, in one family. Other links' switch
// addresses are reached like the servers behind them (the allow-list of a
// segmented port); only FRR leaves also filter those at the switch itself
// (the VRF guard's input hook), see docs/fabric.md.
func switchDests(p *fabric.Port, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range switchAddrs(p) {
		if a.Is6() == v6 {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	if v6 {
		out = append(out, netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("ff00::/8"))
	} else {
		out = append(out, netip.MustParsePrefix("224.0.0.0/4"))
	}
	return out
}

// numberedACL writes an access list in the numbered form NX-OS and EOS
// share: the entries in order (sequence 10, 20, ...; ICMP entries with the
// family's ICMP keyword), then the rest permitted or denied, at indent.
func numberedACL(w *lines, indent int, kw, name, proto, icmp string, entries []aclEntry, permitRest bool) {
	action := map[bool]string{true: "permit", false: "deny"}
	w.add(0, "%s access-list %s", kw, name)
	seq := 10
	for _, e := range entries {
		pr := proto
		if e.icmp {
			pr = icmp
		}
		for _, src := range aclSources(e) {
			w.add(indent, "%d %s %s %s %s", seq, action[e.permit], pr, src, aclAddr(e.dst))
			seq += 10
		}
	}
	w.add(indent, "%d %s %s any any", seq, action[permitRest], proto)
	w.add(0, "!")
}

// aclAddr writes a prefix of an ACL entry, "any" when invalid.
func aclAddr(p netip.Prefix) string {
	if !p.IsValid() {
		return "any"
	}
	return p.String()
}

// aclSources are an entry's sources as ACL words: "any", or each source.
func aclSources(e aclEntry) []string {
	if len(e.src) == 0 {
		return []string{"any"}
	}
	out := make([]string, len(e.src))
	for i, s := range e.src {
		out[i] = s.String()
	}
	return out
}
