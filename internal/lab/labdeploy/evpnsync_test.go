package labdeploy

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jobfabric/jobfabric/internal/deploy"
)

// fakeLeaf answers vtysh, ip and bridge as an FRR 8.4.4 leaf does (the
// outputs are recorded from the lab), with one VRF (tenant-a, L3VNI 10000)
// routing 10.0.0.0/31 and fd00:0:0:1::/127 through VTEP 10.254.1.1.
type fakeLeaf struct {
	mu sync.Mutex
	// nh4, nh6: the prefix lists of zebra's next hops (nil: no next hop).
	nh4, nh6 []string
	rmac     bool // zebra holds the VTEP's router MAC
	neigh    bool // the kernel holds the neighbours
	resyncs  []string
}

const fakeRoutes4 = `{"10.0.0.0/31":[{"prefix":"10.0.0.0/31","protocol":"bgp","vrfName":"tenant-a","selected":true,"installed":true,
 "nexthops":[{"flags":267,"fib":true,"ip":"10.254.1.1","afi":"ipv4","interfaceIndex":2,"interfaceName":"br10000","active":true,"onLink":true}]}],
 "10.0.0.2/31":[{"prefix":"10.0.0.2/31","protocol":"connected","vrfName":"tenant-a","selected":true,"nexthops":[{"directlyConnected":true,"interfaceName":"swp1"}]}]}
`
const fakeRoutes6 = `{"fd00:0:0:1::/127":[{"prefix":"fd00:0:0:1::/127","protocol":"bgp","vrfName":"tenant-a","selected":true,
 "nexthops":[{"ip":"::ffff:afe:101","afi":"ipv6","interfaceName":"br10000","active":true}]}],
 "fe80::/64":[{"prefix":"fe80::/64","protocol":"connected","selected":true,"nexthops":[{"directlyConnected":true,"interfaceName":"br10000"}]}]}
`

func (f *fakeLeaf) run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := strings.Join(args, " ")
	nh := func(ip string, list []string) string {
		if list == nil {
			return "{}\n"
		}
		return `{"ip":"` + ip + `","routerMac":"02:52:fa:71:37:93","refCount":1,"prefixList":["` + strings.Join(list, `","`) + `"]}` + "\n"
	}
	switch {
	case name == "vtysh" && strings.Contains(line, "show ip route vrf tenant-a json"):
		return []byte(fakeRoutes4 + fakeRoutes6), nil
	case name == "vtysh" && strings.Contains(line, "show evpn next-hops"):
		var b strings.Builder
		for _, a := range args {
			switch a {
			case "show evpn next-hops vni 10000 ip 10.254.1.1 json":
				b.WriteString(nh("10.254.1.1", f.nh4))
			case "show evpn next-hops vni 10000 ip ::ffff:10.254.1.1 json":
				b.WriteString(nh("::ffff:afe:101", f.nh6))
			}
		}
		return []byte(b.String()), nil
	case name == "vtysh" && strings.Contains(line, "show evpn rmac vni 10000 json"):
		if !f.rmac {
			return nil, nil // zebra prints nothing for an L3VNI without router MACs
		}
		return []byte(`{"numRmacs":1,"02:52:fa:71:37:93":{"routerMac":"02:52:fa:71:37:93","vtepIp":"10.254.1.1"}}` + "\n"), nil
	case name == "vtysh" && strings.Contains(line, "show running-config"):
		return []byte("vrf tenant-a\n vni 10000\nexit-vrf\n!\nrouter bgp 65002 vrf tenant-a\n bgp router-id 10.254.1.2\nexit\n"), nil
	case name == "vtysh" && strings.Contains(line, "no bgp bestpath bandwidth"):
		f.resyncs = append(f.resyncs, line)
		f.nh4, f.nh6, f.rmac, f.neigh = []string{"10.0.0.0/31"}, []string{"fd00:0:0:1::/127"}, true, true
		return nil, nil
	case name == "ip" && strings.Contains(line, "neigh show dev br10000"):
		if !f.neigh {
			return []byte("[]"), nil
		}
		return []byte(`[{"dst":"10.254.1.1","lladdr":"02:52:fa:71:37:93","extern_learn":null,"state":["NOARP"],"protocol":"zebra"},` +
			`{"dst":"::ffff:10.254.1.1","lladdr":"02:52:fa:71:37:93","state":["NOARP"],"protocol":"zebra"}]`), nil
	case name == "bridge" && strings.Contains(line, "fdb show dev vx10000"):
		if !f.rmac {
			return []byte("[]"), nil
		}
		return []byte(`[{"mac":"02:52:fa:71:37:93","flags":["extern_learn"],"master":"br10000","state":""},` +
			`{"mac":"02:52:fa:71:37:93","dst":"10.254.1.1","linkNetNsId":0,"flags":["self","extern_learn"],"state":""}]`), nil
	}
	return nil, nil
}

var acme = []EVPNVRF{{Name: "tenant-a", VNI: 10000, Netns: "lab-leaf1.vrf-tenant-a"}}

// TestEVPNDrifts: a route through the L3VNI is consistent when zebra's
// next hop of its VTEP lists it, zebra holds the VTEP's router MAC, and the
// kernel holds both; each way zebra 8.4 loses them is a drift naming it.
func TestEVPNDrifts(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		leaf *fakeLeaf
		want []string // one problem fragment per drifting route, in order
	}{
		{"consistent", &fakeLeaf{nh4: []string{"10.0.0.0/31"}, nh6: []string{"fd00:0:0:1::/127"}, rmac: true, neigh: true}, nil},
		// The best path changed: the prefix is routed, its next hop
		// forgot it (it goes with the VTEP's next withdrawal).
		{"prefix dropped from its next hop", &fakeLeaf{nh4: []string{"10.0.0.4/31"}, nh6: []string{"fd00:0:0:1::/127"}, rmac: true, neigh: true},
			[]string{"does not list the prefix"}},
		// ... and once no prefix referenced them: nothing left.
		{"next hops and router MAC gone", &fakeLeaf{},
			[]string{"zebra holds no next hop 10.254.1.1; zebra holds no router MAC for VTEP 10.254.1.1",
				"zebra holds no next hop ::ffff:10.254.1.1; zebra holds no router MAC for VTEP 10.254.1.1"}},
		{"kernel lost the neighbours", &fakeLeaf{nh4: []string{"10.0.0.0/31"}, nh6: []string{"fd00:0:0:1::/127"}, rmac: true},
			[]string{`kernel neighbour 10.254.1.1 on br10000 is ""`, `kernel neighbour ::ffff:10.254.1.1 on br10000 is ""`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, err := EVPNDrifts(ctx, c.leaf.run, "/vty", acme)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != len(c.want) {
				t.Fatalf("drifts %v, want %d", ds, len(c.want))
			}
			for i, d := range ds {
				if !strings.Contains(d.Problem, c.want[i]) || d.VRF != "tenant-a" || d.VNI != 10000 {
					t.Errorf("drift %d: %s, want %q", i, d, c.want[i])
				}
			}
		})
	}
}

// TestWatchResyncs: the watch resyncs a VRF whose drift stays over two
// checks, by re-announcing its BGP instance to zebra (a command that
// changes no configuration), and leaves a device that is deploying alone.
func TestWatchResyncs(t *testing.T) {
	ctx := context.Background()
	f := &fakeLeaf{}
	l := &Driver{Run: f.run, Targets: map[string]Target{"leaf1": {
		FRRTarget: deploy.FRRTarget{VtySocket: "/vty", ConfDir: "/vty", Netns: "lab-leaf1"},
		Lab:       &Switch{MountNS: "/proc/1/ns/mnt", VRFNetnsPrefix: "lab-leaf1.vrf-"},
	}}}
	mu := l.lock("leaf1")
	mu.Lock()
	if err := l.watchOnce(ctx, "leaf1"); err != nil || len(f.resyncs) != 0 {
		t.Fatalf("checked a device while it deploys: %v, resyncs %v", err, f.resyncs)
	}
	mu.Unlock()
	if err := l.watchOnce(ctx, "leaf1"); err != nil {
		t.Fatal(err)
	}
	want := "--vty_socket /vty -c configure terminal -c router bgp 65002 vrf tenant-a -c no bgp bestpath bandwidth -c exit"
	if len(f.resyncs) != 1 || f.resyncs[0] != want {
		t.Fatalf("resyncs %q, want [%q]", f.resyncs, want)
	}
	if ds, err := EVPNDrifts(ctx, f.run, "/vty", acme); err != nil || len(ds) != 0 {
		t.Fatalf("after the resync: %v %v", ds, err)
	}
	// Consistent: nothing to do.
	if err := l.watchOnce(ctx, "leaf1"); err != nil || len(f.resyncs) != 1 {
		t.Fatalf("resynced a consistent leaf: %v %v", err, f.resyncs)
	}
}
