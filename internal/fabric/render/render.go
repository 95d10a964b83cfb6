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

// Render renders one device of an intent for nos ("" means the device's
// own NOS). File names are relative to the device (the deploy driver decides
// where they go). A NOS this package does not know, or an intent the NOS
// cannot express (an NX-OS VRF without an L3 VLAN), is an invalid_argument
// *domain.Error naming the device.
func Render(d *fabric.Device, nos string) ([]File, error) {
	if nos == "" {
		nos = d.NOS
	}
	var files []File
	var err error
	switch nos {
	case Junos:
		files, err = renderJunos(d)
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
	out := make([]DeviceFiles, 0, len(in.Devices))
	for i := range in.Devices {
		d := &in.Devices[i]
		files, err := Render(d, "")
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

// linkLocalV6 are destinations every ACL permits so that IPv6 neighbor
// discovery on the link keeps working: a port's allow-list is about which
// servers it may reach, not about its own link.
func linkLocalV6() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("ff02::/16")}
}

// aclSplit splits an allow-list into its IPv4 and IPv6 destinations, the
// IPv6 list led by the link-local ones.
func aclSplit(acl *fabric.ACL) (v4, v6 []netip.Prefix) {
	v6 = linkLocalV6()
	for _, p := range acl.Allow {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
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

// hasV6 reports whether any port of the device has an IPv6 link or gateway.
func hasV6(d *fabric.Device) bool {
	for _, p := range d.Ports {
		if p.Assigned() && (p.IPv6.IsValid() || p.Gateway6.IsValid()) {
			return true
		}
	}
	return false
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
