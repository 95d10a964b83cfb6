package topology

import (
	"testing"
)

func TestIndex(t *testing.T) {
	topo, err := Generate(GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 4, NVLinkDomainSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	x := NewIndex(topo)

	srv, fabric := x.Server("s1-gpu003")
	if srv == nil || srv.Name != "s1-gpu003" || fabric != "dc1/fabric1" {
		t.Fatalf("Server() = %v, %q", srv, fabric)
	}
	if x.Fabric(fabric) != f(topo) {
		t.Error("Fabric() is not the topology's fabric")
	}
	if s, fab := x.Server("nope"); s != nil || fab != "" {
		t.Error("Server(nope) found something")
	}
	if x.Leaf("spine1") != nil || x.Spine("s1-leaf0") != nil || x.Leaf("s1-leaf0") == nil || x.Spine("spine1") == nil {
		t.Error("Leaf/Spine mix leaves and spines")
	}
	if leaf, port, c := x.LeafFor("s1-gpu003", "nic9"); leaf != "" || port != "" || c != nil {
		t.Error("LeafFor found a cable for a missing NIC")
	}
	if got := len(x.ServersInStripe("dc1/fabric1", 2)); got != 4 {
		t.Errorf("%d servers in stripe 2; want 4", got)
	}
	if got := x.ServersInStripe("dc1/fabric1", 3); got != nil {
		t.Errorf("stripe 3 = %v", got)
	}
	domains := x.NVLinkDomains()
	if len(domains) != 4 || len(domains["s2-nvl02"]) != 2 || domains["s2-nvl02"][0].Name != "s2-gpu003" {
		t.Errorf("NVLinkDomains() = %v", domains)
	}
	delete(domains, "s1-nvl01")
	if len(x.NVLinkDomains()) != 4 {
		t.Error("NVLinkDomains() returned the index's own map")
	}
	if x.TotalGPUs() != 32 {
		t.Errorf("TotalGPUs() = %d", x.TotalGPUs())
	}
	if m := x.GPUsByModel(); len(m) != 1 || m["H100-80GB"] != 32 {
		t.Errorf("GPUsByModel() = %v", m)
	}

	cases := map[string]struct {
		a, b string
		want Distance
		ok   bool
	}{
		"same server":    {"s1-gpu001", "s1-gpu001", SameServer, true},
		"same domain":    {"s1-gpu001", "s1-gpu002", SameNVLinkDomain, true},
		"same stripe":    {"s1-gpu001", "s1-gpu003", SameStripe, true},
		"across stripes": {"s1-gpu001", "s2-gpu001", SameFabric, true},
		"unknown":        {"s1-gpu001", "x", 0, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, ok := x.Distance(tc.a, tc.b); got != tc.want || ok != tc.ok {
				t.Errorf("Distance(%s, %s) = %d, %v; want %d, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestIndexOtherFabric(t *testing.T) {
	a, _ := Generate(GenerateOptions{ServersPerStripe: 1, GPUsPerServer: 1, Spines: 1})
	b, _ := Generate(GenerateOptions{Site: "dc2", ServersPerStripe: 1, GPUsPerServer: 1, Spines: 1})
	// Same names in both: rename dc2's server so both are indexed.
	f(b).Servers[0].Name = "other"
	a.Sites = append(a.Sites, b.Sites...)
	x := NewIndex(a)
	if d, ok := x.Distance("s1-gpu001", "other"); !ok || d != OtherFabric {
		t.Errorf("Distance = %d, %v; want OtherFabric", d, ok)
	}
	if _, fab := x.Server("other"); fab != "dc2/fabric1" {
		t.Errorf("fabric = %q", fab)
	}
	if NewIndex(nil).TotalGPUs() != 0 {
		t.Error("NewIndex(nil) counts GPUs")
	}
}
