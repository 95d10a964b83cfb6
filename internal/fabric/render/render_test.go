package render_test

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func compile(t *testing.T, nos, model string) *fabric.Intent {
	t.Helper()
	in, err := fabrictest.Input(nos, model)
	if err != nil {
		t.Fatal(err)
	}
	it, err := fabric.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func renderAll(t *testing.T, it *fabric.Intent) []render.DeviceFiles {
	t.Helper()
	out, err := render.RenderIntent(it)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bundle concatenates every file of every device, each under a "==== "
// header, for one golden file per NOS and model.
func bundle(ds []render.DeviceFiles) string {
	var b strings.Builder
	for _, d := range ds {
		for _, f := range d.Files {
			b.WriteString("==== " + d.Device + "/" + f.Name + "\n")
			b.WriteString(f.Content)
		}
	}
	return b.String()
}

// TestGolden renders the fixture cluster for every NOS and model and
// compares with testdata/<model>/<nos>.golden. Rewrite with:
//
//	go test ./internal/fabric/render/ -run Golden -update
func TestGolden(t *testing.T) {
	for _, model := range fabrictest.Models() {
		for _, nos := range fabrictest.NOSes() {
			t.Run(model+"/"+nos, func(t *testing.T) {
				got := bundle(renderAll(t, compile(t, nos, model)))
				path := filepath.Join("testdata", model, nos+".golden")
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					lines := render.DiffFile(path, string(want), got)
					if len(lines) > 40 {
						lines = append(lines[:40], "...")
					}
					t.Errorf("%s differs from the render (run with -update if the change is intended):\n%s", path, strings.Join(lines, "\n"))
				}
			})
		}
	}
}

// TestRenderIsStable renders twice: output must not depend on map order.
func TestRenderIsStable(t *testing.T) {
	for _, model := range fabrictest.Models() {
		for _, nos := range fabrictest.NOSes() {
			it := compile(t, nos, model)
			first := bundle(renderAll(t, it))
			for range 5 {
				if again := bundle(renderAll(t, compile(t, nos, model))); again != first {
					t.Fatalf("%s/%s: two renders differ", model, nos)
				}
			}
		}
	}
}

func TestRenderFacts(t *testing.T) {
	// Spot checks of the syntax fabric-facts.md pins, independent of the
	// golden files (which a careless -update could bless).
	tests := map[string]struct {
		nos, model, device, file string
		want                     []string
		not                      []string
	}{
		"junos quarantine and guard": {"junos", fabrictest.PureRT5, "s1-leaf0", "junos.set", []string{
			"set interfaces et-0/0/2 disable\n",
			"set firewall family inet filter jf-et-0-0-0-0-in term underlay from destination-address 10.254.1.1/32\n",
			"set firewall family inet filter jf-et-0-0-0-0-in term switch-icmp from destination-address 10.0.0.0/32\n",
			"set firewall family inet filter jf-et-0-0-0-0-in term switch-icmp from protocol icmp\n",
			"set firewall family inet filter jf-et-0-0-0-0-in term switch then discard\n",
			// Source-address validation: permits only from the server's address.
			"set firewall family inet filter jf-et-0-0-0-0-in term switch-icmp from source-address 10.0.0.1/32\n",
			"set firewall family inet filter jf-et-0-0-0-0-in term source from source-address 10.0.0.1/32\nset firewall family inet filter jf-et-0-0-0-0-in term source then accept\nset firewall family inet filter jf-et-0-0-0-0-in term rest then discard\n",
			"set firewall family inet6 filter jf-et-0-0-0-0-in6 term source from source-address fd00:0:0:1::1/128\nset firewall family inet6 filter jf-et-0-0-0-0-in6 term source from source-address fe80::/10\n",
			"set firewall family inet6 filter jf-et-0-0-0-0-in6 term switch-icmp from next-header icmp6\n",
			"set interfaces et-0/0/0 unit 0 family inet filter input jf-et-0-0-0-0-in\n",
		}, []string{"set interfaces et-0/0/0 disable"}},
		"nxos quarantine and guard": {"nxos", fabrictest.PureRT5, "s1-leaf0", "nxos.cfg", []string{
			"interface Ethernet1/3\n  description s1-gpu003 nic0 (unassigned)\n  no switchport\n  shutdown\n",
			"  70 permit icmp 10.0.0.1/32 10.0.0.0/32\n  80 permit icmp 10.0.0.1/32 224.0.0.0/4\n  90 deny ip any 10.0.0.0/32\n  100 deny ip any 224.0.0.0/4\n  110 permit ip 10.0.0.1/32 any\n  120 deny ip any any\n",
			"  100 permit ipv6 fd00:0:0:1::1/128 any\n  110 permit ipv6 fe80::/10 any\n  120 deny ipv6 any any\n",
			"  ip access-group JF-Ethernet1-1-IN in\n  ipv6 traffic-filter JF-Ethernet1-1-IN6 in\n",
		}, nil},
		"eos quarantine and guard": {"eos", fabrictest.PureRT5, "s1-leaf0", "eos.cfg", []string{
			"   description s1-gpu003 nic0 (unassigned)\n   no switchport\n   shutdown\n",
			" permit icmpv6 fe80::/10 fe80::/10\n",
			"   ip access-group JF-Ethernet1-1-IN in\n",
		}, nil},
		"sonic quarantine and guard": {"sonic", fabrictest.PureRT5, "s1-leaf0", "config_db.json", []string{
			`"admin_status": "down",` + "\n" + `            "description": "s1-gpu003 nic0 (unassigned)"`,
			`"JF_Ethernet0_V4|SWITCH_ICMP_1": {` + "\n" + `            "DST_IP": "10.0.0.0/32",` + "\n" + `            "IP_PROTOCOL": "1",` + "\n" + `            "PACKET_ACTION": "FORWARD",` + "\n" + `            "PRIORITY": "8995",` + "\n" + `            "SRC_IP": "10.0.0.1/32"`,
			`"JF_Ethernet0_V4|SOURCE_1": {` + "\n" + `            "IP_TYPE": "IPV4ANY",` + "\n" + `            "PACKET_ACTION": "FORWARD",` + "\n" + `            "PRIORITY": "8991",` + "\n" + `            "SRC_IP": "10.0.0.1/32"`,
			`"JF_Ethernet0_V4|DENY_ALL": {`,
			`"JF_Ethernet0_V6|SWITCH_ICMP_1": {` + "\n" + `            "DST_IPV6": "fd00:0:0:1::/128",` + "\n" + `            "IP_PROTOCOL": "58",`,
		}, nil},
		"frr quarantine": {"frr", fabrictest.PureRT5, "s1-leaf0", "frr.conf", []string{
			"interface swp3\n description s1-gpu003 nic0 (unassigned)\n shutdown\nexit\n",
		}, nil},
		"frr underlay guard": {"frr", fabrictest.PureRT5, "s1-leaf0", "guard.nft", []string{
			"\t\ttype ifname\n\t\telements = {\n\t\t\t\"swp1\",\n",
			"type filter hook input priority filter - 10; policy accept;\n\t\tiifname @server_ports counter drop\n",
			"type filter hook forward priority filter - 10; policy accept;\n\t\toifname @server_ports counter drop\n",
		}, nil},
		"frr VRF guard": {"frr", fabrictest.PureRT5, "s1-leaf0", "guard-acme.nft", []string{
			"type filter hook input priority filter - 10; policy drop;\n\t\tiifname \"lo\" accept\n",
			"nd-neighbor-solicit",
			// Source-address validation, before conntrack and the group mark.
			"chain guardsrc {\n\t\ttype filter hook prerouting priority raw; policy accept;\n\t\tiifname \"swp1\" ip saddr != { 10.0.0.1 } counter drop\n\t\tiifname \"swp1\" ip6 saddr != { fe80::/10, fd00:0:0:1::1 } counter drop\n\t}\n",
		}, []string{"tcp"}},
		"frr switch group": {"frr", fabrictest.Segmented, "s1-leaf0", "gbp-globex.nft", []string{
			"\t\tmeta mark 65535 accept\n\t\tmeta mark . oifname != @allowed counter drop\n",
			"type filter hook output priority mangle; policy accept;\n\t\tmeta mark set 65535\n",
			"meta mark . ip daddr @switch_allowed4 accept",
		}, nil},
		"junos type-5 VRF": {"junos", fabrictest.PureRT5, "s1-leaf0", "junos.set", []string{
			"set routing-instances acme instance-type vrf",
			"set routing-instances acme interface et-0/0/0.0",
			"set routing-instances acme route-distinguisher 10.254.1.1:1",
			"set routing-instances acme vrf-target target:65000:10001",
			"set routing-instances acme protocols evpn ip-prefix-routes advertise direct-nexthop",
			"set routing-instances acme protocols evpn ip-prefix-routes encapsulation vxlan",
			"set routing-instances acme protocols evpn ip-prefix-routes vni 10001",
			"set interfaces et-0/0/0 unit 0 family inet address 10.0.0.0/31",
		}, []string{"set routing-instances acme interface et-0/0/2.0"}},
		"junos spine keeps next hops on loopback sessions": {"junos", fabrictest.PureRT5, "spine1", "junos.set", []string{
			"set protocols bgp group overlay multihop no-nexthop-change",
			"set protocols bgp group underlay family inet unicast extended-nexthop",
		}, nil},
		"nxos L3VNI": {"nxos", fabrictest.PureRT5, "s1-leaf0", "nxos.cfg", []string{
			"vlan 3001\n  name acme-l3vni\n  vn-segment 10001\n",
			"interface Vlan3001\n  description L3VNI 10001 of acme\n  no shutdown\n  mtu 9216\n  vrf member acme\n  ip forward\n",
			"vrf context acme\n  description tenant acme\n  vni 10001\n  rd 10.254.1.1:1\n  address-family ipv4 unicast\n    route-target import 65000:10001\n    route-target import 65000:10001 evpn\n",
			"  member vni 10001 associate-vrf\n",
		}, []string{"route-target both auto", "rd auto\n  address-family"}},
		"nxos security groups": {"nxos", fabrictest.Segmented, "s1-leaf1", "nxos.cfg", []string{
			"security-group 102 name globex-job-22\n  match connected-endpoints vrf globex ipv4 10.0.0.6/31\n",
			"security-group 110 name globex-storage\n  match external-subnets vrf globex ipv4 10.99.0.0/24\n",
			"  security enforce tag 999 default deny\n  security contract source 102 destination 110 policy JF-PERMIT-ALL bidir\n",
			"feature security-group",
		}, nil},
		"eos VRF": {"eos", fabrictest.PureRT5, "s1-leaf0", "eos.cfg", []string{
			"interface Ethernet1/1\n   description s1-gpu001 nic0 (tenant acme, job 11)\n   mtu 9214\n   no switchport\n   vrf acme\n   ip address 10.0.0.0/31\n",
			"   vxlan vrf acme vni 10001\n",
			"ip routing vrf acme\n",
			"   vrf acme\n      rd 10.254.1.1:1\n      route-target import evpn 65000:10001\n      route-target export evpn 65000:10001\n      redistribute connected\n",
		}, nil},
		"eos ACL fallback says so": {"eos", fabrictest.Segmented, "s1-leaf0", "eos.cfg", []string{
			"! Job segmentation: EOS here has no VXLAN group policy",
			"ip access-list JF-Ethernet2-1-IN\n   10 deny ip any 10.253.0.0/28\n   20 deny ip any 10.254.0.1/32\n",
			"   70 permit icmp 10.0.0.5/32 10.0.0.4/32\n   80 permit icmp 10.0.0.5/32 224.0.0.0/4\n   90 deny ip any 10.0.0.4/32\n   100 deny ip any 224.0.0.0/4\n   110 permit ip 10.0.0.5/32 10.0.0.4/31\n   120 deny ip any any\n",
			"   ip access-group JF-Ethernet2-1-IN in\n",
		}, nil},
		"sonic tables": {"sonic", fabrictest.PureRT5, "s1-leaf0", "config_db.json", []string{
			`"VXLAN_TUNNEL": {` + "\n" + `        "vtep": {` + "\n" + `            "src_ip": "10.254.1.1"`,
			`"source_vtep": "vtep"`,
			`"vtep|map_10001_Vlan3001": {` + "\n" + `            "vlan": "Vlan3001",` + "\n" + `            "vni": "10001"`,
			`"Vrf_acme": {` + "\n" + `            "vni": "10001"`,
			`"Ethernet0|10.0.0.0/31": {}`,
		}, nil},
		"sonic ACL fallback says so": {"sonic", fabrictest.Segmented, "s1-leaf0", "config_db.json", []string{
			`"policy_desc": "jobfabric server-port guard of Ethernet8, then job segmentation as an ACL (SONiC has no VXLAN group policy): group 101"`,
			`"DST_IP": "10.0.0.4/31"`,
		}, nil},
		"frr follows the lab": {"frr", fabrictest.PureRT5, "s1-leaf0", "frr.conf", []string{
			"vrf acme\n vni 10001\nexit-vrf\n",
			"router bgp 65001 vrf acme\n bgp router-id 10.254.1.1\n no bgp ebgp-requires-policy\n",
			"  advertise ipv4 unicast\n",
			"  route-target import 65000:10001\n  route-target export 65000:10001\n",
			" neighbor swp5 interface remote-as 65000\n",
			"  advertise-all-vni\n",
		}, nil},
		"frr spine keeps the EVPN next hop": {"frr", fabrictest.PureRT5, "spine1", "frr.conf", []string{
			"  neighbor swp1 attribute-unchanged next-hop\n",
		}, []string{"advertise-all-vni", "vrf acme"}},
		"frr lab nftables": {"frr", fabrictest.Segmented, "s1-leaf1", "gbp-globex.nft", []string{
			"elements = {\n\t\t\t\"swp2\" : 102,\n\t\t}",
			"elements = {\n\t\t\t102 . \"swp2\",\n\t\t\t110 . \"swp2\",\n\t\t}",
			`iifname != "br10002" meta mark set iifname map @port_group`,
			`meta mark . oifname != @allowed counter drop`,
			"chain gbpfw {",
		}, []string{"chain fwd"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			it := compile(t, tc.nos, tc.model)
			files, err := render.Render(it.Device(tc.device), "")
			if err != nil {
				t.Fatal(err)
			}
			var content string
			found := false
			for _, f := range files {
				if f.Name == tc.file {
					content, found = f.Content, true
				}
			}
			if !found {
				t.Fatalf("no file %s among %d files", tc.file, len(files))
			}
			for _, w := range tc.want {
				if !strings.Contains(content, w) {
					t.Errorf("%s lacks:\n%s", tc.file, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(content, n) {
					t.Errorf("%s has %q", tc.file, n)
				}
			}
		})
	}
}

func TestRenderRefusals(t *testing.T) {
	tests := map[string]struct {
		nos     string
		mutate  func(in *fabric.Input)
		wantMsg string
	}{
		"junos spine with EVPN on link sessions": {"junos", func(in *fabric.Input) {
			in.Options.Overlay = fabric.OverlayOnLinks
		}, "overlay \"loopback\""},
		"nxos without L3 VLAN": {"nxos", func(in *fabric.Input) {
			ids := in.IDs.Tenants["acme"]
			ids.L3VLAN = 0
			in.IDs.Tenants["acme"] = ids
		}, "no L3 VLAN"},
		"sonic without L3 VLAN": {"sonic", func(in *fabric.Input) {
			ids := in.IDs.Tenants["acme"]
			ids.L3VLAN = 0
			in.IDs.Tenants["acme"] = ids
		}, "no L3 VLAN"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in, err := fabrictest.Input(tc.nos, fabrictest.PureRT5)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(&in)
			it, err := fabric.Compile(in)
			if err != nil {
				t.Fatal(err)
			}
			_, err = render.RenderIntent(it)
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantMsg)
			}
		})
	}
	if _, err := render.Render(&fabric.Device{Name: "x"}, "ios"); err == nil {
		t.Error("an unknown NOS rendered")
	}
}

// TestRenderersFollowTheIntent: quarantine and the guard are rendered from
// the intent's fields, not re-derived, so a mutated intent renders as
// mutated (and the verifier, which reads the same fields, catches it).
func TestRenderersFollowTheIntent(t *testing.T) {
	tests := []struct {
		nos, file  string
		port       string // unassigned port, then the guarded one
		guarded    string
		quarantine string // what quarantining the unassigned port renders
		guard      string // what guarding the other port renders
		srcFile    string // the file of the guarded port's source-address validation
		source     string // what it renders
	}{
		{"junos", "junos.set", "et-0/0/2", "et-0/0/0", "set interfaces et-0/0/2 disable", "jf-et-0-0-0-0-in",
			"junos.set", "jf-et-0-0-0-0-in term source from source-address 10.0.0.1/32"},
		{"nxos", "nxos.cfg", "Ethernet1/3", "Ethernet1/1", "s1-gpu003 nic0 (unassigned)\n  no switchport\n  shutdown", "JF-Ethernet1-1-IN",
			"nxos.cfg", "permit ip 10.0.0.1/32 any"},
		{"eos", "eos.cfg", "Ethernet3/1", "Ethernet1/1", "s1-gpu003 nic0 (unassigned)\n   no switchport\n   shutdown", "JF-Ethernet1-1-IN",
			"eos.cfg", "permit ip 10.0.0.1/32 any"},
		{"sonic", "config_db.json", "Ethernet16", "Ethernet0", `"admin_status": "down",` + "\n" + `            "description": "s1-gpu003 nic0 (unassigned)"`, "JF_Ethernet0_V4",
			"config_db.json", `"SRC_IP": "10.0.0.1/32"`},
		{"frr", "frr.conf", "swp3", "swp1", "s1-gpu003 nic0 (unassigned)\n shutdown", "",
			"guard-acme.nft", `iifname "swp1" ip saddr != { 10.0.0.1 } counter drop`},
	}
	for _, tc := range tests {
		t.Run(tc.nos, func(t *testing.T) {
			file := func(it *fabric.Intent, name string) string {
				files, err := render.Render(it.Device("s1-leaf0"), "")
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					if f.Name == name {
						return f.Content
					}
				}
				t.Fatalf("no %s", name)
				return ""
			}
			content := func(it *fabric.Intent) string { return file(it, tc.file) }
			it := compile(t, tc.nos, fabrictest.PureRT5)
			if c := content(it); !strings.Contains(c, tc.quarantine) || tc.guard != "" && !strings.Contains(c, tc.guard) {
				t.Fatalf("the compiled intent renders without quarantine %q or guard %q", tc.quarantine, tc.guard)
			}
			if c := file(it, tc.srcFile); !strings.Contains(c, tc.source) {
				t.Fatalf("the compiled intent renders without source-address validation %q", tc.source)
			}
			d := it.Device("s1-leaf0")
			d.Port(tc.guarded).Sources = nil
			if c := file(it, tc.srcFile); strings.Contains(c, tc.source) {
				t.Errorf("a port without Sources still renders its source check %q", tc.source)
			}
			d.Port(tc.port).Quarantined = false
			d.Port(tc.guarded).Guarded = false
			c := content(it)
			if strings.Contains(c, tc.quarantine) {
				t.Errorf("an un-quarantined port still renders %q", tc.quarantine)
			}
			if tc.guard != "" && strings.Contains(c, tc.guard) {
				t.Errorf("an unguarded port still renders its guard %q", tc.guard)
			}
		})
	}
	// FRR's underlay guard lists guarded ports only.
	it := compile(t, "frr", fabrictest.PureRT5)
	it.Device("s1-leaf0").Port("swp3").Guarded = false
	files, err := render.Render(it.Device("s1-leaf0"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == "guard.nft" && strings.Contains(f.Content, `"swp3"`) {
			t.Errorf("an unguarded port is in the underlay guard:\n%s", f.Content)
		}
	}
}

// TestJunosNoInet6FilterWithoutIPv6: a filter would create family inet6
// (and a link-local address) on a unit that has no IPv6.
func TestJunosNoInet6FilterWithoutIPv6(t *testing.T) {
	it := compile(t, "junos", fabrictest.PureRT5)
	d := it.Device("s1-leaf0")
	d.Port("et-0/0/0").IPv6 = netip.Prefix{}
	files, err := render.Render(d, "")
	if err != nil {
		t.Fatal(err)
	}
	c := files[0].Content
	if strings.Contains(c, "jf-et-0-0-0-0-in6") || strings.Contains(c, "interfaces et-0/0/0 unit 0 family inet6") {
		t.Errorf("a port without IPv6 gets family inet6:\n%s", c)
	}
	if !strings.Contains(c, "set interfaces et-0/0/0 unit 0 family inet filter input jf-et-0-0-0-0-in\n") {
		t.Errorf("a port without IPv6 lost its IPv4 guard")
	}
}
