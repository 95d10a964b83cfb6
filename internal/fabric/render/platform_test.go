package render_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
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
