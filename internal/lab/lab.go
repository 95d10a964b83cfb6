package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// DefaultDir is the state directory of `jobfabric lab` (one lab at a time
// per state directory); JOBFABRIC_LAB_DIR overrides it.
const DefaultDir = "/run/jobfabric-lab"

// Limits of a lab: it is for proofs, not for scale.
const (
	MaxSwitches  = 32
	MaxEndpoints = 128
)

// FRRDir is where the FRR daemons are installed.
var FRRDir = "/usr/lib/frr"

// Options says what lab to build.
type Options struct {
	// Topology is the topology file (YAML or JSON), or set Parsed.
	Topology string
	Parsed   *domain.Topology
	// Dir is the state directory (default DefaultDir): it holds lab.json
	// of the lab that is up, and the lab's run directory.
	Dir string
	// Log receives one line per step (nil: silent).
	Log io.Writer
}

// Lab is a lab that is up (or was, for Down).
type Lab struct {
	// Prefix starts the name of every namespace of the lab.
	Prefix string `json:"prefix"`
	// RunDir holds the daemons' files, one directory per switch, and
	// targets.json.
	RunDir    string     `json:"runDir"`
	Dir       string     `json:"dir"`
	Topology  string     `json:"topology,omitempty"`
	Created   time.Time  `json:"created"`
	Devices   []Device   `json:"devices"`
	Endpoints []Endpoint `json:"endpoints"`
	// Ready is set once Up finished.
	Ready bool `json:"ready"`
}

// Device is one switch of the lab.
type Device struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // leaf, spine or super-spine
	Netns    string `json:"netns"`
	Dir      string `json:"dir"` // vty sockets, pid files, configs, logs
	Loopback string `json:"loopback"`
	// HolderPID holds the daemons' private mount namespace.
	HolderPID int `json:"holderPid"`
	// Ports are the server ports (leaves) and uplinks.
	Ports   []string `json:"ports"`
	Uplinks []string `json:"uplinks"`
}

// Endpoint is one server NIC: a namespace cabled to a leaf port.
type Endpoint struct {
	Server string `json:"server"`
	NIC    string `json:"nic"`
	GPU    int    `json:"gpu"`
	Netns  string `json:"netns"`
	Iface  string `json:"iface"`
	Leaf   string `json:"leaf"`
	Port   string `json:"port"`
	// IPv4 and IPv6 are the server side of the cable's prefixes; the leaf
	// side (the gateway) is configured by FRR when the port is in a VRF.
	IPv4     string `json:"ipv4"`
	IPv6     string `json:"ipv6,omitempty"`
	Gateway4 string `json:"gateway4"`
	Gateway6 string `json:"gateway6,omitempty"`
}

// Name is server/nic.
func (e *Endpoint) Name() string { return e.Server + "/" + e.NIC }

// Addr4 is the endpoint's IPv4 address without the prefix length.
func (e *Endpoint) Addr4() string {
	a, _, _ := strings.Cut(e.IPv4, "/")
	return a
}

// TargetsFile is the deploy driver's targets file of the lab.
func (l *Lab) TargetsFile() string { return filepath.Join(l.RunDir, "targets.json") }

// Device returns the named switch, or nil.
func (l *Lab) Device(name string) *Device {
	for i := range l.Devices {
		if l.Devices[i].Name == name {
			return &l.Devices[i]
		}
	}
	return nil
}

// ExistsError says a lab is already up in the state directory.
type ExistsError struct{ Lab *Lab }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("a lab is already up in %s (namespaces %s*, run dir %s, created %s): run `jobfabric lab down` first",
		e.Lab.Dir, e.Lab.Prefix, e.Lab.RunDir, e.Lab.Created.Format(time.RFC3339))
}

// Check says whether this machine can run a lab: root, FRR, nftables,
// iproute2, util-linux's nsenter and unshare, ping, and network
// namespaces. The error says what is missing.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root (network and mount namespaces)")
	}
	var missing []string
	for _, p := range []string{FRRDir + "/zebra", FRRDir + "/bgpd", FRRDir + "/frr-reload.py"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, t := range []string{"vtysh", "nft", "ip", "nsenter", "unshare", "mountpoint", "ping", "python3", "sleep"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the lab needs FRR (frr, frr-pythontools), nftables, iproute2, util-linux, iputils-ping and python3; missing: %s", strings.Join(missing, ", "))
	}
	if _, err := user.Lookup("frr"); err != nil {
		return errors.New("the lab runs the FRR daemons as user frr, which does not exist (install frr)")
	}
	name := "jflcheck-" + randHex(4)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot create a network namespace: %v: %s", err, strings.TrimSpace(string(out)))
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	for _, c := range []struct {
		what string
		cmd  []string
	}{
		{"a VXLAN device with group-policy extension (gbp)", []string{"ip", "-n", name, "link", "add", "vx1", "type", "vxlan", "id", "1", "dstport", "4789", "local", "127.0.0.1", "gbp"}},
		{"nftables in a network namespace", []string{"ip", "netns", "exec", name, "nft", "list", "ruleset"}},
		{"a private mount namespace with a tmpfs", []string{"unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "jflcheck", "/mnt"}},
	} {
		if out, err := exec.Command(c.cmd[0], c.cmd[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("cannot make %s: %v: %s", c.what, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// traversable checks that every user (the daemons run as frr) can reach
// dir.
func traversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return domain.Invalid("lab-dir", "the FRR daemons run as user frr and cannot reach %s: %s is mode %s; use a --lab-dir every user can traverse", dir, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func stateFile(dir string) string { return filepath.Join(dir, "lab.json") }

func dirOr(d string) string {
	if d != "" {
		return d
	}
	if e := os.Getenv("JOBFABRIC_LAB_DIR"); e != "" {
		return e
	}
	return DefaultDir
}

// Load returns the lab that is up in state directory dir ("" for the
// default), or an error saying there is none.
func Load(dir string) (*Lab, error) {
	dir = dirOr(dir)
	b, err := os.ReadFile(stateFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &domain.Error{Code: domain.CodeNotFound, Field: "lab", Message: fmt.Sprintf("no lab is up in %s (jobfabric lab up --topology FILE builds one)", dir)}
	}
	if err != nil {
		return nil, err
	}
	var l Lab
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile(dir), err)
	}
	return &l, nil
}

func (l *Lab) save() error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := stateFile(l.Dir) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, stateFile(l.Dir))
}

func (l *Lab) logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// loadTopology reads, normalizes and validates the topology, and checks
// that a lab can be built of it.
func loadTopology(o Options) (*domain.Topology, error) {
	t := o.Parsed
	if t == nil {
		if o.Topology == "" {
			return nil, domain.Invalid("topology", "a topology file is required (--topology FILE)")
		}
		b, err := os.ReadFile(o.Topology)
		if err != nil {
			return nil, domain.Invalid("topology", "cannot read %s: %v", o.Topology, err)
		}
		if t, err = topology.Parse(b); err != nil {
			return nil, err
		}
	}
	if err := topology.Normalize(t, nil); err != nil {
		return nil, err
	}
	if err := topology.Validate(t); err != nil {
		return nil, err
	}
	switches, endpoints := 0, 0
	for _, s := range t.Sites {
		for _, f := range s.Fabrics {
			for _, sw := range slices.Concat(f.SuperSpines, f.Spines, f.Leaves) {
				switches++
				if sw.NOS != "frr" {
					return nil, domain.Invalid("nos", "switch %s runs %q: the lab runs FRR only, set nos: frr on every switch", sw.Name, sw.NOS)
				}
			}
			endpoints += len(f.Cables)
		}
	}
	if switches > MaxSwitches || endpoints > MaxEndpoints {
		return nil, domain.Invalid("topology", "%d switches and %d server links: a lab holds at most %d and %d", switches, endpoints, MaxSwitches, MaxEndpoints)
	}
	return t, nil
}

// Up builds the lab the options describe and starts its daemons; a lab
// already up in the same state directory is refused (*ExistsError). What
// Up created is removed again when it fails.
func Up(ctx context.Context, o Options) (l *Lab, err error) {
	topo, err := loadTopology(o)
	if err != nil {
		return nil, err
	}
	dir := dirOr(o.Dir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		os.Chmod(dir, 0o755) // whatever the umask: the daemons (user frr) work below it
	}
	if cur, err := Load(dir); err == nil {
		return nil, &ExistsError{Lab: cur}
	}
	if err := traversable(dir); err != nil {
		return nil, err
	}
	id := randHex(3)
	l = &Lab{Prefix: "jfl" + id + "-", RunDir: filepath.Join(dir, "jfl"+id), Dir: dir, Topology: o.Topology, Created: time.Now().UTC()}
	// Claim the state directory first, atomically: a second Up is refused.
	fh, err := os.OpenFile(stateFile(dir), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			if cur, lerr := Load(dir); lerr == nil {
				return nil, &ExistsError{Lab: cur}
			}
			return nil, fmt.Errorf("a lab is already up in %s (its lab.json is unreadable): run `jobfabric lab down` first", dir)
		}
		return nil, err
	}
	fh.Close()
	defer func() {
		if err != nil {
			if derr := l.Down(context.WithoutCancel(ctx)); derr != nil {
				err = fmt.Errorf("%w (and tearing down: %v)", err, derr)
			}
			l = nil
		}
	}()
	if err := l.save(); err != nil {
		return l, err
	}
	if err := os.MkdirAll(l.RunDir, 0o755); err != nil {
		return l, err
	}
	start := time.Now()
	if err := l.build(ctx, topo, o.Log); err != nil {
		return l, err
	}
	l.logf(o.Log, "namespaces and links: %d switches, %d endpoints (%s)", len(l.Devices), len(l.Endpoints), time.Since(start).Round(time.Millisecond))
	if err := l.startFRR(ctx, o.Log); err != nil {
		return l, err
	}
	if err := l.writeTargets(); err != nil {
		return l, err
	}
	l.Ready = true
	if err := l.save(); err != nil {
		return l, err
	}
	l.logf(o.Log, "lab %s is up in %s (%s); deploy targets: %s", strings.TrimSuffix(l.Prefix, "-"), l.RunDir, time.Since(start).Round(time.Millisecond), l.TargetsFile())
	return l, nil
}

// sh runs a command and returns its error with its output.
func sh(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ifaceName(nic string) string {
	if len(nic) == 0 || len(nic) > 15 || strings.ContainsAny(nic, "/ :") {
		return "eth0"
	}
	return nic
}

// build creates the namespaces and links and addresses the endpoints.
func (l *Lab) build(ctx context.Context, topo *domain.Topology, log io.Writer) error {
	nsOf := map[string]string{}
	addDevice := func(sw domain.Switch, role string) {
		ns := l.Prefix + sw.Name
		nsOf[sw.Name] = ns
		l.Devices = append(l.Devices, Device{Name: sw.Name, Role: role, Netns: ns, Dir: filepath.Join(l.RunDir, sw.Name), Loopback: sw.Loopback})
	}
	for _, s := range topo.Sites {
		for _, f := range s.Fabrics {
			for _, sw := range f.SuperSpines {
				addDevice(sw, "super-spine")
			}
			for _, sw := range f.Spines {
				addDevice(sw, "spine")
			}
			for _, sw := range f.Leaves {
				addDevice(sw, "leaf")
			}
			servers := map[string]*domain.Server{}
			for i := range f.Servers {
				servers[f.Servers[i].Name] = &f.Servers[i]
			}
			for _, c := range f.Cables {
				e := Endpoint{Server: c.Server, NIC: c.NIC, GPU: -1, Netns: l.Prefix + "h-" + c.Server + "-" + c.NIC, Iface: ifaceName(c.NIC), Leaf: c.Leaf, Port: c.Port}
				if srv := servers[c.Server]; srv != nil {
					for _, n := range srv.NICs {
						if n.Name == c.NIC {
							e.GPU = n.GPU
						}
					}
				}
				for _, x := range []struct {
					p        string
					addr, gw *string
				}{{c.IPv4, &e.IPv4, &e.Gateway4}, {c.IPv6, &e.IPv6, &e.Gateway6}} {
					if x.p == "" {
						continue
					}
					p, err := netip.ParsePrefix(x.p)
					if err != nil {
						return fmt.Errorf("cable %s/%s: %v", c.Server, c.NIC, err)
					}
					// The leaf takes the first address, the server the second.
					*x.gw = p.Masked().Addr().String()
					*x.addr = netip.PrefixFrom(p.Masked().Addr().Next(), p.Bits()).String()
				}
				if e.IPv4 == "" {
					return fmt.Errorf("cable %s/%s has no IPv4 prefix", c.Server, c.NIC)
				}
				l.Endpoints = append(l.Endpoints, e)
				d := l.Device(c.Leaf)
				d.Ports = append(d.Ports, c.Port)
			}
			for _, u := range f.Uplinks {
				l.Device(u.Leaf).Uplinks = append(l.Device(u.Leaf).Uplinks, u.LeafPort)
				l.Device(u.Spine).Uplinks = append(l.Device(u.Spine).Uplinks, u.SpinePort)
			}
			for _, u := range f.SpineUplinks {
				l.Device(u.Spine).Uplinks = append(l.Device(u.Spine).Uplinks, u.SpinePort)
				l.Device(u.SuperSpine).Uplinks = append(l.Device(u.SuperSpine).Uplinks, u.SuperSpinePort)
			}
		}
	}
	if err := l.save(); err != nil { // Down must find every name from here on
		return err
	}
	for _, d := range l.Devices {
		if err := sh(ctx, "ip", "netns", "add", d.Netns); err != nil {
			return err
		}
		if err := sh(ctx, "ip", "-n", d.Netns, "link", "set", "lo", "up"); err != nil {
			return err
		}
		if err := sh(ctx, "ip", "netns", "exec", d.Netns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"); err != nil {
			return err
		}
	}
	veth := func(nsA, a, nsB, b string) error {
		if err := sh(ctx, "ip", "link", "add", a, "netns", nsA, "type", "veth", "peer", "name", b, "netns", nsB); err != nil {
			return err
		}
		if err := sh(ctx, "ip", "-n", nsA, "link", "set", a, "up"); err != nil {
			return err
		}
		return sh(ctx, "ip", "-n", nsB, "link", "set", b, "up")
	}
	for _, s := range topo.Sites {
		for _, f := range s.Fabrics {
			for _, u := range f.Uplinks {
				if err := veth(nsOf[u.Leaf], u.LeafPort, nsOf[u.Spine], u.SpinePort); err != nil {
					return err
				}
			}
			for _, u := range f.SpineUplinks {
				if err := veth(nsOf[u.Spine], u.SpinePort, nsOf[u.SuperSpine], u.SuperSpinePort); err != nil {
					return err
				}
			}
		}
	}
	for _, e := range l.Endpoints {
		if err := sh(ctx, "ip", "netns", "add", e.Netns); err != nil {
			return err
		}
		if err := sh(ctx, "ip", "-n", e.Netns, "link", "set", "lo", "up"); err != nil {
			return err
		}
		if err := veth(nsOf[e.Leaf], e.Port, e.Netns, e.Iface); err != nil {
			return err
		}
		cmds := [][]string{
			{"ip", "-n", e.Netns, "addr", "add", e.IPv4, "dev", e.Iface},
			{"ip", "-n", e.Netns, "route", "add", "default", "via", e.Gateway4, "dev", e.Iface},
		}
		if e.IPv6 != "" {
			cmds = append(cmds,
				[]string{"ip", "-n", e.Netns, "addr", "add", e.IPv6, "dev", e.Iface, "nodad"},
				[]string{"ip", "-n", e.Netns, "-6", "route", "add", "default", "via", e.Gateway6, "dev", e.Iface})
		}
		for _, c := range cmds {
			if err := sh(ctx, c[0], c[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// startFRR starts zebra and bgpd of every switch in the switch's
// namespace and in a private mount namespace of its own, held by a
// `sleep infinity` process, whose /run/netns is an empty tmpfs: zebra -n
// adopts every namespace it sees there as a VRF, and the deploy driver
// puts the switch's VRFs (and only those) there.
func (l *Lab) startFRR(ctx context.Context, log io.Writer) error {
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("user frr: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for i := range l.Devices {
		d := &l.Devices[i]
		if err := os.MkdirAll(d.Dir, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d.Dir, uid, gid); err != nil {
			return err
		}
		// An empty configuration: the server's first deploy brings the
		// underlay up.
		for name, content := range map[string]string{
			// The rendered frr.conf says `frr defaults datacenter`; FRR
			// takes defaults at startup only, and a daemon started with
			// other defaults shows differences frr-reload cannot remove.
			"zebra.conf": "frr defaults datacenter\nhostname " + d.Name + "\n" + labdeploy.ZebraConf,
			"bgpd.conf":  "frr defaults datacenter\nhostname " + d.Name + "\n",
			"vtysh.conf": "service integrated-vtysh-config\n",
		} {
			if err := os.WriteFile(filepath.Join(d.Dir, name), []byte(content), 0o644); err != nil {
				return err
			}
		}
		holder := exec.Command("ip", "netns", "exec", d.Netns, "unshare", "--mount", "--propagation", "private", "sleep", "infinity")
		holder.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := holder.Start(); err != nil {
			return fmt.Errorf("%s: start the mount namespace holder: %w", d.Name, err)
		}
		d.HolderPID = holder.Process.Pid
		go holder.Wait() // reaps it when Down kills it
		if err := l.save(); err != nil {
			return err
		}
		if err := waitFor(ctx, 5*time.Second, func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.HolderPID))
			return strings.HasPrefix(string(b), "sleep\x00")
		}); err != nil {
			return fmt.Errorf("%s: the mount namespace holder did not start", d.Name)
		}
		mnt := d.MountNS()
		if err := sh(ctx, "nsenter", "--mount="+mnt, "--", "mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "jobfabric-lab", "/run/netns"); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		zebra := []string{"--mount=" + mnt, "--net=/run/netns/" + d.Netns, "--", FRRDir + "/zebra", "-d"}
		if d.Role == "leaf" {
			zebra = append(zebra, "-n")
		}
		common := func(daemon string) []string {
			return []string{"-P", "0", "-i", filepath.Join(d.Dir, daemon+".pid"), "-z", filepath.Join(d.Dir, "zserv.api"),
				"--vty_socket", d.Dir, "-f", filepath.Join(d.Dir, daemon+".conf"), "--log", "file:" + filepath.Join(d.Dir, daemon+".log")}
		}
		if err := sh(ctx, "nsenter", append(zebra, common("zebra")...)...); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
		if err := waitFor(ctx, 10*time.Second, func() bool { return exists(filepath.Join(d.Dir, "zserv.api")) }); err != nil {
			return fmt.Errorf("%s: zebra did not open its API socket: %s", d.Name, tail(filepath.Join(d.Dir, "zebra.log"), 5))
		}
		bgpd := append([]string{"--mount=" + mnt, "--net=/run/netns/" + d.Netns, "--", FRRDir + "/bgpd", "-d"}, common("bgpd")...)
		if err := sh(ctx, "nsenter", bgpd...); err != nil {
			return fmt.Errorf("%s: %w", d.Name, err)
		}
	}
	for _, d := range l.Devices {
		for _, daemon := range []string{"zebra", "bgpd"} {
			if err := waitFor(ctx, 10*time.Second, func() bool { return exists(filepath.Join(d.Dir, daemon+".vty")) }); err != nil {
				return fmt.Errorf("%s: %s did not open its vty socket: %s", d.Name, daemon, tail(filepath.Join(d.Dir, daemon+".log"), 5))
			}
		}
	}
	l.logf(log, "FRR started on %d switches", len(l.Devices))
	return nil
}

// MountNS is the mount namespace of the device's daemons.
func (d *Device) MountNS() string { return fmt.Sprintf("/proc/%d/ns/mnt", d.HolderPID) }

// VRFNetnsPrefix prefixes the host names of the device's VRF namespaces.
func (d *Device) VRFNetnsPrefix() string { return d.Netns + ".vrf-" }

func (l *Lab) writeTargets() error {
	ts := map[string]labdeploy.Target{}
	for _, d := range l.Devices {
		ts[d.Name] = labdeploy.Target{
			FRRTarget: deploy.FRRTarget{VtySocket: d.Dir, ConfDir: d.Dir, Netns: d.Netns},
			Lab:       &labdeploy.Switch{MountNS: d.MountNS(), VRFNetnsPrefix: d.VRFNetnsPrefix(), Ports: slices.Clone(d.Ports)},
		}
	}
	b, err := json.MarshalIndent(ts, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.TargetsFile(), append(b, '\n'), 0o644)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no " + filepath.Base(path) + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// waitFor polls cond every 20ms for at most d.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
