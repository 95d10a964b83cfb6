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
	"time"

	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/lab"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
)

// What a root user on a server tries with raw packets, beyond what the
// kernel's sockets send (attack): packets with the source address of a
// switch, TTLs that run out inside the fabric, VXLAN from a VTEP's
// address. A tap on every switch (lab.Tap, server ports ignored) sees
// what got past the attacker's leaf port; the victims' NICs count the
// crafted echoes delivered.

// rawFindings is what one attacker's raw packets reached; empty is the
// goal.
type rawFindings struct {
	caught    map[string][]lab.Catch // by vector: seen on a switch beyond the server ports
	delivered []lab.Delivery         // spoofed VXLAN-GBP echoes that reached a victim
	// spoofedSrc are echoes with another endpoint's source address that
	// reached a victim: none may, since every server port accepts only its
	// server's own sources (the leaf's source-address validation).
	spoofedSrc []lab.Delivery
	allowed    int            // of those, delivered to victims the attacker may reach anyway
	sent       map[string]int // packets built, by vector
}

func (f *rawFindings) empty() bool {
	return len(f.caught) == 0 && len(f.delivered) == 0 && len(f.spoofedSrc) == 0
}

func (f *rawFindings) String() string {
	var b strings.Builder
	vecs := []string{"spoofed-bgp", "ttl", "spoofed-vxlan", "tunnel-ttl"}
	for _, v := range vecs {
		fmt.Fprintf(&b, "%s: %d sent, ", v, f.sent[v])
		// The switches' answers first: they say who took the bait.
		var answers, seen []string
		for _, c := range f.caught[v] {
			l := &seen
			if c.Answer {
				l = &answers
			}
			if s := c.String(); !slices.Contains(*l, s) {
				*l = append(*l, s)
			}
		}
		sort.Strings(answers)
		sort.Strings(seen)
		na, n := len(answers), len(answers)+len(seen)
		seen = append(answers, seen...)
		if len(seen) > 8 {
			seen = append(seen[:8], fmt.Sprintf("... %d more", len(seen)-8))
		}
		fmt.Fprintf(&b, "%d seen on switches (%d answers) %v; ", n, na, seen)
	}
	for v, cs := range f.caught {
		if !slices.Contains(vecs, v) {
			fmt.Fprintf(&b, "%s: %d seen %v; ", v, len(cs), cs)
		}
	}
	byKey := map[string]int{}
	for _, d := range f.delivered {
		byKey[fmt.Sprintf("VNI %d group %d via %s from %s -> %s", d.Probe.VNI, d.Probe.Group, d.Probe.VTEP, d.Probe.Outer, d.Victim)]++
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range byKey {
			if !yield(k) {
				return
			}
		}
	})
	if len(keys) > 8 {
		keys = append(keys[:8], fmt.Sprintf("... %d more", len(keys)-8))
	}
	fmt.Fprintf(&b, "%d spoofed VXLAN-GBP echoes delivered %v; ", len(f.delivered), keys)
	var src []string
	for _, d := range f.spoofedSrc {
		if k := d.Probe.Outer.String() + " -> " + d.Victim; !slices.Contains(src, k) {
			src = append(src, k)
		}
	}
	sort.Strings(src)
	if len(src) > 8 {
		src = append(src[:8], fmt.Sprintf("... %d more", len(src)-8))
	}
	fmt.Fprintf(&b, "spoofed-src: %d sent, %d delivered (%d where the attacker may reach anyway, %d where it may not) %v", f.sent["spoofed-src"], len(f.spoofedSrc), f.allowed, len(f.spoofedSrc)-f.allowed, src)
	return b.String()
}

// fabricFacts is what an attacker would learn or guess of the deployed
// fabric, here read from the deployed configurations: each switch's
// loopback, role and AS, and each leaf's spines (its pod).
type fabricFacts struct {
	loopback map[string]netip.Addr
	role     map[string]string
	asn      map[string]uint16
	spines   map[string][]string // leaf -> the spines it peers with
}

func (e *e2e) facts() fabricFacts {
	e.t.Helper()
	var cfgs []render.DeviceFiles
	if err := e.admin.Do(e.ctx, "GET", "/v1/fabric/configs", nil, &cfgs); err != nil {
		e.t.Fatal(err)
	}
	ff := fabricFacts{loopback: map[string]netip.Addr{}, role: map[string]string{}, asn: map[string]uint16{}, spines: map[string][]string{}}
	for _, d := range e.l.Devices {
		ff.loopback[d.Name] = netip.MustParseAddr(d.Loopback)
		ff.role[d.Name] = d.Role
	}
	asRe := regexp.MustCompile(`(?m)^router bgp (\d+)$`)
	peerRe := regexp.MustCompile(`(?m)^ neighbor \S+ description (\S+)$`)
	for _, d := range cfgs {
		for _, f := range d.Files {
			if f.Name != "frr.conf" {
				continue
			}
			if m := asRe.FindStringSubmatch(f.Content); m != nil {
				n, _ := strconv.ParseUint(m[1], 10, 16)
				ff.asn[d.Device] = uint16(n)
			}
			if ff.role[d.Device] == "leaf" {
				for _, m := range peerRe.FindAllStringSubmatch(f.Content, -1) {
					if ff.role[m[1]] == "spine" {
						ff.spines[d.Device] = append(ff.spines[d.Device], m[1])
					}
				}
			}
		}
	}
	return ff
}

// samePod says whether two leaves share a spine.
func (ff fabricFacts) samePod(a, b string) bool {
	return slices.ContainsFunc(ff.spines[a], func(s string) bool { return slices.Contains(ff.spines[b], s) })
}

// rawAttack sends, from every attacker at once:
//   - spoofed-bgp: to every switch loopback, a SYN and then a BGP OPEN
//     (TTL 255) from every other switch's loopback, with its AS;
//   - ttl: an echo request and a SYN to port 179 with TTL 1 to 4 to every
//     switch loopback but its own leaf's, from its own address;
//   - spoofed-vxlan: crafted VXLAN-GBP from the address of every other
//     VTEP and spine, to every leaf's VTEP (the other pod's too), with
//     every L3VNI and group, to every victim behind that leaf;
//   - tunnel-ttl (an attacker with a peer: its job's endpoint behind
//     another leaf, in the other pod on three tiers): an echo request and a SYN with TTL 1 to 4 to that peer,
//     which the leaves carry in VXLAN (across the super-spines): no spine
//     or super-spine may answer it (the tunnel does not inherit the TTL);
//   - spoofed-src: an echo request to every victim from the address of
//     every other endpoint: none may arrive, the attacker's leaf drops
//     them on ingress (source-address validation); were it gone, none
//     would still arrive where the attacker itself may not reach (the
//     group policy classifies by port, not by source).
func (e *e2e) rawAttack(attackers []attacker, peers map[string]lab.Endpoint) map[string]*rawFindings {
	e.t.Helper()
	ff := e.facts()
	vnis, groups, _ := e.fabricIDs()
	want, _ := e.expected()
	var points []lab.TapPoint
	for _, d := range e.l.Devices {
		points = append(points, lab.TapPoint{Switch: d.Name, Netns: d.Netns, Skip: slices.Clone(d.Ports)})
	}
	tap, err := lab.StartTap(points)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tap.Close()
	ln, victims := e.listenVictims(attackers)
	defer ln.Close()

	names := slices.Sorted(func(yield func(string) bool) {
		for n := range ff.loopback {
			if !yield(n) {
				return
			}
		}
	})
	out := map[string]*rawFindings{}
	var wg sync.WaitGroup
	for i, a := range attackers {
		f := &rawFindings{caught: map[string][]lab.Catch{}, sent: map[string]int{}}
		out[a.ep.Name()] = f
		port, err := e.l.LeafPort(e.ctx, &a.ep)
		if err != nil {
			e.t.Fatal(err)
		}
		e.arm(a, port)
		own := netip.MustParseAddr(a.ep.Addr4())
		idx := uint16(i)
		var pkts [][]byte
		add := func(vector string, ps ...[]byte) {
			pkts = append(pkts, ps...)
			f.sent[vector] += len(ps)
		}
		for _, dst := range names {
			for _, src := range names {
				if src != dst {
					add("spoofed-bgp", lab.SpoofedBGP(idx, ff.loopback[src], ff.loopback[dst], ff.asn[src], 255)...)
				}
			}
			if dst != a.ep.Leaf {
				for ttl := uint8(1); ttl <= 4; ttl++ {
					add("ttl", lab.LowTTL(idx, own, ff.loopback[dst], ttl)...)
				}
			}
		}
		if p, ok := peers[a.ep.Name()]; ok {
			for ttl := uint8(1); ttl <= 4; ttl++ {
				add("tunnel-ttl", lab.TunnelTTL(idx, own, netip.MustParseAddr(p.Addr4()), ttl)...)
			}
		}
		// Spoofed source: to every victim, from every other endpoint's
		// address (the group is the port's, whatever the source says).
		for _, v := range victims {
			for _, s := range e.l.Endpoints {
				if s.Name() != a.ep.Name() && s.Name() != v.Name() {
					p := lab.Probe{Attacker: idx, Dst: netip.MustParseAddr(v.Addr4()), Outer: netip.MustParseAddr(s.Addr4())}
					add("spoofed-src", lab.SpoofedEcho(p))
				}
			}
		}
		// Spoofed VXLAN: to every leaf (the other pod's too), from
		// addresses its VTEP sees VXLAN from (every other leaf's) or
		// might trust (the spines').
		srcMAC := net.HardwareAddr{0x02, 0x4a, 0x46, 0, 1, byte(i)}
		for _, vtep := range names {
			if ff.role[vtep] != "leaf" {
				continue
			}
			var spoof []netip.Addr
			for _, s := range names {
				if s != vtep && (ff.role[s] == "leaf" || ff.role[s] == "spine") {
					spoof = append(spoof, ff.loopback[s])
				}
			}
			for _, v := range victims {
				if v.Leaf != vtep {
					continue
				}
				for _, vni := range vnis {
					for _, g := range groups {
						for _, s := range spoof {
							p := lab.Probe{Attacker: idx, VTEP: ff.loopback[vtep], VNI: vni, Group: g, Dst: netip.MustParseAddr(v.Addr4()), Outer: s}
							add("spoofed-vxlan", lab.SpoofedVXLAN(p, labdeploy.RouterMAC(vtep, vni), srcMAC, own))
						}
					}
				}
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := lab.SendRaw(a.ep.Netns, pkts); err != nil {
				e.t.Error(err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the last packets cross the fabric
	for _, c := range tap.Catches() {
		if int(c.Attacker) >= len(attackers) || c.Vector == "icmp-error" {
			e.t.Errorf("the tap caught %s, naming no attacker", c)
			continue
		}
		a := attackers[c.Attacker]
		out[a.ep.Name()].caught[c.Vector] = append(out[a.ep.Name()].caught[c.Vector], c)
	}
	for _, d := range ln.Deliveries() {
		a := attackers[d.Probe.Attacker]
		f := out[a.ep.Name()]
		switch {
		case !d.Probe.Outer.IsValid():
			e.t.Errorf("a crafted echo without a spoofed source was delivered during the raw attack: %s at %s", d.Probe, d.Victim)
		case d.Probe.VTEP.IsUnspecified(): // spoofed-src
			if want[lab.Pair{From: a.ep.Name(), To: d.Victim}] {
				f.allowed++
			}
			f.spoofedSrc = append(f.spoofedSrc, d)
		default:
			f.delivered = append(f.delivered, d)
		}
	}
	return out
}

// rawReport logs every attacker's raw findings and says whether all were
// empty.
func (e *e2e) rawReport(step string, attackers []attacker, got map[string]*rawFindings) bool {
	e.t.Helper()
	clean := true
	for _, a := range attackers {
		f := got[a.ep.Name()]
		e.t.Logf("%s (raw): from %s (%s, port %s/%s): %s", step, a.ep.Name(), a.role, a.ep.Leaf, a.ep.Port, f)
		clean = clean && f.empty()
	}
	return clean
}

// deliveredAcross says whether a spoofed VXLAN-GBP echo reached a victim
// in another pod than the attacker's leaf.
func (e *e2e) deliveredAcross(ff fabricFacts, from lab.Endpoint, f *rawFindings) bool {
	return slices.ContainsFunc(f.delivered, func(d lab.Delivery) bool {
		v, err := e.l.Endpoint(d.Victim)
		return err == nil && !ff.samePod(v.Leaf, from.Leaf)
	})
}

// caughtAt says whether a vector's packets were seen on a switch of a
// role, in transit or not.
func (f *rawFindings) caughtAt(ff fabricFacts, vector, role string) bool {
	return slices.ContainsFunc(f.caught[vector], func(c lab.Catch) bool { return ff.role[c.Switch] == role })
}

// reached says whether a vector's packet arrived at a switch of a role
// for that switch's own address (its control plane).
func (f *rawFindings) reached(ff fabricFacts, vector, role string) bool {
	return slices.ContainsFunc(f.caught[vector], func(c lab.Catch) bool {
		return ff.role[c.Switch] == role && !c.Out && !c.Answer && c.Dst == ff.loopback[c.Switch]
	})
}

// expired says whether a vector's packet arrived at a switch of a role
// with TTL 1, for another address: that switch must drop it and answer.
func (f *rawFindings) expired(ff fabricFacts, vector, role string) bool {
	return slices.ContainsFunc(f.caught[vector], func(c lab.Catch) bool {
		return ff.role[c.Switch] == role && !c.Out && !c.Answer && c.TTL == 1 && c.Dst != ff.loopback[c.Switch]
	})
}

// answeredBy says whether a switch of a role answered a vector's packet
// (an ICMP error, a SYN-ACK or RST, an echo reply from its loopback).
func (f *rawFindings) answeredBy(ff fabricFacts, vector, role string) bool {
	return slices.ContainsFunc(f.caught[vector], func(c lab.Catch) bool {
		if !c.Answer {
			return false
		}
		for n, a := range ff.loopback {
			if a == c.Src && ff.role[n] == role {
				return true
			}
		}
		return false
	})
}

// linkLocals are the IPv6 link-local addresses of every switch's fabric
// links (the unnumbered BGP sessions run on them), by switch.
func (e *e2e) linkLocals() map[string][]netip.Addr {
	e.t.Helper()
	out := map[string][]netip.Addr{}
	for _, d := range e.l.Devices {
		b, err := exec.CommandContext(e.ctx, "ip", "-n", d.Netns, "-6", "-o", "addr", "show", "scope", "link").Output()
		if err != nil {
			e.t.Fatalf("ip -n %s addr: %v", d.Netns, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 || !slices.Contains(d.Uplinks, f[1]) {
				continue
			}
			if p, err := netip.ParsePrefix(f[3]); err == nil {
				out[d.Name] = append(out[d.Name], p.Addr())
			}
		}
	}
	return out
}

// dropSourceCheck deletes the source-address validation of an endpoint's
// leaf port (the guardsrc chain of the VRF's guard, guard-<vrf>.nft, in
// the VRF's namespace) and returns what loads the rendered guard again.
func (e *e2e) dropSourceCheck(ep lab.Endpoint) (restore func()) {
	e.t.Helper()
	p, err := e.l.LeafPort(e.ctx, &ep)
	if err != nil {
		e.t.Fatal(err)
	}
	vrf := strings.TrimPrefix(p.Netns, e.l.Device(ep.Leaf).VRFNetnsPrefix())
	guard := e.renderedFile(ep.Leaf, "guard-"+vrf+".nft")
	if !strings.Contains(guard, fmt.Sprintf("iifname %q ip saddr != {", ep.Port)) {
		e.t.Fatalf("the rendered guard-%s.nft of %s validates no source on %s:\n%s", vrf, ep.Leaf, ep.Port, guard)
	}
	e.sh("ip", "netns", "exec", p.Netns, "nft", "delete", "chain", "inet", "jobfabric_guard", "guardsrc")
	return func() { e.shIn(guard, "ip", "netns", "exec", p.Netns, "nft", "-f", "-") }
}

// spoofedTo says whether a spoofed-source echo reached victim.
func (f *rawFindings) spoofedTo(victim string) bool {
	return slices.ContainsFunc(f.spoofedSrc, func(d lab.Delivery) bool { return d.Victim == victim })
}
