package platform

import (
	"slices"
	"strings"
)

// NOS names, as the topology spells them.
const (
	EOS   = "eos"
	FRR   = "frr"
	Junos = "junos"
	NXOS  = "nxos"
	SONiC = "sonic"
)

// NOSes lists the NOSes platforms are known for, sorted.
func NOSes() []string { return []string{EOS, FRR, Junos, NXOS, SONiC} }

// Generic is the model of a switch whose topology entry names no platform:
// a Linux box running FRR (the lab's namespaces, Cumulus-style swpN ports),
// with as many ports as its portCount says.
const (
	GenericVendor = "generic"
	GenericModel  = "linux"
	// DefaultPortPrefix names a generic switch's ports when its topology
	// entry does not say (Cumulus style swp1..swpN).
	DefaultPortPrefix = "swp"
)

// Model is one switch model: its vendor, the NOSes it runs and its front
// panel.
type Model struct {
	Vendor string
	Name   string
	// NOSes are the NOSes the model runs, the vendor's own first.
	NOSes []string
	// Groups are the front-panel ports, in port order, numbered from 1
	// without gaps. Generic (Linux) has none: its ports come from the
	// switch's portCount.
	Groups []PortGroup
	// OverlayECMP: ECMP over EVPN type-5 (VXLAN) routes needs
	// `forwarding-options vxlan-routing overlay-ecmp` on this model, and
	// committing it restarts the forwarding engine (Junos QFX5110, QFX5120,
	// EX4650: Juniper CLI reference, "overlay-ecmp").
	OverlayECMP bool
	// GBPProfile: VXLAN group-based policy on this model also needs
	// `chassis forwarding-options vxlan-gbp-profile`, which restarts the
	// forwarding engine (Juniper EVPN User Guide, "Micro-segmentation
	// using VXLAN GBP": QFX5120 and EX4650).
	GBPProfile bool
	// Evolved: the model runs Junos OS Evolved, which channelizes a port
	// on the interface (`set interfaces et-0/0/N number-of-sub-ports K`,
	// `speed`); Junos OS (QFX5120) does it under `chassis fpc 0 pic 0
	// port N channel-speed`. Juniper, "Configure Port Speed":
	// https://juniper.net/documentation/us/en/software/junos/interfaces-ethernet/topics/topic-map/configure-port.html
	Evolved bool
	// Doc is the vendor document the port map comes from.
	Doc string
}

// PortGroup is a run of identical front-panel ports.
type PortGroup struct {
	First, Last int // port numbers, from 1
	Lanes       int // SerDes lanes of one port
	Speed       int // Gb/s of the whole port
	// Breakouts are the sub-port counts a port can be split into (a
	// 400G port into 4x100G: 4); empty when it cannot be split.
	Breakouts []int
	// SONiCModes are SONiC's names of the breakouts by sub-port count:
	// the keys of breakout_modes in the model's platform.json, which
	// CONFIG_DB's BREAKOUT_CFG brkout_mode must match exactly. Empty
	// where the platform.json was not read: SONiC breakouts of such a
	// port are refused rather than guessed.
	SONiCModes map[int]string
}

// Runs reports whether the model runs nos.
func (m *Model) Runs(nos string) bool { return slices.Contains(m.NOSes, nos) }

// Generic reports whether m is the generic Linux model.
func (m *Model) Generic() bool { return m.Vendor == GenericVendor && m.Name == GenericModel }

// Ports is the number of front-panel ports.
func (m *Model) Ports() int {
	if len(m.Groups) == 0 {
		return 0
	}
	return m.Groups[len(m.Groups)-1].Last
}

// group returns the group of front-panel port n, or nil.
func (m *Model) group(n int) *PortGroup {
	for i := range m.Groups {
		if g := &m.Groups[i]; n >= g.First && n <= g.Last {
			return g
		}
	}
	return nil
}

// Group returns the port group of front-panel port n.
func (m *Model) Group(n int) (PortGroup, bool) {
	if g := m.group(n); g != nil {
		return *g, true
	}
	return PortGroup{}, false
}

// Breakouts returns the sub-port counts port n can be split into.
func (m *Model) Breakouts(n int) []int {
	if g := m.group(n); g != nil {
		return g.Breakouts
	}
	return nil
}

// models is the platform table. Port maps are the front panels of the
// vendors' data sheets; a model's SFP management-speed ports are listed
// because a server or uplink may be cabled to them.
//
// To add a model: append an entry (vendor and model as the vendor writes
// them, the NOSes it runs, its port groups, the data sheet in Doc), then
// add its default version to defaults if it becomes a NOS's default.
func models() []Model {
	return []Model{
		{
			Vendor: GenericVendor, Name: GenericModel, NOSes: []string{FRR},
			Doc: "FRR on Linux: ports are the switch's portPrefix + 1..portCount (veths in the lab)",
		},
		{
			Vendor: "arista", Name: "DCS-7060X6-64PE", NOSes: []string{EOS, SONiC},
			Groups: []PortGroup{
				{First: 1, Last: 64, Lanes: 8, Speed: 800, Breakouts: []int{2, 4, 8}},
				{First: 65, Last: 66, Lanes: 1, Speed: 10},
			},
			Doc: "Arista 7060X6 Series data sheet: 64 x 800G OSFP, 2 x SFP+",
		},
		{
			Vendor: "arista", Name: "DCS-7050CX3-32S", NOSes: []string{EOS, SONiC},
			Groups: []PortGroup{
				{First: 1, Last: 32, Lanes: 4, Speed: 100, Breakouts: []int{2, 4}},
				{First: 33, Last: 34, Lanes: 1, Speed: 10},
			},
			Doc: "Arista 7050X3 Series data sheet: 7050CX3-32S, 32 x 100G QSFP100, 2 x SFP+",
		},
		{
			Vendor: "cisco", Name: "N9K-C9364D-GX2A", NOSes: []string{NXOS},
			Groups: []PortGroup{
				{First: 1, Last: 64, Lanes: 8, Speed: 400, Breakouts: []int{2, 4}},
				{First: 65, Last: 66, Lanes: 1, Speed: 10},
			},
			Doc: "Cisco Nexus 9364D-GX2A Switch Data Sheet: 64 x 400G QSFP-DD, 2 x 1/10G SFP+",
		},
		{
			Vendor: "cisco", Name: "N9K-C9332D-GX2B", NOSes: []string{NXOS},
			Groups: []PortGroup{
				{First: 1, Last: 32, Lanes: 8, Speed: 400, Breakouts: []int{2, 4}},
				{First: 33, Last: 34, Lanes: 1, Speed: 10},
			},
			Doc: "Cisco Nexus 9332D-GX2B Switch Data Sheet: 32 x 400G QSFP-DD, 2 x 1/10G SFP+",
		},
		{
			Vendor: "juniper", Name: "QFX5230-64CD", NOSes: []string{Junos}, Evolved: true,
			Groups: []PortGroup{
				{First: 1, Last: 64, Lanes: 8, Speed: 400, Breakouts: []int{2, 4, 8}},
				{First: 65, Last: 66, Lanes: 1, Speed: 10},
			},
			Doc: "Juniper QFX5230 Switch Hardware Guide: 64 x 400G QSFP56-DD (et-0/0/0..63), 2 x 10G SFP+",
		},
		{
			Vendor: "juniper", Name: "QFX5220-32CD", NOSes: []string{Junos}, Evolved: true,
			Groups: []PortGroup{
				{First: 1, Last: 32, Lanes: 8, Speed: 400, Breakouts: []int{2, 4}},
				{First: 33, Last: 34, Lanes: 1, Speed: 10},
			},
			Doc: "Juniper QFX5220 Switch Hardware Guide: QFX5220-32CD, 32 x 400G QSFP56-DD (et-0/0/0..31), 2 x 10G SFP+ (xe-0/0/32, 33)",
		},
		{
			Vendor: "juniper", Name: "QFX5120-32C", NOSes: []string{Junos},
			Groups: []PortGroup{
				{First: 1, Last: 32, Lanes: 4, Speed: 100, Breakouts: []int{4}},
				{First: 33, Last: 34, Lanes: 1, Speed: 10},
			},
			OverlayECMP: true, GBPProfile: true,
			Doc: "Juniper QFX5120 Switch Hardware Guide: QFX5120-32C, 32 x 100G QSFP28 (et-0/0/0..31, 4 x 25G breakout), 2 x 10G SFP+ (xe-0/0/32, 33)",
		},
		{
			Vendor: "nvidia", Name: "SN5600", NOSes: []string{SONiC},
			Groups: []PortGroup{
				// platform.json offers 1x800G, 2x400G and 4x200G, no 8-way
				// breakout: https://github.com/sonic-net/sonic-buildimage/blob/master/device/mellanox/x86_64-nvidia_sn5600-r0/platform.json
				{First: 1, Last: 64, Lanes: 8, Speed: 800, Breakouts: []int{2, 4}, SONiCModes: map[int]string{
					2: "2x400G[200G,100G,50G,40G,25G,10G]",
					4: "4x200G[100G,50G,25G,10G]",
				}},
				{First: 65, Last: 65, Lanes: 1, Speed: 25},
			},
			Doc: "NVIDIA Spectrum-4 SN5600 data sheet (64 x 800G OSFP, 1 x 25G SFP28); sonic-buildimage device/mellanox/x86_64-nvidia_sn5600-r0 platform.json (Ethernet0, Ethernet8, ..., Ethernet512)",
		},
		{
			Vendor: "nvidia", Name: "SN4700", NOSes: []string{SONiC},
			Groups: []PortGroup{
				{First: 1, Last: 32, Lanes: 8, Speed: 400, Breakouts: []int{2, 4, 8}},
			},
			Doc: "NVIDIA Spectrum-3 SN4700 data sheet (32 x 400G QSFP-DD); sonic-buildimage device/mellanox/x86_64-mlnx_msn4700-r0 platform.json (Ethernet0, Ethernet8, ..., Ethernet248)",
		},
	}
}

// Models lists the known models, generic first.
func Models() []Model { return models() }

// Lookup returns the model of vendor and name. Case is ignored (vendors
// print model names in both cases); the returned model spells them as the
// table does.
func Lookup(vendor, name string) (Model, bool) {
	for _, m := range models() {
		if strings.EqualFold(m.Vendor, vendor) && strings.EqualFold(m.Name, name) {
			return m, true
		}
	}
	return Model{}, false
}

// Default is the platform `topology generate` gives a NOS's switches: a
// model that runs it and a release that has every feature the renderers
// use for it.
type Default struct {
	Vendor, Model, Version string
}

// DefaultFor returns the default platform of nos.
func DefaultFor(nos string) (Default, bool) {
	switch nos {
	case EOS:
		return Default{"arista", "DCS-7060X6-64PE", "4.32.2F"}, true
	case NXOS:
		return Default{"cisco", "N9K-C9364D-GX2A", "10.5(2)F"}, true
	case Junos:
		return Default{"juniper", "QFX5230-64CD", "23.4R2-S3-EVO"}, true
	case SONiC:
		return Default{"nvidia", "SN5600", "202405"}, true
	case FRR:
		return Default{GenericVendor, GenericModel, "10.2"}, true
	}
	return Default{}, false
}

// ModelNames lists "vendor/model" of every model that runs nos (every model
// when nos is empty), for messages.
func ModelNames(nos string) []string {
	var out []string
	for _, m := range models() {
		if nos == "" || m.Runs(nos) {
			out = append(out, m.Vendor+"/"+m.Name)
		}
	}
	return out
}
