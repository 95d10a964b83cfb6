package topology

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestGenerateValid(t *testing.T) {
	cases := map[string]struct {
		o    GenerateOptions
		want domain.TopologySummary // GPUsByModel is not compared
	}{
		"defaults": {
			o:    GenerateOptions{},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 2, Leaves: 8, Servers: 4, GPUs: 32, NICs: 32, Cables: 32, Uplinks: 16, Stripes: 1, Rails: 8, NVLinkDomains: 4},
		},
		"one of everything": {
			o:    GenerateOptions{Stripes: 1, ServersPerStripe: 1, GPUsPerServer: 1, Spines: 1},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 1, Leaves: 1, Servers: 1, GPUs: 1, NICs: 1, Cables: 1, Uplinks: 1, Stripes: 1, Rails: 1, NVLinkDomains: 1},
		},
		"odd sizes": {
			o:    GenerateOptions{Stripes: 3, ServersPerStripe: 5, GPUsPerServer: 3, Spines: 3, GPUModel: "L40S-48GB", NOS: "frr"},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 3, Leaves: 9, Servers: 15, GPUs: 45, NICs: 45, Cables: 45, Uplinks: 27, Stripes: 3, Rails: 3, NVLinkDomains: 15},
		},
		"nvl72 racks": {
			o:    GenerateOptions{Stripes: 2, ServersPerStripe: 36, GPUsPerServer: 4, NVLinkDomainSize: 72, GPUModel: "GB200"},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 2, Leaves: 8, Servers: 72, GPUs: 288, NICs: 288, Cables: 288, Uplinks: 16, Stripes: 2, Rails: 4, NVLinkDomains: 4},
		},
		"four-byte asns past 534 leaves": {
			o:    GenerateOptions{Stripes: 100, ServersPerStripe: 2, GPUsPerServer: 8, Spines: 1},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 1, Leaves: 800, Servers: 200, GPUs: 1600, NICs: 1600, Cables: 1600, Uplinks: 800, Stripes: 100, Rails: 8, NVLinkDomains: 200},
		},
		"large": {
			o:    GenerateOptions{Stripes: 64, ServersPerStripe: 32, GPUsPerServer: 8},
			want: domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 2, Leaves: 512, Servers: 2048, GPUs: 16384, NICs: 16384, Cables: 16384, Uplinks: 1024, Stripes: 64, Rails: 8, NVLinkDomains: 2048},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && tc.want.Servers > 500 {
				t.Skip("large")
			}
			topo, err := Generate(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := Validate(topo); got != nil {
				t.Fatalf("Validate() = %v%s", got, describeDetails(got))
			}
			got := topo.Summary()
			got.GPUsByModel = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("summary = %+v\nwant      %+v", got, tc.want)
			}
			// Generated output is already normalized: Normalize changes nothing.
			before := Fingerprint(topo)
			if err := Normalize(topo, topo); err != nil || Fingerprint(topo) != before {
				t.Errorf("Normalize changed a generated topology (err %v)", err)
			}
		})
	}
}

func TestGenerateDetails(t *testing.T) {
	topo, err := Generate(GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 4, NVLinkDomainSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	fab := f(topo)
	srv := fab.Servers[5] // stripe 2, server 2
	if srv.Name != "s2-gpu002" || srv.Stripe != 2 || srv.NVLinkDomain != "s2-nvl01" {
		t.Errorf("server = %s stripe %d domain %s", srv.Name, srv.Stripe, srv.NVLinkDomain)
	}
	if nic := srv.NICs[3]; nic.Name != "nic3" || nic.RDMADevice != "mlx5_3" || nic.Rail != 3 || nic.NUMA != 1 || nic.GPU != 3 {
		t.Errorf("nic3 = %+v", nic)
	}
	if srv.GPUNUMA[1] != 0 || srv.GPUNUMA[2] != 1 {
		t.Errorf("gpuNuma = %v", srv.GPUNUMA)
	}
	x := NewIndex(topo)
	if leaf, port, c := x.LeafFor("s2-gpu002", "nic3"); leaf != "s2-leaf3" || port != "swp2" || c == nil || c.IPv4 == "" || c.IPv6 == "" {
		t.Errorf("LeafFor = %s %s %+v", leaf, port, c)
	}
	l := x.Leaf("s2-leaf3")
	if l.ASN != 65008 || l.Loopback != "10.254.1.8" || *l.Stripe != 2 || *l.Rail != 3 || l.PortCount != 32 {
		t.Errorf("leaf = %+v", l)
	}
	if s := x.Spine("spine2"); s.ASN != 65000 || s.Loopback != "10.254.0.2" {
		t.Errorf("spine = %+v", s)
	}
	// Leaf ports after the server ports, one spine port per leaf.
	up := fab.Uplinks[len(fab.Uplinks)-1]
	if up != (domain.Uplink{Leaf: "s2-leaf3", LeafPort: "swp6", Spine: "spine2", SpinePort: "swp8"}) {
		t.Errorf("last uplink = %+v", up)
	}
	if d := len(x.NVLinkDomains()); d != 4 {
		t.Errorf("%d NVLink domains; want 4", d)
	}
}

func TestGenerateFourByteASNs(t *testing.T) {
	topo, err := Generate(GenerateOptions{Stripes: 70, ServersPerStripe: 1, GPUsPerServer: 8, Spines: 1})
	if err != nil {
		t.Fatal(err)
	}
	fab := f(topo)
	if fab.Spines[0].ASN != 4200000000 || fab.Leaves[559].ASN != 4200000560 {
		t.Errorf("ASNs: spine %d, last leaf %d", fab.Spines[0].ASN, fab.Leaves[559].ASN)
	}
}

func TestGenerateOptionErrors(t *testing.T) {
	cases := map[string]struct {
		o     GenerateOptions
		field string
	}{
		"negative stripes":             {GenerateOptions{Stripes: -1}, "stripes"},
		"too many stripes":             {GenerateOptions{Stripes: 1001}, "stripes"},
		"leaves do not fit a spine":    {GenerateOptions{Stripes: 200, GPUsPerServer: 8}, "stripes"},
		"too many servers":             {GenerateOptions{ServersPerStripe: 5000}, "servers-per-stripe"},
		"servers and uplinks overflow": {GenerateOptions{ServersPerStripe: 1024, Spines: 2}, "servers-per-stripe"},
		"too many gpus":                {GenerateOptions{GPUsPerServer: 65}, "gpus-per-server"},
		"too many spines":              {GenerateOptions{Spines: 500}, "spines"},
		"unknown model":                {GenerateOptions{GPUModel: "H100"}, "gpu-model"},
		"unknown nos":                  {GenerateOptions{NOS: "ios"}, "nos"},
		"bad site":                     {GenerateOptions{Site: "DC 1"}, "site"},
		"bad fabric":                   {GenerateOptions{Fabric: "-x"}, "fabric"},
		"bad driver":                   {GenerateOptions{Driver: "535 beta"}, "driver"},
		"domain not whole servers":     {GenerateOptions{GPUsPerServer: 8, NVLinkDomainSize: 12}, "nvlink-domain-size"},
		"domain crossing stripes":      {GenerateOptions{GPUsPerServer: 4, ServersPerStripe: 32, NVLinkDomainSize: 72}, "nvlink-domain-size"},
		"domain larger than a stripe":  {GenerateOptions{GPUsPerServer: 4, ServersPerStripe: 4, NVLinkDomainSize: 72}, "nvlink-domain-size"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(tc.o)
			if err == nil {
				t.Fatal("Generate() = nil error")
			}
			if de := asDomain(t, err); de.Field != tc.field {
				t.Errorf("field = %q; want %q (%v)", de.Field, tc.field, de)
			}
		})
	}
}

// The golden file shows what `jobfabric topology generate` prints for a tiny
// cluster. Rewrite it with: go test ./internal/topology/ -run Golden -update
func TestGenerateGolden(t *testing.T) {
	topo := small(t)
	got, err := yaml.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "generate-small.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated YAML differs from %s (run with -update if intended):\n%s", path, got)
	}
	// The golden file is itself a valid topology file.
	parsed, err := Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := Normalize(parsed, nil); err != nil {
		t.Fatal(err)
	}
	if derr := Validate(parsed); derr != nil {
		t.Fatalf("Validate(golden) = %v%s", derr, describeDetails(derr))
	}
}

func BenchmarkGenerateValidate(b *testing.B) {
	o := GenerateOptions{Stripes: 64, ServersPerStripe: 32, GPUsPerServer: 8}
	for b.Loop() {
		topo, err := Generate(o)
		if err != nil {
			b.Fatal(err)
		}
		if derr := Validate(topo); derr != nil {
			b.Fatal(derr)
		}
	}
}

func BenchmarkParseNormalizeValidateFingerprint(b *testing.B) {
	topo, err := Generate(GenerateOptions{Stripes: 64, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	doc, err := yaml.Marshal(topo)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		t, err := Parse(doc)
		if err != nil {
			b.Fatal(err)
		}
		if err := Normalize(t, topo); err != nil {
			b.Fatal(err)
		}
		if derr := Validate(t); derr != nil {
			b.Fatal(derr)
		}
		_ = Fingerprint(t)
	}
}
