package topology

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

const fp = "sites[0].fabrics[0]"

func TestValidateRules(t *testing.T) {
	type want struct {
		rule, field string
		msg         string // a substring of that detail's message, when set
	}
	cases := map[string]struct {
		mutate func(t *domain.Topology)
		want   []want // each must be among the details; nil: valid
	}{
		"generated is valid": {
			mutate: func(*domain.Topology) {},
		},
		"no sites": {
			mutate: func(t *domain.Topology) { t.Sites = nil },
			want:   []want{{"required", "sites", ""}},
		},
		"api version": {
			mutate: func(t *domain.Topology) { t.APIVersion = "jobfabric/v2" },
			want:   []want{{"api-version", "apiVersion", `"jobfabric/v2"`}},
		},
		"kind": {
			mutate: func(t *domain.Topology) { t.Kind = "Job" },
			want:   []want{{"kind", "kind", `"Job"`}},
		},
		"duplicate site": {
			mutate: func(t *domain.Topology) { t.Sites = append(t.Sites, domain.Site{Name: "dc1"}) },
			want:   []want{{"duplicate-name", "sites[1].name", `"dc1"`}},
		},
		"duplicate fabric in a site": {
			mutate: func(t *domain.Topology) {
				t.Sites[0].Fabrics = append(t.Sites[0].Fabrics, domain.Fabric{Name: "fabric1"})
			},
			want: []want{{"duplicate-name", "sites[0].fabrics[1].name", `"fabric1"`}},
		},
		"same fabric name in two sites is fine": {
			mutate: func(t *domain.Topology) {
				t.Sites = append(t.Sites, domain.Site{Name: "dc2", Fabrics: []domain.Fabric{{Name: "fabric1"}}})
			},
		},
		"duplicate server": {
			mutate: func(t *domain.Topology) { f(t).Servers[1].Name = "s1-gpu001" },
			want:   []want{{"duplicate-name", fp + ".servers[1].name", `"s1-gpu001"`}},
		},
		"server named like a leaf": {
			mutate: func(t *domain.Topology) { f(t).Leaves[1].Name = "s1-gpu001" },
			want:   []want{{"duplicate-name", fp + ".servers[0].name", "leaf"}},
		},
		"switch names unique across sites": {
			mutate: func(t *domain.Topology) {
				t.Sites = append(t.Sites, domain.Site{Name: "dc2", Fabrics: []domain.Fabric{{Name: "f", Spines: []domain.Switch{{Name: "spine1", ASN: 1, Loopback: "10.9.0.1", PortCount: 4}}}}})
			},
			want: []want{{"duplicate-name", "sites[1].fabrics[0].spines[0].name", `"spine1"`}},
		},
		"bad server name": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].Name = "GPU_1" },
			want:   []want{{"name", fp + ".servers[0].name", `"GPU_1"`}},
		},
		"bad site name": {
			mutate: func(t *domain.Topology) { t.Sites[0].Name = "" },
			want:   []want{{"name", "sites[0].name", "empty"}},
		},
		"duplicate nic": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].Name = "nic0" },
			want:   []want{{"duplicate-name", fp + ".servers[0].nics[1].name", `"nic0"`}},
		},
		"bad nic name": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].Name = "eth0.100" },
			want:   []want{{"name", fp + ".servers[0].nics[1].name", `"eth0.100"`}},
		},
		"duplicate rdma device": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].RDMADevice = "mlx5_0" },
			want:   []want{{"rdma-device-duplicate", fp + ".servers[0].nics[1].rdmaDevice", "mlx5_0"}},
		},
		"port count zero": {
			mutate: func(t *domain.Topology) { f(t).Leaves[0].PortCount = 0 },
			want:   []want{{"port-count", fp + ".leaves[0].portCount", "portCount 0"}},
		},
		"port count too large": {
			mutate: func(t *domain.Topology) { f(t).Spines[0].PortCount = 2048 },
			want:   []want{{"port-count", fp + ".spines[0].portCount", "2048"}},
		},
		"port prefix with a space": {
			mutate: func(t *domain.Topology) { f(t).Leaves[0].PortPrefix = "Ethernet 1/" },
			want:   []want{{"port-prefix", fp + ".leaves[0].portPrefix", `"Ethernet 1/"`}},
		},
		"nos": {
			mutate: func(t *domain.Topology) { f(t).Leaves[0].NOS = "ios" },
			want:   []want{{"nos", fp + ".leaves[0].nos", `"ios"`}},
		},
		"asn zero": {
			mutate: func(t *domain.Topology) { f(t).Leaves[0].ASN = 0 },
			want:   []want{{"asn-range", fp + ".leaves[0].asn", "ASN 0"}},
		},
		"asn reserved": {
			mutate: func(t *domain.Topology) { f(t).Spines[0].ASN = 4294967295 },
			want:   []want{{"asn-range", fp + ".spines[0].asn", "4294967295"}},
		},
		"loopback missing": {
			mutate: func(t *domain.Topology) { f(t).Leaves[1].Loopback = "" },
			want:   []want{{"loopback", fp + ".leaves[1].loopback", "no loopback"}},
		},
		"loopback not ipv4": {
			mutate: func(t *domain.Topology) { f(t).Leaves[1].Loopback = "fd00::1" },
			want:   []want{{"loopback", fp + ".leaves[1].loopback", `"fd00::1"`}},
		},
		"loopback duplicate": {
			mutate: func(t *domain.Topology) { f(t).Leaves[1].Loopback = f(t).Leaves[0].Loopback },
			want:   []want{{"loopback", fp + ".leaves[1].loopback", "10.254.1.1"}},
		},
		"leaf without rail in rail-optimized fabric": {
			mutate: func(t *domain.Topology) { f(t).Leaves[0].Rail = nil },
			want:   []want{{"leaf-rail", fp + ".leaves[0].rail", "no rail"}},
		},
		"two leaves on one rail": {
			mutate: func(t *domain.Topology) { f(t).Leaves[1].Rail = ptr(0) },
			want:   []want{{"duplicate-rail", fp + ".leaves[1].rail", "s1-leaf0"}},
		},
		"spine with a rail": {
			mutate: func(t *domain.Topology) { f(t).Spines[0].Stripe = ptr(1) },
			want:   []want{{"spine-rail", fp + ".spines[0]", "spine1"}},
		},
		"unknown gpu model": {
			mutate: func(t *domain.Topology) { f(t).Servers[1].GPUModel = "H100" },
			want:   []want{{"gpu-model-known", fp + ".servers[1].gpuModel", `"H100"`}},
		},
		"zero gpus": {
			mutate: func(t *domain.Topology) { f(t).Servers[1].GPUs = 0 },
			want:   []want{{"gpu-count", fp + ".servers[1].gpus", "0 GPUs"}},
		},
		"too many gpus": {
			mutate: func(t *domain.Topology) { f(t).Servers[1].GPUs = 4096 },
			want:   []want{{"gpu-count", fp + ".servers[1].gpus", "4096"}},
		},
		"gpu numa length": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].GPUNUMA = []int{0, 0, 1} },
			want:   []want{{"gpu-numa", fp + ".servers[0].gpuNuma", "3 GPUs"}},
		},
		"gpu numa value": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].GPUNUMA[1] = 64 },
			want:   []want{{"gpu-numa", fp + ".servers[0].gpuNuma[1]", "node 64"}},
		},
		"negative stripe": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].Stripe = -1 },
			want:   []want{{"stripe-range", fp + ".servers[0].stripe", "-1"}},
		},
		"nic gpu index": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].GPU = 2 },
			want:   []want{{"nic-gpu-index", fp + ".servers[0].nics[1].gpu", "GPU 2"}},
		},
		"nic gpu -1 is fine": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].GPU = -1 },
		},
		"nic numa": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[0].NUMA = -1 },
			want:   []want{{"nic-numa", fp + ".servers[0].nics[0].numa", "node -1"}},
		},
		"nic rail out of range": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].Rail = 2 },
			want:   []want{{"nic-rail-range", fp + ".servers[0].nics[1].rail", "rail 2"}},
		},
		"two nics on one rail": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].NICs[1].Rail = 0 },
			want: []want{
				{"nic-rail-duplicate", fp + ".servers[0].nics[1].rail", "rail 0"},
				{"rail-match", fp + ".cables[1].leaf", "serves rail 1"},
			},
		},
		"fewer nics than gpus": {
			mutate: func(t *domain.Topology) {
				f(t).Servers[0].NICs = f(t).Servers[0].NICs[:1]
				f(t).Cables = append(f(t).Cables[:1], f(t).Cables[2:]...)
			},
			want: []want{{"rail-nic-count", fp + ".servers[0].nics", "2 GPUs and 1 NICs"}},
		},
		"stripe without leaves": {
			mutate: func(t *domain.Topology) { f(t).Servers[0].Stripe = 7 },
			want: []want{
				{"stripe-exists", fp + ".servers[0].stripe", "stripe 7"},
				{"stripe-match", fp + ".cables[0].leaf", "serves stripe 1"},
			},
		},
		"stripe lacking a rail's leaf": {
			mutate: func(t *domain.Topology) {
				f(t).Leaves = f(t).Leaves[:1]
				f(t).Uplinks = f(t).Uplinks[:1]
			},
			want: []want{
				{"stripe-rail-leaf", fp + ".leaves", "rail 1"},
				{"device-exists", fp + ".cables[1].leaf", `no leaf named "s1-leaf1"`},
			},
		},
		"nic not cabled": {
			mutate: func(t *domain.Topology) { f(t).Cables = f(t).Cables[:3] },
			want:   []want{{"nic-cabled", fp + ".servers[1].nics[1]", "s1-gpu002/nic1"}},
		},
		"cable to a missing leaf port": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Port = "swp99" },
			want:   []want{{"port-exists", fp + ".cables[0].port", `"swp99"`}},
		},
		"cable to a port with a leading zero": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Port = "swp01" },
			want:   []want{{"port-exists", fp + ".cables[0].port", `"swp01"`}},
		},
		"cable to a port of another prefix": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Port = "Ethernet1" },
			want:   []want{{"port-exists", fp + ".cables[0].port", "swp1..swp32"}},
		},
		"cable to a missing nic": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].NIC = "nic7" },
			want:   []want{{"port-exists", fp + ".cables[0].nic", `no NIC "nic7"`}},
		},
		"cable to a missing server": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Server = "s1-gpu009" },
			want:   []want{{"device-exists", fp + ".cables[0].server", `"s1-gpu009"`}},
		},
		"cable to a spine": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Leaf = "spine1" },
			want:   []want{{"device-exists", fp + ".cables[0].leaf", "is a spine"}},
		},
		"cable to a server of another fabric": {
			mutate: func(t *domain.Topology) {
				t.Sites[0].Fabrics = append(t.Sites[0].Fabrics, domain.Fabric{Name: "f2", Servers: []domain.Server{{Name: "other", GPUModel: "H100-80GB", GPUs: 1}}})
				f(t).Cables[0].Server = "other"
			},
			want: []want{{"device-exists", fp + ".cables[0].server", "dc1/f2"}},
		},
		"cable without leaf": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Leaf = "" },
			want:   []want{{"required", fp + ".cables[0].leaf", "names no leaf"}},
		},
		"leaf port cabled twice": {
			mutate: func(t *domain.Topology) { f(t).Cables[2].Port = "swp1" },
			want:   []want{{"port-cabled-once", fp + ".cables[2].port", "s1-leaf0/swp1"}},
		},
		"leaf port used by a cable and an uplink": {
			mutate: func(t *domain.Topology) { f(t).Cables[2].Port = "swp3" },
			want:   []want{{"port-cabled-once", fp + ".uplinks[0].leafPort", "cable s1-gpu002/nic0"}},
		},
		"nic cabled twice": {
			mutate: func(t *domain.Topology) {
				f(t).Cables = append(f(t).Cables, domain.Cable{Server: "s1-gpu001", NIC: "nic0", Leaf: "s1-leaf0", Port: "swp4"})
			},
			want: []want{{"nic-cabled-once", fp + ".cables[4].nic", "s1-gpu001/nic0"}},
		},
		"rail mismatch": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].Leaf, f(t).Cables[0].Port = "s1-leaf1", "swp5" },
			want:   []want{{"rail-match", fp + ".cables[0].leaf", "rail 0"}},
		},
		"rail mismatch ignored when not rail-optimized": {
			mutate: func(t *domain.Topology) {
				f(t).RailOptimized = false
				f(t).Cables[0].Leaf, f(t).Cables[0].Port = "s1-leaf1", "swp5"
			},
		},
		"stripe mismatch": {
			mutate: func(t *domain.Topology) {
				for i := range f(t).Leaves {
					f(t).Leaves[i].Stripe = ptr(2)
				}
			},
			want: []want{
				{"stripe-match", fp + ".cables[0].leaf", "stripe 1"},
				{"stripe-exists", fp + ".servers[0].stripe", "stripe 1"},
			},
		},
		"uplink to a missing spine port": {
			mutate: func(t *domain.Topology) { f(t).Uplinks[0].SpinePort = "swp40" },
			want:   []want{{"port-exists", fp + ".uplinks[0].spinePort", `"swp40"`}},
		},
		"uplink to a missing spine": {
			mutate: func(t *domain.Topology) { f(t).Uplinks[0].Spine = "spine9" },
			want:   []want{{"device-exists", fp + ".uplinks[0].spine", "spine9"}},
		},
		"spine port used twice": {
			mutate: func(t *domain.Topology) { f(t).Uplinks[1].SpinePort = "swp1" },
			want:   []want{{"port-cabled-once", fp + ".uplinks[1].spinePort", "spine1/swp1"}},
		},
		"uplink address not a /31": {
			mutate: func(t *domain.Topology) { f(t).Uplinks[0].IPv4 = "10.200.0.0/30" },
			want:   []want{{"link-address", fp + ".uplinks[0].ipv4", "/31"}},
		},
		"cable ipv4 written with the server address": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].IPv4 = "10.0.0.1/31" },
			want:   []want{{"link-address", fp + ".cables[0].ipv4", "10.0.0.0/31"}},
		},
		"cable ipv4 not a /31": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].IPv4 = "10.0.0.0/30" },
			want:   []want{{"link-address", fp + ".cables[0].ipv4", `"10.0.0.0/30"`}},
		},
		"cable ipv6 not a /127": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].IPv6 = "fd00:0:0:1::/64" },
			want:   []want{{"link-address", fp + ".cables[0].ipv6", "/127"}},
		},
		"cable ipv4 given an ipv6": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].IPv4 = "fd00::/127" },
			want:   []want{{"link-address", fp + ".cables[0].ipv4", "not an IPv4"}},
		},
		"two cables one address": {
			mutate: func(t *domain.Topology) { f(t).Cables[1].IPv4 = f(t).Cables[0].IPv4 },
			want:   []want{{"link-address-overlap", fp + ".cables[1].ipv4", "10.0.0.0/31"}},
		},
		"two cables one ipv6": {
			mutate: func(t *domain.Topology) { f(t).Cables[3].IPv6 = f(t).Cables[2].IPv6 },
			want:   []want{{"link-address-overlap", fp + ".cables[3].ipv6", "fd00:0:0:1::4/127"}},
		},
		"uplink overlaps a cable": {
			mutate: func(t *domain.Topology) { f(t).Uplinks[0].IPv4 = f(t).Cables[2].IPv4 },
			want:   []want{{"link-address-overlap", fp + ".uplinks[0].ipv4", "cable s1-gpu002/nic0"}},
		},
		"cable overlaps a loopback": {
			mutate: func(t *domain.Topology) { f(t).Cables[0].IPv4 = "10.254.0.0/31" },
			want:   []want{{"link-address-overlap", fp + ".cables[0].ipv4", "loopback 10.254.0.1"}},
		},
		"bad ipv4 pool": {
			mutate: func(t *domain.Topology) { f(t).LinkPools.IPv4 = "10.0.0.0/32" },
			want:   []want{{"link-pool", fp + ".linkPools.ipv4", "/32"}},
		},
		"ipv6 pool given an ipv4": {
			mutate: func(t *domain.Topology) { f(t).LinkPools.IPv6 = "10.0.0.0/8" },
			want:   []want{{"link-pool", fp + ".linkPools.ipv6", "not an IPv6"}},
		},
		"nvlink domain mixing models": {
			mutate: func(t *domain.Topology) {
				f(t).Servers[1].NVLinkDomain = "s1-gpu001"
				f(t).Servers[1].GPUModel = "A100-80GB"
			},
			want: []want{{"nvlink-domain", fp + ".servers[1].nvlinkDomain", "one model"}},
		},
		"nvlink domain across fabrics": {
			mutate: func(t *domain.Topology) {
				t.Sites[0].Fabrics = append(t.Sites[0].Fabrics, domain.Fabric{Name: "f2",
					Servers: []domain.Server{{Name: "other", GPUModel: "H100-80GB", GPUs: 1, NVLinkDomain: "s1-gpu001"}}})
			},
			want: []want{{"nvlink-domain", "sites[0].fabrics[1].servers[0].nvlinkDomain", "span fabrics"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			topo := small(t)
			tc.mutate(topo)
			got := Validate(topo)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("Validate() = %v%s; want nil", got, describeDetails(got))
				}
				return
			}
			if got == nil {
				t.Fatalf("Validate() = nil; want %v", tc.want)
			}
			if got.Code != domain.CodeInvalidArgument || got.Field != got.Details[0].Field {
				t.Errorf("error code %s field %q; want invalid_argument and the first detail's field", got.Code, got.Field)
			}
			for _, w := range tc.want {
				found := false
				for _, d := range got.Details {
					if d.Rule == w.rule && d.Field == w.field {
						found = true
						if !strings.Contains(d.Message, w.msg) {
							t.Errorf("%s @ %s: message %q does not contain %q", w.rule, w.field, d.Message, w.msg)
						}
						if d.Object == "" && !strings.HasPrefix(d.Field, "apiVersion") && d.Field != "kind" && d.Field != "sites" {
							t.Errorf("%s @ %s: no object", w.rule, w.field)
						}
					}
				}
				if !found {
					t.Errorf("no detail %s @ %s; got:%s", w.rule, w.field, describeDetails(got))
				}
			}
		})
	}
}

// f returns the first fabric of a topology.
func f(t *domain.Topology) *domain.Fabric { return &t.Sites[0].Fabrics[0] }

func TestValidateObjectNamesTheCable(t *testing.T) {
	topo := small(t)
	f(topo).Cables[0].Port = "swp99"
	got := Validate(topo)
	if got == nil || len(got.Details) != 1 {
		t.Fatalf("Validate() = %v%s; want one problem", got, describeDetails(got))
	}
	d := got.Details[0]
	if d.Object != "cable s1-gpu001/nic0 -> s1-leaf0/swp99" {
		t.Errorf("object = %q", d.Object)
	}
	if want := "topology has 1 problem: leaf s1-leaf0 has no port \"swp99\""; !strings.HasPrefix(got.Message, want) {
		t.Errorf("message = %q; want prefix %q", got.Message, want)
	}
}

func TestValidateCollectsAllAndCaps(t *testing.T) {
	topo, err := Generate(GenerateOptions{Stripes: 2, ServersPerStripe: 8, GPUsPerServer: 8, Spines: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 16 servers x 8 NICs = 128 broken NUMA nodes.
	for _, s := range topo.Servers() {
		for i := range s.NICs {
			s.NICs[i].NUMA = 99
		}
	}
	got := Validate(topo)
	if got == nil {
		t.Fatal("Validate() = nil")
	}
	if len(got.Details) != maxDetails {
		t.Errorf("%d details; want the cap %d", len(got.Details), maxDetails)
	}
	if !strings.HasPrefix(got.Message, "topology has 128 problems; first: NIC s1-gpu001/nic0 is on NUMA node 99") ||
		!strings.Contains(got.Message, "only the first 100") {
		t.Errorf("message = %q", got.Message)
	}
	if got.Field != fp+".servers[0].nics[0].numa" {
		t.Errorf("field = %q", got.Field)
	}
}

func TestValidatePlainFabric(t *testing.T) {
	// Not rail-optimized: leaves without stripe or rail, a server with more
	// NICs than GPUs, a NIC left uncabled, no pools and so no addresses.
	topo := newBuilder().spine("sp1").
		leaf("l1", 0, 0).leaf("l2", 0, 1).
		server("srv1", 0, 1).
		cable("srv1", "nic0", "l1", "swp1").
		uplink("l1", "swp32", "sp1", "swp1").uplink("l2", "swp32", "sp1", "swp2").
		build()
	f(topo).Leaves[0].Stripe, f(topo).Leaves[0].Rail = nil, nil
	f(topo).Leaves[1].Stripe, f(topo).Leaves[1].Rail = nil, nil
	f(topo).Servers[0].NICs = append(f(topo).Servers[0].NICs, domain.NIC{Name: "nic1", Rail: 5, GPU: -1})
	if err := Normalize(topo, nil); err != nil {
		t.Fatal(err)
	}
	if got := Validate(topo); got != nil {
		t.Fatalf("Validate() = %v%s", got, describeDetails(got))
	}
	if c := f(topo).Cables[0]; c.IPv4 != "" || c.IPv6 != "" {
		t.Errorf("cable got addresses %q %q without pools", c.IPv4, c.IPv6)
	}
}

func TestValidateNil(t *testing.T) {
	if Validate(nil) == nil {
		t.Fatal("Validate(nil) = nil")
	}
}
