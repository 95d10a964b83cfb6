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
					"   neighbor interface Ethernet",
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
