package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// FRRTarget says where one device's FRR runs.
type FRRTarget struct {
	// VtySocket is the directory of the daemons' vty sockets (vtysh
	// --vty_socket).
	VtySocket string `json:"vtySocket"`
	// ConfDir holds the device's frr.conf (written by the driver).
	ConfDir string `json:"confDir"`
	// Netns runs vtysh, frr-reload and nft inside this network namespace
	// ("" for the current one).
	Netns string `json:"netns,omitempty"`
	// VRFNetns maps a VRF name to the namespace its nftables ruleset
	// (gbp-<vrf>.nft) is loaded into: FRR's netns VRF backend makes each VRF
	// a namespace. A VRF missing here gets Netns.
	VRFNetns map[string]string `json:"vrfNetns,omitempty"`
}

// LoadFRRTargets reads a JSON object of device name -> FRRTarget.
func LoadFRRTargets(path string) (map[string]FRRTarget, error) {
	if path == "" {
		return nil, domain.Invalid("frr-targets", "the frr driver needs --frr-targets FILE (device -> vty socket, conf dir, namespaces)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, domain.Invalid("frr-targets", "cannot read %s: %v", path, err)
	}
	var ts map[string]FRRTarget
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a lab's targets file needs the lab's driver, not this one
	if err := dec.Decode(&ts); err != nil {
		return nil, domain.Invalid("frr-targets", "%s is not a JSON object of device -> target: %v (a file written by jobfabric lab up needs --fabric-driver lab)", path, err)
	}
	for name, t := range ts {
		if t.VtySocket == "" || t.ConfDir == "" {
			return nil, domain.Invalid("frr-targets", "device %s needs vtySocket and confDir", name)
		}
	}
	return ts, nil
}

// Runner runs a command and returns its combined output.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// ExecRunner runs commands with os/exec.
func ExecRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// FRR applies frr.conf to running FRR daemons with frr-reload.py (which
// computes and applies the difference to the running config) and loads
// the nftables rulesets of segmented VRFs. The whole new config is checked
// first (frr-reload --test); if the reload fails, the previous frr.conf
// (kept as frr.conf.prev before the reload) is reloaded again.
//
// A reload is never cut off half-way: Apply's context is honoured up to
// the reload (the underlay guard, writing frr.conf.next, the --test
// check: nothing of the new config is applied yet); from the --reload on
// (the reload, the restore of the previous config if it fails, the VRFs'
// rulesets) the commands run to their end whatever happens to the
// context, bounded only by ReloadTimeout, so a caller's deadline never
// leaves a switch with half a configuration.
type FRR struct {
	Targets map[string]FRRTarget
	Run     Runner
	// Hosts, when set, says where a device's FRR runs (the ssh driver: a
	// remote host); nil runs every step on this machine with Run.
	Hosts func(ctx context.Context, device string) (Host, error)
	// Reload is the frr-reload.py path (default /usr/lib/frr/frr-reload.py).
	Reload string
	// ReloadTimeout bounds a reload once started, its restore and the
	// rulesets after it, whatever Apply's context says (0: 5m).
	ReloadTimeout time.Duration
}

// Name implements Driver.
func (f *FRR) Name() string { return "frr" }

func (f *FRR) reloadPath() string {
	if f.Reload != "" {
		return f.Reload
	}
	return "/usr/lib/frr/frr-reload.py"
}

// Host is where a device's FRR runs: the steps of Apply, and nothing
// else, so that the sequence (guard, check, reload, restore) is written
// once for this machine and for a remote one.
type Host interface {
	// WriteFile writes data to path (mode 0644) and syncs it to disk.
	WriteFile(ctx context.Context, path string, data []byte) error
	// Exists reports whether path exists.
	Exists(ctx context.Context, path string) (bool, error)
	// Rename renames from to to, atomically (same directory).
	Rename(ctx context.Context, from, to string) error
	// Copy copies from to to (mode 0644) and syncs it.
	Copy(ctx context.Context, from, to string) error
	// Run runs a command and returns its combined output.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ErrHostLost is wrapped by a Host's error when the connection to the
// host ended before the command said how it ended: whether it ran to its
// end is not known.
var ErrHostLost = errors.New("connection to the host lost")

// localHost is this machine, commands run with a Runner.
type localHost struct{ run Runner }

func (h localHost) WriteFile(_ context.Context, path string, data []byte) error {
	return writeSynced(path, data, 0o644)
}

func (h localHost) Exists(_ context.Context, path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (h localHost) Rename(_ context.Context, from, to string) error { return os.Rename(from, to) }

func (h localHost) Copy(_ context.Context, from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return writeSynced(to, b, 0o644)
}

func (h localHost) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return h.run(ctx, name, args...)
}

func (f *FRR) host(ctx context.Context, device string) (Host, error) {
	if f.Hosts != nil {
		return f.Hosts(ctx, device)
	}
	return localHost{f.Run}, nil
}

// in runs a command in the target's namespace.
func in(ctx context.Context, h Host, netns string, name string, args ...string) ([]byte, error) {
	if netns != "" {
		args = append([]string{"netns", "exec", netns, name}, args...)
		name = "ip"
	}
	return h.Run(ctx, name, args...)
}

// stateUnknown reports an error met once the device had begun to change:
// a lost connection leaves the device's state unknown, not restored.
func stateUnknown(device string, err error) error {
	return fmt.Errorf("device %s: state unknown: %w (the reload may or may not have run to its end; the next deploy applies the whole config again)", device, err)
}

// Apply implements Driver.
func (f *FRR) Apply(ctx context.Context, d Device) error {
	t, ok := f.Targets[d.Name]
	if !ok {
		return fmt.Errorf("device %s: no FRR target configured", d.Name)
	}
	var conf string
	var guard *ruleset
	var rules []ruleset
	for _, file := range d.Files {
		switch {
		case file.Name == "frr.conf":
			conf = file.Content
		case file.Name == "guard.nft":
			guard = &ruleset{file: file.Name, content: file.Content}
		case strings.HasSuffix(file.Name, ".nft"):
			// gbp-<vrf>.nft (group policy), guard-<vrf>.nft (the VRF's
			// server-port guard): loaded in the VRF's namespace.
			for _, kind := range []string{"gbp-", "guard-"} {
				if vrf, ok := strings.CutPrefix(strings.TrimSuffix(file.Name, ".nft"), kind); ok && vrf != "" {
					rules = append(rules, ruleset{file: file.Name, vrf: vrf, content: file.Content})
				}
			}
		}
	}
	if conf == "" {
		return fmt.Errorf("device %s: no frr.conf to apply (NOS %s)", d.Name, d.NOS)
	}
	for _, r := range rules {
		if _, ok := t.VRFNetns[r.vrf]; !ok && strings.HasPrefix(r.file, "guard-") {
			// A VRF guard accepts nothing but ICMP for the switch itself:
			// loaded in the underlay's namespace it would cut BGP.
			return fmt.Errorf("device %s: vrf %s has no network namespace of its own (vrfNetns), so its guard %s cannot be loaded; nothing applied (the frr driver needs FRR's netns VRF backend)", d.Name, r.vrf, r.file)
		}
	}
	h, err := f.host(ctx, d.Name)
	if err != nil {
		return fmt.Errorf("device %s: nothing applied: %w", d.Name, err)
	}
	// The underlay's guard goes first: a port this config takes out of a
	// VRF is never in the default table unguarded.
	if guard != nil {
		if err := f.loadRules(ctx, h, t, t.Netns, *guard); err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	current := filepath.Join(t.ConfDir, "frr.conf")
	next := filepath.Join(t.ConfDir, "frr.conf.next")
	if err := h.WriteFile(ctx, next, []byte(conf)); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	reload := func(ctx context.Context, mode, file string) error {
		out, err := in(ctx, h, t.Netns, "python3", f.reloadPath(), mode, "--vty_socket", t.VtySocket, "--confdir", t.ConfDir, "--rundir", t.ConfDir, file)
		if err != nil {
			return fmt.Errorf("frr-reload %s: %w: %s", mode, err, lastLines(out, 5))
		}
		return nil
	}
	if err := reload(ctx, "--test", next); err != nil {
		return fmt.Errorf("device %s: the new config was refused, nothing applied: %w", d.Name, err)
	}
	// frr-reload --reload of a file other than CONFDIR/frr.conf ends with
	// vtysh write, also when some lines failed: frr.conf then holds the
	// half-applied config. The previous one is restored from a copy.
	prev := filepath.Join(t.ConfDir, "frr.conf.prev")
	hasPrev, err := h.Exists(ctx, current)
	if err != nil {
		return fmt.Errorf("device %s: nothing applied: %w", d.Name, err)
	}
	if hasPrev {
		if err := h.Copy(ctx, current, prev); err != nil {
			return fmt.Errorf("device %s: keeping the previous config, nothing applied: %w", d.Name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("device %s: checked but not reloaded, nothing applied: %w", d.Name, err)
	}
	// From here on the device changes: run to the end (see FRR).
	timeout := f.ReloadTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := reload(ctx, "--reload", next); err != nil {
		if errors.Is(err, ErrHostLost) || ctx.Err() != nil {
			// Cut by ReloadTimeout or a lost connection: how far it got
			// is not known, and no restore can run on a spent context.
			return stateUnknown(d.Name, err)
		}
		if hasPrev {
			rerr := reload(ctx, "--reload", prev)
			if rerr == nil {
				rerr = h.Rename(ctx, prev, current)
			}
			if errors.Is(rerr, ErrHostLost) {
				return stateUnknown(d.Name, fmt.Errorf("%w; then restoring the previous config: %w", err, rerr))
			}
			if rerr != nil {
				return fmt.Errorf("device %s: %w; restoring the previous config failed too: %v", d.Name, err, rerr)
			}
			return fmt.Errorf("device %s: %w (previous config restored)", d.Name, err)
		}
		return fmt.Errorf("device %s: %w (the device had no frr.conf to restore: its state is what the failed reload left)", d.Name, err)
	}
	if err := h.Rename(ctx, next, current); err != nil {
		if errors.Is(err, ErrHostLost) {
			return stateUnknown(d.Name, fmt.Errorf("reloaded, then renaming frr.conf.next: %w", err))
		}
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	for _, r := range rules {
		ns := t.Netns
		if v, ok := t.VRFNetns[r.vrf]; ok {
			ns = v
		}
		if err := f.loadRules(ctx, h, t, ns, r); err != nil {
			if errors.Is(err, ErrHostLost) {
				return stateUnknown(d.Name, fmt.Errorf("reloaded, then loading %s: %w", r.file, err))
			}
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	return nil
}

// ruleset is one nftables file of a device; vrf is "" for the underlay.
type ruleset struct{ file, vrf, content string }

// LoadRules writes the nftables ruleset file (named file, holding content)
// to t's conf dir and loads it in namespace ns; the lab's driver
// (internal/lab/labdeploy) loads the underlay guard with it before it
// moves ports.
func (f *FRR) LoadRules(ctx context.Context, t FRRTarget, ns, file, content string) error {
	return f.loadRules(ctx, localHost{f.Run}, t, ns, ruleset{file: file, content: content})
}

// loadRules writes a ruleset to the device's conf dir and loads it in
// namespace ns. nft -f replaces the table atomically: the ruleset deletes
// its own table first and the whole file is one transaction.
func (f *FRR) loadRules(ctx context.Context, h Host, t FRRTarget, ns string, r ruleset) error {
	path := filepath.Join(t.ConfDir, r.file)
	if err := h.WriteFile(ctx, path, []byte(r.content)); err != nil {
		return err
	}
	if out, err := in(ctx, h, ns, "nft", "-f", path); err != nil {
		return fmt.Errorf("nft -f %s in %s: %w: %s", path, ns, err, lastLines(out, 5))
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
