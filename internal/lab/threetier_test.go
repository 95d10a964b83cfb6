package lab_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/lab"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// threeTierTopology is the three-tier lab: 2 pods, each of 1 stripe of 2
// rails (2 leaves) under 1 spine, joined by 2 super-spines; 4 servers of 2
// GPUs per stripe (16 GPU endpoints), every switch running FRR.
func threeTierTopology(t *testing.T) []byte {
	t.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, Pods: 2, SuperSpines: 2, Spines: 1, ServersPerStripe: 4, GPUsPerServer: 2, NOS: "frr"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLabThreeTier proves the three-tier fabric with packets: a jobfabric
// server deploys two pods joined by super-spines (the spines re-advertise
// EVPN to the super-spines, next hop unchanged, and the super-spines to
// the other pod), and pings between every pair of GPU endpoints match
// what the tenants and jobs allow. Stripe 1 is pod 1 and stripe 2 is pod
// 2, so every job below spans the pods: its traffic crosses a
// super-spine, the only way between them. Once all three jobs are Ready,
// the servers attack the fabric (threeTierAttack).
func TestLabThreeTier(t *testing.T) {
	e, _ := startE2ETopology(t, 7*time.Minute, threeTierTopology)
	if n := len(e.l.Devices); n != 8 {
		t.Fatalf("the lab has %d switches, want 2 super-spines, 2 spines and 4 leaves", n)
	}
	e.createTenants()
	j100 := e.place(domain.JobSpec{Name: "job-100", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	j200 := e.place(domain.JobSpec{Name: "job-200", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 1}, "s1-gpu003", "s2-gpu003")
	e.waitReady(j100, j200)
	e.check("job 100 (tenant A) and job 200 (tenant B), each across both pods")

	// A second job of tenant A across the pods: a group of its own, which
	// reaches its own peers in the other pod and not job 100's.
	j101 := e.place(domain.JobSpec{Name: "job-101", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	e.waitReady(j101)
	e.check("job 101 (tenant A) across both pods")

	// The same lab, attacked from its servers in both pods.
	e.threeTierAttack()

	e.end(j100)
	e.check("job 100 ended")
	t.Logf("three-tier lab test took %s", time.Since(e.start).Round(time.Millisecond))
}

// threeTierAttack attacks the three-tier lab from its servers, as
// TestLabAdversarial does the two-tier one, with raw packets besides
// (rawAttack): a root user on an unassigned NIC in each pod, and on NICs
// of tenant A's two jobs (one per pod) and of tenant B's job (pod 2).
// Targets: every switch's loopback and fabric link addresses, spines and
// super-spines included (BGP, echo), every VTEP of both pods with every
// L3VNI and group (crafted VXLAN-GBP, from the attacker's address and from
// the spoofed address of every leaf and spine), and the switches'
// control planes by TTL. Nothing may get through. Then the detector is
// checked on the pod-2 unassigned port: with its quarantine and its
// leaf's guard both removed, every vector must find its way in.
func (e *e2e) threeTierAttack() {
	t := e.t
	t.Helper()
	ep := func(name string) lab.Endpoint {
		x, err := e.l.Endpoint(name)
		if err != nil {
			t.Fatal(err)
		}
		return *x
	}
	attackers := []attacker{
		{ep("s1-gpu004/nic0"), "unassigned, pod 1", false},
		{ep("s2-gpu004/nic1"), "unassigned, pod 2", false},
		{ep("s1-gpu001/nic0"), "tenant-a/job-100, pod 1", true},
		{ep("s2-gpu002/nic1"), "tenant-a/job-101, pod 2", true},
		{ep("s2-gpu003/nic0"), "tenant-b/job-200, pod 2", true},
	}
	// Each tenant attacker's peer: its job's endpoint in the other pod.
	peers := map[string]lab.Endpoint{
		"s1-gpu001/nic0": ep("s2-gpu001/nic0"),
		"s2-gpu002/nic1": ep("s1-gpu002/nic0"),
		"s2-gpu003/nic0": ep("s1-gpu003/nic0"),
	}
	start := time.Now()
	clean := e.report("three-tier attack", attackers, e.attack(attackers))
	if !e.rawReport("three-tier attack", attackers, e.rawAttack(attackers, peers)) || !clean {
		t.Errorf("three-tier attack: something got through from a server port (see above)")
	}

	// Mutations: the pod-2 unassigned port, up, then without its leaf's
	// guard: every vector must get through (the test is not blind),
	// across the super-spines; restored, nothing does.
	ff := e.facts()
	e.guardMutations(attackers[1:2], func(f *findings, r *rawFindings) map[string]bool {
		return map[string]bool{
			"the kernel sockets' probes (attack)":                           !f.empty(false),
			"a spoofed BGP OPEN reaching a super-spine":                     r.reached(ff, "spoofed-bgp", "super-spine"),
			"a spoofed BGP OPEN reaching a spine":                           r.reached(ff, "spoofed-bgp", "spine"),
			"a super-spine answering a spoofed SYN (to the spoofed switch)": r.answeredBy(ff, "spoofed-bgp", "super-spine"),
			"a TTL running out at a spine":                                  r.expired(ff, "ttl", "spine"),
			"a TTL running out at a super-spine":                            r.expired(ff, "ttl", "super-spine"),
			"a spoofed VXLAN-GBP echo delivered in the other pod":           e.deliveredAcross(ff, attackers[1].ep, r),
			"a spoofed VXLAN-GBP packet crossing a super-spine":             r.caughtAt(ff, "spoofed-vxlan", "super-spine"),
		}
	})

	// The tunnel's TTL: a tenant's low-TTL packets to its peer in the
	// other pod run out at a leaf (its own, or the far one in the VRF),
	// never at a spine or super-spine, because the leaves' VXLAN devices
	// set the outer TTL themselves. With the outer TTL of the attacker's
	// leaf's tunnels forced to 2 (an nftables rule in its underlay
	// namespace: changing the VXLAN device itself upsets zebra's EVPN
	// state), they expire at a super-spine, which answers: the tap sees it.
	ta := attackers[2:3]
	tleaf := e.l.Device(ta[0].ep.Leaf)
	e.shIn("table ip jobfabric_labtest_ttl {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n\t\tudp dport 4789 ip ttl set 2\n\t}\n}\n",
		"ip", "netns", "exec", tleaf.Netns, "nft", "-f", "-")
	r := e.rawAttack(ta, peers)[ta[0].ep.Name()]
	e.sh("ip", "netns", "exec", tleaf.Netns, "nft", "delete", "table", "ip", "jobfabric_labtest_ttl")
	e.rawReport("tunnel TTL 2 on "+tleaf.Name, ta, map[string]*rawFindings{ta[0].ep.Name(): r})
	if !r.answeredBy(ff, "tunnel-ttl", "super-spine") {
		t.Errorf("with the tunnel's TTL at 2, no super-spine answers a tenant's tunnelled packets: the detector is blind")
	}

	// Source spoofing. Job-100's leaf port accepts only its server's
	// own source (source-address validation): with that check removed,
	// its spoofed echoes reach the victims it may reach anyway (across
	// the pods) and no other: the group of a packet is its server
	// port's, whatever source it carries. With the group policy of
	// tenant A's VRF on s2-leaf0 deleted too, they reach job-101's
	// s2-gpu002/nic0 there, in the other pod: the detector counts them.
	victim := ep("s2-gpu002/nic0")
	restore := e.dropSourceCheck(ta[0].ep)
	r = e.rawAttack(ta, peers)[ta[0].ep.Name()]
	e.rawReport("source check of "+ta[0].ep.Leaf+"/"+ta[0].ep.Port+" removed", ta, map[string]*rawFindings{ta[0].ep.Name(): r})
	if r.allowed == 0 {
		t.Errorf("without the source check on %s/%s, no spoofed-source echo arrives: the detector is blind", ta[0].ep.Leaf, ta[0].ep.Port)
	}
	if n := len(r.spoofedSrc) - r.allowed; n > 0 {
		t.Errorf("without the source check, %d spoofed-source echoes reach victims the attacker may not reach", n)
	}
	vp, err := e.l.LeafPort(e.ctx, &victim)
	if err != nil {
		t.Fatal(err)
	}
	vrf := strings.TrimPrefix(vp.Netns, e.l.Device(victim.Leaf).VRFNetnsPrefix())
	gbp := e.renderedFile(victim.Leaf, "gbp-"+vrf+".nft")
	e.sh("ip", "netns", "exec", vp.Netns, "nft", "delete", "table", "inet", "jobfabric_gbp")
	r = e.rawAttack(ta, peers)[ta[0].ep.Name()]
	e.shIn(gbp, "ip", "netns", "exec", vp.Netns, "nft", "-f", "-")
	restore()
	e.rawReport("source check removed, group policy of "+vrf+" on "+victim.Leaf+" deleted", ta, map[string]*rawFindings{ta[0].ep.Name(): r})
	if !r.spoofedTo(victim.Name()) {
		t.Errorf("with the source check and the group policy deleted on %s, no spoofed-source echo from %s reaches %s: the detector is blind", victim.Leaf, ta[0].ep.Name(), victim.Name())
	}
	if !e.rawReport("source check and group policy restored", ta, e.rawAttack(ta, peers)) {
		t.Errorf("source check and group policy restored: something got through")
	}
	t.Logf("three-tier attack and mutations took %s", time.Since(start).Round(time.Millisecond))
}
