package render_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/datadriven"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// TestThreeTier renders the three-tier fixture (two pods under two
// super-spines, tenants with a server in each pod) for every NOS; the
// expected configurations are in testdata/three-tier/. Commands:
//
//	plan nos=NOS                 the ASN plan and every session (EVPN, next hop kept)
//	render nos=NOS devices=(a,b) the named devices' files, blank lines left out
//
// Rewrite with: go test ./internal/fabric/render/ -run ThreeTier -rewrite
func TestThreeTier(t *testing.T) {
	datadriven.Walk(t, "testdata/three-tier", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, c *datadriven.Case) string {
			nos := c.Args.Get("nos", "frr")
			in, err := fabrictest.ThreeTierInput(nos)
			if err != nil {
				t.Fatal(err)
			}
			it, err := fabric.Compile(in)
			if err != nil {
				return "error: " + err.Error()
			}
			switch c.Cmd {
			case "plan":
				return plan(it)
			case "render":
				var want []string
				for _, a := range c.Args {
					if a.Key == "devices" {
						want = a.Vals
					}
				}
				files, err := render.RenderIntent(it)
				if err != nil {
					return "error: " + err.Error()
				}
				var b strings.Builder
				for _, d := range files {
					if len(want) > 0 && !slices.Contains(want, d.Device) {
						continue
					}
					for _, f := range d.Files {
						b.WriteString("==== " + d.Device + "/" + f.Name + "\n")
						for _, l := range strings.Split(strings.TrimRight(f.Content, "\n"), "\n") {
							if strings.TrimSpace(l) != "" {
								b.WriteString(l + "\n")
							}
						}
					}
				}
				return b.String()
			}
			t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
			return ""
		})
	})
}

// plan lists each device's role, pod, ASN and loopback, then its sessions.
func plan(it *fabric.Intent) string {
	var b strings.Builder
	for _, d := range it.Devices {
		fmt.Fprintf(&b, "%s %s pod=%d asn=%d lo=%s vrfs=%d\n", d.Name, d.Role, d.Pod, d.ASN, d.Loopback, len(d.VRFs))
		for _, s := range d.Sessions {
			var flags []string
			if s.Multihop {
				flags = append(flags, "multihop")
			}
			if s.Unicast {
				flags = append(flags, "unicast")
			}
			if s.EVPN {
				flags = append(flags, "evpn")
			}
			if s.NextHopUnchanged {
				flags = append(flags, "nh-unchanged")
			}
			via := s.Interface
			if s.Address.IsValid() {
				via += " " + s.Address.String()
			}
			fmt.Fprintf(&b, "  -> %s asn=%d via %s [%s]\n", s.Peer, s.PeerASN, strings.TrimSpace(via), strings.Join(flags, " "))
		}
	}
	return b.String()
}

// TestThreeTierLintClean lints the three-tier renders of every NOS with
// each switch's platform rules, super-spines included.
func TestThreeTierLintClean(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		t.Run(nos, func(t *testing.T) {
			in, err := fabrictest.ThreeTierInput(nos)
			if err != nil {
				t.Fatal(err)
			}
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range lint.Check(lintConfigs(renderAll(t, it)), render.LintHooks(in.Topology)) {
				t.Error(f)
			}
		})
	}
}

// TestThreeTierFRRSyntax checks every FRR configuration of the three-tier
// fixture with `vtysh --dryrun` (the lab runs them: TestLabThreeTier).
func TestThreeTierFRRSyntax(t *testing.T) {
	check := vtyshCheck(t)
	in, err := fabrictest.ThreeTierInput("frr")
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range renderAll(t, it) {
		for _, f := range d.Files {
			if f.Name == "frr.conf" {
				if err := check(t, f.Content); err != nil {
					t.Errorf("%s/%s: %v", d.Device, f.Name, err)
				}
			}
		}
	}
}
