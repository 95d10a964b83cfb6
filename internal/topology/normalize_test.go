package topology

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// plain is a non-rail fabric with one leaf and servers a..: NIC i of every
// server cabled to the leaf, ports in order.
func plain(v4, v6 string, servers ...string) *builder {
	b := newBuilder().pools(v4, v6).leaf("l1", 0, 0)
	port := 1
	for _, s := range servers {
		b.server(s, 0, 2)
		for _, nic := range []string{"nic0", "nic1"} {
			b.cable(s, nic, "l1", portName(port))
			port++
		}
	}
	return b
}

type addrs struct{ v4, v6 string }

func cableAddrs(t *domain.Topology) map[string]addrs {
	out := map[string]addrs{}
	for _, c := range f(t).Cables {
		out[c.Server+"/"+c.NIC] = addrs{c.IPv4, c.IPv6}
	}
	return out
}

func TestNormalizeDefaults(t *testing.T) {
	topo := plain("", "", "a").build()
	if err := Normalize(topo, nil); err != nil {
		t.Fatal(err)
	}
	if topo.APIVersion != APIVersion || topo.Kind != Kind {
		t.Errorf("apiVersion/kind = %q/%q", topo.APIVersion, topo.Kind)
	}
	if got := f(topo).Leaves[0].PortPrefix; got != "swp" {
		t.Errorf("portPrefix = %q", got)
	}
	s := f(topo).Servers[0]
	if s.NVLinkDomain != "a" {
		t.Errorf("nvlinkDomain = %q; want the server name", s.NVLinkDomain)
	}
	if !reflect.DeepEqual(s.GPUNUMA, []int{0, 0}) {
		t.Errorf("gpuNuma = %v", s.GPUNUMA)
	}
	if got := Validate(topo); got != nil {
		t.Errorf("Validate() = %v%s", got, describeDetails(got))
	}
}

func TestNormalizeKeepsExplicitValues(t *testing.T) {
	topo := plain("10.0.0.0/24", "", "a").build()
	f(topo).Leaves[0].PortPrefix = "Ethernet"
	f(topo).Servers[0].NVLinkDomain = "rack1"
	f(topo).Servers[0].GPUNUMA = []int{0, 1}
	f(topo).Cables[1].IPv4 = "10.0.0.0/31" // takes the pool's first /31
	if err := Normalize(topo, nil); err != nil {
		t.Fatal(err)
	}
	s := f(topo).Servers[0]
	if f(topo).Leaves[0].PortPrefix != "Ethernet" || s.NVLinkDomain != "rack1" || !reflect.DeepEqual(s.GPUNUMA, []int{0, 1}) {
		t.Errorf("explicit values changed: %+v %+v", f(topo).Leaves[0], s)
	}
	want := map[string]addrs{"a/nic0": {"10.0.0.2/31", ""}, "a/nic1": {"10.0.0.0/31", ""}}
	if got := cableAddrs(topo); !reflect.DeepEqual(got, want) {
		t.Errorf("addresses = %v; want %v", got, want)
	}
}

func TestNormalizeAllocates(t *testing.T) {
	cases := map[string]struct {
		topo *domain.Topology
		want map[string]addrs
	}{
		"both families in order": {
			topo: plain("10.0.0.0/24", "fd00::/64", "a", "b").build(),
			want: map[string]addrs{
				"a/nic0": {"10.0.0.0/31", "fd00::/127"}, "a/nic1": {"10.0.0.2/31", "fd00::2/127"},
				"b/nic0": {"10.0.0.4/31", "fd00::4/127"}, "b/nic1": {"10.0.0.6/31", "fd00::6/127"},
			},
		},
		"skips loopbacks inside the pool": {
			// The leaf's loopback is 10.254.0.1: the pool's first /31 holds it.
			topo: plain("10.254.0.0/29", "", "a").build(),
			want: map[string]addrs{"a/nic0": {"10.254.0.2/31", ""}, "a/nic1": {"10.254.0.4/31", ""}},
		},
		"skips addresses used in another fabric": {
			topo: func() *domain.Topology {
				t := plain("10.0.0.0/24", "", "a").build()
				other := plain("", "", "x").f
				other.Name, other.Leaves[0].Name, other.Leaves[0].Loopback = "f2", "l2", "10.254.9.9"
				other.Servers[0].Name = "x"
				other.Cables[0].IPv4, other.Cables[1].IPv4 = "10.0.0.0/31", "10.0.0.4/31"
				other.Cables[0].Leaf, other.Cables[1].Leaf = "l2", "l2"
				t.Sites[0].Fabrics = append(t.Sites[0].Fabrics, other)
				return t
			}(),
			want: map[string]addrs{"a/nic0": {"10.0.0.2/31", ""}, "a/nic1": {"10.0.0.6/31", ""}},
		},
		"only ipv6 pool": {
			topo: plain("", "fd00:0:0:1::/64", "a").build(),
			want: map[string]addrs{"a/nic0": {"", "fd00:0:0:1::/127"}, "a/nic1": {"", "fd00:0:0:1::2/127"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := Normalize(tc.topo, nil); err != nil {
				t.Fatal(err)
			}
			if got := cableAddrs(tc.topo); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("addresses = %v; want %v", got, tc.want)
			}
			if got := Validate(tc.topo); got != nil {
				t.Errorf("Validate() = %v%s", got, describeDetails(got))
			}
		})
	}
}

// Adding a server in the middle of the file renumbers nothing: a and c keep
// their addresses, b takes free ones.
func TestNormalizeStableWithPrev(t *testing.T) {
	prev := plain("10.0.0.0/24", "fd00::/64", "a", "c").build()
	if err := Normalize(prev, nil); err != nil {
		t.Fatal(err)
	}
	before := cableAddrs(prev)

	next := plain("10.0.0.0/24", "fd00::/64", "a", "b", "c").build()
	if err := Normalize(next, prev); err != nil {
		t.Fatal(err)
	}
	after := cableAddrs(next)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s moved from %v to %v", k, v, after[k])
		}
	}
	want := map[string]addrs{"b/nic0": {"10.0.0.8/31", "fd00::8/127"}, "b/nic1": {"10.0.0.10/31", "fd00::a/127"}}
	for k, v := range want {
		if after[k] != v {
			t.Errorf("%s = %v; want %v", k, after[k], v)
		}
	}
	if got := Validate(next); got != nil {
		t.Errorf("Validate() = %v%s", got, describeDetails(got))
	}

	// Without prev, positions decide: c would have moved.
	fresh := plain("10.0.0.0/24", "fd00::/64", "a", "b", "c").build()
	if err := Normalize(fresh, nil); err != nil {
		t.Fatal(err)
	}
	if cableAddrs(fresh)["c/nic0"] == before["c/nic0"] {
		t.Error("test is not testing anything: c keeps its address even without prev")
	}
}

func TestNormalizePrevYields(t *testing.T) {
	prev := plain("10.0.0.0/24", "", "a", "b").build()
	if err := Normalize(prev, nil); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		mutate func(t *domain.Topology)
		want   map[string]addrs
	}{
		"to an explicit address now given to another cable": {
			// a/nic0's old address goes to b/nic1, a/nic0 takes b/nic1's old one.
			mutate: func(t *domain.Topology) { f(t).Cables[3].IPv4 = "10.0.0.0/31" },
			want: map[string]addrs{
				"a/nic0": {"10.0.0.6/31", ""}, "a/nic1": {"10.0.0.2/31", ""},
				"b/nic0": {"10.0.0.4/31", ""}, "b/nic1": {"10.0.0.0/31", ""},
			},
		},
		"to a new pool": {
			mutate: func(t *domain.Topology) { f(t).LinkPools.IPv4 = "10.1.0.0/24" },
			want: map[string]addrs{
				"a/nic0": {"10.1.0.0/31", ""}, "a/nic1": {"10.1.0.2/31", ""},
				"b/nic0": {"10.1.0.4/31", ""}, "b/nic1": {"10.1.0.6/31", ""},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := plain("10.0.0.0/24", "", "a", "b").build()
			tc.mutate(next)
			if err := Normalize(next, prev); err != nil {
				t.Fatal(err)
			}
			if got := cableAddrs(next); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("addresses = %v; want %v", got, tc.want)
			}
			if got := Validate(next); got != nil {
				t.Errorf("Validate() = %v%s", got, describeDetails(got))
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	cases := map[string]struct {
		topo       *domain.Topology
		field, msg string
	}{
		"pool exhausted": {
			topo:  plain("10.0.0.0/30", "", "a", "b").build(), // two /31s for four cables
			field: fp + ".cables[2].ipv4", msg: "no free /31 left for cable b/nic0 -> l1/swp3; 2 cables still need an address",
		},
		"ipv6 pool exhausted": {
			topo:  plain("", "fd00::/127", "a").build(),
			field: fp + ".cables[1].ipv6", msg: "no free /127",
		},
		"malformed pool": {
			topo:  plain("10.0.0.0/33", "", "a").build(),
			field: fp + ".linkPools.ipv4", msg: `link pool "10.0.0.0/33" is not a prefix`,
		},
		"pool not on its first address": {
			topo:  plain("10.0.0.1/24", "", "a").build(),
			field: fp + ".linkPools.ipv4", msg: "10.0.0.0/24",
		},
		"nil": {field: "", msg: "no topology"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Normalize(tc.topo, nil)
			if err == nil {
				t.Fatal("Normalize() = nil")
			}
			de := asDomain(t, err)
			if de.Field != tc.field || !strings.Contains(de.Message, tc.msg) {
				t.Errorf("error = %v; want field %q and %q", de, tc.field, tc.msg)
			}
		})
	}
}

// A bad pool nobody needs is left for Validate to report.
func TestNormalizeIgnoresUnneededPool(t *testing.T) {
	topo := plain("nonsense", "", "a").build()
	f(topo).Cables[0].IPv4, f(topo).Cables[1].IPv4 = "10.0.0.0/31", "10.0.0.2/31"
	if err := Normalize(topo, nil); err != nil {
		t.Fatal(err)
	}
	if got := Validate(topo); got == nil || !hasDetail(got, "link-pool", fp+".linkPools.ipv4") {
		t.Errorf("Validate() = %v%s; want link-pool", got, describeDetails(got))
	}
}

func TestNormalizeIdempotentAndDeterministic(t *testing.T) {
	a := plain("10.0.0.0/24", "fd00::/64", "a", "b", "c").build()
	b := plain("10.0.0.0/24", "fd00::/64", "a", "b", "c").build()
	if err := Normalize(a, nil); err != nil {
		t.Fatal(err)
	}
	if err := Normalize(b, nil); err != nil {
		t.Fatal(err)
	}
	fa := Fingerprint(a)
	if Fingerprint(b) != fa {
		t.Error("two Normalize runs on the same input differ")
	}
	if err := Normalize(a, b); err != nil {
		t.Fatal(err)
	}
	if Fingerprint(a) != fa {
		t.Error("Normalize is not idempotent")
	}
}
