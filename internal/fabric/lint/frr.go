package lint

import "strings"

// FRR's own parser (vtysh --dryrun) checks the syntax of frr.conf in the
// render tests; the lint adds what a parser cannot see: two EVPN VRFs
// sharing a route target. FRRouting, "EVPN" (route-target import/export
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
		if vrf != "" && strings.HasPrefix(t, "route-target ") {
			if af, ok := l.in("address-family "); ok && af == "address-family l2vpn evpn" {
				r.rt(l.n, "vrf", vrf, word(t, 2))
			}
		}
	}
	return r
}
