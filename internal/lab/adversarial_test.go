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

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/lab"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
)

// attacker is an endpoint whose server's root user turned hostile.
type attacker struct {
	ep   lab.Endpoint
	role string // "unassigned", "tenant-a/job-100", ...
	// tenant: the NIC is a tenant's. Its leaf port is in the tenant's
	// VRF, where the switch's addresses on the link (the gateway, and
	// the link-local address next to it) answer echo as every switch
	// address a job may reach does; everything else counts.
	tenant bool
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

func (f *findings) empty(tenant bool) bool {
	n := len(f.tcp) + len(f.underlay) + len(f.vxlan)
	if !tenant {
		n += len(f.linkLocal)
	}
	return n == 0
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
// leaf-side cable address, the port's link-local address, the link-local
// address of every fabric link of every tier, which the attacker points
// at its leaf port), echo to every switch loopback and fabric link
// address, and a crafted VXLAN-GBP echo request with every L3VNI
// and every group, to every VTEP (and the attacker's own gateway), for
// every victim endpoint; victims count what arrives at their NICs.
func (e *e2e) attack(attackers []attacker) map[string]*findings {
	e.t.Helper()
	vnis, groups, vteps := e.fabricIDs()
	ln, victims := e.listenVictims(attackers)
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
	// The fabric links' link-local addresses (the unnumbered BGP
	// sessions of every tier): a server can name them only on its own
	// link, so it points them at the leaf port's MAC.
	var linkLocals []netip.Addr
	lls := e.linkLocals()
	for _, d := range e.l.Devices {
		linkLocals = append(linkLocals, lls[d.Name]...)
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
		var neigh strings.Builder
		for _, x := range linkLocals {
			fmt.Fprintf(&neigh, "neigh replace %s lladdr %s dev %s nud permanent\n", x, port.MAC, a.ep.Iface)
			targets = append(targets, target{x, a.ep.Iface})
		}
		e.shIn(neigh.String(), "ip", "-n", a.ep.Netns, "-batch", "-")
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
		// (d) echo to the underlay's loopbacks and link addresses.
		var echoes []string
		for _, x := range loopbacks {
			echoes = append(echoes, x.String())
		}
		for _, x := range linkLocals {
			echoes = append(echoes, x.String()+"%"+a.ep.Iface)
		}
		for _, x := range echoes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				count()
				from, err := lab.EchoRepliers(e.ctx, a.ep.Netns, x, 1, 400*time.Millisecond)
				if err != nil {
					e.t.Error(err)
				}
				for _, r := range from {
					add(&f.underlay, x+" answered by "+r)
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
						frames = append(frames, lab.Frame{Probe: p, Payload: lab.VXLANGBPFrame(p, labdeploy.RouterMAC(leaf, vni), srcMAC, src)})
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
		clean = clean && f.empty(a.tenant)
	}
	return clean
}

// TestLabAdversarial attacks the lab from the servers (issue 11): a root
// user on a server whose NIC belongs to no tenant, and one on a tenant's
// server, try the leaf's link-local addresses, BGP on every switch
// address they can name, and crafted VXLAN-GBP packets with every L3VNI
// and every group to every VTEP, and raw packets (rawAttack: spoofed
// BGP OPENs, low TTLs, spoofed-source VXLAN-GBP and echoes from other
// servers' addresses). Nothing may get through.
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
		{ep("s1-gpu004/nic0"), "unassigned", false},
		{ep("s1-gpu003/nic1"), "unassigned NIC of tenant-b's server", false},
		{ep("s1-gpu001/nic0"), "tenant-a/job-100", true},
		{ep("s2-gpu003/nic0"), "tenant-b/job-200", true},
	}
	// Each tenant attacker's peer: its job's endpoint behind another leaf.
	peers := map[string]lab.Endpoint{"s1-gpu001/nic0": ep("s2-gpu001/nic0"), "s2-gpu003/nic0": ep("s1-gpu003/nic0")}
	clean := e.report("attack", attackers, e.attack(attackers))
	if !e.rawReport("attack", attackers, e.rawAttack(attackers, peers)) || !clean {
		t.Errorf("attack: something got through from a server port (see above)")
	}

	// The verifier, which models server ports as attackers on the
	// intent, agrees.
	var v api.FabricVerify
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/verify", nil, &v); err != nil || !v.OK {
		t.Errorf("fabric verify (%v):\n%s", err, v.Text)
	}

	// Mutations: the detector must see a port whose protection is gone.
	ff := e.facts()
	e.guardMutations(attackers[:1], func(f *findings, r *rawFindings) map[string]bool {
		return map[string]bool{
			"the kernel sockets' probes (attack)": !f.empty(false),
			"a spoofed BGP OPEN reaching a spine": r.reached(ff, "spoofed-bgp", "spine"),
			"a TTL running out at a spine":        r.expired(ff, "ttl", "spine"),
			"a spoofed VXLAN-GBP echo delivered":  len(r.delivered) > 0,
		}
	})

	// Source-address validation: tenant-a/job-100's spoofed-source echoes
	// die at its leaf's port. Without the check, those to the victims it
	// may reach anyway arrive (the detector sees them), none elsewhere
	// (the group policy classifies by port); restored, none arrive.
	ta := attackers[2:3]
	restore := e.dropSourceCheck(ta[0].ep)
	r := e.rawAttack(ta, nil)[ta[0].ep.Name()]
	e.rawReport("source check of "+ta[0].ep.Leaf+"/"+ta[0].ep.Port+" removed", ta, map[string]*rawFindings{ta[0].ep.Name(): r})
	if r.allowed == 0 {
		t.Errorf("without the source check on %s/%s, no spoofed-source echo arrives: the detector is blind", ta[0].ep.Leaf, ta[0].ep.Port)
	}
	if n := len(r.spoofedSrc) - r.allowed; n > 0 {
		t.Errorf("without the source check, %d spoofed-source echoes reach victims the attacker may not reach", n)
	}
	restore()
	if !e.rawReport("source check restored", ta, e.rawAttack(ta, nil)) {
		t.Errorf("source check restored: something got through")
	}

	// ICMP errors inside a segmented job, across leaves.
	src, _ := e.l.Endpoint("s1-gpu001/nic1") // job-100, s1-leaf1
	dst, _ := e.l.Endpoint("s2-gpu001/nic0") // job-100, s2-leaf0
	other, _ := e.l.Endpoint("s2-gpu001/nic1")
	for _, f := range e.icmpErrors(*src, *dst, *other) {
		t.Error(f)
	}

	// A GPU moves between tenants: never reachable by both.
	overlap, _, beforeReady, seq := e.move()
	if overlap >= 0 {
		t.Errorf("the moved endpoint answered both tenants for %s", overlap)
	}
	if beforeReady < 0 {
		t.Errorf("the old tenant reached the moved endpoint %s after the new tenant's job was Ready", -beforeReady)
	}
	// The port left tenant B in a revision of its own, before tenant A's.
	// Usually that revision held job-102 back (the fabric was busy while
	// B's job ended and A's was placed, so one compile saw both); on a
	// loaded machine the compile may come between the two, and the
	// removal needs no hold. Either way, out first: the hold itself is
	// tested in internal/state and internal/server.
	out := slices.IndexFunc(seq, func(x string) bool { return strings.Contains(x, ":-") })
	if len(seq) < 2 || out < 0 || slices.IndexFunc(seq, func(x string) bool { return strings.Contains(x, ":tenant-a") }) < out {
		t.Errorf("the moved port's VRF by revision is %v: want out of tenant-b's VRF first, then in tenant-a's", seq)
	} else if !strings.Contains(seq[out], "(a job held)") {
		t.Logf("the port left tenant-b's VRF in a revision compiled before job-102 was placed (no hold needed): %v", seq)
	}
}

// pingOutput runs ping in an endpoint's namespace and returns its output.
func (e *e2e) pingOutput(ep lab.Endpoint, args ...string) string {
	out, _ := exec.CommandContext(e.ctx, "ip", append([]string{"netns", "exec", ep.Netns, "ping", "-n"}, args...)...).CombinedOutput()
	return string(out)
}

// icmpErrors checks that a segmented job gets the ICMP errors of the far
// leaf (TTL exceeded; fragmentation needed, so that path-MTU discovery
// works) and that a switch address answers every endpoint of the job
// alike, whichever leaf the endpoint is on. src, dst and other are
// endpoints of one job, src and dst on different leaves. It returns the
// failures.
func (e *e2e) icmpErrors(src, dst, other lab.Endpoint) []string {
	e.t.Helper()
	var fails []string
	// TTL 2: the near leaf forwards (TTL 1), the far leaf cannot.
	out := e.pingOutput(src, "-c", "2", "-i", "0.3", "-W", "1", "-t", "2", dst.Addr4())
	if !strings.Contains(out, "Time to live exceeded") {
		fails = append(fails, fmt.Sprintf("ping -t 2 %s from %s (%s -> %s): no \"time to live exceeded\" from the far leaf:\n%s", dst.Addr4(), src.Name(), src.Leaf, dst.Leaf, out))
	} else {
		e.t.Logf("ping -t 2 %s from %s: %s", dst.Addr4(), src.Name(), firstLineWith(out, "exceeded"))
	}
	// A smaller MTU on the far leaf's port: a DF packet that fits the
	// tunnel but not that port must come back as "fragmentation needed".
	port, err := e.l.LeafPort(e.ctx, &dst)
	if err != nil {
		e.t.Fatal(err)
	}
	run := func(args ...string) {
		if out, err := exec.CommandContext(e.ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			e.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "-n", port.Netns, "link", "set", dst.Port, "mtu", "1300")
	out = e.pingOutput(src, "-c", "3", "-i", "0.3", "-W", "1", "-M", "do", "-s", "1400", dst.Addr4())
	rg, _ := exec.CommandContext(e.ctx, "ip", "-n", src.Netns, "route", "get", dst.Addr4()).CombinedOutput()
	run("ip", "-n", port.Netns, "link", "set", dst.Port, "mtu", "1500")
	run("ip", "-n", src.Netns, "route", "flush", "cache")
	if !strings.Contains(string(rg), "mtu 1300") {
		fails = append(fails, fmt.Sprintf("DF ping of 1428 bytes %s -> %s with MTU 1300 on %s/%s: the sender did not learn the path MTU (ip route get: %s):\n%s",
			src.Name(), dst.Name(), dst.Leaf, dst.Port, strings.TrimSpace(string(rg)), out))
	} else {
		e.t.Logf("PMTU discovery %s -> %s through %s/%s at MTU 1300: %s; ip route get: %s", src.Name(), dst.Name(), dst.Leaf, dst.Port,
			firstLineWith(out, "mtu"), strings.Join(strings.Fields(string(rg)), " "))
	}
	// The far port's gateway answers the job's endpoints alike.
	gw := dst.Gateway4
	res := map[string]bool{}
	for _, x := range []lab.Endpoint{dst, src, other} {
		ok, _ := e.l.Ping(e.ctx, &x, gw, 500*time.Millisecond)
		res[fmt.Sprintf("%s (%s)", x.Name(), x.Leaf)] = ok
	}
	first := res[fmt.Sprintf("%s (%s)", dst.Name(), dst.Leaf)]
	for k, v := range res {
		if v != first {
			fails = append(fails, fmt.Sprintf("the switch address %s (%s/%s) answers inconsistently: %v", gw, dst.Leaf, dst.Port, res))
			break
		}
		_ = k
	}
	e.t.Logf("ping %s (the gateway of %s on %s) from the job's endpoints: %v", gw, dst.Name(), dst.Leaf, res)
	return fails
}

func firstLineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), strings.ToLower(sub)) {
			return strings.TrimSpace(l)
		}
	}
	return "(none)"
}

// portVRFs lists, for every revision after rev, the VRF of a leaf port in
// that revision ("-" for none), and the revision numbers.
func (e *e2e) portVRFs(after uint64, leaf, port string) (revs []uint64, vrfs []string) {
	e.t.Helper()
	var infos []struct {
		Rev     uint64   `json:"rev"`
		Changed []string `json:"changed"`
		Cause   string   `json:"cause"`
	}
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/revisions", nil, &infos); err != nil {
		e.t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^interface ` + regexp.QuoteMeta(port) + `(?: vrf (\S+))?$`)
	for _, r := range infos {
		if r.Rev <= after || !slices.Contains(r.Changed, leaf) {
			continue
		}
		var cfgs []render.DeviceFiles
		if err := e.admin.Do(e.ctx, "GET", fmt.Sprintf("/v1/fabric/configs?rev=%d&device=%s", r.Rev, leaf), nil, &cfgs); err != nil {
			e.t.Fatal(err)
		}
		v := "?"
		for _, f := range cfgs[0].Files {
			if f.Name == "frr.conf" {
				if m := re.FindStringSubmatch(f.Content); m != nil {
					v = m[1]
					if v == "" {
						v = "-"
					}
				}
			}
		}
		if strings.Contains(r.Cause, "held") {
			v += " (a job held)"
		}
		revs, vrfs = append(revs, r.Rev), append(vrfs, v)
	}
	return revs, vrfs
}

// move measures a reclaim: tenant B's job on one GPU of a server ends and
// tenant A's job, waiting for that server, is placed on it at once. An
// endpoint of B that stays (the old tenant's peer) and one of A's new job
// (the new tenant's peer) ping the moved endpoint every 20 ms all along.
func (e *e2e) move() (overlap, afterPlaced, beforeReady time.Duration, seq []string) {
	e.t.Helper()
	moved, _ := e.l.Endpoint("s1-gpu004/nic0")
	oldPeer, _ := e.l.Endpoint("s2-gpu003/nic0") // tenant B, job-200, stays
	newPeer, _ := e.l.Endpoint("s1-gpu004/nic1") // tenant A's new job, other leaf
	j202 := e.place(domain.JobSpec{Name: "job-202", Tenant: "tenant-b", Workspace: "train", GPUs: 1}, "s1-gpu004")
	e.waitReady(j202)
	rev0 := e.deployed(nil)
	var cordoned []string
	for _, ep := range e.l.Endpoints {
		if ep.Server != "s1-gpu004" && !slices.Contains(cordoned, ep.Server) {
			e.setCordon(ep.Server, true)
			cordoned = append(cordoned, ep.Server)
		}
	}
	defer func() {
		for _, s := range cordoned {
			e.setCordon(s, false)
		}
	}()
	j102, err := e.admin.SubmitJob(e.ctx, domain.JobSpec{Name: "job-102", Tenant: "tenant-a", Workspace: "train", GPUs: 2, GPUsPerNode: 2})
	if err != nil {
		e.t.Fatal(err)
	}
	oldRun, err := e.l.StartPing(e.ctx, oldPeer, moved.Addr4(), 20*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	newRun, err := e.l.StartPing(e.ctx, newPeer, moved.Addr4(), 20*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(oldRun.Replies()) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("tenant B's %s does not reach %s before the move", oldPeer.Name(), moved.Name())
		}
	}
	// The fabric is busy deploying another change (a tenant's VRF on
	// every leaf) when B's job ends and A's is placed on its GPU: the
	// next compile sees the GPU change hands at once.
	if _, err := e.admin.CreateTenant(e.ctx, api.TenantCreateRequest{Name: "tenant-c", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := e.admin.CancelJob(e.ctx, j202.ID); err != nil {
		e.t.Fatal(err)
	}
	var ready *domain.Job
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cur, err := e.admin.Job(e.ctx, j102.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		if cur.State == domain.JobReady {
			ready = cur
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job-102 is %s 60s after job-202 ended: %+v", cur.State, cur.Reason)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); len(newRun.Replies()) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	olds, news := oldRun.Stop(), newRun.Stop()
	if len(news) == 0 {
		e.t.Fatalf("tenant A's %s never reached %s after the move", newPeer.Name(), moved.Name())
	}
	lastOld, firstNew := olds[len(olds)-1], news[0]
	placed := *ready.PlacedAt
	readyAt := ready.UpdatedAt
	overlap = lastOld.Sub(firstNew)
	afterPlaced = lastOld.Sub(placed)
	beforeReady = readyAt.Sub(lastOld)
	revs, vrfs := e.portVRFs(rev0, moved.Leaf, moved.Port)
	for i := range revs {
		seq = append(seq, fmt.Sprintf("r%d:%s", revs[i], vrfs[i]))
	}
	e.t.Logf("move of %s (%s/%s) from tenant-b to tenant-a: job-102 placed %s, Ready %s after; tenant-b's %s last reply %s after placed; tenant-a's %s first reply %s after placed; both reach it for %s (negative: never); port's VRF by revision: %s",
		moved.Name(), moved.Leaf, moved.Port, placed.Format("15:04:05.000"), readyAt.Sub(placed).Round(time.Millisecond), oldPeer.Name(), afterPlaced.Round(time.Millisecond),
		newPeer.Name(), firstNew.Sub(placed).Round(time.Millisecond), overlap.Round(time.Millisecond), strings.Join(seq, " "))
	return overlap, afterPlaced, beforeReady, seq
}

// renderedFile is a file of a device's deployed configuration.
func (e *e2e) renderedFile(device, name string) string {
	e.t.Helper()
	var cfgs []render.DeviceFiles
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/configs?device="+device, nil, &cfgs); err != nil {
		e.t.Fatal(err)
	}
	for _, f := range cfgs[0].Files {
		if f.Name == name {
			return f.Content
		}
	}
	e.t.Fatalf("%s has no %s", device, name)
	return ""
}

// sh runs a command; shIn feeds it stdin.
func (e *e2e) sh(args ...string) { e.t.Helper(); e.shIn("", args...) }

func (e *e2e) shIn(stdin string, args ...string) {
	e.t.Helper()
	cmd := exec.CommandContext(e.ctx, args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// listenVictims listens on every endpoint that is not an attacker's (the
// victims, returned too): what arrives there got through.
func (e *e2e) listenVictims(attackers []attacker) (*lab.Listener, []lab.Endpoint) {
	e.t.Helper()
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
	return ln, victims
}

// guardMutations shows the attacks are not blind, on u's one unassigned
// port: each of the quarantine (the port down) and the guard (nftables in
// the leaf's underlay namespace) alone keeps the attacker out; with the
// port up and the guard deleted, every vector blind names must find
// something (from the kernel-socket findings f and the raw ones r);
// restored, nothing gets through.
func (e *e2e) guardMutations(u []attacker, blind func(f *findings, r *rawFindings) map[string]bool) {
	e.t.Helper()
	leaf := e.l.Device(u[0].ep.Leaf)
	guard := e.renderedFile(leaf.Name, "guard.nft")
	both := func(step string) bool {
		clean := e.report(step, u, e.attack(u))
		return e.rawReport(step, u, e.rawAttack(u, nil)) && clean
	}
	e.sh("ip", "-n", leaf.Netns, "link", "set", u[0].ep.Port, "up")
	if !both("port up, guard kept") {
		e.t.Errorf("with the guard in place, an unassigned port that is up lets packets through")
	}
	e.sh("ip", "netns", "exec", leaf.Netns, "nft", "delete", "table", "inet", "jobfabric_guard")
	f := e.attack(u)[u[0].ep.Name()]
	e.report("port up, guard removed", u, map[string]*findings{u[0].ep.Name(): f})
	r := e.rawAttack(u, nil)[u[0].ep.Name()]
	e.rawReport("port up, guard removed", u, map[string]*rawFindings{u[0].ep.Name(): r})
	for what, found := range blind(f, r) {
		if !found {
			e.t.Errorf("without quarantine and guard, the attack finds no %s: the detector is blind", what)
		}
	}
	e.sh("ip", "-n", leaf.Netns, "link", "set", u[0].ep.Port, "down")
	if !both("port down, guard removed") {
		e.t.Errorf("a quarantined (down) port lets packets through without the guard")
	}
	e.shIn(guard, "ip", "netns", "exec", leaf.Netns, "nft", "-f", "-")
	if !both("restored") {
		e.t.Errorf("restored: something got through")
	}
}
