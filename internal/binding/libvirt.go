package binding

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// PCIAddress is a PCI function as libvirt's <address type='pci'> names it.
type PCIAddress struct {
	Domain, Bus, Slot, Function int
}

// pciBusID matches nvidia-smi's 00000000:53:00.0, sysfs' 0000:4b:00.0 and
// a bare 53:00.0 (domain 0).
var pciBusID = regexp.MustCompile(`^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$`)

// ParsePCIBusID reads a PCI address; libvirt takes domains up to 0xffff
// and slots up to 0x1f.
func ParsePCIBusID(s string) (PCIAddress, error) {
	m := pciBusID.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return PCIAddress{}, fmt.Errorf("PCI address %q is not [domain:]bus:slot.function", s)
	}
	hex := func(x string) int {
		if x == "" {
			return 0
		}
		v, _ := strconv.ParseUint(x, 16, 32)
		return int(v)
	}
	a := PCIAddress{Domain: hex(m[1]), Bus: hex(m[2]), Slot: hex(m[3]), Function: hex(m[4])}
	if a.Domain > 0xffff || a.Slot > 0x1f {
		return PCIAddress{}, fmt.Errorf("PCI address %q is out of range (domain <= 0xffff, slot <= 0x1f)", s)
	}
	return a, nil
}

// String is the sysfs form, 0000:53:00.0.
func (a PCIAddress) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", a.Domain, a.Bus, a.Slot, a.Function)
}

// LibvirtDevices is a <devices> fragment of a libvirt domain holding the
// job's hostdevs.
type LibvirtDevices struct {
	XMLName  xml.Name         `xml:"devices"`
	Comment  string           `xml:",comment"`
	Hostdevs []LibvirtHostdev `xml:"hostdev"`
}

// LibvirtHostdev is one <hostdev mode='subsystem' type='pci'>: libvirt
// (managed='yes') detaches the function from its host driver, binds it to
// vfio-pci while the VM runs and gives it back after.
type LibvirtHostdev struct {
	Mode    string `xml:"mode,attr"`
	Type    string `xml:"type,attr"`
	Managed string `xml:"managed,attr"`
	Source  struct {
		Address LibvirtAddress `xml:"address"`
	} `xml:"source"`
	// Alias names the device in the domain (a user alias starts "ua-").
	Alias struct {
		Name string `xml:"name,attr"`
	} `xml:"alias"`
}

// LibvirtAddress is a PCI <address> with libvirt's hex attributes.
type LibvirtAddress struct {
	Domain   string `xml:"domain,attr"`
	Bus      string `xml:"bus,attr"`
	Slot     string `xml:"slot,attr"`
	Function string `xml:"function,attr"`
}

func hostdev(a PCIAddress, alias string) LibvirtHostdev {
	h := LibvirtHostdev{Mode: "subsystem", Type: "pci", Managed: "yes"}
	h.Source.Address = LibvirtAddress{Domain: fmt.Sprintf("0x%04x", a.Domain), Bus: fmt.Sprintf("0x%02x", a.Bus),
		Slot: fmt.Sprintf("0x%02x", a.Slot), Function: fmt.Sprintf("0x%x", a.Function)}
	h.Alias.Name = alias
	return h
}

// Libvirt returns the hostdevs of the binding: each GPU the job holds, then
// each NIC on the rails of those GPUs, by the PCI address its node agent
// reported. A VM takes devices whole, so a binding of MIG instances or
// GPU shares is refused, and so is a device whose address is unknown
// (naming it and the missing fact): a VM without its rail NIC would run
// with no fabric.
func (b *Binding) Libvirt() (*LibvirtDevices, error) {
	d := &LibvirtDevices{Comment: fmt.Sprintf(" jobfabric job %d on %s (tenant %s): %d GPUs, %d rail NICs, PCI passthrough ", b.Job, b.Node, b.Fabric.Tenant, len(b.GPUs), len(b.NICs))}
	seen := map[PCIAddress]bool{}
	add := func(what, bus, alias string) error {
		a, err := ParsePCIBusID(bus)
		if err != nil {
			return precondition("pciBusId", "%s of node %s: %v", what, b.Node, err)
		}
		if seen[a] {
			// Two ports of one PCI function: the function is passed once.
			return nil
		}
		seen[a] = true
		d.Hostdevs = append(d.Hostdevs, hostdev(a, alias))
		return nil
	}
	for _, g := range b.GPUs {
		what := fmt.Sprintf("GPU %d (%s)", g.Index, orUnknown(g.UUID))
		switch {
		case g.MIG != nil:
			return nil, precondition("placement", "%s of node %s: the job holds MIG instance %s at slot %d, and a VM takes whole GPUs (PCI passthrough)", what, b.Node, g.MIG.Profile, g.MIG.Start)
		case g.Share > 0:
			return nil, precondition("placement", "%s of node %s: the job holds a %g share of it, and a VM takes whole GPUs (PCI passthrough)", what, b.Node, g.Share)
		case g.PCIBusID == "":
			return nil, precondition("pciBusId", "%s of node %s: PCI address unknown: the node agent has not reported the GPU's pciBusId (nvidia-smi -q -x, Bus Id)", what, b.Node)
		}
		if err := add(what, g.PCIBusID, fmt.Sprintf("ua-jobfabric-gpu%d", g.Index)); err != nil {
			return nil, err
		}
	}
	for _, n := range b.NICs {
		what := fmt.Sprintf("NIC %s (%s, rail %d)", n.Name, orUnknown(n.RDMADevice), n.Rail)
		if n.PCIBusID == "" {
			return nil, precondition("pciBusId", "%s of node %s: PCI address unknown: the node agent has not reported the NIC's pciBusId (sysfs /sys/class/infiniband/%s/device)", what, b.Node, orUnknown(n.RDMADevice))
		}
		if err := add(what, n.PCIBusID, "ua-jobfabric-nic-"+aliasName(n.Name)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// aliasName keeps [a-z0-9-] of an inventory name, for a libvirt alias.
func aliasName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// LibvirtXML is Libvirt as an indented XML fragment: paste its hostdevs
// into the domain's <devices> (virsh edit), or attach each with virsh
// attach-device.
func (b *Binding) LibvirtXML() ([]byte, error) {
	d, err := b.Libvirt()
	if err != nil {
		return nil, err
	}
	out, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode libvirt hostdevs: %w", err)
	}
	return append(out, '\n'), nil
}
