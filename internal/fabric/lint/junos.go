package lint

import (
	"slices"
	"strings"
)

// Vendor documents the Junos rules come from.
const (
	// Juniper EVPN User Guide, "MAC-VRF routing instance type": a mac-vrf
	// instance must have a bridge domain (vlans); commit fails with "must
	// configure bridge-domain for mac-vrf instance" otherwise.
	juniperMACVRF = "https://www.juniper.net/documentation/us/en/software/junos/evpn-vxlan/topics/concept/mac-vrf-routing-instance-overview.html"
	// Juniper CLI reference, "ip-prefix-routes": type-5 routes need a VTEP
	// source and the export policy they name.
	juniperT5 = "https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/ip-prefix-routes-edit-protocols-evpn.html"
	// Juniper, "Firewall Filter Configuration": a filter applied to an
	// interface must exist in the same family; a GBP tagging filter is
	// family any with micro-segmentation (22.4R1).
	juniperFilter = "https://www.juniper.net/documentation/us/en/software/junos/cli-reference/topics/ref/statement/filter-edit-firewall-qfx-series.html"
	// Juniper, "Routing Policy": a policy or AS list named in a protocol
	// must be defined under policy-options.
	juniperPolicy = "https://www.juniper.net/documentation/us/en/software/junos/routing-policy/topics/concept/policy-configuring-overview.html"
	// Juniper, "Configure Port Speed": a port is channelized into
	// et-F/P/N:0.. by `number-of-sub-ports` (and `speed`) on the interface
	// (Junos OS Evolved) or under `chassis fpc F pic P port N`
	// (`channel-speed`, `number-of-sub-ports`).
	juniperChannelize = "https://juniper.net/documentation/us/en/software/junos/interfaces-ethernet/topics/topic-map/configure-port.html"
)

// junos lints set commands. Junos commits the candidate as a whole, so
// "defined" means anywhere in the file, not above.
func junos(device string, f File) *report {
	r := newReport(device, f.Name)
	type set struct {
		n int
		w []string // words after "set"
	}
	var sets []set
	// sorted holds the statements (words joined by one space), sorted:
	// whether a statement starts with some words is a binary search,
	// not a scan of the file.
	var sorted []string
	n := 0
	for raw := range strings.SplitSeq(f.Content, "\n") {
		n++
		if t := strings.TrimSpace(raw); strings.HasPrefix(t, "set ") {
			w := strings.Fields(strings.TrimPrefix(t, "set "))
			sets = append(sets, set{n, w})
			sorted = append(sorted, strings.Join(w, " "))
		}
	}
	slices.Sort(sorted)
	has := func(prefix ...string) bool {
		q := strings.Join(prefix, " ")
		if _, ok := slices.BinarySearch(sorted, q); ok {
			return true
		}
		// " " sorts before every other character of a word, so the
		// statements that continue q follow q+" " directly.
		i, _ := slices.BinarySearch(sorted, q+" ")
		return i < len(sorted) && strings.HasPrefix(sorted[i], q+" ")
	}
	macVRFs := map[string]int{}
	unchannelized := map[string]bool{}
	for _, s := range sets {
		w := s.w
		at := func(i int) string {
			if i < len(w) {
				return w[i]
			}
			return ""
		}
		switch {
		case at(0) == "interfaces" && at(1) != "":
			if at(2) == "number-of-sub-ports" || at(2) == "speed" {
				break // the channelization of a whole port, not a use of it
			}
			r.iface(s.n, at(1))
			if fpc, pic, port, ok := junosChannel(at(1)); ok && !unchannelized[at(1)] && !junosChannelized(has, fpc, pic, port) {
				unchannelized[at(1)] = true // said once per channel
				r.add(s.n, "junos/breakout-before-use", "%s is a channel of port %s/%s/%s, which is not channelized (no number-of-sub-ports on the interface, no channel-speed or number-of-sub-ports under chassis fpc %s pic %s port %s): commit fails (%s)",
					at(1), fpc, pic, port, fpc, pic, port, juniperChannelize)
			}
			if i := index(w, "filter"); i > 0 && at(i+1) == "input" || i > 0 && at(i+1) == "output" {
				fam := at(i - 1)
				if !has("firewall", "family", fam, "filter", at(i+2)) {
					r.add(s.n, "junos/define-before-use", "interface %s applies %s filter %s, which is not defined (%s)", at(1), fam, at(i+2), juniperFilter)
				}
			}
		case at(0) == "routing-instances" && at(2) == "instance-type" && at(3) == "mac-vrf":
			macVRFs[at(1)] = s.n
		case at(0) == "routing-instances" && at(2) == "vrf-target":
			kind := "vrf"
			if has("routing-instances", at(1), "instance-type", "mac-vrf") {
				kind = "mac-vrf"
			}
			r.rt(s.n, kind, at(1), strings.TrimPrefix(at(3), "target:"))
		case at(0) == "routing-instances" && at(2) == "interface":
			phys, unit, _ := strings.Cut(at(3), ".")
			if !has("interfaces", phys, "unit", unit) {
				r.add(s.n, "junos/define-before-use", "routing instance %s names interface %s, which has no unit %s (%s)", at(1), at(3), unit, juniperT5)
			}
		case at(0) == "routing-instances" && at(2) == "vlans" && at(4) == "l3-interface":
			phys, unit, _ := strings.Cut(at(5), ".")
			if !has("interfaces", phys, "unit", unit) {
				r.add(s.n, "junos/define-before-use", "VLAN %s routes through %s, which is not defined (%s)", at(3), at(5), juniperMACVRF)
			}
		case at(0) == "forwarding-options" && at(1) == "vxlan-routing" && at(2) == "overlay-ecmp":
			r.feature(s.n, FeatureJunosOverlayECMP)
		case at(0) == "firewall" && at(1) == "family" && at(2) == "any" && (index(w, "gbp-src-tag") > 0 || index(w, "gbp-dst-tag") > 0):
			r.feature(s.n, FeatureJunosGBP)
		case at(0) == "chassis" && at(1) == "forwarding-options" && at(2) == "vxlan-gbp-profile":
			r.feature(s.n, FeatureJunosGBP)
		case at(0) == "firewall" && at(1) == "family" && at(2) == "any" && index(w, "gbp-tag") > 0:
			r.feature(s.n, FeatureJunosGBP)
			if !has("firewall", "family", "any", "filter", at(4), "micro-segmentation") {
				r.add(s.n, "junos/required", "filter %s assigns GBP tags but is not a micro-segmentation filter (%s)", at(4), juniperFilter)
			}
		}
		// Every policy or AS list a line names is defined.
		for i, x := range w {
			if i+1 >= len(w) {
				break
			}
			switch {
			case x == "export" && at(0) != "policy-options":
				if !has("policy-options", "policy-statement", w[i+1]) {
					r.add(s.n, "junos/define-before-use", "export policy %s is not defined (%s)", w[i+1], juniperPolicy)
				}
			case x == "peer-as-list":
				if !has("policy-options", "as-list", w[i+1]) {
					r.add(s.n, "junos/define-before-use", "AS list %s is not defined (%s)", w[i+1], juniperPolicy)
				}
			}
		}
		if at(0) == "routing-instances" && index(w, "ip-prefix-routes") > 0 && at(len(w)-2) == "encapsulation" && at(len(w)-1) == "vxlan" {
			if !has("switch-options", "vtep-source-interface") && !has("routing-instances", at(1), "vtep-source-interface") {
				r.add(s.n, "junos/required", "type-5 routes of %s are VXLAN-encapsulated but no VTEP source interface is set (%s)", at(1), juniperT5)
			}
		}
	}
	for name, n := range macVRFs {
		r.feature(n, FeatureJunosMACVRF)
		if !has("routing-instances", name, "vlans") {
			r.add(n, "junos/required", "mac-vrf instance %s has no VLAN: commit fails with \"must configure bridge-domain for mac-vrf instance\" (%s)", name, juniperMACVRF)
		}
	}
	return r
}

func index(w []string, x string) int {
	for i, y := range w {
		if y == x {
			return i
		}
	}
	return -1
}

// junosChannel splits a channel's name, type-F/P/N:C, into its FPC, PIC and
// port; ok is false for any other name.
func junosChannel(name string) (fpc, pic, port string, ok bool) {
	_, rest, found := strings.Cut(name, "-")
	phys, _, isChannel := strings.Cut(rest, ":")
	if !found || !isChannel {
		return "", "", "", false
	}
	parts := strings.Split(phys, "/")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// junosChannelized reports whether the configuration channelizes port
// F/P/N, on the interface (any type prefix) or under the chassis.
func junosChannelized(has func(...string) bool, fpc, pic, port string) bool {
	for _, typ := range []string{"et", "xe", "ge"} {
		if has("interfaces", typ+"-"+fpc+"/"+pic+"/"+port, "number-of-sub-ports") {
			return true
		}
	}
	return has("chassis", "fpc", fpc, "pic", pic, "port", port, "channel-speed") ||
		has("chassis", "fpc", fpc, "pic", pic, "port", port, "number-of-sub-ports")
}
