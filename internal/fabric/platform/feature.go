package platform

import (
	"fmt"
	"slices"
	"strings"
)

// Feature is something a rendered configuration relies on that not every
// release of a NOS has.
type Feature string

// Features the renderers use. A renderer that starts relying on something
// new adds it here and to what render asks Check about.
const (
	// EVPNType5: IP-VRFs with an L3VNI, EVPN type-5 (IP prefix) routes.
	EVPNType5 Feature = "evpn-type5"
	// AnycastGateway: the same gateway IP and MAC on every leaf's
	// IRB/SVI of a link VLAN (vlan-aware tenants).
	AnycastGateway Feature = "anycast-gateway"
	// BGPUnnumbered: eBGP over IPv6 link-local on uplinks without
	// addresses (RFC 5549 next hops).
	BGPUnnumbered Feature = "bgp-unnumbered"
	// GroupPolicy: job segmentation by group tags in the data plane. NOSes
	// that segment with per-port ACLs instead need no entry.
	GroupPolicy Feature = "group-policy"
	// VXLANGBP: Junos VXLAN group-based policy (GBP tags in the VXLAN
	// header, `then gbp-tag`, `from gbp-src-tag`). Optional: where a
	// switch lacks it, job segmentation falls back to per-port ACLs, so
	// render asks Has, never Check.
	VXLANGBP Feature = "vxlan-gbp"
)

// Requirement says from which release a NOS has a feature.
type Requirement struct {
	NOS     string
	Feature Feature
	// Models limits the entry to these models (vendor/model, as in
	// ModelNames); empty means every model of the NOS. When a NOS has
	// entries for a feature and none matches a model, that model lacks the
	// feature in every release.
	Models []string
	// Min is the first release with the feature; "" means no release has
	// it.
	Min string
	// What names the configuration that needs it, for messages.
	What string
	// Doc is the vendor document the entry comes from.
	Doc string
}

// Requirements is the feature table, in the order entries are matched.
//
// To add an entry: append a Requirement with the NOS, the feature (add a
// Feature constant if it is new, and report it from render's features), the
// models it is limited to if the vendor lists platforms, the first release
// written as the NOS writes it (ParseVersion must read it: TestRequirements
// checks), what configuration needs it, and the vendor document. "(verify)"
// marks a release taken from a secondary source.
func Requirements() []Requirement {
	return []Requirement{
		// EVPN type-5 with an L3VNI.
		{NOS: EOS, Feature: EVPNType5, Min: "4.20.1F", What: "vxlan vrf VNI, EVPN ip-prefix routes",
			Doc: "Arista EOS User Manual, VXLAN routing with EVPN: type-5 routes since EOS-4.20.1F (verify)"},
		{NOS: NXOS, Feature: EVPNType5, Min: "7.0(3)I1(1)", What: "vrf context vni, member vni associate-vrf",
			Doc: "Cisco Nexus 9000 Series NX-OS VXLAN Configuration Guide, 7.x: VXLAN BGP EVPN, 7.0(3)I1(1) (verify)"},
		{NOS: Junos, Feature: EVPNType5, Min: "20.4R1", What: "protocols evpn ip-prefix-routes encapsulation vxlan",
			Doc: "Juniper Feature Explorer, EVPN-VXLAN type 5 routes on QFX5130/QFX5220/QFX5230 (Junos OS Evolved) (verify)"},
		{NOS: SONiC, Feature: EVPNType5, Min: "202012", What: "VRF|Vrf vni, VXLAN_EVPN_NVO",
			Doc: "sonic-net/SONiC doc/vxlan/EVPN/EVPN_VXLAN_HLD.md: EVPN L3 VNI (symmetric IRB) in 202012 (verify)"},
		{NOS: FRR, Feature: EVPNType5, Min: "7.0", What: "vrf vni, advertise ipv4 unicast",
			Doc: "FRRouting doc/user/evpn.rst and release notes: EVPN type-5 routes (verify)"},

		// Anycast gateways of vlan-aware tenants.
		{NOS: SONiC, Feature: AnycastGateway, Min: "202311", What: "SAG|GLOBAL gateway_mac, VLAN_INTERFACE static_anycast_gateway",
			Doc: "sonic-net/SONiC doc/sag/sag-HLD.md (static anycast gateway); SAG tables in sonic-swss/sonic-utilities from the 202311 branch (verify)"},
		{NOS: NXOS, Feature: AnycastGateway, Min: "7.0(3)I1(1)", What: "fabric forwarding mode anycast-gateway",
			Doc: "Cisco Nexus 9000 Series NX-OS VXLAN Configuration Guide: distributed anycast gateway (verify)"},
		{NOS: EOS, Feature: AnycastGateway, Min: "4.15.0F", What: "ip virtual-router address/mac-address",
			Doc: "Arista EOS User Manual, VARP / ip virtual-router (verify)"},

		// BGP unnumbered uplinks.
		{NOS: EOS, Feature: BGPUnnumbered, Min: "4.27.0F", What: "neighbor interface ... peer group",
			Doc: "Arista EOS User Manual, BGP: IPv6 link-local (unnumbered) neighbors with `neighbor interface`, RFC 5549 next hops (verify)"},
		{NOS: NXOS, Feature: BGPUnnumbered, Min: "9.3(1)", What: "neighbor Ethernet1/N (interface peering)",
			Doc: "Cisco Nexus 9000 Series NX-OS Unicast Routing Configuration Guide 9.3(x): BGP interface peering via IPv6 link-local for IPv4 (verify)"},
		{NOS: Junos, Feature: BGPUnnumbered, Min: "20.3R1", What: "dynamic-neighbor peer-auto-discovery",
			Doc: "Juniper Feature Explorer: BGP unnumbered / automatic peer discovery via IPv6 ND (verify)"},

		// Junos VXLAN GBP: optional (ACL fallback elsewhere), on the
		// models Juniper lists.
		{NOS: Junos, Feature: VXLANGBP, Models: []string{"juniper/QFX5120-32C"}, Min: "22.4R1",
			What: "firewall family any filter ... micro-segmentation, then gbp-tag, from gbp-src-tag/gbp-dst-tag",
			Doc:  "Juniper EVPN User Guide, Micro-Segmentation Using VXLAN Group-Based Policy: QFX5120 and EX4650 from Junos OS 22.4R1 (verify)"},

		// Data-plane group policy (NX-OS renders security groups; EOS,
		// Junos and SONiC segment with ACLs and have no entry).
		{NOS: NXOS, Feature: GroupPolicy, Min: "10.5(1)F", What: "feature security-group, security enforce tag",
			Doc: "Cisco Nexus 9000 Series NX-OS VXLAN Configuration Guide 10.5(x): Group Policy Option (GPO) security groups (verify)"},
	}
}

// FeatureError is a switch whose platform lacks a feature its
// configuration needs.
type FeatureError struct {
	Switch  string
	NOS     string
	Model   string // vendor/model
	Version string
	Feature Feature
	What    string
	// Min is the first release with the feature; "" when the model has it
	// in no release.
	Min string
	Doc string
}

func (e *FeatureError) Error() string {
	if e.Min == "" {
		return fmt.Sprintf("switch %s (%s %s on %s) needs %s (%s), which no %s release has on %s [%s]",
			e.Switch, e.NOS, e.Version, e.Model, e.Feature, e.What, e.NOS, e.Model, e.Doc)
	}
	return fmt.Sprintf("switch %s runs %s %s on %s, but %s (%s) needs %s %s or later [%s]",
		e.Switch, e.NOS, e.Version, e.Model, e.Feature, e.What, e.NOS, e.Min, e.Doc)
}

// Check returns a *FeatureError for the first of features that release
// version of nos on model m lacks, nil when it has them all. An empty
// version is not checked (the generic Linux platform need not say its FRR
// release); a version nos cannot parse is an error.
func Check(sw string, m Model, nos, version string, features []Feature) error {
	if version == "" {
		return nil
	}
	v, err := ParseVersion(nos, version)
	if err != nil {
		return fmt.Errorf("switch %s: %w", sw, err)
	}
	model := m.Vendor + "/" + m.Name
	for _, f := range features {
		req, found, listed := requirementFor(nos, f, model)
		if !listed {
			continue // nothing known limits it
		}
		fe := &FeatureError{Switch: sw, NOS: nos, Model: model, Version: version, Feature: f}
		if !found {
			fe.What, fe.Doc = req.What, req.Doc
			return fe
		}
		if req.Min == "" {
			fe.What, fe.Doc = req.What, req.Doc
			return fe
		}
		min, err := ParseVersion(nos, req.Min)
		if err != nil {
			return fmt.Errorf("feature table: %s %s: %w", nos, f, err)
		}
		if v.Compare(min) < 0 {
			fe.What, fe.Min, fe.Doc = req.What, req.Min, req.Doc
			return fe
		}
	}
	return nil
}

// Has reports whether a switch of model m running nos at version has f by
// the table: an entry applies to the model and the release is at least its
// minimum. Unlike Check it says no when nothing is known (no entry, or no
// release given): it is for optional features a renderer uses only where
// they are known to work.
func Has(m Model, nos, version string, f Feature) bool {
	if version == "" {
		return false
	}
	v, err := ParseVersion(nos, version)
	if err != nil {
		return false
	}
	req, found, _ := requirementFor(nos, f, m.Vendor+"/"+m.Name)
	if !found || req.Min == "" {
		return false
	}
	min, err := ParseVersion(nos, req.Min)
	return err == nil && v.Compare(min) >= 0
}

// requirementFor finds the entry of nos and f that applies to model. listed
// says the table has entries for nos and f at all; found that one applies
// to model (when listed and not found, req is the first entry, for its
// description).
func requirementFor(nos string, f Feature, model string) (req Requirement, found, listed bool) {
	for _, r := range Requirements() {
		if r.NOS != nos || r.Feature != f {
			continue
		}
		if !listed {
			req, listed = r, true
		}
		if len(r.Models) == 0 || slices.ContainsFunc(r.Models, func(x string) bool { return strings.EqualFold(x, model) }) {
			return r, true, true
		}
	}
	return req, false, listed
}
