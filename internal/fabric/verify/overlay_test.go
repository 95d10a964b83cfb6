package verify_test

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestThreeTierOverlay verifies the three-tier fixture (two pods, tenants
// with a server in each) for every NOS, then breaks the path between the
// pods in the ways a hand-edited or buggy intent could.
func TestThreeTierOverlay(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		in, err := fabrictest.ThreeTierInput(nos)
		if err != nil {
			t.Fatal(err)
		}
		if e := topology.Validate(in.Topology); e != nil {
			t.Fatalf("%s: the fixture's topology is invalid: %v", nos, e)
		}
		it, err := fabric.Compile(in)
		if err != nil {
			t.Fatal(err)
		}
		if r := verify.Verify(in, it); !r.OK() {
			t.Fatalf("%s: the compiled three-tier intent fails:\n%s", nos, r.Text(20))
		}
	}
	cases := map[string]struct {
		edit func(it *fabric.Intent)
		rule string
		want string
	}{
		"super-spines rewrite the next hop": {func(it *fabric.Intent) {
			for _, n := range []string{"super1", "super2"} {
				d := it.Device(n)
				for i := range d.Sessions {
					d.Sessions[i].NextHopUnchanged = false
				}
			}
		}, verify.RuleEVPNNextHop, "with next hop super1"},
		"pod 2 has no EVPN toward the super-spines": {func(it *fabric.Intent) {
			d := it.Device("p2-spine1")
			for i := range d.Sessions {
				if strings.HasPrefix(d.Sessions[i].Peer, "super") {
					d.Sessions[i].EVPN = false
				}
			}
		}, verify.RuleEVPNPath, "do not reach s2-leaf0"},
		"both pods' spines in one ASN (an AS-path loop)": {func(it *fabric.Intent) {
			asn := it.Device("p1-spine1").ASN
			it.Device("p2-spine1").ASN = asn
			for i := range it.Devices {
				d := &it.Devices[i]
				for j := range d.Sessions {
					if d.Sessions[j].Peer == "p2-spine1" {
						d.Sessions[j].PeerASN = asn
					}
				}
			}
		}, verify.RuleEVPNPath, "no chain of EVPN sessions"},
		"a session one end does not configure": {func(it *fabric.Intent) {
			d := it.Device("super1")
			d.Sessions = d.Sessions[:0]
			d = it.Device("super2")
			d.Sessions = d.Sessions[:0]
		}, verify.RuleEVPNPath, "do not reach"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := fabrictest.ThreeTierInput("frr")
			if err != nil {
				t.Fatal(err)
			}
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(it)
			r := verify.Verify(in, it)
			for _, c := range r.Checks {
				if c.Name != verify.CheckOverlay {
					continue
				}
				for _, f := range c.Failures {
					if f.Rule == tc.rule && strings.Contains(f.Detail, tc.want) {
						return
					}
				}
				t.Fatalf("overlay check: %+v; want a %s failure saying %q", c, tc.rule, tc.want)
			}
			t.Fatal("no overlay check in the report")
		})
	}
}
