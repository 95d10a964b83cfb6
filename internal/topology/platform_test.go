package topology

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestGeneratePlatforms: every NOS's generated cluster names a platform per
// switch and the model's ports, and validates.
func TestGeneratePlatforms(t *testing.T) {
	tests := []struct {
		nos, platform, leafPort, uplink string
	}{
		{"eos", "", "Ethernet1/1", "Ethernet5/1"},
		{"nxos", "", "Ethernet1/1", "Ethernet1/5"},
		{"junos", "", "et-0/0/0", "et-0/0/4"},
		{"sonic", "", "Ethernet0", "Ethernet32"},
		{"sonic", "arista/DCS-7050CX3-32S", "Ethernet0", "Ethernet16"},
		{"frr", "", "swp1", "swp5"},
	}
	for _, tt := range tests {
		t.Run(tt.nos+"/"+tt.platform, func(t *testing.T) {
			v := ""
			if tt.platform != "" {
				v = "202405"
			}
			topo, err := Generate(GenerateOptions{GPUsPerServer: 2, NOS: tt.nos, Platform: tt.platform, Version: v})
			if err != nil {
				t.Fatal(err)
			}
			f := &topo.Sites[0].Fabrics[0]
			for _, sw := range append(append([]domain.Switch{}, f.Leaves...), f.Spines...) {
				if sw.Platform == nil || sw.Platform.Model == "" || sw.Platform.Version == "" || sw.NOS != tt.nos {
					t.Fatalf("switch %s: nos %s platform %+v", sw.Name, sw.NOS, sw.Platform)
				}
			}
			if got := f.Cables[0].Port; got != tt.leafPort {
				t.Errorf("first server port = %s, want %s", got, tt.leafPort)
			}
			if got := f.Uplinks[0].LeafPort; got != tt.uplink {
				t.Errorf("first uplink port = %s, want %s", got, tt.uplink)
			}
			if err := Validate(topo); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGeneratePlatformRefuses(t *testing.T) {
	for name, o := range map[string]GenerateOptions{
		"unknown model":           {NOS: "eos", Platform: "arista/DCS-0000"},
		"model without the NOS":   {NOS: "junos", Platform: "cisco/N9K-C9364D-GX2A", Version: "23.4R2"},
		"bad version":             {NOS: "nxos", Version: "10.4"},
		"no version":              {NOS: "nxos", Platform: "cisco/N9K-C9332D-GX2B"},
		"more servers than ports": {NOS: "nxos", Platform: "cisco/N9K-C9332D-GX2B", Version: "10.4(3)", ServersPerStripe: 33},
	} {
		if _, err := Generate(o); err == nil {
			t.Errorf("%s: generated", name)
		}
	}
}

// TestValidatePlatformPorts: a switch's ports are its platform's; the
// Linux names the renderers used to keep are refused on real NOSes, and
// so is a platform that cannot run the NOS or a release that cannot be read.
func TestValidatePlatformPorts(t *testing.T) {
	tests := []struct {
		name  string
		nos   string
		edit  func(f *domain.Fabric)
		rule  string
		field string
		msg   string
	}{
		{"linux name on eos", "eos", func(f *domain.Fabric) { f.Cables[0].Port = "swp1" },
			"port-exists", "sites[0].fabrics[0].cables[0].port", `leaf s1-leaf0 has no port "swp1" (its ports are Ethernet1/1..Ethernet66)`},
		{"beyond the panel", "nxos", func(f *domain.Fabric) { f.Cables[0].Port = "Ethernet1/67" },
			"port-exists", "sites[0].fabrics[0].cables[0].port", `no port "Ethernet1/67"`},
		{"junos spine port", "junos", func(f *domain.Fabric) { f.Uplinks[0].SpinePort = "et-0/0/64" },
			"port-exists", "sites[0].fabrics[0].uplinks[0].spinePort", `did you mean "xe-0/0/64"`},
		{"sub-port without breakout", "nxos", func(f *domain.Fabric) { f.Cables[0].Port = "Ethernet1/10/1" },
			"port-exists", "sites[0].fabrics[0].cables[0].port", "declare a breakout of Ethernet1/10"},
		{"whole port broken out", "nxos", func(f *domain.Fabric) {
			f.Leaves[0].Breakouts = []domain.Breakout{{Port: "Ethernet1/1", Into: 4}}
		}, "port-exists", "sites[0].fabrics[0].cables[0].port", "Ethernet1/1/1..Ethernet1/1/4"},
		{"impossible breakout", "eos", func(f *domain.Fabric) {
			f.Leaves[0].Breakouts = []domain.Breakout{{Port: "Ethernet65", Into: 4}}
		}, "breakout", "sites[0].fabrics[0].leaves[0].breakouts[0]", "cannot be broken out"},
		{"no platform", "sonic", func(f *domain.Fabric) { f.Leaves[1].Platform = nil },
			"platform-required", "sites[0].fabrics[0].leaves[1].platform", "leaf s1-leaf1 runs sonic but names no platform"},
		{"platform without the NOS", "sonic", func(f *domain.Fabric) {
			f.Spines[0].Platform.Vendor, f.Spines[0].Platform.Model = "cisco", "N9K-C9364D-GX2A"
		},
			"platform", "sites[0].fabrics[0].spines[0].platform.model", "runs sonic, but cisco/N9K-C9364D-GX2A runs nxos"},
		{"unreadable version", "junos", func(f *domain.Fabric) { f.Leaves[0].Platform.Version = "23.4" },
			"nos-version", "sites[0].fabrics[0].leaves[0].platform.version", `"23.4" is not a junos release`},
		{"no version", "eos", func(f *domain.Fabric) { f.Leaves[0].Platform.Version = "" },
			"nos-version", "sites[0].fabrics[0].leaves[0].platform.version", "names no eos release"},
		{"release without EVPN type-5", "sonic", func(f *domain.Fabric) { f.Leaves[1].Platform.Version = "202006" },
			"nos-feature", "sites[0].fabrics[0].leaves[1].platform.version", "switch s1-leaf1 runs sonic 202006 on nvidia/SN5600, but evpn-type5"},
		{"release without BGP unnumbered", "eos", func(f *domain.Fabric) { f.Spines[0].Platform.Version = "4.26.1F" },
			"nos-feature", "sites[0].fabrics[0].spines[0].platform.version", "switch spine1 runs eos 4.26.1F on arista/DCS-7060X6-64PE, but bgp-unnumbered"},
		{"port count of another model", "eos", func(f *domain.Fabric) { f.Leaves[0].PortCount = 32 },
			"port-count", "sites[0].fabrics[0].leaves[0].portCount", "has 66 front-panel ports"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := Generate(GenerateOptions{GPUsPerServer: 2, NOS: tt.nos})
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(&topo.Sites[0].Fabrics[0])
			derr := Validate(topo)
			if derr == nil {
				t.Fatal("valid")
			}
			var found bool
			for _, d := range derr.Details {
				if d.Rule == tt.rule && d.Field == tt.field && strings.Contains(d.Message, tt.msg) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s problem at %s mentioning %q in %v", tt.rule, tt.field, tt.msg, derr.Details)
			}
		})
	}
}

// TestValidateBreakoutPorts: sub-ports of a declared breakout are ports;
// each is cabled once.
func TestValidateBreakoutPorts(t *testing.T) {
	topo, err := Generate(GenerateOptions{GPUsPerServer: 2, NOS: "junos"})
	if err != nil {
		t.Fatal(err)
	}
	f := &topo.Sites[0].Fabrics[0]
	f.Leaves[0].Breakouts = []domain.Breakout{{Port: "et-0/0/0", Into: 4}, {Port: "et-0/0/1", Into: 2}}
	for i := range f.Cables {
		c := &f.Cables[i]
		if c.Leaf != "s1-leaf0" {
			continue
		}
		switch c.Port {
		case "et-0/0/0":
			c.Port = "et-0/0/0:3"
		case "et-0/0/1":
			c.Port = "et-0/0/1:1"
		}
	}
	if err := Validate(topo); err != nil {
		t.Fatal(err)
	}
	f.Cables[2].Port = "et-0/0/0:3" // s1-gpu002 nic0 onto s1-gpu001's sub-port
	derr := Validate(topo)
	if derr == nil || !strings.Contains(derr.Error(), "leaf port s1-leaf0/et-0/0/0:3 is already used") {
		t.Fatalf("a sub-port cabled twice: %v", derr)
	}
	var de *domain.Error
	if !errors.As(error(derr), &de) {
		t.Fatal("not a domain error")
	}
}

// TestNormalizePlatform: a known model is spelled as the table spells it
// and fills the NOS and port count.
func TestNormalizePlatform(t *testing.T) {
	sw := domain.Switch{Name: "l", Platform: &domain.Platform{Vendor: "Cisco", Model: "n9k-c9332d-gx2b", Version: "10.4(3)"}}
	defaultSwitch(&sw)
	if sw.Platform.Vendor != "cisco" || sw.Platform.Model != "N9K-C9332D-GX2B" || sw.NOS != "nxos" || sw.PortCount != 34 || sw.PortPrefix != "" {
		t.Fatalf("normalized: %+v %+v", sw, sw.Platform)
	}
}
