package lint_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric/lint"
)

func one(nos, name, content string) lint.Config {
	return lint.Config{Device: "leaf1", NOS: nos, Files: []lint.File{{Name: name, Content: content}}}
}

// TestRules: each rule, on the smallest configuration that breaks it, and
// on the same configuration fixed.
func TestRules(t *testing.T) {
	tests := map[string]struct {
		nos, file string
		bad, good string
		rule      string
	}{
		"nxos feature before use": {"nxos", "nxos.cfg",
			"interface nve1\n  source-interface loopback0\nfeature nv overlay\n",
			"feature nv overlay\ninterface nve1\n  source-interface loopback0\n",
			"nxos/feature-order"},
		"nxos contract before its groups": {"nxos", "nxos.cfg",
			"feature security-group\nvrf context t\n  security contract source 1 destination 2 policy P bidir\nsecurity-group 1 name a\nsecurity-group 2 name b\nclass-map type security match-any C\n  match ipv4\npolicy-map type security P\n  class C\n",
			"feature security-group\nsecurity-group 1 name a\nsecurity-group 2 name b\nclass-map type security match-any C\n  match ipv4\npolicy-map type security P\n  class C\nvrf context t\n  security contract source 1 destination 2 policy P bidir\n",
			"nxos/define-before-use"},
		"nxos group names an undefined VRF": {"nxos", "nxos.cfg",
			"feature security-group\nsecurity-group 1 name a\n  match connected-endpoints vrf t ipv4 10.0.0.0/31\nvrf context t\n",
			"feature security-group\nvrf context t\nsecurity-group 1 name a\n  match connected-endpoints vrf t ipv4 10.0.0.0/31\n",
			"nxos/define-before-use"},
		"nxos match ipv6 unconfirmed": {"nxos", "nxos.cfg",
			"feature security-group\nclass-map type security match-any C\n  match ipv6\n",
			"feature security-group\nclass-map type security match-any C\n  match ip\n",
			"nxos/security-class-match"},
		"nxos reserved VLAN": {"nxos", "nxos.cfg",
			"vlan 3000\nvlan 3968\n",
			"vlan 3000\nvlan 3967\n",
			"nxos/reserved-vlan"},
		"nxos reserved VLAN in a list": {"nxos", "nxos.cfg",
			"vlan 10,4000-4001\n",
			"vlan 10,3900-3901\n",
			"nxos/reserved-vlan"},
		"nxos reserved range moved": {"nxos", "nxos.cfg",
			"system vlan 2000 reserve\nvlan 2100\n",
			"system vlan 2000 reserve\nvlan 3968\n",
			"nxos/reserved-vlan"},
		"nxos access group without its ACL": {"nxos", "nxos.cfg",
			"interface Ethernet1/1\n  ip access-group A in\nip access-list A\n  10 permit ip any any\n",
			"ip access-list A\n  10 permit ip any any\ninterface Ethernet1/1\n  ip access-group A in\n",
			"nxos/define-before-use"},
		"nxos L2 EVIs share a target": {"nxos", "nxos.cfg",
			"feature vn-segment-vlan-based\nnv overlay evpn\nvlan 10\n  vn-segment 100\nvlan 11\n  vn-segment 101\nevpn\n  vni 100 l2\n    route-target import 65000:7\n  vni 101 l2\n    route-target import 65000:7\n",
			"feature vn-segment-vlan-based\nnv overlay evpn\nvlan 10\n  vn-segment 100\nvlan 11\n  vn-segment 101\nevpn\n  vni 100 l2\n    route-target import 65000:100\n  vni 101 l2\n    route-target import 65000:101\n",
			"evpn/route-target-unique"},
		"eos unnumbered without next-hop originate": {"eos", "eos.cfg",
			"ip routing ipv6 interfaces\nipv6 unicast-routing\ninterface Ethernet1\n   ipv6 enable\nrouter bgp 1\n   neighbor U peer group\n   neighbor interface Ethernet1 peer-group U remote-as 2\n   address-family ipv4\n      neighbor U activate\n",
			"ip routing ipv6 interfaces\nipv6 unicast-routing\ninterface Ethernet1\n   ipv6 enable\nrouter bgp 1\n   neighbor U peer group\n   neighbor interface Ethernet1 peer-group U remote-as 2\n   address-family ipv4\n      neighbor U activate\n      neighbor U next-hop address-family ipv6 originate\n",
			"eos/required"},
		"eos interface neighbor in the IP neighbor's form": {"eos", "eos.cfg",
			"ip routing ipv6 interfaces\nipv6 unicast-routing\ninterface Ethernet1\n   ipv6 enable\nrouter bgp 1\n   neighbor U peer group\n   neighbor interface Ethernet1 peer group U remote-as 2\n   address-family ipv4\n      neighbor U activate\n      neighbor U next-hop address-family ipv6 originate\n",
			"ip routing ipv6 interfaces\nipv6 unicast-routing\ninterface Ethernet1\n   ipv6 enable\nrouter bgp 1\n   neighbor U peer group\n   neighbor interface Ethernet1 peer-group U remote-as 2\n   address-family ipv4\n      neighbor U activate\n      neighbor U next-hop address-family ipv6 originate\n",
			"eos/syntax"},
		"eos virtual IPv6 without ipv6 enable": {"eos", "eos.cfg",
			"vrf instance t\ninterface Vlan10\n   vrf t\n   ipv6 address virtual fd00::1/64\n",
			"vrf instance t\ninterface Vlan10\n   vrf t\n   ipv6 enable\n   ipv6 address virtual fd00::1/64\n",
			"eos/required"},
		"eos vrf before its instance": {"eos", "eos.cfg",
			"interface Ethernet1\n   vrf t\nvrf instance t\n",
			"vrf instance t\ninterface Ethernet1\n   vrf t\n",
			"eos/define-before-use"},
		"eos two VRFs one target": {"eos", "eos.cfg",
			"vrf instance a\nvrf instance b\nrouter bgp 1\n   vrf a\n      route-target import evpn 65000:1\n   vrf b\n      route-target import evpn 65000:1\n",
			"vrf instance a\nvrf instance b\nrouter bgp 1\n   vrf a\n      route-target import evpn 65000:1\n   vrf b\n      route-target import evpn 65000:2\n",
			"evpn/route-target-unique"},
		"junos mac-vrf without a VLAN": {"junos", "junos.set",
			"set routing-instances t-mac instance-type mac-vrf\nset routing-instances t-mac vrf-target target:65000:9\n",
			"set routing-instances t-mac instance-type mac-vrf\nset routing-instances t-mac vrf-target target:65000:9\nset routing-instances t-mac vlans v10 vlan-id 10\n",
			"junos/required"},
		"junos filter not defined": {"junos", "junos.set",
			"set interfaces et-0/0/1 unit 0 family inet filter input F\n",
			"set interfaces et-0/0/1 unit 0 family inet filter input F\nset firewall family inet filter F term rest then accept\n",
			"junos/define-before-use"},
		"junos export policy not defined": {"junos", "junos.set",
			"set protocols bgp group u export P\n",
			"set protocols bgp group u export P\nset policy-options policy-statement P then accept\n",
			"junos/define-before-use"},
		"junos GBP tag outside a micro-segmentation filter": {"junos", "junos.set",
			"set firewall family any filter G term t then gbp-tag 5\n",
			"set firewall family any filter G micro-segmentation\nset firewall family any filter G term t then gbp-tag 5\n",
			"junos/required"},
		// Cisco Nexus-as-Code, "Breakout Interface".
		"nxos sub-port before its breakout": {"nxos", "nxos.cfg",
			"interface Ethernet1/3/2\n  no switchport\ninterface breakout module 1 port 3 map 100g-4x\n",
			"interface breakout module 1 port 1,3-4 map 100g-4x\ninterface Ethernet1/3/2\n  no switchport\n",
			"nxos/breakout-before-use"},
		"nxos sub-port of another port's breakout": {"nxos", "nxos.cfg",
			"interface breakout module 1 port 2 map 100g-4x\ninterface Ethernet1/3/2\n  no switchport\n",
			"interface breakout module 1 port 3 map 200g-2x\ninterface Ethernet1/3/2\n  no switchport\n",
			"nxos/breakout-before-use"},
		// Juniper, "Configure Port Speed".
		"junos channel of an unchannelized port (evolved)": {"junos", "junos.set",
			"set interfaces et-0/0/4:2 mtu 9216\n",
			"set interfaces et-0/0/4 number-of-sub-ports 4\nset interfaces et-0/0/4 speed 100g\nset interfaces et-0/0/4:2 mtu 9216\n",
			"junos/breakout-before-use"},
		"junos channel of an unchannelized port (chassis)": {"junos", "junos.set",
			"set chassis fpc 0 pic 0 port 5 channel-speed 25g\nset interfaces et-0/0/4:2 mtu 9216\n",
			"set chassis fpc 0 pic 0 port 4 channel-speed 25g\nset interfaces et-0/0/4:2 mtu 9216\n",
			"junos/breakout-before-use"},
		// Arista EOS User Manual, "Layer 1 Profiles".
		"eos lane used before its speed": {"eos", "eos.cfg",
			"interface Ethernet1/3\n   no switchport\ninterface Ethernet1/3\n   speed 200g-2\n",
			"interface Ethernet1/1\n   speed 200g-2\ninterface Ethernet1/3\n   speed 200g-2\ninterface Ethernet1/3\n   no switchport\ninterface Ethernet1/1\n   no switchport\n",
			"eos/breakout-before-use"},
		// SONiC, "Dynamic Port Breakout" HLD.
		"sonic sub-ports without a breakout": {"sonic", "config_db.json",
			`{"PORT": {"Ethernet0": {"index": "1", "lanes": "0,1,2,3"}, "Ethernet4": {"index": "1", "lanes": "4,5,6,7"}}, "INTERFACE": {"Ethernet4": {}}}`,
			`{"BREAKOUT_CFG": {"Ethernet0": {"brkout_mode": "2x400G[200G]"}}, "PORT": {"Ethernet0": {"index": "1", "lanes": "0,1,2,3"}, "Ethernet4": {"index": "1", "lanes": "4,5,6,7"}}, "INTERFACE": {"Ethernet4": {}}}`,
			"sonic/breakout-before-use"},
		"sonic breakout mode and sub-ports disagree": {"sonic", "config_db.json",
			`{"BREAKOUT_CFG": {"Ethernet0": {"brkout_mode": "4x200G[100G]"}}, "PORT": {"Ethernet0": {"index": "1", "lanes": "0,1,2,3"}, "Ethernet4": {"index": "1", "lanes": "4,5,6,7"}}}`,
			`{"BREAKOUT_CFG": {"Ethernet0": {"brkout_mode": "2x400G[200G]"}}, "PORT": {"Ethernet0": {"index": "1", "lanes": "0,1,2,3"}, "Ethernet4": {"index": "1", "lanes": "4,5,6,7"}}}`,
			"sonic/breakout"},
		"frr two L2VNIs one target": {"frr", "frr.conf",
			"router bgp 1\n address-family l2vpn evpn\n  advertise-all-vni\n  vni 100\n   route-target import 65000:7\n  exit-vni\n  vni 101\n   route-target import 65000:7\n  exit-vni\n",
			"router bgp 1\n address-family l2vpn evpn\n  advertise-all-vni\n  vni 100\n   route-target import 65000:100\n  exit-vni\n  vni 101\n   route-target import 65000:101\n  exit-vni\n",
			"evpn/route-target-unique"},
		"frr two VRFs one target": {"frr", "frr.conf",
			"router bgp 1 vrf a\n address-family l2vpn evpn\n  route-target import 65000:1\nrouter bgp 1 vrf b\n address-family l2vpn evpn\n  route-target import 65000:1\n",
			"router bgp 1 vrf a\n address-family l2vpn evpn\n  route-target import 65000:1\nrouter bgp 1 vrf b\n address-family l2vpn evpn\n  route-target import 65000:2\n",
			"evpn/route-target-unique"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := lint.Check([]lint.Config{one(tc.nos, tc.file, tc.bad)}, lint.Hooks{})
			if !hasRule(fs, tc.rule) {
				t.Errorf("the bad configuration passes %s: %v", tc.rule, fs)
			}
			if fs := lint.Check([]lint.Config{one(tc.nos, tc.file, tc.good)}, lint.Hooks{}); len(fs) > 0 {
				t.Errorf("the good configuration has findings: %v", fs)
			}
		})
	}
}

func hasRule(fs []lint.Finding, rule string) bool {
	for _, f := range fs {
		if f.Rule == rule {
			return true
		}
	}
	return false
}

// TestRouteTargetAcrossDevices: one VRF on two leaves shares its target
// (that is the point), two VRFs on two leaves must not.
func TestRouteTargetAcrossDevices(t *testing.T) {
	cfg := func(dev, vrf, rt string) lint.Config {
		return lint.Config{Device: dev, NOS: "frr", Files: []lint.File{{Name: "frr.conf",
			Content: "router bgp 1 vrf " + vrf + "\n address-family l2vpn evpn\n  route-target import " + rt + "\n"}}}
	}
	if fs := lint.Check([]lint.Config{cfg("l1", "a", "65000:1"), cfg("l2", "a", "65000:1")}, lint.Hooks{}); len(fs) > 0 {
		t.Errorf("one VRF on two leaves: %v", fs)
	}
	fs := lint.Check([]lint.Config{cfg("l1", "a", "65000:1"), cfg("l2", "b", "65000:1")}, lint.Hooks{})
	if len(fs) != 1 || !strings.Contains(fs[0].Msg, "vrf a (on l1 frr.conf) and vrf b (on l2 frr.conf)") {
		t.Errorf("two VRFs on two leaves: %v", fs)
	}
}

// TestHooks: the platform rules are asked about every interface and
// feature the configuration uses, and what they refuse is a finding.
func TestHooks(t *testing.T) {
	c := one("junos", "junos.set", "set interfaces xe-0/0/1 mtu 9216\nset interfaces et-0/0/2 mtu 9216\nset forwarding-options vxlan-routing overlay-ecmp\n")
	var asked []string
	h := lint.Hooks{
		InterfaceName: func(dev, name string) error {
			asked = append(asked, name)
			if strings.HasPrefix(name, "xe-") {
				return errors.New("a QFX5220 has no 10G ports")
			}
			return nil
		},
		Feature: func(dev, f string) error {
			asked = append(asked, f)
			return errors.New("needs Junos 18.4R1 on this platform")
		},
	}
	fs := lint.Device(c, h)
	if strings.Join(asked, ",") != "et-0/0/2,xe-0/0/1,"+lint.FeatureJunosOverlayECMP {
		t.Errorf("asked %v", asked)
	}
	if len(fs) != 2 || fs[0].Rule != "platform/interface-name" || fs[1].Rule != "platform/min-version" {
		t.Errorf("findings %v", fs)
	}
	if fs := lint.Device(c, lint.Hooks{}); len(fs) != 0 {
		t.Errorf("without hooks: %v", fs)
	}
}
