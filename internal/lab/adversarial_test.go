package lab_test

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/lab"
)

// attacker is an endpoint whose server's root user turned hostile.
type attacker struct {
	ep   lab.Endpoint
	role string // "unassigned", "tenant-a/job-100", ...
}

// findings is what got through from one attacker; empty is the goal.
type findings struct {
	linkLocal []string       // link-local echo replies from the leaf
	tcp       []string       // completed TCP handshakes to port 179
	underlay  []string       // echo replies from switch loopbacks
	vxlan     []lab.Delivery // crafted VXLAN-GBP echoes that reached a victim
	frames    int            // crafted VXLAN datagrams sent
	probes    int            // TCP and echo probes tried
}

func (f *findings) empty() bool {
	return len(f.linkLocal)+len(f.tcp)+len(f.underlay)+len(f.vxlan) == 0
}

func (f *findings) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d link-local replies %v; %d TCP/179 connects %v; %d underlay echo replies %v; %d of %d crafted VXLAN-GBP echoes delivered",
		len(f.linkLocal), f.linkLocal, len(f.tcp), f.tcp, len(f.underlay), f.underlay, len(f.vxlan), f.frames)
	byKey := map[string]int{}
	for _, d := range f.vxlan {
		byKey[fmt.Sprintf("VNI %d group %d -> %s", d.Probe.VNI, d.Probe.Group, d.Victim)]++
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range byKey {
			if !yield(k) {
				return
			}
		}
	})
	if len(keys) > 12 {
		keys = append(keys[:12], fmt.Sprintf("... %d more", len(keys)-12))
	}
	if len(keys) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(keys, "; "))
	}
	return b.String()
}

// fabricIDs are the L3VNIs and policy groups the deployed configs use:
// what an attacker would try (it can guess them; the test reads them).
func (e *e2e) fabricIDs() (vnis []uint32, groups []uint16, vteps []netip.Addr) {
	e.t.Helper()
	var cfgs []render.DeviceFiles
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/configs", nil, &cfgs); err != nil {
		e.t.Fatal(err)
	}
	vniRe := regexp.MustCompile(`(?m)^vrf \S+\n vni (\d+)`)
	groupRe := regexp.MustCompile(`(?m)^# group (\d+):`)
	seenV, seenG := map[uint32]bool{}, map[uint16]bool{0: true}
	groups = []uint16{0}
	for _, d := range cfgs {
		for _, f := range d.Files {
			for _, m := range vniRe.FindAllStringSubmatch(f.Content, -1) {
				n, _ := strconv.ParseUint(m[1], 10, 32)
				if !seenV[uint32(n)] {
					seenV[uint32(n)] = true
					vnis = append(vnis, uint32(n))
				}
			}
			for _, m := range groupRe.FindAllStringSubmatch(f.Content, -1) {
				n, _ := strconv.ParseUint(m[1], 10, 16)
				if !seenG[uint16(n)] {
					seenG[uint16(n)] = true
					groups = append(groups, uint16(n))
				}
			}
		}
	}
	for _, d := range e.l.Devices {
		if d.Role == "leaf" {
			vteps = append(vteps, netip.MustParseAddr(d.Loopback))
		}
	}
	slices.Sort(vnis)
	slices.Sort(groups)
	return vnis, groups, vteps
}

// arm does what a root user on the attacker's server may: static
// neighbour entries for its gateways pointing at the leaf port's MAC
// (an unassigned port answers no ARP), so its default routes lead into
// the leaf whatever the leaf thinks of the port.
func (e *e2e) arm(a attacker, port *lab.PortInfo) {
	e.t.Helper()
	for _, c := range [][]string{
		{"ip", "-n", a.ep.Netns, "neigh", "replace", a.ep.Gateway4, "lladdr", port.MAC.String(), "dev", a.ep.Iface, "nud", "permanent"},
		{"ip", "-n", a.ep.Netns, "-6", "neigh", "replace", a.ep.Gateway6, "lladdr", port.MAC.String(), "dev", a.ep.Iface, "nud", "permanent"},
	} {
		if out, err := exec.CommandContext(e.ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			e.t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
}

// attack runs every probe from every attacker at once: link-local echo
// to the leaf (ff02::1, ff02::2, the port's fe80 address), TCP to port
// 179 of every switch address the attacker can name (loopbacks, every
// leaf-side cable address, the port's link-local address), echo to every
// switch loopback, and a crafted VXLAN-GBP echo request with every L3VNI
// and every group, to every VTEP (and the attacker's own gateway), for
// every victim endpoint; victims count what arrives at their NICs.
func (e *e2e) attack(attackers []attacker) map[string]*findings {
	e.t.Helper()
	vnis, groups, vteps := e.fabricIDs()
	var victims []lab.Endpoint
	for _, ep := range e.l.Endpoints {
		if !slices.ContainsFunc(attackers, func(a attacker) bool { return a.ep.Name() == ep.Name() }) {
			victims = append(victims, ep)
		}
	}
	ln, err := lab.Listen(victims)
	if err != nil {
		e.t.Fatal(err)
	}
	defer ln.Close()

	var loopbacks []netip.Addr
	for _, d := range e.l.Devices {
		loopbacks = append(loopbacks, netip.MustParseAddr(d.Loopback))
	}
	var gateways []netip.Addr
	for _, ep := range e.l.Endpoints {
		for _, g := range []string{ep.Gateway4, ep.Gateway6} {
			if a, err := netip.ParseAddr(g); err == nil {
				gateways = append(gateways, a)
			}
		}
	}
	out := map[string]*findings{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, a := range attackers {
		f := &findings{}
		out[a.ep.Name()] = f
		port, err := e.l.LeafPort(e.ctx, &a.ep)
		if err != nil {
			e.t.Fatal(err)
		}
		e.arm(a, port)
		add := func(list *[]string, s string) {
			mu.Lock()
			*list = append(*list, s)
			mu.Unlock()
		}
		count := func() {
			mu.Lock()
			f.probes++
			mu.Unlock()
		}

		// (a) IPv6 link-local to the leaf.
		for _, dst := range []string{"ff02::1", "ff02::2", port.LinkLocal.String()} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				count()
				from, err := lab.EchoRepliers(e.ctx, a.ep.Netns, dst+"%"+a.ep.Iface, 2, 500*time.Millisecond)
				if err != nil {
					e.t.Error(err)
				}
				for _, x := range from {
					add(&f.linkLocal, dst+" answered by "+x)
				}
			}()
		}
		// (b) TCP 179 on every switch address it can name.
		type target struct {
			addr netip.Addr
			zone string
		}
		var targets []target
		for _, x := range append(slices.Clone(loopbacks), gateways...) {
			targets = append(targets, target{x, ""})
		}
		targets = append(targets, target{port.LinkLocal, a.ep.Iface})
		for _, x := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				count()
				ok, err := lab.TCPConnect(e.ctx, a.ep.Netns, netip.AddrPortFrom(x.addr, 179), x.zone, 400*time.Millisecond)
				if err != nil {
					e.t.Error(err)
				}
				if ok {
					s := x.addr.String()
					if x.zone != "" {
						s += "%" + x.zone
					}
					add(&f.tcp, s)
				}
			}()
		}
		// (d) echo to the underlay's loopbacks.
		for _, x := range loopbacks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				count()
				from, err := lab.EchoRepliers(e.ctx, a.ep.Netns, x.String(), 1, 400*time.Millisecond)
				if err != nil {
					e.t.Error(err)
				}
				for _, r := range from {
					add(&f.underlay, x.String()+" answered by "+r)
				}
			}()
		}
		// (c) crafted VXLAN-GBP frames.
		src := netip.MustParseAddr(a.ep.Addr4())
		srcMAC := net.HardwareAddr{0x02, 0x4a, 0x46, 0, 0, byte(i)}
		to := append(slices.Clone(vteps), netip.MustParseAddr(a.ep.Gateway4))
		var frames []lab.Frame
		for _, vtep := range to {
			leaf := ""
			for _, d := range e.l.Devices {
				if d.Loopback == vtep.String() {
					leaf = d.Name
				}
			}
			if leaf == "" {
				leaf = a.ep.Leaf // its own gateway: its own leaf's router MAC
			}
			for _, vni := range vnis {
				for _, g := range groups {
					for _, v := range victims {
						p := lab.Probe{Attacker: uint16(i), VTEP: vtep, VNI: vni, Group: g, Dst: netip.MustParseAddr(v.Addr4())}
						frames = append(frames, lab.Frame{Probe: p, Payload: lab.VXLANGBPFrame(p, deploy.RouterMAC(leaf, vni), srcMAC, src)})
					}
				}
			}
		}
		f.frames = len(frames)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := lab.SendVXLAN(a.ep.Netns, frames); err != nil {
				e.t.Error(err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the last datagrams cross the fabric
	for _, d := range ln.Deliveries() {
		a := attackers[d.Probe.Attacker]
		out[a.ep.Name()].vxlan = append(out[a.ep.Name()].vxlan, d)
	}
	for _, f := range out {
		sort.Strings(f.linkLocal)
		sort.Strings(f.tcp)
		sort.Strings(f.underlay)
	}
	e.t.Logf("attack: %d L3VNIs %v, %d groups %v, %d VTEPs, %d victims", len(vnis), vnis, len(groups), groups, len(vteps), len(victims))
	return out
}

// report logs every attacker's findings and says whether all were empty.
func (e *e2e) report(step string, attackers []attacker, got map[string]*findings) bool {
	e.t.Helper()
	clean := true
	for _, a := range attackers {
		f := got[a.ep.Name()]
		e.t.Logf("%s: from %s (%s, port %s/%s): %s", step, a.ep.Name(), a.role, a.ep.Leaf, a.ep.Port, f)
		clean = clean && f.empty()
	}
	return clean
}

// TestLabAdversarial attacks the lab from the servers (issue 11): a root
// user on a server whose NIC belongs to no tenant, and one on a tenant's
// server, try the leaf's link-local addresses, BGP on every switch
// address they can name, and crafted VXLAN-GBP packets with every L3VNI
// and every group to every VTEP. Nothing may get through.
func TestLabAdversarial(t *testing.T) {
	e, _ := startE2E(t, 4*time.Minute)
	e.createTenants()
	j100 := e.place(domain.JobSpec{Name: "job-100", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	j101 := e.place(domain.JobSpec{Name: "job-101", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	j200 := e.place(domain.JobSpec{Name: "job-200", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 1}, "s1-gpu003", "s2-gpu003")
	e.waitReady(j100, j101, j200)

	ep := func(name string) lab.Endpoint {
		x, err := e.l.Endpoint(name)
		if err != nil {
			t.Fatal(err)
		}
		return *x
	}
	attackers := []attacker{
		{ep("s1-gpu004/nic0"), "unassigned"},
		{ep("s1-gpu003/nic1"), "unassigned NIC of tenant-b's server"},
		{ep("s1-gpu001/nic0"), "tenant-a/job-100"},
		{ep("s2-gpu003/nic0"), "tenant-b/job-200"},
	}
	if !e.report("attack", attackers, e.attack(attackers)) {
		t.Errorf("attack: something got through from a server port (see above)")
	}
}
