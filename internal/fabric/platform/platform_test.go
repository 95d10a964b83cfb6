package platform

import (
	"errors"
	"strings"
	"testing"
)

func ports(t *testing.T, vendor, model, nos string, breakouts map[string]int) *Ports {
	t.Helper()
	m, ok := Lookup(vendor, model)
	if !ok {
		t.Fatalf("no model %s/%s", vendor, model)
	}
	p := NewPorts(m, nos, "swp", 8)
	for parent, n := range breakouts {
		if err := p.Breakout(parent, n); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestNames pins each NOS's spelling of whole ports and breakout
// sub-ports, and that Parse reads back exactly what Name writes.
func TestNames(t *testing.T) {
	tests := []struct {
		name               string
		vendor, model, nos string
		breakouts          map[string]int
		port               Port
		want               string
	}{
		{"eos osfp", "arista", "DCS-7060X6-64PE", EOS, nil, Port{N: 1}, "Ethernet1/1"},
		{"eos sfp", "arista", "DCS-7060X6-64PE", EOS, nil, Port{N: 65}, "Ethernet65"},
		{"eos 4x", "arista", "DCS-7060X6-64PE", EOS, map[string]int{"Ethernet3/1": 4}, Port{N: 3, Sub: 2}, "Ethernet3/3"},
		{"eos 8x", "arista", "DCS-7060X6-64PE", EOS, map[string]int{"Ethernet3/1": 8}, Port{N: 3, Sub: 8}, "Ethernet3/8"},
		{"nxos", "cisco", "N9K-C9364D-GX2A", NXOS, nil, Port{N: 64}, "Ethernet1/64"},
		{"nxos 4x", "cisco", "N9K-C9364D-GX2A", NXOS, map[string]int{"Ethernet1/5": 4}, Port{N: 5, Sub: 4}, "Ethernet1/5/4"},
		{"junos", "juniper", "QFX5230-64CD", Junos, nil, Port{N: 1}, "et-0/0/0"},
		{"junos sfp", "juniper", "QFX5220-32CD", Junos, nil, Port{N: 33}, "xe-0/0/32"},
		{"junos 4x", "juniper", "QFX5230-64CD", Junos, map[string]int{"et-0/0/4": 4}, Port{N: 5, Sub: 1}, "et-0/0/4:0"},
		{"sonic", "nvidia", "SN5600", SONiC, nil, Port{N: 2}, "Ethernet8"},
		{"sonic sfp", "nvidia", "SN5600", SONiC, nil, Port{N: 65}, "Ethernet512"},
		{"sonic 4x", "nvidia", "SN5600", SONiC, map[string]int{"Ethernet8": 4}, Port{N: 2, Sub: 3}, "Ethernet12"},
		{"sonic on arista", "arista", "DCS-7060X6-64PE", SONiC, nil, Port{N: 66}, "Ethernet513"},
		{"generic", GenericVendor, GenericModel, FRR, nil, Port{N: 7}, "swp7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ports(t, tt.vendor, tt.model, tt.nos, tt.breakouts)
			if got := p.Name(tt.port); got != tt.want {
				t.Fatalf("Name(%+v) = %q, want %q", tt.port, got, tt.want)
			}
			got, err := p.Parse(tt.want)
			if err != nil || got != tt.port {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", tt.want, got, err, tt.port)
			}
		})
	}
}

// TestParseRefuses: a port the platform lacks, a second spelling, a
// sub-port of a port that is not broken out and the whole name of one
// that is are all refused, with what to write instead.
func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name               string
		vendor, model, nos string
		breakouts          map[string]int
		port, want         string
	}{
		{"beyond the panel", "cisco", "N9K-C9332D-GX2B", NXOS, nil, "Ethernet1/35", "Ethernet1/1..Ethernet1/34"},
		{"linux name on nxos", "cisco", "N9K-C9332D-GX2B", NXOS, nil, "swp1", "Ethernet1/1..Ethernet1/34"},
		{"linux name on eos", "arista", "DCS-7060X6-64PE", EOS, nil, "swp5", "Ethernet1/1..Ethernet66"},
		{"eos bare multi-lane", "arista", "DCS-7060X6-64PE", EOS, nil, "Ethernet1", "no port"},
		{"leading zero", "cisco", "N9K-C9332D-GX2B", NXOS, nil, "Ethernet1/01", `did you mean "Ethernet1/1"`},
		{"junos wrong type", "juniper", "QFX5220-32CD", Junos, nil, "xe-0/0/0", `did you mean "et-0/0/0"`},
		{"sub-port not broken out", "cisco", "N9K-C9332D-GX2B", NXOS, nil, "Ethernet1/2/1", "declare a breakout of Ethernet1/2 into 2, 4"},
		{"whole port broken out", "juniper", "QFX5230-64CD", Junos, map[string]int{"et-0/0/1": 4}, "et-0/0/1", "et-0/0/1:0..et-0/0/1:3"},
		{"sub-port beyond split", "cisco", "N9K-C9332D-GX2B", NXOS, map[string]int{"Ethernet1/2": 2}, "Ethernet1/2/3", "broken out into 2"},
		{"sonic lane inside a sub-port", "nvidia", "SN5600", SONiC, map[string]int{"Ethernet0": 2}, "Ethernet2", "no port"},
		{"sfp cannot break out", "cisco", "N9K-C9332D-GX2B", NXOS, nil, "Ethernet1/33/1", "cannot be broken out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ports(t, tt.vendor, tt.model, tt.nos, tt.breakouts)
			_, err := p.Parse(tt.port)
			if !errors.Is(err, ErrNoPort) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want ErrNoPort mentioning %q", tt.port, err, tt.want)
			}
		})
	}
}

func TestBreakoutRefuses(t *testing.T) {
	p := ports(t, "cisco", "N9K-C9364D-GX2A", NXOS, nil)
	for parent, into := range map[string]int{"Ethernet1/1": 8, "Ethernet1/65": 4, "Ethernet1/99": 4} {
		if err := p.Breakout(parent, into); err == nil {
			t.Errorf("Breakout(%s, %d) accepted", parent, into)
		}
	}
	if err := p.Breakout("Ethernet1/1", 4); err != nil {
		t.Fatal(err)
	}
	if err := p.Breakout("Ethernet1/1", 2); err == nil {
		t.Error("a second breakout of one port accepted")
	}
}

// TestTranslate maps a port to another NOS's name of the same front-panel
// port (fabric render --nos).
func TestTranslate(t *testing.T) {
	from := ports(t, GenericVendor, GenericModel, FRR, nil)
	to := ports(t, "cisco", "N9K-C9364D-GX2A", NXOS, nil)
	if got, err := from.Translate("swp5", to); err != nil || got != "Ethernet1/5" {
		t.Fatalf("Translate(swp5) = %q, %v", got, err)
	}
	junos := ports(t, "juniper", "QFX5230-64CD", Junos, map[string]int{"et-0/0/0": 4})
	eos := ports(t, "arista", "DCS-7060X6-64PE", EOS, nil)
	if got, err := junos.Translate("et-0/0/0:3", eos); err != nil || got != "Ethernet1/7" {
		t.Fatalf("Translate(et-0/0/0:3) = %q, %v", got, err)
	}
	small := ports(t, "cisco", "N9K-C9332D-GX2B", NXOS, nil)
	if _, err := eos.Translate("Ethernet40/1", small); err == nil {
		t.Fatal("a port beyond the target's panel translated")
	}
}

func TestVersions(t *testing.T) {
	tests := []struct {
		nos, a, b string
		want      int
	}{
		{EOS, "4.32.2F", "4.27.0F", 1},
		{EOS, "4.30.1.1M", "4.30.1F", 1},
		{NXOS, "10.4(3)", "10.5(1)F", -1},
		{NXOS, "9.3(10)", "9.3(9)", 1},
		{NXOS, "7.0(3)I7(9)", "7.0(3)I1(1)", 1},
		{Junos, "22.4R3-S2", "22.4R1", 1},
		{Junos, "23.4R2-S3-EVO", "23.4R2", 1},
		{Junos, "21.4R3-S5.4", "22.4R1", -1},
		{SONiC, "202305", "202311", -1},
		{SONiC, "202311.2", "202311", 1},
		{FRR, "10.2", "10.2.0", 0},
	}
	for _, tt := range tests {
		a, err := ParseVersion(tt.nos, tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseVersion(tt.nos, tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Compare(b); got != tt.want {
			t.Errorf("%s: Compare(%s, %s) = %d, want %d", tt.nos, tt.a, tt.b, got, tt.want)
		}
	}
	for nos, bad := range map[string]string{EOS: "4.32", NXOS: "10.4.3", Junos: "23.4", SONiC: "master", FRR: "v10"} {
		if _, err := ParseVersion(nos, bad); err == nil {
			t.Errorf("%s: %q parsed", nos, bad)
		}
	}
}

// TestRequirements: every entry of the feature table names a known NOS and
// model, a release its NOS can parse and a document.
func TestRequirements(t *testing.T) {
	known := map[string]bool{}
	for _, m := range Models() {
		known[strings.ToLower(m.Vendor+"/"+m.Name)] = true
	}
	for _, r := range Requirements() {
		if _, ok := versionFormats[r.NOS]; !ok {
			t.Errorf("%s %s: unknown NOS", r.NOS, r.Feature)
		}
		if r.Min != "" {
			if _, err := ParseVersion(r.NOS, r.Min); err != nil {
				t.Errorf("%s %s: %v", r.NOS, r.Feature, err)
			}
		}
		for _, m := range r.Models {
			if !known[strings.ToLower(m)] {
				t.Errorf("%s %s: unknown model %s", r.NOS, r.Feature, m)
			}
		}
		if r.Doc == "" || r.What == "" {
			t.Errorf("%s %s: no document or description", r.NOS, r.Feature)
		}
	}
	// Every NOS's default platform runs it and has every feature.
	for _, nos := range NOSes() {
		d, ok := DefaultFor(nos)
		if !ok {
			t.Fatalf("no default for %s", nos)
		}
		m, ok := Lookup(d.Vendor, d.Model)
		if !ok || !m.Runs(nos) {
			t.Fatalf("%s: default %s/%s unknown or does not run it", nos, d.Vendor, d.Model)
		}
		if err := Check("sw", m, nos, d.Version, []Feature{EVPNType5, AnycastGateway, BGPUnnumbered, GroupPolicy}); err != nil {
			t.Errorf("%s default: %v", nos, err)
		}
	}
}

func TestCheck(t *testing.T) {
	sn, _ := Lookup("nvidia", "SN5600")
	err := Check("s1-leaf0", sn, SONiC, "202205", []Feature{EVPNType5, AnycastGateway})
	var fe *FeatureError
	if !errors.As(err, &fe) || fe.Switch != "s1-leaf0" || fe.Feature != AnycastGateway || fe.Min != "202311" {
		t.Fatalf("SONiC 202205 with SAG: %v", err)
	}
	for _, s := range []string{"s1-leaf0", "anycast-gateway", "202205", "202311", "SAG|GLOBAL"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if err := Check("s1-leaf0", sn, SONiC, "202311", []Feature{AnycastGateway}); err != nil {
		t.Fatal(err)
	}
	n9k, _ := Lookup("cisco", "N9K-C9364D-GX2A")
	if err := Check("s1-leaf1", n9k, NXOS, "10.4(3)", []Feature{GroupPolicy}); !errors.As(err, &fe) || fe.Feature != GroupPolicy {
		t.Fatalf("NX-OS 10.4(3) with security groups: %v", err)
	}
	if err := Check("s1-leaf1", n9k, NXOS, "ten", nil); err == nil {
		t.Fatal("an unparsable version passed")
	}
}

// TestEveryNameRoundTrips: on every model, for every NOS it runs, with
// every port broken out every way it can be, each port and sub-port has a
// distinct name that Parse reads back.
func TestEveryNameRoundTrips(t *testing.T) {
	for _, m := range Models() {
		for _, nos := range m.NOSes {
			// mode i: every port split into its i-th breakout (0: whole).
			for mode := 0; mode <= 3; mode++ {
				p := NewPorts(m, nos, "swp", 48)
				n := p.ports()
				for i := 1; i <= n; i++ {
					if b := m.Breakouts(i); mode > 0 && mode <= len(b) {
						if err := p.Breakout(p.Name(Port{N: i}), b[mode-1]); err != nil {
							t.Fatalf("%s/%s %s: %v", m.Vendor, m.Name, nos, err)
						}
					}
				}
				seen := map[string]Port{}
				for i := 1; i <= n; i++ {
					subs := []Port{{N: i}}
					if s := p.Split(i); s > 0 {
						subs = subs[:0]
						for k := 1; k <= s; k++ {
							subs = append(subs, Port{N: i, Sub: k})
						}
					}
					for _, pt := range subs {
						name := p.Name(pt)
						if other, dup := seen[name]; dup {
							t.Fatalf("%s/%s %s mode %d: %s names %+v and %+v", m.Vendor, m.Name, nos, mode, name, other, pt)
						}
						seen[name] = pt
						if got, err := p.Parse(name); err != nil || got != pt {
							t.Fatalf("%s/%s %s mode %d: Parse(%s) = %+v, %v; want %+v", m.Vendor, m.Name, nos, mode, name, got, err, pt)
						}
					}
				}
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"Ethernet1/1", "Ethernet1/1/4", "et-0/0/0:3", "Ethernet512", "swp1s0", "Ethernet1/01", "xe-0/0/64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, m := range Models() {
			for _, nos := range m.NOSes {
				p := NewPorts(m, nos, "swp", 64)
				_ = p.Breakout(p.Name(Port{N: 1}), 4)
				pt, err := p.Parse(name)
				if err == nil && p.Name(pt) != name {
					t.Fatalf("%s/%s %s: Parse(%q) = %+v, named %q", m.Vendor, m.Name, nos, name, pt, p.Name(pt))
				}
			}
		}
	})
}

// TestHas: an optional feature is there only on a listed model at or above
// its release; an unknown release or model says no.
func TestHas(t *testing.T) {
	qfx5120, _ := Lookup("juniper", "QFX5120-32C")
	qfx5230, _ := Lookup("juniper", "QFX5230-64CD")
	for _, tc := range []struct {
		name    string
		m       Model
		version string
		want    bool
	}{
		{"listed model, at the minimum", qfx5120, "22.4R1", true},
		{"listed model, later", qfx5120, "23.4R2-S3", true},
		{"listed model, earlier", qfx5120, "22.3R1", false},
		{"unlisted model", qfx5230, "24.2R1-EVO", false},
		{"no release", qfx5120, "", false},
		{"unreadable release", qfx5120, "latest", false},
	} {
		if got := Has(tc.m, Junos, tc.version, VXLANGBP); got != tc.want {
			t.Errorf("%s: Has(%s, %q, vxlan-gbp) = %v, want %v", tc.name, tc.m.Name, tc.version, got, tc.want)
		}
	}
}
