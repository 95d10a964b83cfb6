package labdeploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/deploy"
)

// EVPN type-5 consistency of a leaf running FRR 8.4 (Debian 12's frr).
//
// Zebra keeps, per L3VNI, a next hop per remote VTEP (the kernel neighbour
// VTEP -> router MAC on the VRF's bridge) and a router MAC (the FDB entry
// RMAC -> VTEP on the VXLAN device), each referenced by the prefixes routed
// through it; the last prefix to go takes them out of the kernel. Two bugs
// of zebra 8.4 make those references drift from the routes:
//
//   - bgpd replaces the best path of an imported type-5 prefix by sending
//     zebra a delete and then an add. Zebra queues the add's EVPN part at
//     once but the delete's only when its early-route queue runs, after it:
//     the prefix ends installed but no longer referenced
//     (FRRouting/frr#12391, #13491; fixed by #12524, not in 8.4.4).
//   - the router MAC is dropped when the last prefix of one address family
//     goes, even though the other family still routes through it
//     (FRRouting/frr#16340; fixed by #18677).
//
// The best path of a prefix changes when its copy via one spine goes while
// the copy via the other stays: a spine session resetting (a hold timer
// expiring on a loaded machine, `clear bgp`) does it to every prefix the
// leaf imports and to every prefix the other leaves import from it, at
// once, and they all lose each other's router MACs. A change that leaves
// other prefixes of the VTEP referenced stays hidden until the VTEP's next
// withdrawal, which takes the router MAC and neighbour while routes
// through them stay installed (TestLabEndToEnd's CI flake: job 102's pair
// s1-leaf1 <-> s2-leaf0 unreachable once job 100 had ended).
//
// EVPNDrifts finds it, and Resync repairs it by having bgpd announce every
// selected route of the VRF to zebra again (adds only, no delete before
// them): `no bgp bestpath bandwidth` in the VRF's BGP instance sets the
// default it already has, changes no configuration, and re-announces the
// VRF's table (bgp_zebra_announce_table).

// EVPNDrift is one route of a VRF whose next hop zebra or the kernel does
// not hold as routed through a remote VTEP.
type EVPNDrift struct {
	VRF    string `json:"vrf"`
	VNI    uint32 `json:"vni"`
	Prefix string `json:"prefix"`
	// Nexthop is the route's next hop (the VTEP, v4-mapped for IPv6).
	Nexthop string `json:"nexthop"`
	// Problem says what is missing.
	Problem string `json:"problem"`
}

func (d EVPNDrift) String() string {
	return fmt.Sprintf("vrf %s (L3VNI %d) %s via %s: %s", d.VRF, d.VNI, d.Prefix, d.Nexthop, d.Problem)
}

// EVPNVRF names a VRF of a leaf, its L3VNI and the namespace that holds its
// bridge br<VNI> and VXLAN device vx<VNI> ("" to skip the kernel checks).
type EVPNVRF struct {
	Name  string
	VNI   uint32
	Netns string
}

// EVPNDrifts compares, for each VRF, the selected BGP routes through the
// L3VNI's bridge with zebra's next-hop and router-MAC tables and with the
// kernel's neighbour and FDB entries. vtysh runs with --vty_socket vty.
func EVPNDrifts(ctx context.Context, run deploy.Runner, vty string, vrfs []EVPNVRF) ([]EVPNDrift, error) {
	var drifts []EVPNDrift
	for _, v := range vrfs {
		ds, err := vrfDrifts(ctx, run, vty, v)
		if err != nil {
			return nil, fmt.Errorf("vrf %s: %w", v.Name, err)
		}
		drifts = append(drifts, ds...)
	}
	return drifts, nil
}

// evpnRoute is a selected BGP route through an L3VNI's bridge.
type evpnRoute struct {
	prefix  netip.Prefix
	nexthop netip.Addr // as zebra keys its next hop: IPv4, or v4-mapped IPv6
}

func vrfDrifts(ctx context.Context, run deploy.Runner, vty string, v EVPNVRF) ([]EVPNDrift, error) {
	br, vx := "br"+strconv.Itoa(int(v.VNI)), "vx"+strconv.Itoa(int(v.VNI))
	out, err := vtyshJSON(ctx, run, vty, "show ip route vrf "+v.Name+" json", "show ipv6 route vrf "+v.Name+" json")
	if err != nil {
		return nil, err
	}
	routes, err := parseEVPNRoutes(out, br)
	if err != nil {
		return nil, err
	}
	if len(routes) == 0 {
		return nil, nil
	}
	nhs := map[netip.Addr]bool{}
	for _, r := range routes {
		nhs[r.nexthop] = true
	}
	order := slices.SortedFunc(maps.Keys(nhs), netip.Addr.Compare)
	// zebra answers one object for each next hop, {} for one it does not
	// hold; for the router MACs, nothing at all when it holds none.
	var cmds []string
	for _, a := range order {
		cmds = append(cmds, fmt.Sprintf("show evpn next-hops vni %d ip %s json", v.VNI, a))
	}
	out, err = vtyshJSON(ctx, run, vty, cmds...)
	if err != nil {
		return nil, err
	}
	objs, err := jsonObjects(out)
	if err != nil {
		return nil, err
	}
	if len(objs) != len(cmds) {
		return nil, fmt.Errorf("%d answers to %d vtysh commands (%s): %s", len(objs), len(cmds), strings.Join(cmds, "; "), lastLines(out, 3))
	}
	rmac := fmt.Sprintf("show evpn rmac vni %d json", v.VNI)
	out, err = vtyshJSON(ctx, run, vty, rmac)
	if err != nil {
		return nil, err
	}
	rmacs, err := jsonObjects(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rmac, err)
	}
	rmacOf := map[netip.Addr]string{} // VTEP -> router MAC (zebra)
	for _, obj := range rmacs {
		for mac, raw := range obj {
			var e struct {
				VTEP string `json:"vtepIp"`
			}
			if json.Unmarshal(raw, &e) != nil || e.VTEP == "" {
				continue // "numRmacs"
			}
			if a, err := netip.ParseAddr(e.VTEP); err == nil {
				rmacOf[a.Unmap()] = strings.ToLower(mac)
			}
		}
	}
	type nh struct {
		mac      string
		prefixes map[netip.Prefix]bool
	}
	nhOf := map[netip.Addr]*nh{}
	for i, a := range order {
		var e struct {
			MAC      string   `json:"routerMac"`
			Prefixes []string `json:"prefixList"`
		}
		raw, _ := json.Marshal(objs[i])
		if json.Unmarshal(raw, &e) != nil || e.MAC == "" {
			continue
		}
		n := &nh{mac: strings.ToLower(e.MAC), prefixes: map[netip.Prefix]bool{}}
		for _, s := range e.Prefixes {
			if p, err := netip.ParsePrefix(s); err == nil {
				n.prefixes[p.Masked()] = true
			}
		}
		nhOf[a] = n
	}
	var neigh, fdb map[string]string
	if v.Netns != "" {
		if neigh, err = kernelNeigh(ctx, run, v.Netns, br); err != nil {
			return nil, err
		}
		if fdb, err = kernelFDB(ctx, run, v.Netns, vx); err != nil {
			return nil, err
		}
	}
	var drifts []EVPNDrift
	for _, r := range routes {
		d := EVPNDrift{VRF: v.Name, VNI: v.VNI, Prefix: r.prefix.String(), Nexthop: r.nexthop.String()}
		vtep := r.nexthop.Unmap()
		n := nhOf[r.nexthop]
		var missing []string
		switch {
		case n == nil:
			missing = append(missing, "zebra holds no next hop "+r.nexthop.String())
		case !n.prefixes[r.prefix]:
			missing = append(missing, "zebra's next hop "+r.nexthop.String()+" does not list the prefix (it goes with the VTEP's next withdrawal)")
		}
		mac, ok := rmacOf[vtep]
		if !ok {
			missing = append(missing, "zebra holds no router MAC for VTEP "+vtep.String())
		}
		if v.Netns != "" && n != nil {
			if got := neigh[r.nexthop.String()]; got != n.mac {
				missing = append(missing, fmt.Sprintf("kernel neighbour %s on %s is %q, zebra says %s", r.nexthop, br, got, n.mac))
			}
		}
		if v.Netns != "" && ok {
			if got := fdb[mac]; got != vtep.String() {
				missing = append(missing, fmt.Sprintf("kernel FDB %s on %s points to %q, want VTEP %s", mac, vx, got, vtep))
			}
		}
		if len(missing) > 0 {
			d.Problem = strings.Join(missing, "; ")
			drifts = append(drifts, d)
		}
	}
	return drifts, nil
}

// parseEVPNRoutes reads `show ip[v6] route vrf X json` (one object per
// command): the selected BGP routes with a next hop on the L3VNI's bridge.
func parseEVPNRoutes(out []byte, bridge string) ([]evpnRoute, error) {
	type nexthop struct {
		IP            string `json:"ip"`
		InterfaceName string `json:"interfaceName"`
	}
	type route struct {
		Protocol string    `json:"protocol"`
		Selected bool      `json:"selected"`
		Nexthops []nexthop `json:"nexthops"`
	}
	objs, err := jsonObjects(out)
	if err != nil {
		return nil, err
	}
	var routes []evpnRoute
	for _, obj := range objs {
		for key, raw := range obj {
			p, err := netip.ParsePrefix(key)
			if err != nil {
				continue
			}
			var rs []route
			if err := json.Unmarshal(raw, &rs); err != nil {
				return nil, fmt.Errorf("route %s: %w", key, err)
			}
			for _, r := range rs {
				if r.Protocol != "bgp" || !r.Selected {
					continue
				}
				for _, nh := range r.Nexthops {
					a, err := netip.ParseAddr(nh.IP)
					if err != nil || nh.InterfaceName != bridge {
						continue
					}
					routes = append(routes, evpnRoute{prefix: p.Masked(), nexthop: a})
				}
			}
		}
	}
	slices.SortFunc(routes, func(a, b evpnRoute) int {
		if c := a.prefix.Addr().Compare(b.prefix.Addr()); c != 0 {
			return c
		}
		return a.nexthop.Compare(b.nexthop)
	})
	return slices.Compact(routes), nil
}

// jsonObjects splits concatenated JSON objects (vtysh prints one per -c).
func jsonObjects(out []byte) ([]map[string]json.RawMessage, error) {
	var objs []map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var obj map[string]json.RawMessage
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("vtysh answered no JSON: %v: %s", err, lastLines(out, 3))
		}
		objs = append(objs, obj)
	}
}

func vtyshJSON(ctx context.Context, run deploy.Runner, vty string, cmds ...string) ([]byte, error) {
	args := []string{"--vty_socket", vty}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := run(ctx, "vtysh", args...)
	if err != nil {
		return nil, fmt.Errorf("vtysh %s: %v: %s", strings.Join(cmds, "; "), err, lastLines(out, 3))
	}
	return out, nil
}

// kernelNeigh maps the neighbours on dev to their link-layer addresses.
func kernelNeigh(ctx context.Context, run deploy.Runner, ns, dev string) (map[string]string, error) {
	out, err := run(ctx, "ip", "-n", ns, "-j", "neigh", "show", "dev", dev)
	if err != nil {
		return nil, fmt.Errorf("ip -n %s neigh show dev %s: %v: %s", ns, dev, err, lastLines(out, 2))
	}
	var es []struct {
		Dst    string `json:"dst"`
		LLAddr string `json:"lladdr"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &es); err != nil && len(bytes.TrimSpace(out)) > 0 {
		return nil, fmt.Errorf("ip -j neigh: %v", err)
	}
	m := map[string]string{}
	for _, e := range es {
		if a, err := netip.ParseAddr(e.Dst); err == nil {
			m[a.String()] = strings.ToLower(e.LLAddr)
		}
	}
	return m, nil
}

// kernelFDB maps the remote MACs of a VXLAN device to their VTEP.
func kernelFDB(ctx context.Context, run deploy.Runner, ns, dev string) (map[string]string, error) {
	out, err := run(ctx, "bridge", "-n", ns, "-j", "fdb", "show", "dev", dev)
	if err != nil {
		return nil, fmt.Errorf("bridge -n %s fdb show dev %s: %v: %s", ns, dev, err, lastLines(out, 2))
	}
	var es []struct {
		MAC string `json:"mac"`
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &es); err != nil && len(bytes.TrimSpace(out)) > 0 {
		return nil, fmt.Errorf("bridge -j fdb: %v", err)
	}
	m := map[string]string{}
	for _, e := range es {
		if e.Dst != "" {
			m[strings.ToLower(e.MAC)] = e.Dst
		}
	}
	return m, nil
}

// Resync has bgpd announce every selected route of the VRFs' BGP instances
// to zebra again (see above); instances maps a VRF to its `router bgp N vrf
// X` line.
func Resync(ctx context.Context, run deploy.Runner, vty string, instances map[string]string, vrfs []string) error {
	args := []string{"--vty_socket", vty, "-c", "configure terminal"}
	for _, v := range vrfs {
		inst, ok := instances[v]
		if !ok {
			return fmt.Errorf("vrf %s has no BGP instance to resync", v)
		}
		args = append(args, "-c", inst, "-c", "no bgp bestpath bandwidth", "-c", "exit")
	}
	out, err := run(ctx, "vtysh", args...)
	if err != nil {
		return fmt.Errorf("vtysh %s: %v: %s", strings.Join(args[2:], "; "), err, lastLines(out, 3))
	}
	return nil
}

// syncEVPN checks the device's VRFs for drift and resyncs the VRFs that
// have it until none is left; it gives up after timeout.
func (p *plumber) syncEVPN(ctx context.Context, vrfs []labVRF, timeout time.Duration) error {
	if len(vrfs) == 0 {
		return nil
	}
	evs := make([]EVPNVRF, len(vrfs))
	for i, v := range vrfs {
		evs[i] = EVPNVRF{Name: v.Name, VNI: v.VNI, Netns: p.vrfNetns(v.Name)}
	}
	start := time.Now()
	for round := 0; ; round++ {
		drifts, err := EVPNDrifts(ctx, p.l.Run, p.t.VtySocket, evs)
		if err != nil {
			return err
		}
		if len(drifts) == 0 {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("EVPN state still drifts from the routes after %d resyncs in %s: %s", round, timeout, joinDrifts(drifts))
		}
		if err := p.resync(ctx, drifts); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// resync has bgpd announce the VRFs of drifts to zebra again.
func (p *plumber) resync(ctx context.Context, drifts []EVPNDrift) error {
	var vrfs []string
	for _, d := range drifts {
		if !slices.Contains(vrfs, d.VRF) {
			vrfs = append(vrfs, d.VRF)
		}
	}
	if p.l.Log != nil {
		p.l.Log.Warn("lab: zebra's EVPN next hops drift from the routes (FRR 8.4); bgpd announces the VRFs again",
			"device", p.dev, "vrfs", strings.Join(vrfs, ","), "drifts", len(drifts), "first", drifts[0].String())
	}
	out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show running-config")
	if err != nil {
		return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
	}
	instances := runningVRFInstances(string(out))
	// A VRF without an instance is going away (or not configured yet):
	// there is nothing to ask, and `router bgp N vrf X` would create one.
	vrfs = slices.DeleteFunc(vrfs, func(v string) bool { _, ok := instances[v]; return !ok })
	if len(vrfs) == 0 {
		return nil
	}
	return Resync(ctx, p.l.Run, p.t.VtySocket, instances, vrfs)
}

// WatchInterval is how often `jobfabric server --fabric-driver lab` checks
// the lab's EVPN state (WatchEVPN): well within the 30 s a lab test gives a
// step to converge, and a few vtysh calls per VRF each time.
const WatchInterval = 3 * time.Second

// WatchEVPN checks every lab leaf's EVPN state each interval until ctx
// ends, and resyncs the VRFs that drift. Deploys repair the devices they
// touch; the drift also comes between them: a spine session that resets
// (a hold timer expiring on a loaded machine) changes the best path of
// every prefix the leaf advertised, on every other leaf at once. A device
// that is deploying is skipped (its deploy checks it at the end). Errors
// (a lab going down) are logged and the watch goes on.
func (l *Driver) WatchEVPN(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, name := range slices.Sorted(maps.Keys(l.Targets)) {
			if err := l.watchOnce(ctx, name); err != nil && ctx.Err() == nil && l.Log != nil {
				l.Log.Debug("lab: EVPN check", "device", name, "err", err)
			}
		}
	}
}

// watchOnce checks one device, unless it is deploying, and resyncs the
// VRFs that drift in two checks in a row (a route still being installed
// is not a drift).
func (l *Driver) watchOnce(ctx context.Context, name string) error {
	t := l.Targets[name]
	if t.Lab == nil {
		return nil
	}
	mu := l.lock(name)
	if !mu.TryLock() {
		return nil
	}
	defer mu.Unlock()
	p := &plumber{l: l, dev: name, t: t}
	out, err := l.Run(ctx, "vtysh", "--vty_socket", t.VtySocket, "-c", "show running-config")
	if err != nil {
		return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
	}
	var evs []EVPNVRF
	for vrf, vni := range runningVNIs(string(out)) {
		evs = append(evs, EVPNVRF{Name: vrf, VNI: vni, Netns: p.vrfNetns(vrf)})
	}
	if len(evs) == 0 {
		return nil
	}
	slices.SortFunc(evs, func(a, b EVPNVRF) int { return strings.Compare(a.Name, b.Name) })
	drifts, err := EVPNDrifts(ctx, l.Run, t.VtySocket, evs)
	if err != nil || len(drifts) == 0 {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}
	again, err := EVPNDrifts(ctx, l.Run, t.VtySocket, evs)
	if err != nil {
		return err
	}
	var persist []EVPNDrift
	for _, d := range again {
		if slices.ContainsFunc(drifts, func(o EVPNDrift) bool { return o.VRF == d.VRF && o.Prefix == d.Prefix && o.Nexthop == d.Nexthop }) {
			persist = append(persist, d)
		}
	}
	if len(persist) == 0 {
		return nil
	}
	return p.resync(ctx, persist)
}

func joinDrifts(ds []EVPNDrift) string {
	s := make([]string, 0, len(ds))
	for i, d := range ds {
		if i == 5 {
			s = append(s, fmt.Sprintf("and %d more", len(ds)-5))
			break
		}
		s = append(s, d.String())
	}
	return strings.Join(s, "; ")
}
