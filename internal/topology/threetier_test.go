package topology

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestGenerateThreeTier generates the 100,000-GPU cluster of issue 18 as a
// three-tier fabric (196 stripes x 8 rails = 1,568 leaves in 4 pods under
// 4 super-spines), which two tiers cannot hold: a spine has at most 1,024
// ports.
func TestGenerateThreeTier(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 12,544 servers")
	}
	o := GenerateOptions{Stripes: 196, ServersPerStripe: 64, GPUsPerServer: 8, Spines: 16}
	if _, err := Generate(o); err == nil || !strings.Contains(err.Error(), "three-tier") {
		t.Fatalf("two tiers of 1,568 leaves: %v, want a refusal pointing at a three-tier fabric", err)
	}
	o.SuperSpines, o.Pods = 4, 4
	topo, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if e := Validate(topo); e != nil {
		t.Fatalf("Validate() = %v%s", e, describeDetails(e))
	}
	s := topo.Summary()
	want := domain.TopologySummary{Sites: 1, Fabrics: 1, Spines: 64, SuperSpines: 4, Pods: 4, Leaves: 1568, Servers: 12544, GPUs: 100352,
		NICs: 100352, Cables: 100352, Uplinks: 1568 * 16, SpineUplinks: 64 * 4, Stripes: 196, Rails: 8, NVLinkDomains: 12544}
	s.GPUsByModel = nil
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", s, want)
	}
	f := &topo.Sites[0].Fabrics[0]
	// RFC 7938's plan: one ASN for the super-spines, one per pod's
	// spines, one per leaf; 4-byte once the leaves pass the 2-byte range.
	if f.SuperSpines[0].ASN != genSpineASN4 || f.Spines[16].ASN != genSpineASN4+2 || *f.Spines[16].Pod != 2 || f.Leaves[0].ASN != genSpineASN4+5 {
		t.Fatalf("ASNs: super %d, p2-spine1 %d (pod %d), s1-leaf0 %d", f.SuperSpines[0].ASN, f.Spines[16].ASN, *f.Spines[16].Pod, f.Leaves[0].ASN)
	}
	for _, u := range f.Uplinks {
		if u.Leaf == "s50-leaf0" && !strings.HasPrefix(u.Spine, "p2-") {
			t.Fatalf("leaf s50-leaf0 (stripe 50, pod 2) is uplinked to %s", u.Spine)
		}
	}
}

func TestGenerateThreeTierRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		o     GenerateOptions
		field string
	}{
		"pods without super-spines": {GenerateOptions{Stripes: 2, Pods: 2}, "pods"},
		"uneven pods":               {GenerateOptions{Stripes: 3, Pods: 2, SuperSpines: 1}, "stripes"},
		"pod too large for a spine": {GenerateOptions{Stripes: 200, Pods: 1, SuperSpines: 2, ServersPerStripe: 1}, "pods"},
		"too many super-spines":     {GenerateOptions{SuperSpines: 129}, "super-spines"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Generate(tc.o)
			if e := asDomain(t, err); e.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", e.Field, err, tc.field)
			}
		})
	}
}

func TestValidateThreeTier(t *testing.T) {
	gen := func(t *testing.T) *domain.Topology {
		topo, err := Generate(GenerateOptions{Stripes: 2, Pods: 2, SuperSpines: 2, Spines: 1, ServersPerStripe: 2, GPUsPerServer: 2})
		if err != nil {
			t.Fatal(err)
		}
		return topo
	}
	if e := Validate(gen(t)); e != nil {
		t.Fatalf("generated three-tier topology: %v%s", e, describeDetails(e))
	}
	for name, tc := range map[string]struct {
		edit        func(f *domain.Fabric)
		rule, field string
	}{
		"leaf without pod": {func(f *domain.Fabric) { f.Leaves[1].Pod = nil }, "pod", "sites[0].fabrics[0].leaves[1].pod"},
		"pod out of range": {func(f *domain.Fabric) { f.Spines[0].Pod = ptr(0) }, "pod", "sites[0].fabrics[0].spines[0].pod"},
		"leaf uplinked to another pod": {func(f *domain.Fabric) { f.Uplinks[0].Spine = "p2-spine1"; f.Uplinks[0].SpinePort = "swp9" },
			"pod-match", "sites[0].fabrics[0].uplinks[0].spine"},
		"spine cut off": {func(f *domain.Fabric) {
			f.SpineUplinks = f.SpineUplinks[2:] // p1-spine1's two links
		}, "spine-uplink", "sites[0].fabrics[0].spines[0]"},
		"super-spine with a pod": {func(f *domain.Fabric) { f.SuperSpines[0].Pod = ptr(1) }, "spine-rail", "sites[0].fabrics[0].superSpines[0]"},
		"spine uplink to a leaf": {func(f *domain.Fabric) { f.SpineUplinks[0].SuperSpine = "s1-leaf0" }, "device-exists", "sites[0].fabrics[0].spineUplinks[0].superSpine"},
		"super-spine port twice": {func(f *domain.Fabric) {
			f.SpineUplinks[1].SuperSpinePort = f.SpineUplinks[3].SuperSpinePort
			f.SpineUplinks[1].SuperSpine = f.SpineUplinks[3].SuperSpine
		},
			"port-cabled-once", "sites[0].fabrics[0].spineUplinks[3].superSpinePort"},
		"pod in a two-tier fabric": {func(f *domain.Fabric) { f.SuperSpines, f.SpineUplinks = nil, nil },
			"pod", "sites[0].fabrics[0].spines[0].pod"},
	} {
		t.Run(name, func(t *testing.T) {
			topo := gen(t)
			tc.edit(&topo.Sites[0].Fabrics[0])
			e := Validate(topo)
			if e == nil || !hasDetail(e, tc.rule, tc.field) {
				t.Fatalf("Validate() = %v%s; want rule %s at %s", e, describeDetails(e), tc.rule, tc.field)
			}
		})
	}
}
