package render_test

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// lintConfigs hands a render to the lint.
func lintConfigs(ds []render.DeviceFiles) []lint.Config {
	var out []lint.Config
	for _, d := range ds {
		c := lint.Config{Device: d.Device, NOS: d.NOS}
		for _, f := range d.Files {
			c.Files = append(c.Files, lint.File{Name: f.Name, Content: f.Content})
		}
		out = append(out, c)
	}
	return out
}

func lintClean(t *testing.T, ds []render.DeviceFiles) {
	t.Helper()
	for _, f := range lint.Check(lintConfigs(ds), lint.Hooks{}) {
		t.Error(f)
	}
}

// TestRendersLintClean runs the per-NOS semantic lint, with each switch's
// platform rules (port names of its model, features of its release), over
// every render the golden files hold: the switch would refuse what the
// lint finds.
func TestRendersLintClean(t *testing.T) {
	for _, model := range fabrictest.Models() {
		for _, nos := range fabrictest.NOSes() {
			t.Run(model+"/"+nos, func(t *testing.T) {
				in, err := fabrictest.Input(nos, model)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range lint.Check(lintConfigs(renderAll(t, compile(t, nos, model))), render.LintHooks(in.Topology)) {
					t.Error(f)
				}
			})
		}
	}
}

// TestPlatformLintRules: the platform hooks find a port the switch's model
// lacks (and leave logical interfaces alone), an optional feature the
// model or release lacks, and overlay-ecmp on a model that does not take
// it.
func TestPlatformLintRules(t *testing.T) {
	sw := func(nos, vendor, model, version string) domain.Switch {
		return domain.Switch{Name: "leaf", NOS: nos, Platform: &domain.Platform{Vendor: vendor, Model: model, Version: version}}
	}
	for _, tc := range []struct {
		name   string
		sw     domain.Switch
		nos    string
		config string
		want   string // a finding's rule, "" for none
	}{
		{"eos port of the model", sw("eos", "arista", "DCS-7060X6-64PE", "4.32.2F"), "eos",
			"interface Ethernet64/1\n   no switchport\ninterface Loopback0\n   ip address 10.0.0.1/32\n", ""},
		{"eos port past the model's last", sw("eos", "arista", "DCS-7060X6-64PE", "4.32.2F"), "eos",
			"interface Ethernet65/1\n   no switchport\n", "platform/interface-name"},
		{"eos linux name is logical, not a port", sw("eos", "arista", "DCS-7060X6-64PE", "4.32.2F"), "eos",
			"interface Vlan10\n   ip address virtual 10.1.0.1/24\n   ipv6 enable\n", ""},
		{"nxos port of the model", sw("nxos", "cisco", "N9K-C9364D-GX2A", "10.5(2)F"), "nxos",
			"interface Ethernet1/64\n  no switchport\n", ""},
		{"nxos sub-port without a breakout", sw("nxos", "cisco", "N9K-C9364D-GX2A", "10.5(2)F"), "nxos",
			"interface Ethernet1/3/1\n  no switchport\n", "platform/interface-name"},
		{"junos overlay-ecmp where the model takes it", sw("junos", "juniper", "QFX5120-32C", "23.4R1"), "junos",
			"set forwarding-options vxlan-routing overlay-ecmp\n", ""},
		{"junos overlay-ecmp on a model without it", sw("junos", "juniper", "QFX5230-64CD", "24.2R1-EVO"), "junos",
			"set forwarding-options vxlan-routing overlay-ecmp\n", "platform/min-version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "leaf.cfg"
			if tc.nos == "junos" {
				name = "leaf.set"
			}
			c := lint.Config{Device: "leaf", NOS: tc.nos, Files: []lint.File{{Name: name, Content: tc.config}}}
			var rules []string
			for _, f := range lint.Device(c, render.SwitchLintHooks(tc.sw)) {
				if strings.HasPrefix(f.Rule, "platform/") {
					rules = append(rules, f.Rule+": "+f.Msg)
				}
			}
			switch {
			case tc.want == "" && len(rules) > 0:
				t.Errorf("platform findings %v, want none", rules)
			case tc.want != "" && (len(rules) == 0 || !strings.HasPrefix(rules[0], tc.want)):
				t.Errorf("platform findings %v, want %s", rules, tc.want)
			}
		})
	}
}

// TestEOSUnnumberedUnderlay renders EOS over the unnumbered underlay
// `topology generate` produces: IPv4 loopbacks over link-local sessions
// need the IPv6 next hop originated, or the fabric never comes up.
func TestEOSUnnumberedUnderlay(t *testing.T) {
	for _, model := range fabrictest.Models() {
		t.Run(model, func(t *testing.T) {
			in, err := fabrictest.Input("eos", model)
			if err != nil {
				t.Fatal(err)
			}
			top, err := fabrictest.Topology("eos", false)
			if err != nil {
				t.Fatal(err)
			}
			in.Topology = top
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			ds := renderAll(t, it)
			lintClean(t, ds)
			for _, d := range ds {
				c := d.Files[0].Content
				for _, want := range []string{
					"   address-family ipv4\n      neighbor UNDERLAY activate\n      neighbor UNDERLAY next-hop address-family ipv6 originate\n",
					" peer-group UNDERLAY remote-as ",
					"ip routing ipv6 interfaces\n",
				} {
					if !strings.Contains(c, want) {
						t.Errorf("%s lacks %q", d.Device, want)
					}
				}
			}
		})
	}
}

// TestJunosOverlayECMP: the line is rendered where the platform needs it
// (pure type-5 VRFs on QFX5110/5120, EX4650), and nowhere else.
func TestJunosOverlayECMP(t *testing.T) {
	const line = "set forwarding-options vxlan-routing overlay-ecmp\n"
	for _, tc := range []struct {
		caps   render.Caps
		device string
		want   bool
	}{
		{render.Caps{OverlayECMP: true}, "s1-leaf0", true},
		{render.Caps{}, "s1-leaf0", false},
		{render.Caps{OverlayECMP: true}, "spine1", false},
	} {
		it := compile(t, "junos", fabrictest.PureRT5)
		opts := render.Options{Caps: func(*fabric.Device) render.Caps { return tc.caps }}
		files, err := opts.Render(it.Device(tc.device), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(files[0].Content, line); got != tc.want {
			t.Errorf("%s caps %+v: overlay-ecmp rendered %v, want %v", tc.device, tc.caps, got, tc.want)
		}
	}
}

// TestJunosGBP: where the platform has GBP, job segmentation is tags and
// an enforcement filter, the ports keep only the guard, and the result
// passes the lint; elsewhere (the golden files) it is the ACL fallback.
func TestJunosGBP(t *testing.T) {
	it := compile(t, "junos", fabrictest.Segmented)
	opts := render.Options{Caps: func(*fabric.Device) render.Caps { return render.Caps{GBP: true, GBPProfile: true} }}
	ds, err := opts.RenderIntent(it)
	if err != nil {
		t.Fatal(err)
	}
	lintClean(t, ds)
	var c string
	for _, d := range ds {
		if d.Device == "s1-leaf1" {
			c = d.Files[0].Content
		}
	}
	for _, want := range []string{
		"set chassis forwarding-options vxlan-gbp-profile\n",
		"set firewall family any filter JF-GBP-TAG micro-segmentation\n",
		"set firewall family any filter JF-GBP-TAG term g102-et-0-0-1 from interface et-0/0/1.0\nset firewall family any filter JF-GBP-TAG term g102-et-0-0-1 then gbp-tag 102\n",
		"set firewall family any filter JF-GBP-TAG term g110-ext1 from ip-version ipv4 address 10.99.0.0/24\nset firewall family any filter JF-GBP-TAG term g110-ext1 then gbp-tag 110\n",
		"set forwarding-options evpn-vxlan gbp mac-ip-inter-tagging\n",
		// Within the group, and the contract both ways.
		"set firewall family any filter JF-GBP term g102-g102 from gbp-src-tag 102\nset firewall family any filter JF-GBP term g102-g102 from gbp-dst-tag 102\nset firewall family any filter JF-GBP term g102-g102 then accept\n",
		"term g102-g110 then accept\n", "term g110-g102 then accept\n",
		// The guard stays on the port.
		"set firewall family inet filter jf-et-0-0-1-0-in term underlay from destination-address",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("s1-leaf1 lacks:\n%s", want)
		}
	}
	for _, not := range []string{"term allow ", "uses no group-based policy"} {
		if strings.Contains(c, not) {
			t.Errorf("s1-leaf1 with GBP still has the ACL fallback (%q)", not)
		}
	}
}

// TestJunosCapsFromPlatform: without Options.Caps, the switch's model and
// release decide: a QFX5120 at 22.4R1 or later gets GBP (with its profile)
// and overlay-ecmp; before 22.4R1 the ACL fallback and overlay-ecmp; a
// QFX5230 neither. Every result passes the lint.
func TestJunosCapsFromPlatform(t *testing.T) {
	const (
		ecmp    = "set forwarding-options vxlan-routing overlay-ecmp\n"
		gbp     = "set firewall family any filter JF-GBP-TAG micro-segmentation\n"
		profile = "set chassis forwarding-options vxlan-gbp-profile\n"
	)
	for _, tc := range []struct {
		model, version         string
		fixture                string
		ecmp, gbp, withProfile bool
	}{
		{"QFX5120-32C", "23.4R1", fabrictest.Segmented, true, true, true}, // globex is pure type-5
		{"QFX5120-32C", "22.3R1", fabrictest.Segmented, true, false, false},
		{"QFX5120-32C", "23.4R1", fabrictest.PureRT5, true, false, false},
		{"QFX5230-64CD", "24.2R1-EVO", fabrictest.Segmented, false, false, false},
		{"QFX5230-64CD", "24.2R1-EVO", fabrictest.PureRT5, false, false, false},
	} {
		it := compile(t, "junos", tc.fixture)
		d := *it.Device("s1-leaf1")
		d.Platform = &domain.Platform{Vendor: "juniper", Model: tc.model, Version: tc.version}
		files, err := render.Render(&d, "")
		if err != nil {
			t.Fatalf("%s %s: %v", tc.model, tc.version, err)
		}
		c := files[0].Content
		for line, want := range map[string]bool{ecmp: tc.ecmp, gbp: tc.gbp, profile: tc.withProfile} {
			if got := strings.Contains(c, line); got != want {
				t.Errorf("%s %s (%s): %q rendered %v, want %v", tc.model, tc.version, tc.fixture, strings.TrimSpace(line), got, want)
			}
		}
		lintClean(t, []render.DeviceFiles{{Device: d.Name, Files: files}})
	}
}
