package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// checker runs a syntax checker on a file and returns its complaint.
type checker func(t *testing.T, content string) error

func runTool(t *testing.T, name, content string, args ...string) error {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(args[0], append(args[1:], path)...).CombinedOutput()
	if err != nil {
		return &toolError{err: err, out: strings.TrimSpace(string(out))}
	}
	return nil
}

type toolError struct {
	err error
	out string
}

func (e *toolError) Error() string { return e.err.Error() + ": " + e.out }

// vtyshCheck checks frr.conf syntax with `vtysh --dryrun -f` (exit 0 valid,
// non-zero with "line N: % Unknown command" otherwise; the lab's point 8).
func vtyshCheck(t *testing.T) checker {
	path, err := exec.LookPath("vtysh")
	if err != nil {
		t.Skip("vtysh is not installed (apt-get install frr): FRR output is not syntax-checked here")
	}
	return func(t *testing.T, content string) error {
		return runTool(t, "frr.conf", content, path, "--dryrun", "-f")
	}
}

// nftCheck checks a ruleset with `nft -c -f` (parse and validate, change
// nothing). nft needs CAP_NET_ADMIN even to check; without it the test
// skips rather than pass on nothing.
func nftCheck(t *testing.T) checker {
	path, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("nft is not installed (apt-get install nftables): nftables output is not syntax-checked here")
	}
	c := func(t *testing.T, content string) error {
		return runTool(t, "rules.nft", content, path, "-c", "-f")
	}
	if err := c(t, "table inet jobfabric_probe {\n\tchain c {\n\t\ttype filter hook forward priority filter; policy accept;\n\t}\n}\n"); err != nil {
		if strings.Contains(err.Error(), "Operation not permitted") {
			t.Skipf("nft cannot check rulesets without CAP_NET_ADMIN here: %v", err)
		}
		t.Fatalf("nft rejects a known-good ruleset, so its verdicts mean nothing here: %v", err)
	}
	return c
}

// frrFiles collects every frr.conf (FRR and SONiC) of every scenario.
func toolFiles(t *testing.T, nosList []string, suffix string) map[string]string {
	out := map[string]string{}
	for _, model := range fabrictest.Models() {
		for _, nos := range nosList {
			for _, d := range renderAll(t, compile(t, nos, model)) {
				for _, f := range d.Files {
					if strings.HasSuffix(f.Name, suffix) {
						out[model+"/"+nos+"/"+d.Device+"/"+f.Name] = f.Content
					}
				}
			}
		}
	}
	return out
}

// TestFRRConfigsPassVtysh checks every rendered frr.conf with vtysh. It
// first proves the checker bites: a config with one wrong line must fail,
// so a broken vtysh setup cannot make the test pass silently.
func TestFRRConfigsPassVtysh(t *testing.T) {
	check := vtyshCheck(t)
	files := toolFiles(t, []string{render.FRR, render.SONiC}, "frr.conf")
	if len(files) == 0 {
		t.Fatal("no frr.conf rendered")
	}
	good := files["pure-rt5/frr/s1-leaf0/frr.conf"]
	broken := map[string]string{
		"unknown command":            strings.Replace(good, " advertise-all-vni\n", " advertise-all-vnis\n", 1),
		"RT outside address family":  strings.Replace(good, "router bgp 65001 vrf acme\n", "router bgp 65001 vrf acme\n route-target import 65000:1\n", 1),
		"neighbor without remote-as": strings.Replace(good, " neighbor swp5 interface remote-as 65000\n", " neighbor swp5 interface remote-as\n", 1),
	}
	for name, content := range broken {
		if content == good {
			t.Fatalf("canary %q did not change the config", name)
		}
		if err := check(t, content); err == nil {
			t.Fatalf("vtysh accepted a broken config (%s): the check cannot be trusted", name)
		}
	}
	for name, content := range files {
		if err := check(t, content); err != nil {
			t.Errorf("%s: vtysh --dryrun rejects it: %v", name, err)
		}
	}
}

// TestNftRulesetsPassNft checks every rendered group-policy ruleset with
// nft, after proving that nft rejects a chain named "fwd" (the lab's point 7).
func TestNftRulesetsPassNft(t *testing.T) {
	check := nftCheck(t)
	if err := check(t, "table inet x {\n\tchain fwd {\n\t\ttype filter hook forward priority filter; policy accept;\n\t}\n}\n"); err == nil {
		t.Fatal("nft accepted a chain named fwd: the check cannot be trusted")
	}
	files := toolFiles(t, []string{render.FRR}, ".nft")
	if len(files) == 0 {
		t.Fatal("no nftables ruleset rendered")
	}
	for name, content := range files {
		if err := check(t, content); err != nil {
			t.Errorf("%s: nft -c rejects it: %v", name, err)
		}
	}
}
