package topology

import (
	"encoding/json"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

func TestFingerprint(t *testing.T) {
	base := Fingerprint(small(t))
	if len(base) != 64 {
		t.Fatalf("fingerprint %q is not sha256 hex", base)
	}
	cases := map[string]struct {
		mutate func(t *domain.Topology)
		same   bool
	}{
		"unchanged":         {mutate: func(*domain.Topology) {}, same: true},
		"empty uplinks":     {mutate: func(t *domain.Topology) { f(t).Uplinks = []domain.Uplink{} }},
		"a new empty site":  {mutate: func(t *domain.Topology) { t.Sites = append(t.Sites, domain.Site{Name: "dc2"}) }},
		"a cable address":   {mutate: func(t *domain.Topology) { f(t).Cables[0].IPv4 = "10.9.0.0/31" }},
		"rail 0 vs no rail": {mutate: func(t *domain.Topology) { f(t).Leaves[0].Rail = nil }},
		"asn":               {mutate: func(t *domain.Topology) { f(t).Spines[0].ASN++ }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			topo := small(t)
			tc.mutate(topo)
			if got := Fingerprint(topo) == base; got != tc.same {
				t.Errorf("same fingerprint = %v; want %v", got, tc.same)
			}
		})
	}
}

// Empty lists and nil lists fingerprint alike: the replicated log turns one
// into the other.
func TestFingerprintEmptyVsNil(t *testing.T) {
	a := &domain.Topology{Sites: []domain.Site{{Name: "dc1", Fabrics: []domain.Fabric{{Name: "f1"}}}}}
	b := &domain.Topology{Sites: []domain.Site{{Name: "dc1", Fabrics: []domain.Fabric{{Name: "f1",
		Spines: []domain.Switch{}, Leaves: []domain.Switch{}, Servers: []domain.Server{}, Cables: []domain.Cable{}, Uplinks: []domain.Uplink{}}}}}}
	if Fingerprint(a) != Fingerprint(b) {
		t.Error("empty and nil lists fingerprint differently")
	}
	topo := small(t)
	raw, err := json.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	var back domain.Topology
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if Fingerprint(&back) != Fingerprint(topo) {
		t.Error("JSON round trip changed the fingerprint")
	}
}
