package fabric_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
)

func input(t *testing.T, nos, model string) fabric.Input {
	t.Helper()
	in, err := fabrictest.Input(nos, model)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func compile(t *testing.T, in fabric.Input) *fabric.Intent {
	t.Helper()
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return it
}

func port(t *testing.T, it *fabric.Intent, leaf, name string) *fabric.Port {
	t.Helper()
	d := it.Device(leaf)
	if d == nil {
		t.Fatalf("no device %s", leaf)
	}
	p := d.Port(name)
	if p == nil {
		t.Fatalf("no port %s/%s", leaf, name)
	}
	return p
}

// TestPortOwnership checks which VRF each server port lands in, per
// isolation mode: the heart of "the network says what the scheduler says".
func TestPortOwnership(t *testing.T) {
	tests := map[string]struct {
		allocs []fabric.Allocation
		// want maps leaf/port to its VRF ("" = unassigned); ports not
		// listed must be unassigned.
		want map[string]string
	}{
		"no allocations: every port in no VRF": {
			allocs: nil,
			want:   map[string]string{},
		},
		"server isolation: a job on one GPU puts every link of the server in the VRF": {
			allocs: []fabric.Allocation{{Tenant: "acme", Server: "s1-gpu003", GPUs: []int{0}, JobID: "1"}},
			want:   map[string]string{"s1-leaf0/swp3": "acme", "s1-leaf1/swp3": "acme"},
		},
		"GPU isolation: only the rail link of each owned GPU": {
			allocs: []fabric.Allocation{{Tenant: "globex", Server: "s2-gpu004", GPUs: []int{1}, JobID: "2"}},
			want:   map[string]string{"s2-leaf1/swp4": "globex"},
		},
		"GPU isolation: two tenants share a server, one link each": {
			allocs: []fabric.Allocation{
				{Tenant: "globex", Server: "s1-gpu004", GPUs: []int{0}, JobID: "2"},
				{Tenant: "initech", Server: "s1-gpu004", GPUs: []int{1}, JobID: "3"},
			},
			want: map[string]string{"s1-leaf0/swp4": "globex", "s1-leaf1/swp4": "initech"},
		},
		"whole flag: a GPU-isolated tenant holding the whole server owns every link": {
			allocs: []fabric.Allocation{{Tenant: "globex", Server: "s2-gpu003", GPUs: []int{0}, Whole: true, JobID: "2"}},
			want:   map[string]string{"s2-leaf0/swp3": "globex", "s2-leaf1/swp3": "globex"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := input(t, "frr", fabrictest.VLANAware)
			in.Allocations = tc.allocs
			if err := fabrictest.AssignLinkIDs(&in, 1000, 20000); err != nil {
				t.Fatal(err)
			}
			it := compile(t, in)
			for _, d := range it.Devices {
				for _, p := range d.Ports {
					key := d.Name + "/" + p.Name
					if got := p.VRF; got != tc.want[key] {
						t.Errorf("%s is in VRF %q, want %q", key, got, tc.want[key])
					}
					if !p.Assigned() && (p.VLAN != 0 || p.Group != 0 || p.ACL != nil || p.Gateway4.IsValid()) {
						t.Errorf("unassigned %s carries tenant state: %+v", key, p)
					}
				}
			}
		})
	}
}

func TestRDsUniquePerDeviceAndVRF(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.VLANAware))
	seen := map[string]string{}
	for _, d := range it.Devices {
		for _, v := range d.VRFs {
			rds := []fabric.RD{v.RD}
			if v.MAC != nil {
				rds = append(rds, v.MAC.RD)
			}
			for _, rd := range rds {
				if rd.Addr != d.Loopback {
					t.Errorf("%s %s: RD %s does not start with the loopback %s", d.Name, v.Name, rd, d.Loopback)
				}
				if other, dup := seen[rd.String()]; dup {
					t.Errorf("RD %s used by %s and %s/%s", rd, other, d.Name, v.Name)
				}
				seen[rd.String()] = d.Name + "/" + v.Name
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("no VRFs compiled")
	}
}

func TestRouteTargetsExplicitAndEqualAcrossASNs(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.PureRT5))
	rts := map[string]map[string]bool{}
	asns := map[uint32]bool{}
	for _, d := range it.Devices {
		if d.Role != fabric.RoleLeaf {
			continue
		}
		asns[d.ASN] = true
		for _, v := range d.VRFs {
			if rts[v.Tenant] == nil {
				rts[v.Tenant] = map[string]bool{}
			}
			rts[v.Tenant][v.RT.String()] = true
		}
	}
	if len(asns) < 2 {
		t.Fatalf("the fixture's leaves should be in different ASNs, got %v", asns)
	}
	want := map[string]string{"acme": "65000:10001", "globex": "65000:10002"}
	for tenant, set := range rts {
		if len(set) != 1 || !set[want[tenant]] {
			t.Errorf("tenant %s has route targets %v on its leaves, want only %s", tenant, set, want[tenant])
		}
	}
}

func TestAddressesStayWhenServerChangesTenant(t *testing.T) {
	in := input(t, "frr", fabrictest.PureRT5)
	before := compile(t, in)
	in.Allocations = slices.DeleteFunc(slices.Clone(in.Allocations), func(a fabric.Allocation) bool { return a.Server == "s1-gpu002" })
	in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "acme", Server: "s1-gpu002", GPUs: []int{0, 1}, Whole: true, JobID: "12"})
	after := compile(t, in)
	for _, leaf := range []string{"s1-leaf0", "s1-leaf1"} {
		b, a := port(t, before, leaf, "swp2"), port(t, after, leaf, "swp2")
		if b.VRF != "globex" || a.VRF != "acme" {
			t.Fatalf("%s/swp2: VRF %q then %q, want globex then acme", leaf, b.VRF, a.VRF)
		}
		if b.IPv4 != a.IPv4 || b.IPv6 != a.IPv6 || !a.IPv4.IsValid() {
			t.Errorf("%s/swp2 addresses changed with the tenant: %s %s -> %s %s", leaf, b.IPv4, b.IPv6, a.IPv4, a.IPv6)
		}
	}
}

func TestVRFPlacement(t *testing.T) {
	tests := map[string]struct {
		placement fabric.VRFPlacement
		sites     []string // acme's sites
		want      map[string][]string
	}{
		"all leaves (default)": {"", nil, map[string][]string{
			"s1-leaf0": {"acme", "globex"}, "s1-leaf1": {"acme", "globex"}, "s2-leaf0": {"acme", "globex"}, "s2-leaf1": {"acme", "globex"}}},
		"only where used": {fabric.VRFsWhereUsed, nil, map[string][]string{
			"s1-leaf0": {"acme"}, "s1-leaf1": {"acme"}, "s2-leaf0": {}, "s2-leaf1": {"globex"}}},
		"all leaves of the tenant's sites, and where it owns ports": {"", []string{"elsewhere"}, map[string][]string{
			"s1-leaf0": {"acme", "globex"}, "s1-leaf1": {"acme", "globex"}, "s2-leaf0": {"globex"}, "s2-leaf1": {"globex"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := input(t, "frr", fabrictest.PureRT5)
			in.Options.VRFPlacement = tc.placement
			in.Tenants[0].Sites = tc.sites
			in.Allocations = []fabric.Allocation{
				{Tenant: "acme", Server: "s1-gpu001", GPUs: []int{0}, JobID: "11"},
				{Tenant: "globex", Server: "s2-gpu002", GPUs: []int{1}, JobID: "22"},
			}
			got := map[string][]string{}
			for _, d := range compile(t, in).Devices {
				if d.Role == fabric.RoleLeaf {
					got[d.Name] = []string{}
					for _, v := range d.VRFs {
						got[d.Name] = append(got[d.Name], v.Name)
					}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("VRFs per leaf = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJobStartChangesOnlyItsPortsAndRules compiles before and after a job
// of a segmented tenant starts and checks that nothing but that job's
// ports, and the policy of the leaves it lands on, changed.
func TestJobStartChangesOnlyItsPortsAndRules(t *testing.T) {
	in := input(t, "frr", fabrictest.Segmented)
	before := compile(t, in)
	in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "globex", Server: "s2-gpu004", GPUs: []int{1}, JobID: "23"})
	in.Groups = append(in.Groups, fabric.Group{Tenant: "globex", Name: "job-23", ID: 103, JobID: "23"})
	after := compile(t, in)
	changedPorts, changedVRFs := diffIntents(t, before, after)
	if want := []string{"s2-leaf1/swp4"}; !reflect.DeepEqual(changedPorts, want) {
		t.Errorf("changed ports %v, want %v", changedPorts, want)
	}
	if want := []string{"s2-leaf1/globex"}; !reflect.DeepEqual(changedVRFs, want) {
		t.Errorf("changed VRFs %v, want %v", changedVRFs, want)
	}
	p := port(t, after, "s2-leaf1", "swp4")
	if p.Group != 103 || !reflect.DeepEqual(p.ACL.Allow, []netip.Prefix{p.IPv4, p.IPv6}) {
		t.Errorf("job 23's port: group %d, ACL %v; want group 103 allowing only its own link", p.Group, p.ACL.Allow)
	}
	// And stopping it again restores the first intent exactly.
	in.Allocations = in.Allocations[:len(in.Allocations)-1]
	in.Groups = in.Groups[:len(in.Groups)-1]
	if ports, vrfs := diffIntents(t, before, compile(t, in)); len(ports)+len(vrfs) != 0 {
		t.Errorf("after the job stopped, still changed: %v %v", ports, vrfs)
	}
}

func diffIntents(t *testing.T, a, b *fabric.Intent) (ports, vrfs []string) {
	t.Helper()
	for _, da := range a.Devices {
		db := b.Device(da.Name)
		if !reflect.DeepEqual(da.Sessions, db.Sessions) || !reflect.DeepEqual(da.Uplinks, db.Uplinks) {
			t.Errorf("%s: underlay changed", da.Name)
		}
		for i := range da.Ports {
			if !reflect.DeepEqual(da.Ports[i], db.Ports[i]) {
				ports = append(ports, da.Name+"/"+da.Ports[i].Name)
			}
		}
		for i := range da.VRFs {
			if !reflect.DeepEqual(da.VRFs[i], db.VRFs[i]) {
				vrfs = append(vrfs, da.Name+"/"+da.VRFs[i].Name)
			}
		}
	}
	return ports, vrfs
}

func TestSegmentationPolicy(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.Segmented))
	p21 := port(t, it, "s1-leaf0", "swp2") // job 21
	p22 := port(t, it, "s1-leaf1", "swp2") // job 22
	if p21.Group != 101 || p22.Group != 102 {
		t.Fatalf("groups %d and %d, want 101 and 102", p21.Group, p22.Group)
	}
	has := func(acl *fabric.ACL, s string) bool { return slices.Contains(acl.Allow, netip.MustParsePrefix(s)) }
	tests := map[string]struct {
		acl  *fabric.ACL
		dest string
		want bool
	}{
		"job 21 reaches itself":                    {p21.ACL, p21.IPv4.String(), true},
		"job 21 does not reach job 22":             {p21.ACL, p22.IPv4.String(), false},
		"job 21 has no contract with storage":      {p21.ACL, "10.99.0.0/24", false},
		"job 22 reaches its other server (s2)":     {p22.ACL, "10.0.0.22/31", true},
		"job 22 reaches storage by contract":       {p22.ACL, "10.99.0.0/24", true},
		"job 22 reaches storage by contract (v6)":  {p22.ACL, "fd00:99::/64", true},
		"job 22 does not reach job 21":             {p22.ACL, p21.IPv4.String(), false},
		"job 22 does not reach the other tenant":   {p22.ACL, port(t, it, "s1-leaf1", "swp1").IPv4.String(), false},
		"job 22 does not reach unassigned servers": {p22.ACL, port(t, it, "s1-leaf1", "swp4").IPv4.String(), false},
	}
	for name, tc := range tests {
		if got := has(tc.acl, tc.dest); got != tc.want {
			t.Errorf("%s: allow %s = %v, want %v", name, tc.dest, got, tc.want)
		}
	}
	pol := it.Device("s1-leaf1").VRF("globex").Policy
	var ids []uint16
	for _, g := range pol.Groups {
		ids = append(ids, g.ID)
	}
	if !reflect.DeepEqual(ids, []uint16{102, 110}) || pol.Unclassified != 999 || len(pol.Contracts) != 1 {
		t.Errorf("s1-leaf1 globex policy = %+v, want groups 102 and 110 (contracted), unclassified 999, one contract", pol)
	}
	if it.Device("s1-leaf0").VRF("acme").Policy != nil {
		t.Error("an unsegmented tenant got a policy")
	}
}

func TestVLANAwarePorts(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.VLANAware))
	p := port(t, it, "s1-leaf0", "swp3") // initech, link 10.0.0.8/31 = link number 4
	if p.VLAN == 0 || p.L2VNI == 0 {
		t.Fatalf("vlan-aware port without VLAN or L2VNI: %+v", p)
	}
	if p.Gateway4.String() != "10.64.0.129/27" || p.Gateway6.String() != "fd00:100:0:4::1/64" {
		t.Errorf("gateways %s %s, want 10.64.0.129/27 fd00:100:0:4::1/64", p.Gateway4, p.Gateway6)
	}
	if got := p.ServerAddrs(); len(got) != 2 || got[0].String() != "10.64.0.130/27" {
		t.Errorf("server addresses %v, want 10.64.0.130/27 first", got)
	}
	d := it.Device("s1-leaf0")
	v := d.VRF("initech")
	if v.MAC == nil || v.MAC.RD.Num != 103 || v.MAC.RT.String() != "65000:16777219" || d.AnycastMAC != fabric.DefaultAnycastMAC {
		t.Errorf("MAC-VRF %+v, anycast MAC %q", v.MAC, d.AnycastMAC)
	}
}

func TestIRBSubnets(t *testing.T) {
	pp := netip.MustParsePrefix
	tests := map[string]struct {
		pool4, link4, irb4, pool6, link6, irb6 string
		want4, want6                           string
		wantErr                                string
	}{
		"first link": {"10.0.0.0/16", "10.0.0.0/31", "10.64.0.0/10", "fd00:0:0:1::/64", "fd00:0:0:1::/127", "fd00:1::/48", "10.64.0.1/27", "fd00:1::1/64", ""},
		"link 257":   {"10.0.0.0/16", "10.0.2.2/31", "10.64.0.0/10", "fd00:0:0:1::/64", "fd00:0:0:1::202/127", "fd00:1::/48", "10.64.32.33/27", "fd00:1:0:101::1/64", ""},
		// The 100,352nd link of a 100,000-GPU fabric (12,544 servers x 8
		// rails) fits the default pools; the old /24s stopped at 16,384.
		"link 100,351, default pools": {"10.0.0.0/12", "10.3.15.254/31", fabric.DefaultIRBPool4, "fd00:0:0:1::/64", "fd00:0:0:1::3:ffe/127", fabric.DefaultIRBPool6,
			"10.112.255.225/27", "fd00:100:1:87ff::1/64", ""},
		"gateway pool full": {"10.0.0.0/16", "10.0.2.0/31", "10.64.0.0/24", "", "", "", "", "", "holds only 8 /27"},
		"outside the pool":  {"10.0.0.0/16", "10.1.0.0/31", "10.64.0.0/10", "", "", "", "", "", "outside its fabric's link pool"},
	}
	opt := func(s string) netip.Prefix {
		if s == "" {
			return netip.Prefix{}
		}
		return pp(s)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g4, g6, err := fabric.IRBSubnets(opt(tc.pool4), opt(tc.link4), opt(tc.irb4), opt(tc.pool6), opt(tc.link6), opt(tc.irb6))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g4 != opt(tc.want4) || g6 != opt(tc.want6) {
				t.Errorf("got %s %s, want %s %s", g4, g6, tc.want4, tc.want6)
			}
		})
	}
}

func TestUnderlaySessions(t *testing.T) {
	tests := map[string]struct {
		nos     string
		overlay fabric.OverlaySessions
		// want: the sessions of s1-leaf0 and spine1 as
		// "interface|address|flags" strings.
		leaf, spine []string
	}{
		"unnumbered, EVPN on the link sessions": {"frr", "",
			[]string{"swp5||unicast,evpn", "swp6||unicast,evpn"},
			[]string{"swp1||unicast,evpn,nhu", "swp2||unicast,evpn,nhu", "swp3||unicast,evpn,nhu", "swp4||unicast,evpn,nhu"}},
		"numbered, EVPN on loopback sessions": {"eos", fabric.OverlayOnLoopbacks,
			[]string{"Ethernet5/1|10.253.0.0|unicast", "Ethernet6/1|10.253.0.2|unicast", "|10.254.0.1|multihop,evpn", "|10.254.0.2|multihop,evpn"},
			[]string{"Ethernet1/1|10.253.0.1|unicast", "Ethernet2/1|10.253.0.5|unicast", "Ethernet3/1|10.253.0.9|unicast", "Ethernet4/1|10.253.0.13|unicast",
				"|10.254.1.1|multihop,evpn,nhu", "|10.254.1.2|multihop,evpn,nhu", "|10.254.1.3|multihop,evpn,nhu", "|10.254.1.4|multihop,evpn,nhu"}},
	}
	format := func(ss []fabric.Session) []string {
		var out []string
		for _, s := range ss {
			var flags []string
			for _, f := range []struct {
				on   bool
				name string
			}{{s.Multihop, "multihop"}, {s.Unicast, "unicast"}, {s.EVPN, "evpn"}, {s.NextHopUnchanged, "nhu"}} {
				if f.on {
					flags = append(flags, f.name)
				}
			}
			addr := ""
			if s.Address.IsValid() {
				addr = s.Address.String()
			}
			out = append(out, s.Interface+"|"+addr+"|"+strings.Join(flags, ","))
		}
		return out
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := input(t, tc.nos, fabrictest.PureRT5)
			in.Options.Overlay = tc.overlay
			it := compile(t, in)
			if got := format(it.Device("s1-leaf0").Sessions); !reflect.DeepEqual(got, tc.leaf) {
				t.Errorf("leaf sessions\n got %q\nwant %q", got, tc.leaf)
			}
			if got := format(it.Device("spine1").Sessions); !reflect.DeepEqual(got, tc.spine) {
				t.Errorf("spine sessions\n got %q\nwant %q", got, tc.spine)
			}
		})
	}
}

// TestDeterministic shuffles every input list: the intent must not move.
func TestDeterministic(t *testing.T) {
	for _, model := range fabrictest.Models() {
		in := input(t, "frr", model)
		want, err := json.Marshal(compile(t, in))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(7, uint64(len(model))))
		for range 20 {
			r.Shuffle(len(in.Tenants), func(i, j int) { in.Tenants[i], in.Tenants[j] = in.Tenants[j], in.Tenants[i] })
			r.Shuffle(len(in.Allocations), func(i, j int) { in.Allocations[i], in.Allocations[j] = in.Allocations[j], in.Allocations[i] })
			r.Shuffle(len(in.Groups), func(i, j int) { in.Groups[i], in.Groups[j] = in.Groups[j], in.Groups[i] })
			got, _ := json.Marshal(compile(t, in))
			if string(got) != string(want) {
				t.Fatalf("%s: the intent depends on input order", model)
			}
		}
	}
}

func TestInUse(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.VLANAware))
	u := it.InUse()
	if !slices.Contains(u.VNIs, 10001) || !slices.Contains(u.VNIs, 20000) || !slices.Contains(u.VRFIDs, 103) || !slices.Contains(u.RTs, 1<<24+3) {
		t.Errorf("in use = %+v", u)
	}
	if got := u.LinkVLANs["s1-leaf0"]; !reflect.DeepEqual(got, []uint32{1000}) {
		t.Errorf("s1-leaf0 link VLANs %v, want [1000]", got)
	}
	if !reflect.DeepEqual(u.L3VLANs, []uint32{3001, 3002, 3003}) {
		t.Errorf("L3 VLANs %v", u.L3VLANs)
	}
}

func TestIntentJSONRoundTrip(t *testing.T) {
	it := compile(t, input(t, "frr", fabrictest.Segmented))
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	var back fabric.Intent
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(&back); string(b2) != string(b) {
		t.Error("an intent does not survive JSON")
	}
}

func TestCompileErrors(t *testing.T) {
	tests := map[string]struct {
		model     string
		mutate    func(in *fabric.Input)
		wantField string
		wantMsg   string
	}{
		"unknown tenant": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Allocations[0].Tenant = "nobody"
		}, "allocations[0].tenant", "not in the input"},
		"unknown server": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Allocations[2].Server = "s9-gpu999"
		}, "allocations[2].server", "not in the topology"},
		"GPU out of range": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Allocations[2].GPUs = []int{2}
		}, "allocations[2].gpus[0]", "GPUs 0..1"},
		"two tenants on one link": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "acme", Server: "s1-gpu002", GPUs: []int{0}})
		}, "allocations[5]", "claimed by tenant \"globex\" (allocations[2]) and tenant \"acme\""},
		"two tenants on one GPU link": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Tenants = append(in.Tenants, domain.Tenant{Name: "hooli", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5})
			in.IDs.Tenants["hooli"] = fabric.TenantIDs{L3VNI: 10009, VRFID: 9}
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: "hooli", Server: "s1-gpu002", GPUs: []int{0}})
		}, "allocations[5]", "claimed by tenant \"globex\""},
		"a GPU-isolated tenant on a server-isolated tenant's server": {fabrictest.PureRT5, func(in *fabric.Input) {
			f := &in.Topology.Sites[0].Fabrics[0]
			f.Cables = slices.DeleteFunc(f.Cables, func(c domain.Cable) bool { return c.Server == "s1-gpu003" && c.NIC == "nic1" })
			in.Allocations = append(in.Allocations,
				fabric.Allocation{Tenant: "acme", Server: "s1-gpu003", GPUs: []int{0}},
				fabric.Allocation{Tenant: "globex", Server: "s1-gpu003", GPUs: []int{1}})
		}, "allocations[6]", "held whole by tenant \"acme\" (server isolation), but tenant \"globex\""},
		"missing ids": {fabrictest.PureRT5, func(in *fabric.Input) {
			delete(in.IDs.Tenants, "globex")
		}, "ids.tenants[globex]", "no ids"},
		"shared L3VNI": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.IDs.Tenants["globex"] = fabric.TenantIDs{L3VNI: 10001, VRFID: 2}
		}, "ids.tenants[globex].l3vni", "already used by tenant acme"},
		"shared VRF id": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.IDs.Tenants["globex"] = fabric.TenantIDs{L3VNI: 10002, VRFID: 1}
		}, "ids.tenants[globex].vrfId", "already used"},
		"shared route target": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.IDs.Tenants["globex"] = fabric.TenantIDs{L3VNI: 10002, VRFID: 2, RT: 10001}
		}, "ids.tenants[globex].rt", "route-target value 10001"},
		"RT too wide for a 4-byte ASN": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Options.RTASN = 4200000000
			in.IDs.Tenants["acme"] = fabric.TenantIDs{L3VNI: 70000, VRFID: 1}
		}, "ids.tenants[acme].rt", "16 bits"},
		"vlan-aware link without ids": {fabrictest.VLANAware, func(in *fabric.Input) {
			delete(in.IDs.Links, fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"})
		}, "ids.links[s1-leaf0/swp3]", "no VLAN and L2VNI"},
		"link ids of a previous owner": {fabrictest.VLANAware, func(in *fabric.Input) {
			ids := in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}]
			ids.Tenant = "globex"
			in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}] = ids
		}, "ids.links[s1-leaf0/swp3].tenant", "allocated for \"globex\""},
		"link VLAN equal to an L3 VLAN": {fabrictest.VLANAware, func(in *fabric.Input) {
			ids := in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}]
			ids.VLAN = 3001
			in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}] = ids
		}, "ids.links[s1-leaf0/swp3].vlan", "L3 VLAN of tenant acme"},
		"L2VNI equal to an L3VNI": {fabrictest.VLANAware, func(in *fabric.Input) {
			ids := in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}]
			ids.L2VNI = 10002
			in.IDs.Links[fabric.LinkRef{Leaf: "s1-leaf0", Port: "swp3"}] = ids
		}, "ids.links[s1-leaf0/swp3].l2vni", "already used by tenant globex"},
		"duplicate group ID": {fabrictest.Segmented, func(in *fabric.Input) {
			in.Groups[1].ID = 101
		}, "groups[1].id", "group ID 101"},
		"group ID equal to the unclassified tag": {fabrictest.Segmented, func(in *fabric.Input) {
			in.Groups[1].ID = 999
		}, "groups[1].id", "unclassified"},
		"group ID of the switches": {fabrictest.Segmented, func(in *fabric.Input) {
			in.Groups[1].ID = fabric.SwitchGroup
		}, "groups[1].id", "reserved"},
		"unclassified tag of the switches": {fabrictest.Segmented, func(in *fabric.Input) {
			ids := in.IDs.Tenants["globex"]
			ids.UnclassifiedGroup = fabric.SwitchGroup
			in.IDs.Tenants["globex"] = ids
		}, "ids.tenants[globex].unclassifiedGroup", "reserved"},
		"group of an unsegmented tenant": {fabrictest.Segmented, func(in *fabric.Input) {
			in.Groups = append(in.Groups, fabric.Group{Tenant: "acme", Name: "x", ID: 7})
		}, "groups[4].tenant", "does not ask for job segmentation"},
		"contract with an unknown group": {fabrictest.Segmented, func(in *fabric.Input) {
			in.Contracts[0].B = "backup"
		}, "contracts[0].b", "no group \"backup\""},
		"bad option": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Options.VRFPlacement = "some"
		}, "options.vrfPlacement", "not one of"},
		"gateway pool smaller than the fabric": {fabrictest.VLANAware, func(in *fabric.Input) {
			in.Options.IRBPool4 = "10.64.0.0/26"
		}, "options.irbPool4", "gateway pool 10.64.0.0/26 holds 2 /27 subnets, but fabric dc1/fabric1 has 16 server links and a vlan-aware tenant's link needs one each: use a /23 or larger"},
		"IPv6 gateway pool smaller than the fabric": {fabrictest.VLANAware, func(in *fabric.Input) {
			in.Options.IRBPool6 = "fd00:9::/62"
		}, "options.irbPool6", "holds 4 /64 subnets"},
		"bad anycast MAC": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.Options.AnycastMAC = "01:00:5e:00:00:01"
		}, "options.anycastMac", "multicast"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := input(t, "frr", tc.model)
			tc.mutate(&in)
			_, err := fabric.Compile(in)
			var de *domain.Error
			if !errors.As(err, &de) {
				t.Fatalf("err %v, want a *domain.Error", err)
			}
			if de.Code != domain.CodeInvalidArgument || de.Field != tc.wantField || !strings.Contains(de.Message, tc.wantMsg) {
				t.Errorf("got %s field %q: %s\nwant field %q, message containing %q", de.Code, de.Field, de.Message, tc.wantField, tc.wantMsg)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	in := input(t, "frr", fabrictest.Segmented)
	// Two jobs of globex on one GPU's NIC (MIG slices), and a job without a group.
	in.Allocations = append(in.Allocations,
		fabric.Allocation{Tenant: "globex", Server: "s1-gpu004", GPUs: []int{0}, JobID: "24"},
		fabric.Allocation{Tenant: "globex", Server: "s1-gpu004", GPUs: []int{0}, JobID: "22"},
		fabric.Allocation{Tenant: "globex", Server: "s2-gpu004", GPUs: []int{0}, JobID: "25"})
	in.Groups = append(in.Groups, fabric.Group{Tenant: "globex", Name: "job-24", ID: 104, JobID: "24"})
	it := compile(t, in)
	joined := strings.Join(it.Warnings, "\n")
	for _, want := range []string{"job \"25\" of segmented tenant \"globex\" has no group", "serves jobs 22, 24 of tenant \"globex\"", "classified into group 102 (job-22)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
}

func TestOwners(t *testing.T) {
	in := input(t, "frr", fabrictest.PureRT5)
	in.IDs = fabric.IDs{} // Owners needs no ids
	owners, err := fabric.Owners(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range owners {
		got = append(got, o.Link.Leaf+"/"+o.Link.Port+"="+o.Tenant+strings.Join(o.Jobs, ","))
	}
	want := []string{
		"s1-leaf0/swp1=acme11", "s1-leaf0/swp2=globex21",
		"s1-leaf1/swp1=acme11", "s1-leaf1/swp2=globex22",
		"s2-leaf0/swp1=acme11", "s2-leaf0/swp2=globex22",
		"s2-leaf1/swp1=acme", "s2-leaf1/swp2=globex22",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("owners\n got %q\nwant %q", got, want)
	}
}

func TestVRFNames(t *testing.T) {
	tests := map[string]struct {
		tenant string
		want   string
	}{
		"the tenant's name":                  {"hooli", "hooli"},
		"a name some NOS reserves":           {"default", "T9"},
		"longer than a Linux interface name": {"a-very-long-tenant-name", "T9"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := input(t, "frr", fabrictest.PureRT5)
			in.Tenants = append(in.Tenants, domain.Tenant{Name: tc.tenant, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5})
			in.IDs.Tenants[tc.tenant] = fabric.TenantIDs{L3VNI: 10009, VRFID: 9}
			in.Allocations = append(in.Allocations, fabric.Allocation{Tenant: tc.tenant, Server: "s1-gpu004", GPUs: []int{0}})
			it := compile(t, in)
			if got := port(t, it, "s1-leaf0", "swp4").VRF; got != tc.want {
				t.Errorf("VRF %q, want %q", got, tc.want)
			}
			if it.Device("s2-leaf1").VRF(tc.want) == nil {
				t.Errorf("no VRF %q on s2-leaf1", tc.want)
			}
		})
	}
}

// TestServerPortsQuarantinedAndGuarded: a port nobody owns is quarantined,
// every port is guarded, and every leaf's underlay list covers every
// loopback and numbered uplink end of the fabric but no server link.
func TestServerPortsQuarantinedAndGuarded(t *testing.T) {
	for _, nos := range fabrictest.NOSes() {
		for _, model := range fabrictest.Models() {
			in := input(t, nos, model)
			it := compile(t, in)
			var under []netip.Addr
			for _, d := range it.Devices {
				under = append(under, d.Loopback)
				for _, u := range d.Uplinks {
					if u.Address.IsValid() {
						under = append(under, u.Address.Addr())
					}
				}
			}
			quarantined := 0
			for _, d := range it.Devices {
				if d.Role == fabric.RoleSpine {
					if d.Underlay != nil {
						t.Errorf("%s %s: spine %s has an underlay guard list", nos, model, d.Name)
					}
					continue
				}
				for _, a := range under {
					if !slices.ContainsFunc(d.Underlay, func(p netip.Prefix) bool { return p.Contains(a) }) {
						t.Errorf("%s %s: %s's underlay list %v misses %s", nos, model, d.Name, d.Underlay, a)
					}
				}
				for _, p := range d.Ports {
					if p.Quarantined == p.Assigned() || !p.Guarded {
						t.Errorf("%s %s: %s/%s assigned=%v quarantined=%v guarded=%v", nos, model, d.Name, p.Name, p.Assigned(), p.Quarantined, p.Guarded)
					}
					if p.Quarantined {
						quarantined++
					}
					for _, l := range append(p.Prefixes(), p.IPv4, p.IPv6) {
						if l.IsValid() && slices.ContainsFunc(d.Underlay, func(u netip.Prefix) bool { return u.Overlaps(l) }) {
							t.Errorf("%s %s: %s's underlay list %v covers server link %s of %s", nos, model, d.Name, d.Underlay, l, p.Name)
						}
					}
				}
				for _, v := range d.VRFs {
					if v.Policy != nil && v.Policy.Switch != fabric.SwitchGroup {
						t.Errorf("%s %s: %s VRF %s: switch group %d, want %d", nos, model, d.Name, v.Name, v.Policy.Switch, fabric.SwitchGroup)
					}
				}
			}
			if quarantined == 0 {
				t.Errorf("%s %s: the fixture has no unassigned port to quarantine", nos, model)
			}
		}
	}
}

func TestSummarize(t *testing.T) {
	pp := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	tests := map[string]struct{ in, want []netip.Prefix }{
		"empty":            {nil, []netip.Prefix{}},
		"siblings merge":   {pp("10.0.0.1/32", "10.0.0.0/32"), pp("10.0.0.0/31")},
		"cascade":          {pp("10.0.0.0/32", "10.0.0.1/32", "10.0.0.2/31"), pp("10.0.0.0/30")},
		"no over-cover":    {pp("10.0.0.1/32", "10.0.0.2/32"), pp("10.0.0.1/32", "10.0.0.2/32")},
		"contained":        {pp("10.0.0.0/24", "10.0.0.7/32"), pp("10.0.0.0/24")},
		"unmasked, dup":    {pp("10.0.0.3/31", "10.0.0.2/31"), pp("10.0.0.2/31")},
		"families apart":   {pp("fd00::1/128", "10.0.0.0/32", "fd00::/128"), pp("10.0.0.0/32", "fd00::/127")},
		"odd count of /32": {pp("10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"), pp("10.0.0.1/32", "10.0.0.2/31")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := fabric.Summarize(tc.in)
			if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("Summarize(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
