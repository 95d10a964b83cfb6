package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

func dev(name, hash string, files ...string) Device {
	d := Device{Name: name, NOS: "frr", Hash: hash}
	for i := 0; i+1 < len(files); i += 2 {
		d.Files = append(d.Files, render.File{Name: files[i], Content: files[i+1]})
	}
	return d
}

func TestFileDriverSwapsWholeDevices(t *testing.T) {
	dir := t.TempDir()
	f := &File{Dir: dir, Keep: 1}
	ctx := context.Background()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, "leaf1", name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if err := f.Apply(ctx, dev("leaf1", "aaa", "frr.conf", "v1", "gbp-a.nft", "rules1")); err != nil {
		t.Fatal(err)
	}
	if read("frr.conf") != "v1" || read("gbp-a.nft") != "rules1" {
		t.Fatalf("after v1: %q %q", read("frr.conf"), read("gbp-a.nft"))
	}
	// v2 drops a file: the device directory holds exactly v2's files.
	if err := f.Apply(ctx, dev("leaf1", "bbb", "frr.conf", "v2")); err != nil {
		t.Fatal(err)
	}
	if read("frr.conf") != "v2" || !strings.Contains(read("gbp-a.nft"), "no such file") {
		t.Fatalf("after v2: %q %q", read("frr.conf"), read("gbp-a.nft"))
	}
	for _, h := range []string{"ccc", "ddd"} {
		if err := f.Apply(ctx, dev("leaf1", h, "frr.conf", h)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, ".rev"))
	if len(entries) != 2 { // current + Keep
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf(".rev holds %v, want the current version and 1 older", names)
	}
	// Re-applying the current version is harmless.
	if err := f.Apply(ctx, dev("leaf1", "ddd", "frr.conf", "ddd")); err != nil || read("frr.conf") != "ddd" {
		t.Fatalf("re-apply: %v %q", err, read("frr.conf"))
	}
	for name, d := range map[string]Device{
		"device escapes": dev("../x", "e", "frr.conf", "x"),
		"file escapes":   dev("leaf2", "e", "../frr.conf", "x"),
		"hidden file":    dev("leaf2", "e", ".frr.conf", "x"),
	} {
		if err := f.Apply(ctx, d); err == nil {
			t.Errorf("%s: applied, want refused", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "leaf2")); err == nil {
		t.Error("a refused device left files behind")
	}
}

// fakeFRR records commands; fail makes the command whose line contains
// the key fail. Like frr-reload.py, a --reload of a file other than
// CONFDIR/frr.conf writes the running config there (vtysh write), even
// when it fails; reloaded holds the content of each file reloaded.
type fakeFRR struct {
	calls    []string
	fail     map[string]bool
	reloaded []string
}

func (r *fakeFRR) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	line := name + " " + strings.Join(args, " ")
	r.calls = append(r.calls, line)
	if slices.Contains(args, "--reload") {
		file := args[len(args)-1]
		b, _ := os.ReadFile(file)
		r.reloaded = append(r.reloaded, string(b))
		if filepath.Base(file) != "frr.conf" {
			os.WriteFile(filepath.Join(filepath.Dir(file), "frr.conf"), []byte("half-applied"), 0o644)
		}
	}
	for k := range r.fail {
		if strings.Contains(line, k) {
			return []byte("line 3: % Unknown command"), errors.New("exit status 1")
		}
	}
	return nil, nil
}

func TestFRRDriver(t *testing.T) {
	cases := map[string]struct {
		fail      map[string]bool
		wantErr   string
		wantCalls []string // substrings, in order
		wantConf  string   // frr.conf after
		reloaded  []string // the configs given to --reload, in order
	}{
		"applied": {
			wantCalls: []string{"--test", "--reload", "netns exec lab-leaf1-a nft -f"},
			wantConf:  "new",
			reloaded:  []string{"new"},
		},
		"refused by the check": {
			fail:      map[string]bool{"--test": true},
			wantErr:   "nothing applied",
			wantCalls: []string{"--test"},
			wantConf:  "old",
		},
		"reload fails: previous restored": {
			fail:      map[string]bool{"--reload --vty_socket /s --confdir CONF --rundir CONF CONF/frr.conf.next": true},
			wantErr:   "previous config restored",
			wantCalls: []string{"--test", "--reload", "--reload"},
			wantConf:  "old",
			// The restore reloads the previous config, not the frr.conf
			// the failed reload wrote.
			reloaded: []string{"new", "old"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			conf := t.TempDir()
			os.WriteFile(filepath.Join(conf, "frr.conf"), []byte("old"), 0o644)
			r := &fakeFRR{fail: map[string]bool{}}
			for k := range tc.fail {
				r.fail[strings.ReplaceAll(k, "CONF", conf)] = true
			}
			f := &FRR{Run: r.run, Targets: map[string]FRRTarget{"leaf1": {VtySocket: "/s", ConfDir: conf, Netns: "lab-leaf1", VRFNetns: map[string]string{"a": "lab-leaf1-a"}}}}
			err := f.Apply(context.Background(), dev("leaf1", "h", "frr.conf", "new", "gbp-a.nft", "table inet x {}"))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			i := 0
			for _, c := range r.calls {
				if i < len(tc.wantCalls) && strings.Contains(c, tc.wantCalls[i]) {
					i++
				}
			}
			if i != len(tc.wantCalls) {
				t.Fatalf("calls %q, want in order %q", r.calls, tc.wantCalls)
			}
			if !strings.HasPrefix(r.calls[0], "ip netns exec lab-leaf1 python3 ") {
				t.Fatalf("frr-reload not run in the device's namespace: %q", r.calls[0])
			}
			if b, _ := os.ReadFile(filepath.Join(conf, "frr.conf")); string(b) != tc.wantConf {
				t.Fatalf("frr.conf = %q, want %q", b, tc.wantConf)
			}
			if !slices.Equal(r.reloaded, tc.reloaded) {
				t.Fatalf("reloaded %q, want %q", r.reloaded, tc.reloaded)
			}
		})
	}
	if err := (&FRR{Run: (&fakeFRR{}).run}).Apply(context.Background(), dev("nope", "h", "frr.conf", "x")); err == nil {
		t.Fatal("a device without a target was applied")
	}
	// A device's first deploy fails: nothing to restore, and no claim of it.
	conf := t.TempDir()
	r := &fakeFRR{fail: map[string]bool{"--reload --vty_socket": true}}
	f := &FRR{Run: r.run, Targets: map[string]FRRTarget{"leaf1": {VtySocket: "/s", ConfDir: conf}}}
	err := f.Apply(context.Background(), dev("leaf1", "h", "frr.conf", "new"))
	if err == nil || strings.Contains(err.Error(), "restored") || !strings.Contains(err.Error(), "no frr.conf to restore") || len(r.reloaded) != 1 {
		t.Fatalf("first deploy failing: %v after reloads %q, want no restore claimed", err, r.reloaded)
	}
}

// TestFRRReloadNotCutOff: a caller whose context ends during the reload
// does not cut it off: the reload and the rulesets after it run with a
// live context and the new config is in place. One whose context ended
// before the reload applies nothing.
func TestFRRReloadNotCutOff(t *testing.T) {
	conf := t.TempDir()
	os.WriteFile(filepath.Join(conf, "frr.conf"), []byte("old"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var calls []string
	run := func(rctx context.Context, name string, args ...string) ([]byte, error) {
		line := name + " " + strings.Join(args, " ")
		if strings.Contains(line, "--reload") {
			cancel() // the caller gives up while the switch reloads
		}
		if strings.Contains(line, "--reload") || strings.Contains(line, "nft -f") {
			if err := rctx.Err(); err != nil {
				return nil, fmt.Errorf("%s cut off: %w", line, err)
			}
		}
		calls = append(calls, line)
		return nil, nil
	}
	target := map[string]FRRTarget{"leaf1": {VtySocket: "/s", ConfDir: conf, Netns: "lab-leaf1", VRFNetns: map[string]string{"a": "lab-leaf1-a"}}}
	f := &FRR{Run: run, Targets: target}
	if err := f.Apply(ctx, dev("leaf1", "h", "frr.conf", "new", "gbp-a.nft", "table inet x {}")); err != nil {
		t.Fatalf("a reload whose caller gave up half-way: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(conf, "frr.conf")); string(b) != "new" || len(calls) != 3 {
		t.Fatalf("frr.conf = %q after calls %q, want new after --test, --reload and the ruleset", b, calls)
	}

	calls = nil
	os.WriteFile(filepath.Join(conf, "frr.conf"), []byte("old"), 0o644)
	err := f.Apply(ctx, dev("leaf1", "h2", "frr.conf", "newer"))
	if err == nil || !strings.Contains(err.Error(), "nothing applied") || slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, "--reload") }) {
		t.Fatalf("an ended context before the reload: err %v, calls %q; want nothing applied, no --reload", err, calls)
	}
}

// TestFRRDriverLoadsGuards: the underlay's guard is loaded in the device's
// namespace before the reload, each VRF's guard in the VRF's namespace
// after it; a VRF guard with no namespace to go to is refused rather than
// loaded where it would cut the underlay's BGP.
func TestFRRDriverLoadsGuards(t *testing.T) {
	conf := t.TempDir()
	r := &fakeFRR{fail: map[string]bool{}}
	f := &FRR{Run: r.run, Targets: map[string]FRRTarget{"leaf1": {VtySocket: "/s", ConfDir: conf, Netns: "lab-leaf1", VRFNetns: map[string]string{"a": "lab-leaf1-a"}}}}
	files := []string{"frr.conf", "new", "guard.nft", "table inet jobfabric_guard {}", "guard-a.nft", "table inet jobfabric_guard {}", "gbp-a.nft", "table inet jobfabric_gbp {}"}
	if err := f.Apply(context.Background(), dev("leaf1", "h", files...)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ip netns exec lab-leaf1 nft -f " + filepath.Join(conf, "guard.nft"),
		"--test", "--reload",
		"ip netns exec lab-leaf1-a nft -f " + filepath.Join(conf, "guard-a.nft"),
		"ip netns exec lab-leaf1-a nft -f " + filepath.Join(conf, "gbp-a.nft"),
	}
	i := 0
	for _, c := range r.calls {
		if i < len(want) && strings.Contains(c, want[i]) {
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("calls %q, want in order %q", r.calls, want)
	}
	r.calls = nil
	err := f.Apply(context.Background(), dev("leaf1", "h2", "frr.conf", "newer", "guard-b.nft", "table inet jobfabric_guard {}"))
	if err == nil || !strings.Contains(err.Error(), "vrf b has no network namespace") || len(r.calls) != 0 {
		t.Fatalf("a VRF guard without a namespace: %v after %q, want a refusal before anything runs", err, r.calls)
	}
}

// TestFRRReloadTimeoutStateUnknown: a reload cut by ReloadTimeout is
// reported as the device's state unknown, with no restore tried on the
// spent context, never as applied nor as restored.
func TestFRRReloadTimeoutStateUnknown(t *testing.T) {
	conf := t.TempDir()
	os.WriteFile(filepath.Join(conf, "frr.conf"), []byte("old"), 0o644)
	var calls []string
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(args, " "))
		if slices.Contains(args, "--reload") {
			<-ctx.Done() // a reload that outlives its bound
			return nil, ctx.Err()
		}
		return nil, nil
	}
	f := &FRR{Run: run, ReloadTimeout: time.Millisecond, Targets: map[string]FRRTarget{"leaf1": {VtySocket: "/s", ConfDir: conf}}}
	err := f.Apply(context.Background(), dev("leaf1", "h", "frr.conf", "new"))
	if err == nil || !strings.Contains(err.Error(), "device leaf1: state unknown") || strings.Contains(err.Error(), "restored") {
		t.Fatalf("err = %v, want state unknown", err)
	}
	if n := len(calls); n != 2 {
		t.Fatalf("calls %q, want --test and one --reload", calls)
	}
}
