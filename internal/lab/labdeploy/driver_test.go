package labdeploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

const labLeafConf = `frr defaults datacenter
hostname leaf1
!
vrf acme
 vni 10001
exit-vrf
!
interface lo
 ip address 10.254.1.1/32
exit
!
interface swp1 vrf acme
 description s1-gpu001 nic0 (tenant acme, job 11)
 ip address 10.0.0.0/31
exit
!
interface swp2
 description s1-gpu002 nic0 (unassigned)
 shutdown
exit
!
interface swp5
 description to spine1 swp1
exit
!
router bgp 65001
 bgp router-id 10.254.1.1
exit
!
router bgp 65001 vrf acme
 bgp router-id 10.254.1.1
exit
`

func TestParseLabConf(t *testing.T) {
	lc, err := parseLabConf(labLeafConf)
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.VRFs) != 1 || lc.VRFs[0] != (labVRF{"acme", 10001}) || lc.Loopback.String() != "10.254.1.1" {
		t.Fatalf("parsed %+v", lc)
	}
	if lc.PortVRF["swp1"] != "acme" || lc.PortVRF["swp2"] != "" || lc.PortVRF["swp5"] != "" {
		t.Fatalf("ports %v", lc.PortVRF)
	}
	if !lc.Shutdown["swp2"] || lc.Shutdown["swp1"] || len(lc.Shutdown) != 1 {
		t.Fatalf("shutdown %v, want swp2 only", lc.Shutdown)
	}
	for name, conf := range map[string]string{
		"vrf without vni":  "vrf acme\nexit-vrf\ninterface lo\n ip address 10.0.0.1/32\nexit\n",
		"undeclared vrf":   "interface swp1 vrf ghost\nexit\n",
		"shared vni":       "vrf a\n vni 5\nexit-vrf\nvrf b\n vni 5\nexit-vrf\ninterface lo\n ip address 10.0.0.1/32\n",
		"no loopback":      "vrf a\n vni 5\nexit-vrf\n",
		"vni out of range": "vrf a\n vni 99999999\nexit-vrf\n",
	} {
		if _, err := parseLabConf(conf); err == nil {
			t.Errorf("%s: parsed, want an error", name)
		}
	}
	// Without a loopback stanza, the router id is the VTEP.
	if lc, err := parseLabConf("vrf a\n vni 5\nexit-vrf\nrouter bgp 1\n bgp router-id 10.9.9.9\nexit\n"); err != nil || lc.Loopback.String() != "10.9.9.9" {
		t.Fatalf("router-id fallback: %v %v", lc, err)
	}
}

func TestWithNetnsAndRunningVNIs(t *testing.T) {
	got := withNetns(labLeafConf)
	if !strings.HasPrefix(got, ZebraConf) || !strings.Contains(got, "vrf acme\n netns /run/netns/acme\n vni 10001\n") {
		t.Fatalf("withNetns:\n%s", got)
	}
	if strings.Count(got, "netns /run/netns/") != 1 {
		t.Fatalf("netns added outside vrf stanzas:\n%s", got)
	}
	run := "vrf acme\n vni 10001\n netns /run/netns/acme\nexit-vrf\n!\nvrf globex\n netns /run/netns/globex\nexit-vrf\n"
	if v := runningVNIs(run); v["acme"] != 10001 || v["globex"] != 0 || len(v) != 1 {
		t.Fatalf("runningVNIs %v", v)
	}
}

// fakeKernel stands in for ip, nsenter and vtysh: namespaces with their
// links, and a zebra that adopts every VRF and takes every VNI.
type fakeKernel struct {
	t       *testing.T
	netns   string // the NetnsDir
	links   map[string][]string
	vnis    map[string]string // vrf -> vni
	ifaces  map[string]string // running config stanza of a port -> its lines
	views   map[string]bool   // bound /run/netns/<vrf> in the daemons' view
	bgp     map[string]bool   // VRFs with a BGP instance (router bgp N vrf X)
	refused int               // `no router bgp` refused while the VRF had a VNI
	cmds    []string
	reloads int
}

func (k *fakeKernel) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	k.cmds = append(k.cmds, line)
	move := func(link, from, to string) {
		k.links[from] = slices.DeleteFunc(k.links[from], func(s string) bool { return s == link })
		k.links[to] = append(k.links[to], link)
	}
	last := args[len(args)-1]
	switch {
	case name == "nsenter" && slices.Contains(args, "mountpoint"):
		if !k.views[last] {
			return nil, fmt.Errorf("not a mountpoint")
		}
	case name == "nsenter" && slices.Contains(args, "mount"):
		k.views[last] = true
	case name == "nsenter" && slices.Contains(args, "rm"):
		delete(k.views, last)
	case name == "ip" && len(args) >= 3 && args[0] == "netns" && args[1] == "add":
		os.WriteFile(filepath.Join(k.netns, args[2]), nil, 0o644)
		k.links[args[2]] = []string{"lo"}
	case name == "ip" && len(args) >= 3 && args[0] == "netns" && args[1] == "del":
		os.Remove(filepath.Join(k.netns, args[2]))
	case name == "ip" && len(args) >= 5 && args[0] == "-n" && slices.Equal(args[2:5], []string{"-o", "link", "show"}):
		var b strings.Builder
		for i, l := range k.links[args[1]] {
			fmt.Fprintf(&b, "%d: %s: <UP> mtu 1500\n", i+1, l)
		}
		return []byte(b.String()), nil
	case name == "ip" && len(args) >= 5 && args[0] == "-n" && args[2] == "link" && args[3] == "add":
		k.links[args[1]] = append(k.links[args[1]], args[4])
	case name == "ip" && len(args) >= 7 && args[0] == "-n" && args[2] == "link" && args[3] == "set" && args[5] == "netns":
		move(args[4], args[1], args[6])
	case name == "ip" && slices.Contains(args, "-d"):
		return []byte("vx: <UP> protodown on"), nil
	case name == "vtysh" && slices.Contains(args, "show vrf"):
		var b strings.Builder
		for _, f := range mustEntries(k.netns) {
			if v, ok := strings.CutPrefix(f, "lab-leaf1.vrf-"); ok {
				fmt.Fprintf(&b, "vrf %s id 1 netns /run/netns/%s\n", v, v)
			}
		}
		return []byte(b.String()), nil
	case name == "vtysh" && slices.Contains(args, "show running-config"):
		var b strings.Builder
		for v, n := range k.vnis {
			fmt.Fprintf(&b, "vrf %s\n vni %s\nexit-vrf\n", v, n)
		}
		for h, lines := range k.ifaces {
			fmt.Fprintf(&b, "%s\n%sexit\n", h, lines)
		}
		for v := range k.bgp {
			fmt.Fprintf(&b, "router bgp 65001 vrf %s\n bgp router-id 10.254.1.1\nexit\n", v)
		}
		return []byte(b.String()), nil
	case name == "vtysh":
		var vrf string
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-c" && strings.HasPrefix(args[i+1], "vrf ") {
				vrf = strings.TrimPrefix(args[i+1], "vrf ")
			}
			if args[i] == "-c" && strings.HasPrefix(args[i+1], "vni ") {
				k.vnis[vrf] = strings.TrimPrefix(args[i+1], "vni ")
			}
			if args[i] == "-c" && strings.HasPrefix(args[i+1], "no vni ") {
				delete(k.vnis, vrf)
			}
			if v, ok := strings.CutPrefix(args[i+1], "no router bgp 65001 vrf "); args[i] == "-c" && ok {
				// bgpd refuses while the VRF still has its L3VNI.
				if k.vnis[v] != "" {
					k.refused++
				} else {
					delete(k.bgp, v)
				}
			}
			if args[i] == "-c" && strings.HasPrefix(args[i+1], "interface ") {
				delete(k.ifaces, args[i+1])
			}
		}
	case name == "ip" && len(args) > 4 && args[3] == "python3":
		if slices.Contains(args, "--reload") {
			if f, err := os.ReadFile(last); err == nil && strings.Contains(string(f), "router bgp 65001 vrf acme") {
				k.bgp["acme"] = true
			}
			k.reloads++
			k.ifaces = map[string]string{"interface swp1 vrf acme": " description x\n ip address 10.0.0.0/31\n"}
		}
	}
	return nil, nil
}

func mustEntries(dir string) []string {
	es, _ := os.ReadDir(dir)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func (k *fakeKernel) ran(prefix string) bool {
	for _, c := range k.cmds {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// TestLabDriverPlumbsFromConfig: the lab driver builds what the frr.conf
// declares (VRF namespace, gbp VXLAN with the loopback as source, bridge
// with the router MAC, the port in the VRF), applies it through the FRR
// driver with the VRF namespaces for nft, and undoes it when the config
// drops the VRF.
func TestLabDriverPlumbsFromConfig(t *testing.T) {
	dir := t.TempDir()
	netns := filepath.Join(dir, "netns")
	os.Mkdir(netns, 0o755)
	k := &fakeKernel{t: t, netns: netns, links: map[string][]string{"lab-leaf1": {"lo", "swp1", "swp2", "swp5"}}, vnis: map[string]string{}, ifaces: map[string]string{}, views: map[string]bool{}, bgp: map[string]bool{}}
	os.WriteFile(filepath.Join(netns, "lab-leaf1"), nil, 0o644)
	l := &Driver{NetnsDir: netns, Run: k.run, Targets: map[string]Target{"leaf1": {
		FRRTarget: deploy.FRRTarget{VtySocket: dir, ConfDir: dir, Netns: "lab-leaf1"},
		Lab:       &Switch{MountNS: "/proc/1/ns/mnt", VRFNetnsPrefix: "lab-leaf1.vrf-", Ports: []string{"swp1", "swp2"}},
	}}}
	ctx := context.Background()
	if err := l.Apply(ctx, dev("leaf1", "h1", "frr.conf", labLeafConf, "gbp-acme.nft", "table inet jobfabric_gbp {}",
		"guard.nft", "table inet jobfabric_guard {}", "guard-acme.nft", "table inet jobfabric_guard {}")); err != nil {
		t.Fatal(err)
	}
	// The underlay's guard is loaded before any port moves; the VRF's in
	// the VRF's namespace.
	guardAt, moveAt := slices.Index(k.cmds, "ip netns exec lab-leaf1 nft -f "+filepath.Join(dir, "guard.nft")), slices.Index(k.cmds, "ip -n lab-leaf1 link set swp1 netns lab-leaf1.vrf-acme")
	if guardAt < 0 || moveAt < 0 || guardAt > moveAt {
		t.Errorf("guard.nft loaded at %d, swp1 moved at %d: want the guard first; ran:\n  %s", guardAt, moveAt, strings.Join(k.cmds, "\n  "))
	}
	for _, want := range []string{
		"ip netns exec lab-leaf1.vrf-acme nft -f " + filepath.Join(dir, "guard-acme.nft"),
		// The quarantined port goes down, the port joining a VRF comes up.
		"ip -n lab-leaf1 link set swp2 down",
		"ip -n lab-leaf1.vrf-acme link set swp1 up",
		"ip netns add lab-leaf1.vrf-acme",
		"nsenter --net=" + netns + "/lab-leaf1.vrf-acme --mount=/proc/1/ns/mnt -- mount --bind /proc/self/ns/net /run/netns/acme",
		"ip -n lab-leaf1 link add vx10001 type vxlan id 10001 dstport 4789 local 10.254.1.1 nolearning gbp",
		"ip -n lab-leaf1 link set vx10001 netns lab-leaf1.vrf-acme",
		"ip -n lab-leaf1.vrf-acme link set br10001 address " + RouterMAC("leaf1", 10001).String(),
		"ip -n lab-leaf1.vrf-acme link set vx10001 master br10001",
		"ip -n lab-leaf1 link set swp1 netns lab-leaf1.vrf-acme",
		"ip netns exec lab-leaf1.vrf-acme nft -f " + filepath.Join(dir, "gbp-acme.nft"),
		"ip -n lab-leaf1.vrf-acme link set dev vx10001 protodown off",
	} {
		if !k.ran(want) {
			t.Errorf("did not run %q; ran:\n  %s", want, strings.Join(k.cmds, "\n  "))
		}
	}
	if k.ran("ip -n lab-leaf1 link set swp2 netns") || k.ran("ip -n lab-leaf1 link set swp5 netns") {
		t.Fatalf("moved a port its config keeps in the underlay:\n  %s", strings.Join(k.cmds, "\n  "))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "frr.conf")); !strings.Contains(string(b), " netns /run/netns/acme") || !strings.Contains(string(b), ZebraConf) {
		t.Fatalf("applied frr.conf lacks the lab's lines:\n%s", b)
	}

	// The VRF goes: the port leaves it (its stanza cleared first), the
	// namespace is deleted after the reload.
	k.cmds = nil
	noVRF := strings.NewReplacer("vrf acme\n vni 10001\nexit-vrf\n", "", "interface swp1 vrf acme", "interface swp1",
		"router bgp 65001 vrf acme\n bgp router-id 10.254.1.1\nexit\n", "").Replace(labLeafConf)
	if err := l.Apply(ctx, dev("leaf1", "h2", "frr.conf", noVRF)); err != nil {
		t.Fatal(err)
	}
	// Before the reload, the dropped VRF leaves BGP: its L3VNI first, then
	// its instance (which bgpd refuses while the VNI is bound).
	if k.bgp["acme"] || k.refused != 0 {
		t.Fatalf("vrf acme's BGP instance: left %v, refused %d times", k.bgp["acme"], k.refused)
	}
	for _, want := range []string{
		"vtysh --vty_socket " + dir + " -c configure terminal -c vrf acme -c no vni 10001 -c exit-vrf",
		"vtysh --vty_socket " + dir + " -c configure terminal -c no router bgp 65001 vrf acme",
		"vtysh --vty_socket " + dir + " -c configure terminal -c interface swp1 vrf acme -c no description -c no ip address 10.0.0.0/31 -c exit",
		"ip -n lab-leaf1.vrf-acme link set swp1 netns lab-leaf1",
		"nsenter --mount=/proc/1/ns/mnt -- rm -f /run/netns/acme",
		"ip netns del lab-leaf1.vrf-acme",
	} {
		if !k.ran(want) {
			t.Errorf("did not run %q; ran:\n  %s", want, strings.Join(k.cmds, "\n  "))
		}
	}
	if k.reloads != 2 {
		t.Fatalf("%d reloads, want 2", k.reloads)
	}

	// A port the lab does not have (a vlan-aware gateway) is refused.
	svi := labLeafConf + "interface vlan1000 vrf acme\n ip address 10.64.0.1/24\nexit\n"
	if err := l.Apply(ctx, dev("leaf1", "h3", "frr.conf", svi)); err == nil || !strings.Contains(err.Error(), "vlan1000") {
		t.Fatalf("vlan-aware gateway: %v, want a refusal naming vlan1000", err)
	}
}

// TestLoadTargets: the lab driver takes a lab's targets file and refuses
// one with no lab device (the frr driver's) or a lab device without its
// namespaces; the frr driver refuses a lab's file instead of applying it
// without the VRF plumbing.
func TestLoadTargets(t *testing.T) {
	dir := t.TempDir()
	write := func(v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, fmt.Sprintf("t%d.json", len(b)))
		os.WriteFile(p, b, 0o644)
		return p
	}
	plain := write(map[string]deploy.FRRTarget{"leaf1": {VtySocket: "/run/frr", ConfDir: "/etc/frr"}})
	lab := write(map[string]Target{"leaf1": {FRRTarget: deploy.FRRTarget{VtySocket: "/x", ConfDir: "/x", Netns: "n"}, Lab: &Switch{MountNS: "/proc/1/ns/mnt", VRFNetnsPrefix: "n.vrf-"}}})
	bad := write(map[string]Target{"leaf1": {FRRTarget: deploy.FRRTarget{VtySocket: "/x", ConfDir: "/x"}, Lab: &Switch{}}})
	if d, err := Load(lab); err != nil {
		t.Fatal(err)
	} else if d.Name() != "lab" || d.Targets["leaf1"].Lab == nil {
		t.Fatalf("lab targets: %s with %+v", d.Name(), d.Targets)
	}
	for _, c := range []struct{ name, path, want string }{
		{"no file", "", "--frr-targets"},
		{"no lab device", plain, "--fabric-driver frr"},
		{"lab device without namespaces", bad, "lab.mountNs"},
	} {
		if _, err := Load(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
	if _, err := deploy.New("frr", "", lab); err == nil || !strings.Contains(err.Error(), "--fabric-driver lab") {
		t.Errorf("frr driver on a lab's targets: %v, want a refusal pointing to --fabric-driver lab", err)
	}
	if d, err := deploy.New("frr", "", plain); err != nil {
		t.Fatal(err)
	} else if _, ok := d.(*deploy.FRR); !ok {
		t.Fatalf("plain targets: %T, want *deploy.FRR", d)
	}
}

func dev(name, hash string, files ...string) deploy.Device {
	d := deploy.Device{Name: name, NOS: "frr", Hash: hash}
	for i := 0; i+1 < len(files); i += 2 {
		d.Files = append(d.Files, render.File{Name: files[i], Content: files[i+1]})
	}
	return d
}
