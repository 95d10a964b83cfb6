package labdeploy

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// The lab flavour of the FRR driver. A switch of the lab (internal/lab) is
// a Linux network namespace running FRR with the netns VRF backend
// (`zebra -n`): the kernel has no VRF devices, so a tenant VRF is a
// namespace of its own. A real NOS creates its VRFs, VXLAN tunnels and
// port memberships when its configuration says so; in the lab this driver
// does it, from the frr.conf the server deploys and from nothing else:
//
//   - `vrf X / vni N`: namespace X (seen by the device's daemons only, in
//     their private mount namespace), the L3VNI VXLAN device vx<N> with the
//     gbp flag created in the device's underlay namespace (its UDP socket
//     stays there) and moved into X, enslaved to bridge br<N> whose MAC is
//     the router MAC;
//   - `interface swpN vrf X`: the port moves into X and is up; `interface
//     swpN` (no VRF): back into the underlay namespace, down when the
//     stanza says `shutdown` (a quarantined port: zebra would take it down
//     too, but only once the reload runs);
//   - a VRF the config no longer declares is removed after the reload.
//
// Then the FRR driver applies the config (frr-reload --test, --reload) and
// loads each segmented VRF's nftables ruleset into that VRF's namespace.

// Target is one device of a targets file written by the lab: a
// deploy.FRRTarget plus, for lab switches, what the driver needs to build
// the device's VRFs. A device without Lab is applied as the frr driver
// would.
type Target struct {
	deploy.FRRTarget
	Lab *Switch `json:"lab,omitempty"`
}

// Switch says where a lab switch's VRF namespaces live.
type Switch struct {
	// MountNS is the mount namespace of the device's daemons (a
	// /proc/PID/ns/mnt path): its /run/netns is a private tmpfs holding
	// only the device's VRF namespaces, by VRF name, since zebra -n adopts
	// every namespace it finds there.
	MountNS string `json:"mountNs"`
	// VRFNetnsPrefix names VRF X of the device VRFNetnsPrefix+X in the
	// host's /run/netns (for nft and ping); unique per lab and device.
	VRFNetnsPrefix string `json:"vrfNetnsPrefix"`
	// Ports are the server-facing ports a configuration may move into a
	// VRF (the others, uplinks, stay in the underlay namespace).
	Ports []string `json:"ports"`
}

// LoadTargets reads a targets file written by `jobfabric lab up`; a file
// with no lab device is refused (it is the frr driver's).
func LoadTargets(path string) (map[string]Target, error) {
	if path == "" {
		return nil, domain.Invalid("frr-targets", "the lab driver needs --frr-targets RUN_DIR/targets.json (written by jobfabric lab up)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, domain.Invalid("frr-targets", "cannot read %s: %v", path, err)
	}
	var ts map[string]Target
	if err := json.Unmarshal(b, &ts); err != nil {
		return nil, domain.Invalid("frr-targets", "%s is not a JSON object of device -> target: %v", path, err)
	}
	lab := false
	for name, t := range ts {
		if t.VtySocket == "" || t.ConfDir == "" {
			return nil, domain.Invalid("frr-targets", "device %s needs vtySocket and confDir", name)
		}
		if t.Lab == nil {
			continue
		}
		lab = true
		if t.Netns == "" || t.Lab.MountNS == "" || t.Lab.VRFNetnsPrefix == "" {
			return nil, domain.Invalid("frr-targets", "lab device %s needs netns, lab.mountNs and lab.vrfNetnsPrefix", name)
		}
	}
	if !lab {
		return nil, domain.Invalid("frr-targets", "%s names no lab device (no target has a lab section): deploy to running FRR daemons with --fabric-driver frr", path)
	}
	return ts, nil
}

// Driver is the FRR driver of a lab: it builds the kernel side of the
// device's VRFs from the frr.conf it applies (see above), then applies it
// as the FRR driver does.
type Driver struct {
	Targets map[string]Target
	Run     deploy.Runner
	// Reload is the frr-reload.py path (default /usr/lib/frr/frr-reload.py).
	Reload string
	// NetnsDir is where named namespaces live (default /run/netns).
	NetnsDir string
	// Log, when set, hears of every EVPN resync (syncEVPN).
	Log *slog.Logger
	// EVPNSyncTimeout bounds the EVPN consistency check after a reload
	// (default 15s; negative: no check).
	EVPNSyncTimeout time.Duration

	mu      sync.Mutex
	devLock map[string]*sync.Mutex // a device's deploy or EVPN check
}

// lock is the mutex of device name: a deploy holds it, and WatchEVPN
// leaves the device alone meanwhile (a resync naming a VRF instance the
// reload is removing would create it again).
func (l *Driver) lock(name string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.devLock == nil {
		l.devLock = map[string]*sync.Mutex{}
	}
	m := l.devLock[name]
	if m == nil {
		m = &sync.Mutex{}
		l.devLock[name] = m
	}
	return m
}

// New returns the lab driver of targets, running commands with os/exec.
func New(targets map[string]Target) *Driver { return &Driver{Targets: targets, Run: deploy.ExecRunner} }

// Load returns the lab driver of the targets file at path (LoadTargets).
func Load(path string) (*Driver, error) {
	ts, err := LoadTargets(path)
	if err != nil {
		return nil, err
	}
	return New(ts), nil
}

// Name implements deploy.Driver.
func (l *Driver) Name() string { return "lab" }

func (l *Driver) evpnSyncTimeout() time.Duration {
	if l.EVPNSyncTimeout == 0 {
		return 15 * time.Second
	}
	return l.EVPNSyncTimeout
}

func (l *Driver) netnsDir() string {
	if l.NetnsDir != "" {
		return l.NetnsDir
	}
	return "/run/netns"
}

// Apply implements deploy.Driver.
func (l *Driver) Apply(ctx context.Context, d deploy.Device) error {
	t, ok := l.Targets[d.Name]
	if !ok {
		return fmt.Errorf("device %s: no FRR target configured", d.Name)
	}
	ft := t.FRRTarget
	frr := func() *deploy.FRR {
		return &deploy.FRR{Targets: map[string]deploy.FRRTarget{d.Name: ft}, Run: l.Run, Reload: l.Reload}
	}
	if t.Lab == nil {
		return frr().Apply(ctx, d)
	}
	mu := l.lock(d.Name)
	mu.Lock()
	defer mu.Unlock()
	var conf string
	for _, f := range d.Files {
		if f.Name == "frr.conf" {
			conf = f.Content
		}
	}
	if conf == "" {
		return fmt.Errorf("device %s: no frr.conf to apply (NOS %s; the lab runs FRR only)", d.Name, d.NOS)
	}
	lc, err := parseLabConf(conf)
	if err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	for port, vrf := range lc.PortVRF {
		if vrf != "" && !slices.Contains(t.Lab.Ports, port) {
			return fmt.Errorf("device %s: interface %s vrf %s: the lab has no server port %s on this device (vlan-aware gateways are not built by the lab)", d.Name, port, vrf, port)
		}
	}
	p := &plumber{l: l, dev: d.Name, t: t}
	var bound []labVRF // VRFs whose namespace zebra is only now shown
	for _, v := range lc.VRFs {
		fresh, err := p.ensureVRF(ctx, v, lc.Loopback)
		if err != nil {
			return fmt.Errorf("device %s: vrf %s: %w", d.Name, v.Name, err)
		}
		if fresh {
			bound = append(bound, v)
		}
	}
	if err := p.waitVRFs(ctx, bound); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	if err := p.bindVNIs(ctx, lc.VRFs); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	if err := p.unbindDropped(ctx, lc); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	// The underlay's guard before any port moves: a port leaving a VRF is
	// never in the default table unguarded, even for a moment.
	for _, f := range d.Files {
		if f.Name == "guard.nft" {
			if err := frr().LoadRules(ctx, ft, ft.Netns, f.Name, f.Content); err != nil {
				return fmt.Errorf("device %s: %w", d.Name, err)
			}
		}
	}
	if err := p.placePorts(ctx, lc); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	ft.VRFNetns = map[string]string{}
	for _, v := range lc.VRFs {
		ft.VRFNetns[v.Name] = t.Lab.VRFNetnsPrefix + v.Name
	}
	// FRR's netns backend lists `netns /run/netns/<vrf>` under each VRF
	// it adopted; a config without the line would make frr-reload remove
	// it, and with it the VRF's namespace. ZebraConf stays too.
	nd := d
	nd.Files = slices.Clone(d.Files)
	for i, f := range nd.Files {
		if f.Name == "frr.conf" {
			nd.Files[i].Content = withNetns(f.Content)
		}
	}
	if err := frr().Apply(ctx, nd); err != nil {
		return err
	}
	for _, v := range lc.VRFs {
		if err := p.noProtodown(ctx, v); err != nil {
			return fmt.Errorf("device %s: vrf %s: %w", d.Name, v.Name, err)
		}
	}
	// Zebra 8.4's next hops and router MACs drift from the routes when a
	// best path changes (evpnsync.go): check and repair them, so that a
	// leaf this revision touches starts from a consistent state.
	if t := l.evpnSyncTimeout(); t >= 0 {
		if err := p.syncEVPN(ctx, lc.VRFs, t); err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	// VRFs the config dropped go once FRR has let go of them.
	have, err := p.vrfs()
	if err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	for _, name := range have {
		if lc.vni(name) == 0 {
			if err := p.removeVRF(ctx, name, lc.Shutdown); err != nil {
				return fmt.Errorf("device %s: remove vrf %s: %w", d.Name, name, err)
			}
		}
	}
	return nil
}

// ZebraConf is zebra configuration every lab switch runs with, kept
// through every reload: EVPN multihoming's startup delay (180s by
// default, counted from when zebra starts) holds every VXLAN device
// created meanwhile in protodown, so a tenant's L3VNI would stay down for
// the first three minutes of the lab. The lab has no multihoming.
const ZebraConf = "evpn mh startup-delay 0\n"

// withNetns adapts a rendered frr.conf to the lab's FRR: the switch-wide
// ZebraConf, and ` netns /run/netns/<vrf>` in every `vrf NAME` stanza.
func withNetns(conf string) string {
	lines := strings.SplitAfter(conf, "\n")
	var b strings.Builder
	b.WriteString(ZebraConf)
	for _, l := range lines {
		b.WriteString(l)
		if f := strings.Fields(l); len(f) == 2 && f[0] == "vrf" && !strings.HasPrefix(l, " ") {
			if !strings.HasSuffix(l, "\n") {
				b.WriteString("\n")
			}
			b.WriteString(" netns /run/netns/" + f[1] + "\n")
		}
	}
	return b.String()
}

// plumber changes one lab device's namespaces.
type plumber struct {
	l   *Driver
	dev string
	t   Target
}

func (p *plumber) run(ctx context.Context, name string, args ...string) error {
	out, err := p.l.Run(ctx, name, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, lastLines(out, 3))
	}
	return nil
}

func (p *plumber) vrfNetns(vrf string) string { return p.t.Lab.VRFNetnsPrefix + vrf }

// vrfs lists the device's VRF namespaces by VRF name.
func (p *plumber) vrfs() ([]string, error) {
	entries, err := os.ReadDir(p.l.netnsDir())
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if v, ok := strings.CutPrefix(e.Name(), p.t.Lab.VRFNetnsPrefix); ok && v != "" {
			out = append(out, v)
		}
	}
	return out, nil
}

// links lists the interface names of a namespace.
func (p *plumber) links(ctx context.Context, ns string) ([]string, error) {
	names, _, err := p.linkStates(ctx, ns)
	return names, err
}

// linkStates lists the interface names of a namespace and which of them
// are administratively up.
func (p *plumber) linkStates(ctx context.Context, ns string) ([]string, map[string]bool, error) {
	out, err := p.l.Run(ctx, "ip", "-n", ns, "-o", "link", "show")
	if err != nil {
		return nil, nil, fmt.Errorf("ip -n %s link show: %v: %s", ns, err, lastLines(out, 3))
	}
	var names []string
	up := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		// "3: swp1@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> ..."
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		name, _, _ = strings.Cut(name, "@")
		names = append(names, name)
		if len(f) > 2 && slices.Contains(strings.Split(strings.Trim(f[2], "<>"), ","), "UP") {
			up[name] = true
		}
	}
	return names, up, nil
}

// RouterMAC is the router MAC of a lab device's VRF: locally administered,
// stable for a device and L3VNI, distinct across devices.
func RouterMAC(device string, vni uint32) net.HardwareAddr {
	h := fnv.New64a()
	h.Write([]byte(device))
	h.Write([]byte{0, byte(vni >> 16), byte(vni >> 8), byte(vni)})
	s := h.Sum64()
	return net.HardwareAddr{0x02, byte(s >> 32), byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}
}

// ensureVRF makes VRF v exist: its namespace (also in the daemons' view)
// holding vx<VNI> (gbp) enslaved to br<VNI> with the router MAC. fresh:
// the daemons' view of the namespace was bound now.
func (p *plumber) ensureVRF(ctx context.Context, v labVRF, loopback netip.Addr) (fresh bool, err error) {
	ns := p.vrfNetns(v.Name)
	if _, err := os.Stat(p.l.netnsDir() + "/" + ns); err != nil {
		if err := p.run(ctx, "ip", "netns", "add", ns); err != nil {
			return fresh, err
		}
		for _, c := range [][]string{
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
				"net.ipv4.conf.default.rp_filter=0", "net.ipv6.conf.all.forwarding=1"},
		} {
			if err := p.run(ctx, c[0], c[1:]...); err != nil {
				return fresh, err
			}
		}
	}
	// The daemons' view: /run/netns/<vrf> in their mount namespace.
	if err := p.run(ctx, "nsenter", "--mount="+p.t.Lab.MountNS, "--", "mountpoint", "-q", "/run/netns/"+v.Name); err != nil {
		if err := p.bindView(ctx, v.Name); err != nil {
			return false, err
		}
		fresh = true
	}
	names, err := p.links(ctx, ns)
	if err != nil {
		return fresh, err
	}
	vx, br := "vx"+strconv.Itoa(int(v.VNI)), "br"+strconv.Itoa(int(v.VNI))
	// A VNI that changed: drop the old tunnel and bridge.
	for _, n := range names {
		if (strings.HasPrefix(n, "vx") || strings.HasPrefix(n, "br")) && n != vx && n != br {
			if err := p.run(ctx, "ip", "-n", ns, "link", "del", n); err != nil {
				return fresh, err
			}
		}
	}
	if slices.Contains(names, vx) && slices.Contains(names, br) {
		return fresh, nil
	}
	u := p.t.Netns
	mac := RouterMAC(p.dev, v.VNI).String()
	var cmds [][]string
	if !slices.Contains(names, vx) {
		cmds = append(cmds,
			[]string{"ip", "-n", u, "link", "add", vx, "type", "vxlan", "id", strconv.Itoa(int(v.VNI)), "dstport", "4789",
				"local", loopback.String(), "nolearning", "gbp"},
			[]string{"ip", "-n", u, "link", "set", vx, "netns", ns})
	}
	if !slices.Contains(names, br) {
		cmds = append(cmds, []string{"ip", "-n", ns, "link", "add", br, "type", "bridge", "stp_state", "0"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", ns, "link", "set", br, "address", mac},
		[]string{"ip", "-n", ns, "link", "set", vx, "master", br},
		[]string{"ip", "-n", ns, "link", "set", "dev", vx, "type", "bridge_slave", "learning", "off"},
		[]string{"ip", "-n", ns, "link", "set", br, "up"},
		[]string{"ip", "-n", ns, "link", "set", vx, "up"})
	for _, c := range cmds {
		if err := p.run(ctx, c[0], c[1:]...); err != nil {
			return fresh, err
		}
	}
	return fresh, nil
}

// bindView makes VRF name's namespace appear as /run/netns/<name> in the
// daemons' mount namespace. The bind source is the mounting process's own
// network namespace: nsenter opens --net before it enters the mount
// namespace, where the host's /run/netns is hidden.
func (p *plumber) bindView(ctx context.Context, name string) error {
	view := "/run/netns/" + name
	if err := p.run(ctx, "nsenter", "--mount="+p.t.Lab.MountNS, "--", "touch", view); err != nil {
		return err
	}
	return p.run(ctx, "nsenter", "--net="+p.l.netnsDir()+"/"+p.vrfNetns(name), "--mount="+p.t.Lab.MountNS, "--", "mount", "--bind", "/proc/self/ns/net", view)
}

// waitVRFs waits until zebra has adopted every VRF's namespace (`show vrf`
// lists it with an id). Zebra notices a new namespace by inotify and polls
// it for up to a second or so before it is a namespace; a VRF configured
// before that is refused.
func (p *plumber) waitVRFs(ctx context.Context, vrfs []labVRF) error {
	if len(vrfs) == 0 {
		return nil
	}
	start := time.Now()
	for {
		out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show vrf")
		var missing []string
		if err == nil {
			active := map[string]bool{}
			for _, line := range strings.Split(string(out), "\n") {
				// "vrf NAME id N netns PATH" (active) or "vrf NAME inactive"
				if f := strings.Fields(line); len(f) >= 3 && f[0] == "vrf" && f[2] == "id" {
					active[f[1]] = true
				}
			}
			for _, v := range vrfs {
				if !active[v.Name] {
					missing = append(missing, v.Name)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		if time.Since(start) > 15*time.Second {
			if err != nil {
				return fmt.Errorf("vtysh show vrf: %v: %s", err, lastLines(out, 3))
			}
			return fmt.Errorf("zebra did not adopt the namespaces of vrfs %s within 15s (is it running with -n?): %s", strings.Join(missing, ", "), lastLines(out, 6))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// bindVNIs gives every VRF its L3VNI in zebra (`vrf X / vni N`) before
// the reload, and waits until the running config shows it. frr-reload
// could do it, but it applies the lines it still sees missing a second
// time, and zebra shows a VRF's VNI a moment after taking it: the second
// pass then sends `vrf X` right after a `router bgp` stanza, where vtysh
// reads it as bgpd's `vrf-policy`, and the whole reload fails.
func (p *plumber) bindVNIs(ctx context.Context, vrfs []labVRF) error {
	if len(vrfs) == 0 {
		return nil
	}
	start := time.Now()
	sent := false
	for {
		out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show running-config")
		if err != nil {
			return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
		}
		have := runningVNIs(string(out))
		args := []string{"--vty_socket", p.t.VtySocket, "-c", "configure terminal"}
		var missing []string
		for _, v := range vrfs {
			if have[v.Name] == v.VNI {
				continue
			}
			missing = append(missing, v.Name)
			args = append(args, "-c", "vrf "+v.Name)
			if old := have[v.Name]; old != 0 {
				args = append(args, "-c", "no vni "+strconv.Itoa(int(old)))
			}
			args = append(args, "-c", "vni "+strconv.Itoa(int(v.VNI)), "-c", "exit-vrf")
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("zebra did not take the L3VNIs of vrfs %s within 10s", strings.Join(missing, ", "))
		}
		if !sent {
			sent = true
			if err := p.run(ctx, "vtysh", args...); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unbindDropped takes the VRFs the config no longer declares out of BGP
// before the reload: their L3VNI first, then, once bgpd has let go of it,
// their BGP instance. frr-reload would send both in one batch, and bgpd
// refuses `no router bgp N vrf X` ("Please unconfigure l3vni") until
// zebra's unbinding of the VNI has reached it; the reload would fail, the
// previous config (VNI and all) be restored, and every retry race again.
func (p *plumber) unbindDropped(ctx context.Context, lc *labConf) error {
	out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show running-config")
	if err != nil {
		return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
	}
	vnis, instances := runningVNIs(string(out)), runningVRFInstances(string(out))
	var dropped []string
	for vrf := range instances {
		if lc.vni(vrf) == 0 {
			dropped = append(dropped, vrf)
		}
	}
	slices.Sort(dropped)
	for _, vrf := range dropped {
		if n := vnis[vrf]; n != 0 {
			if err := p.run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "configure terminal", "-c", "vrf "+vrf, "-c", fmt.Sprintf("no vni %d", n), "-c", "exit-vrf"); err != nil {
				return err
			}
		}
		start := time.Now()
		for {
			// vtysh exits 0 on bgpd's refusal too: the running config says.
			p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "configure terminal", "-c", "no "+instances[vrf])
			out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show running-config")
			if err != nil {
				return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
			}
			if _, still := runningVRFInstances(string(out))[vrf]; !still {
				break
			}
			if time.Since(start) > 10*time.Second {
				return fmt.Errorf("bgpd kept %q for 10s after its L3VNI was unbound", instances[vrf])
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// runningVRFInstances maps each VRF with a BGP instance in a running config
// to that instance's line (`router bgp N vrf X`).
func runningVRFInstances(conf string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(conf, "\n") {
		if f := strings.Fields(line); len(f) == 5 && !strings.HasPrefix(line, " ") && f[0] == "router" && f[1] == "bgp" && f[3] == "vrf" {
			out[f[4]] = strings.Join(f, " ")
		}
	}
	return out
}

// runningVNIs reads the `vrf X / vni N` stanzas of a running config.
func runningVNIs(conf string) map[string]uint32 {
	out := map[string]uint32{}
	vrf := ""
	for _, line := range strings.Split(conf, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case !strings.HasPrefix(line, " "):
			vrf = ""
			if len(f) == 2 && f[0] == "vrf" {
				vrf = f[1]
			}
		case vrf != "" && len(f) >= 2 && f[0] == "vni":
			if n, err := strconv.ParseUint(f[1], 10, 24); err == nil {
				out[vrf] = uint32(n)
			}
		}
	}
	return out
}

// noProtodown clears protodown on a VRF's VXLAN device. Zebra's EVPN
// multihoming code holds VXLAN devices that appear within its startup
// delay (180s from zebra's start, even when the configuration later sets
// the delay to 0) in protodown, and nothing in a lab without multihoming
// ever lifts it: the L3VNI would stay down and no type-5 route would be
// advertised.
func (p *plumber) noProtodown(ctx context.Context, v labVRF) error {
	ns, vx := p.vrfNetns(v.Name), "vx"+strconv.Itoa(int(v.VNI))
	out, err := p.l.Run(ctx, "ip", "-n", ns, "-d", "link", "show", "dev", vx)
	if err != nil {
		return fmt.Errorf("ip -n %s link show %s: %v: %s", ns, vx, err, lastLines(out, 2))
	}
	if !strings.Contains(string(out), "protodown on") {
		return nil
	}
	return p.run(ctx, "ip", "-n", ns, "link", "set", "dev", vx, "protodown", "off")
}

// placePorts moves every server port into the namespace its interface
// stanza names, its VRF's or the underlay's, and sets it up, or down when
// the stanza says `shutdown`.
func (p *plumber) placePorts(ctx context.Context, lc *labConf) error {
	vrfs, err := p.vrfs()
	if err != nil {
		return err
	}
	where := map[string]string{} // port -> namespace it is in now
	isUp := map[string]bool{}
	vrfOfNS := map[string]string{p.t.Netns: ""}
	for _, v := range vrfs {
		vrfOfNS[p.vrfNetns(v)] = v
	}
	for ns := range vrfOfNS {
		names, up, err := p.linkStates(ctx, ns)
		if err != nil {
			return err
		}
		for _, n := range names {
			if slices.Contains(p.t.Lab.Ports, n) {
				where[n], isUp[n] = ns, up[n]
			}
		}
	}
	var running string // read once, when a port moves
	for _, port := range p.t.Lab.Ports {
		want := p.t.Netns
		if v := lc.PortVRF[port]; v != "" {
			want = p.vrfNetns(v)
		}
		cur, ok := where[port]
		if !ok {
			return fmt.Errorf("port %s is in none of the device's namespaces", port)
		}
		state := map[bool]string{true: "down", false: "up"}[lc.Shutdown[port]]
		if cur == want {
			if isUp[port] == lc.Shutdown[port] {
				if err := p.run(ctx, "ip", "-n", cur, "link", "set", port, state); err != nil {
					return err
				}
			}
			continue
		}
		if running == "" {
			out, err := p.l.Run(ctx, "vtysh", "--vty_socket", p.t.VtySocket, "-c", "show running-config")
			if err != nil {
				return fmt.Errorf("vtysh show running-config: %v: %s", err, lastLines(out, 3))
			}
			running = string(out)
		}
		if err := p.clearStanza(ctx, running, port, vrfOfNS[cur]); err != nil {
			return err
		}
		// Moving a device between namespaces drops its addresses: zebra
		// sets the new ones from the interface stanza.
		if err := p.run(ctx, "ip", "-n", cur, "link", "set", port, "netns", want); err != nil {
			return err
		}
		if err := p.run(ctx, "ip", "-n", want, "link", "set", port, state); err != nil {
			return err
		}
	}
	return nil
}

// clearStanza removes the configuration of a port in the VRF it is about
// to leave ("" for the default VRF), while it is still there. Zebra keeps
// an interface's configuration in the VRF it was made in: once the port
// has moved, `interface swpN vrf X` is an inactive interface whose lines
// cannot be removed, and frr-reload fails on them.
func (p *plumber) clearStanza(ctx context.Context, running, port, vrf string) error {
	header := "interface " + port
	if vrf != "" {
		header += " vrf " + vrf
	}
	var nos []string
	in := false
	for _, line := range strings.Split(running, "\n") {
		if !strings.HasPrefix(line, " ") {
			in = strings.TrimSpace(line) == header
			continue
		}
		if !in {
			continue
		}
		l := strings.TrimSpace(line)
		switch {
		case l == "" || l == "!" || l == "exit":
		case strings.HasPrefix(l, "no "):
			nos = append(nos, strings.TrimPrefix(l, "no "))
		case strings.HasPrefix(l, "description "):
			nos = append(nos, "no description") // takes no text
		default:
			nos = append(nos, "no "+l)
		}
	}
	if len(nos) == 0 {
		return nil
	}
	args := []string{"--vty_socket", p.t.VtySocket, "-c", "configure terminal", "-c", header}
	for _, n := range nos {
		args = append(args, "-c", n)
	}
	return p.run(ctx, "vtysh", append(args, "-c", "exit")...)
}

// removeVRF moves the server ports out of VRF name (a namespace takes its
// veths with it when it goes), unmounts it from the daemons' view and
// deletes it.
func (p *plumber) removeVRF(ctx context.Context, name string, shutdown map[string]bool) error {
	ns := p.vrfNetns(name)
	names, err := p.links(ctx, ns)
	if err != nil {
		return err
	}
	// Ports go home, the tunnel and bridge go away: zebra must not see the
	// namespace vanish with interfaces still in it (zebra 8.4 can abort
	// on that).
	for _, n := range names {
		switch {
		case n == "lo":
		case slices.Contains(p.t.Lab.Ports, n):
			if err := p.run(ctx, "ip", "-n", ns, "link", "set", n, "netns", p.t.Netns); err != nil {
				return err
			}
			state := map[bool]string{true: "down", false: "up"}[shutdown[n]]
			if err := p.run(ctx, "ip", "-n", p.t.Netns, "link", "set", n, state); err != nil {
				return err
			}
		default:
			if err := p.run(ctx, "ip", "-n", ns, "link", "del", n); err != nil {
				return err
			}
		}
	}
	view := "/run/netns/" + name
	if err := p.run(ctx, "nsenter", "--mount="+p.t.Lab.MountNS, "--", "mountpoint", "-q", view); err == nil {
		if err := p.run(ctx, "nsenter", "--mount="+p.t.Lab.MountNS, "--", "umount", view); err != nil {
			return err
		}
	}
	if err := p.run(ctx, "nsenter", "--mount="+p.t.Lab.MountNS, "--", "rm", "-f", view); err != nil {
		return err
	}
	return p.run(ctx, "ip", "netns", "del", ns)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
