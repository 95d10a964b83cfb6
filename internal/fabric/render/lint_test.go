package render_test

import (
	"strings"
	"testing"

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

// TestRendersLintClean runs the per-NOS semantic lint over every render
// the golden files hold: the switch would refuse what the lint finds.
func TestRendersLintClean(t *testing.T) {
	for _, model := range fabrictest.Models() {
		for _, nos := range fabrictest.NOSes() {
			t.Run(model+"/"+nos, func(t *testing.T) {
				lintClean(t, renderAll(t, compile(t, nos, model)))
			})
		}
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
