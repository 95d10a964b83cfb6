package render_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/lint"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

func files(fs []render.File) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Content)
	}
	return b.String()
}

// TestRenderAsAnotherNOSNamesItsPorts: `fabric render --nos X` of the
// lab's FRR switches (swpN ports) names the same front-panel ports as X's
// default platform does. Before platforms, every NOS printed swp1.
func TestRenderAsAnotherNOSNamesItsPorts(t *testing.T) {
	it := compile(t, "frr", fabrictest.Segmented)
	leaf, spine := it.Device("s1-leaf0"), it.Device("spine1")
	tests := []struct {
		nos        string
		leaf, peer []string // in the leaf's and the spine's files
	}{
		{"eos", []string{"interface Ethernet1/1\n", "interface Ethernet5/1\n", "neighbor interface Ethernet5/1 "}, []string{"interface Ethernet1/1\n"}},
		{"nxos", []string{"interface Ethernet1/1\n", "interface Ethernet1/5\n"}, []string{"interface Ethernet1/4\n"}},
		// A Junos spine needs loopback overlay sessions (the compiler's
		// choice), so only the leaf renders as Junos here.
		{"junos", []string{"set interfaces et-0/0/0 ", "set interfaces et-0/0/4 ", "peer-auto-discovery interface et-0/0/4.0", `description "to spine1 et-0/0/0"`}, nil},
		{"sonic", []string{`"Ethernet0": {`, `"Ethernet32": {`, "neighbor Ethernet32 interface"}, []string{`"Ethernet24": {`}},
	}
	for _, tt := range tests {
		t.Run(tt.nos, func(t *testing.T) {
			for _, c := range []struct {
				d    *fabric.Device
				want []string
			}{{leaf, tt.leaf}, {spine, tt.peer}} {
				if c.want == nil {
					continue
				}
				fs, err := render.Render(c.d, tt.nos)
				if err != nil {
					t.Fatal(err)
				}
				out := files(fs)
				if i := strings.Index(out, "swp"); i >= 0 {
					t.Errorf("%s as %s keeps a Linux port name: ...%s...", c.d.Name, tt.nos, out[max(0, i-40):min(len(out), i+20)])
				}
				for _, w := range c.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s as %s: no %q", c.d.Name, tt.nos, w)
					}
				}
			}
		})
	}
	// The intent is not changed by rendering it as another NOS.
	if leaf.Ports[0].Name != "swp1" || leaf.Uplinks[0].Port != "swp5" {
		t.Fatalf("the intent was renamed: %s, %s", leaf.Ports[0].Name, leaf.Uplinks[0].Port)
	}
}

// TestRenderBreakoutPorts: a leaf whose server port is a breakout sub-port
// renders it under the sub-port's name, natively and as another NOS.
func TestRenderBreakoutPorts(t *testing.T) {
	in, err := fabrictest.Input("junos", fabrictest.PureRT5)
	if err != nil {
		t.Fatal(err)
	}
	f := &in.Topology.Sites[0].Fabrics[0]
	for i := range f.Leaves {
		if f.Leaves[i].Name == "s1-leaf0" {
			f.Leaves[i].Breakouts = []domain.Breakout{{Port: "et-0/0/0", Into: 4}}
		}
	}
	for i := range f.Cables {
		if c := &f.Cables[i]; c.Leaf == "s1-leaf0" && c.Port == "et-0/0/0" {
			c.Port = "et-0/0/0:2"
		}
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	d := it.Device("s1-leaf0")
	for nos, want := range map[string]string{
		"junos": "set interfaces et-0/0/0:2 unit 0 family inet address 10.0.0.0/31\n",
		"nxos":  "interface Ethernet1/1/3\n",
		"eos":   "interface Ethernet1/5\n", // 4 x 2 lanes of an 8-lane port: lanes 1, 3, 5, 7
		"sonic": `"Ethernet4|10.0.0.0/31": {}`,
	} {
		fs, err := render.Render(d, nos)
		if err != nil {
			t.Fatalf("%s: %v", nos, err)
		}
		if !strings.Contains(files(fs), want) {
			t.Errorf("%s: no %q", nos, want)
		}
	}
}

// TestRenderRefusesWhatTheReleaseLacks: a config needing a feature the
// switch's NOS release lacks is refused, naming the switch and feature.
func TestRenderRefusesWhatTheReleaseLacks(t *testing.T) {
	tests := []struct {
		nos, model, version string
		feature, min        string
	}{
		{"sonic", fabrictest.VLANAware, "202205", "anycast-gateway", "202311"}, // SAG|GLOBAL, static_anycast_gateway
		{"nxos", fabrictest.Segmented, "10.4(3)", "group-policy", "10.5(1)F"},
		{"eos", fabrictest.PureRT5, "4.19.0F", "evpn-type5", "4.20.1F"},
		{"junos", fabrictest.PureRT5, "19.4R3-S1", "evpn-type5", "20.4R1"},
	}
	for _, tt := range tests {
		t.Run(tt.nos, func(t *testing.T) {
			in, err := fabrictest.Input(tt.nos, tt.model)
			if err != nil {
				t.Fatal(err)
			}
			f := &in.Topology.Sites[0].Fabrics[0]
			f.Leaves[0].Platform.Version = tt.version
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			_, err = render.RenderIntent(it)
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field != "platform.version" {
				t.Fatalf("render = %v; want an invalid_argument on platform.version", err)
			}
			for _, s := range []string{"switch " + f.Leaves[0].Name, tt.feature, tt.version, tt.min} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			f.Leaves[0].Platform.Version = tt.min
			if it, err = fabric.Compile(in); err != nil {
				t.Fatal(err)
			}
			if _, err := render.RenderIntent(it); err != nil {
				t.Fatalf("at the minimum release: %v", err)
			}
		})
	}
}

// TestRenderPlatformlessDeviceOfAnotherNOS: a switch without a platform
// compiled as another NOS (Options.DefaultNOS) still gets that NOS's names.
func TestRenderPlatformlessDeviceOfAnotherNOS(t *testing.T) {
	in, err := fabrictest.Input("frr", fabrictest.PureRT5)
	if err != nil {
		t.Fatal(err)
	}
	f := &in.Topology.Sites[0].Fabrics[0]
	for i := range f.Leaves {
		f.Leaves[i].NOS, f.Leaves[i].Platform = "", nil
	}
	in.Options.DefaultNOS = "nxos"
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := render.Render(it.Device("s1-leaf0"), "")
	if err != nil {
		t.Fatal(err)
	}
	out := files(fs)
	if strings.Contains(out, "swp") || !strings.Contains(out, "interface Ethernet1/1\n") {
		t.Fatalf("NX-OS render of a platform-less leaf:\n%s", out)
	}
}

// breakoutInput is a fixture of nos on its default platform whose leaf
// s1-leaf0 has its first server port broken out into `into`, the server
// cabled to sub-port sub.
func breakoutInput(t *testing.T, nos string, into, sub int, p func(*domain.Switch)) (*fabric.Intent, *domain.Topology) {
	t.Helper()
	in, err := fabrictest.Input(nos, fabrictest.PureRT5)
	if err != nil {
		t.Fatal(err)
	}
	f := &in.Topology.Sites[0].Fabrics[0]
	whole := fabrictest.PortName(nos, 1)
	var ports *platform.Ports
	for i := range f.Leaves {
		if sw := &f.Leaves[i]; sw.Name == "s1-leaf0" {
			if p != nil {
				p(sw)
			}
			sw.Breakouts = []domain.Breakout{{Port: whole, Into: into}}
			m, _ := platform.Lookup(sw.Platform.Vendor, sw.Platform.Model)
			ports = platform.NewPorts(m, nos, "", 0)
			if err := ports.Breakout(whole, into); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range f.Cables {
		if c := &f.Cables[i]; c.Leaf == "s1-leaf0" && c.Port == whole {
			c.Port = ports.Name(platform.Port{N: 1, Sub: sub})
		}
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return it, in.Topology
}

// TestRenderBreakoutConfig: a leaf with a broken-out port gets the
// configuration that splits it, in its NOS's syntax, above the first line
// naming a sub-port, and the result passes the lint with the switch's
// platform rules. Before the breakout was rendered, the configurations
// named sub-ports the switch had never been told to create.
func TestRenderBreakoutConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nos       string
		into, sub int
		platform  func(*domain.Switch)
		breakout  []string // in order
		firstUse  string   // the first line naming a sub-port
	}{
		{"nxos 4x100G", "nxos", 4, 3, nil,
			[]string{"interface breakout module 1 port 1 map 100g-4x\n"}, "interface Ethernet1/1/3\n"},
		{"nxos 2x200G", "nxos", 2, 2, nil,
			[]string{"interface breakout module 1 port 1 map 200g-2x\n"}, "interface Ethernet1/1/2\n"},
		{"junos evolved 4x100G", "junos", 4, 3, nil,
			[]string{"set interfaces et-0/0/0 number-of-sub-ports 4\n", "set interfaces et-0/0/0 speed 100g\n"}, "set interfaces et-0/0/0:2 "},
		{"junos qfx5120 4x25G", "junos", 4, 2, func(sw *domain.Switch) {
			sw.Platform = &domain.Platform{Vendor: "juniper", Model: "QFX5120-32C", Version: "23.4R1"}
		}, []string{"set chassis fpc 0 pic 0 port 0 channel-speed 25g\n"}, "set interfaces et-0/0/0:1 "},
		{"eos 4x200G", "eos", 4, 3, nil,
			[]string{"interface Ethernet1/1\n   speed 200g-2\n", "interface Ethernet1/3\n   speed 200g-2\n", "interface Ethernet1/5\n   speed 200g-2\n", "interface Ethernet1/7\n   speed 200g-2\n"},
			"interface Ethernet1/5\n   description"},
		{"eos 8x100G", "eos", 8, 2, nil,
			[]string{"interface Ethernet1/1\n   speed 100g-1\n", "interface Ethernet1/8\n   speed 100g-1\n"}, "interface Ethernet1/2\n   description"},
		{"sonic 4x200G", "sonic", 4, 3, nil,
			[]string{`"BREAKOUT_CFG": {
        "Ethernet0": {
            "brkout_mode": "4x200G[100G,50G,25G,10G]"
        }
    }`, `"lanes": "0,1",`, `"lanes": "2,3",`, `"lanes": "4,5",`, `"lanes": "6,7",`}, `"Ethernet4|`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, top := breakoutInput(t, tc.nos, tc.into, tc.sub, tc.platform)
			d := it.Device("s1-leaf0")
			fs, err := render.Render(d, "")
			if err != nil {
				t.Fatal(err)
			}
			out := files(fs)
			use := strings.Index(out, tc.firstUse)
			if use < 0 {
				t.Fatalf("no %q in:\n%s", tc.firstUse, out)
			}
			at := 0
			for _, b := range tc.breakout {
				i := strings.Index(out, b)
				switch {
				case i < 0:
					t.Errorf("no breakout %q in:\n%s", b, out)
				case i < at:
					t.Errorf("breakout %q out of order", b)
				case i > use && tc.nos != "sonic": // CONFIG_DB: the entry itself is the use
					t.Errorf("breakout %q comes after the first sub-port use %q", b, tc.firstUse)
				}
				at = max(at, i)
			}
			ds := []render.DeviceFiles{{Device: d.Name, NOS: tc.nos, Files: fs}}
			for _, f := range lint.Check(lintConfigs(ds), render.LintHooks(top)) {
				t.Error(f)
			}
		})
	}
}

// TestRenderBreakoutRefused: a breakout the NOS has no documented form
// for is refused with the port and model, not rendered as a guess.
func TestRenderBreakoutRefused(t *testing.T) {
	it, _ := breakoutInput(t, "sonic", 2, 1, func(sw *domain.Switch) {
		sw.Platform = &domain.Platform{Vendor: "nvidia", Model: "SN4700", Version: "202405"}
	})
	_, err := render.Render(it.Device("s1-leaf0"), "")
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || !strings.Contains(err.Error(), "SN4700") || !strings.Contains(err.Error(), "Ethernet0") {
		t.Fatalf("SONiC breakout on SN4700: %v", err)
	}
}
