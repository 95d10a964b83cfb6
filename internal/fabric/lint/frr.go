package lint

import "strings"

// FRR's own parser (vtysh --dryrun) checks the syntax of frr.conf in the
// render tests; the lint adds what a parser cannot see: two EVPN instances
// (IP-VRFs, L2VNI EVIs) sharing a route target. FRRouting, "EVPN" (route-target import/export
// under router bgp ... vrf ... address-family l2vpn evpn):
// https://docs.frrouting.org/en/latest/evpn.html
func frr(device string, f File) *report {
	r := newReport(device, f.Name)
	vrf := ""
	for _, l := range indented(f.Content) {
		t := l.text
		if l.indent == 0 {
			vrf = ""
			if strings.HasPrefix(t, "router bgp ") && after(t, "vrf") != "" {
				vrf = after(t, "vrf")
			}
			continue
		}
		if !strings.HasPrefix(t, "route-target ") {
			continue
		}
		if af, ok := l.in("address-family "); !ok || af != "address-family l2vpn evpn" {
			continue
		}
		switch v, inVNI := l.in("vni "); {
		case vrf != "":
			r.rt(l.n, "vrf", vrf, word(t, 2))
		case inVNI:
			// An L2VNI's EVI under the default instance.
			r.rt(l.n, "l2vni", word(v, 1), word(t, 2))
		}
	}
	return r
}
