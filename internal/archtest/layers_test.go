package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkgInfo is one package of the module as `go list -deps` sees it.
type pkgInfo struct {
	imports []string // direct imports, non-test files
	deps    []string // every package it depends on, transitively
}

// listModule returns every package of the module (non-test files) with its
// direct imports and its transitive dependencies, in one go list call.
func listModule(t *testing.T) map[string]pkgInfo {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH: cannot list dependencies")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .Deps \",\"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string]pkgInfo{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		pkgs[strings.TrimPrefix(f[0], module+"/")] = pkgInfo{imports: local(f[1]), deps: local(f[2])}
	}
	return pkgs
}

// local splits a comma-separated package list and names the module's own
// packages relative to the module (internal/x), the others as they are.
func local(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		switch {
		case strings.HasPrefix(p, module+"/"):
			p = strings.TrimPrefix(p, module+"/")
		case strings.HasPrefix(p, "internal/"), strings.HasPrefix(p, "vendor/"):
			p = "std/" + p // the standard library's own internal packages
		}
		out = append(out, p)
	}
	return out
}

// A layerRule forbids pkg (and, with sub, the packages under it) to import
// any of forbid: directly when direct is set, else through any path. The
// rules are the arrows of docs/architecture.md; why is what the test says
// when one breaks.
type layerRule struct {
	pkg    string
	sub    bool
	direct bool
	forbid []string
	why    string
}

var layerRules = []layerRule{
	{pkg: "internal/domain", forbid: []string{"internal/"},
		why: "domain is the bottom layer: every package speaks its types, so it imports none of ours"},
	{pkg: "internal/api", forbid: []string{"internal/state", "internal/store", "internal/server", "internal/client", "internal/sched"},
		why: "api holds the wire types shared by server and client; it must not pull in what the server does"},
	{pkg: "internal/client", forbid: []string{"internal/state", "internal/store", "internal/server", "internal/sched", "internal/fabric/render"},
		why: "the client knows the API types, not the server's internals"},
	{pkg: "internal/cli", direct: true, forbid: []string{"internal/state", "internal/sched", "internal/fabric/pool"},
		why: "the CLI reads the API through internal/api and internal/client; it links the server only to run it"},
	{pkg: "internal/state", forbid: []string{"internal/store", "internal/server", "internal/client", "internal/api", "internal/deploy", "internal/lab"},
		why: "the state machine is deterministic and knows no transport: it implements raft.FSM, but the Raft wiring, HTTP and deploys sit above it"},
	{pkg: "internal/state", forbid: []string{"internal/binding", "internal/fabric/render"},
		why: "the state machine keeps what its apply needs; the binder's input and the renderers' files are built from state.View by the server (internal/server/stateview.go)"},
	{pkg: "internal/store", sub: true, forbid: []string{"internal/state", "internal/server", "internal/domain"},
		why: "store wires any FSM into Raft; it must not know what the FSM holds"},
	{pkg: "internal/deploy", forbid: []string{"internal/lab", "internal/state", "internal/store", "internal/server", "internal/fabric/verify"},
		why: "deploy applies rendered files through drivers; the lab's driver is injected from internal/lab, not sniffed here"},
	{pkg: "internal/lab", sub: true, forbid: []string{"internal/state", "internal/store", "internal/server", "internal/client", "internal/cli"},
		why: "the lab is a network under test; the server reaches it only through the driver the CLI injects"},
	{pkg: "internal/server", forbid: []string{"internal/cli", "internal/lab", "internal/devcluster", "internal/bench", "internal/sim", "internal/client"},
		why: "the server is the top of the control plane; harnesses and front ends sit above it, never below"},
	{pkg: "internal/health", direct: true, forbid: []string{"net", "net/http", "os/exec", "internal/state", "internal/store", "internal/server", "internal/client"},
		why: "health is pure (the state comes in as a Source, readings as a telemetry.Reader); it links telemetry's types, whose package scrapes, so the rule is on its own imports"},
	{pkg: "internal/agent", forbid: []string{"internal/state", "internal/store", "internal/server", "internal/sched", "internal/binding"},
		why: "the node agent talks to the API; it must not link the control plane"},
}

func (r layerRule) covers(p string) bool {
	return p == r.pkg || (r.sub && strings.HasPrefix(p, r.pkg+"/"))
}

// forbids reports whether rule entry f forbids dep: "internal/" forbids
// every package of the module, "internal/x" forbids x and the packages
// under it, any other entry (net/http, a module path) exactly that one.
func forbids(dep, f string) bool {
	switch {
	case strings.HasSuffix(f, "/"):
		return strings.HasPrefix(dep, f)
	case strings.HasPrefix(f, "internal/"):
		return dep == f || strings.HasPrefix(dep, f+"/")
	}
	return dep == f
}

// TestDependenciesPointDown enforces the allowed directions of
// docs/architecture.md.
func TestDependenciesPointDown(t *testing.T) {
	pkgs := listModule(t)
	for _, r := range layerRules {
		matched := false
		for p, info := range pkgs {
			if !r.covers(p) {
				continue
			}
			matched = true
			list := info.deps
			how := "depends on"
			if r.direct {
				list, how = info.imports, "imports"
			}
			for _, d := range list {
				for _, f := range r.forbid {
					if forbids(d, f) {
						t.Errorf("%s %s %s: %s", p, how, d, r.why)
					}
				}
			}
		}
		if !matched {
			t.Errorf("rule for %s matches no package: update the rule with the code", r.pkg)
		}
	}
}

// serverImporters are the only packages that may import internal/server:
// the command tree that runs it and the harnesses that start real servers.
var serverImporters = []string{"internal/cli", "internal/devcluster"}

func TestOnlyFrontEndsImportTheServer(t *testing.T) {
	pkgs := listModule(t)
	for p, info := range pkgs {
		if slices.Contains(info.imports, "internal/server") && !slices.Contains(serverImporters, p) {
			t.Errorf("%s imports internal/server: only %v may (docs/architecture.md)", p, serverImporters)
		}
	}
}

// TestRulesCatchAForbiddenImport proves the matcher is not vacuous: a
// package that does import what a rule forbids is reported.
func TestRulesCatchAForbiddenImport(t *testing.T) {
	for _, c := range []struct {
		dep, forbid string
		want        bool
	}{
		{"internal/state", "internal/state", true},
		{"internal/statefoo", "internal/state", false},
		{"internal/fabric/pool", "internal/fabric", true},
		{"internal/topology", "internal/", true},
		{"net/http", "net/http", true},
		{"net/netip", "net", false},
		{"std/internal/abi", "internal/", false},
	} {
		if got := forbids(c.dep, c.forbid); got != c.want {
			t.Errorf("forbids(%q, %q) = %v, want %v", c.dep, c.forbid, got, c.want)
		}
	}
	pkgs := listModule(t)
	if !slices.Contains(pkgs["internal/server"].deps, "internal/state") {
		t.Fatal("go list reports internal/server without internal/state: the listing is broken, every rule would pass")
	}
}

// allowedImports lists, for the packages the layers rest on, every package
// of ours each may import directly: a new arrow fails here until
// docs/architecture.md draws it. state's list is what its deterministic
// apply needs (issue 13 moved the read builders behind state.View).
var allowedImports = map[string][]string{
	"internal/domain":          {},
	"internal/topology":        {"internal/domain", "internal/fabric/platform"},
	"internal/mig":             {"internal/domain"},
	"internal/hostfacts":       {"internal/domain"},
	"internal/sched":           {"internal/domain", "internal/mig"},
	"internal/usage":           {"internal/domain", "internal/topk"},
	"internal/topk":            {},
	"internal/fabric":          {"internal/domain"},
	"internal/binding":         {"internal/domain", "internal/hostfacts"},
	"internal/api":             {"internal/domain", "internal/fabric/verify"},
	"internal/client":          {"internal/api", "internal/binding", "internal/domain"},
	"internal/deploy":          {"internal/domain", "internal/fabric/lint", "internal/fabric/render"},
	"internal/store":           {"internal/fileutil", "internal/srclimit", "internal/tstime"},
	"internal/fabric/platform": {},
	"internal/fabric/lint":     {},
	"internal/state": {"internal/domain", "internal/fabric", "internal/fabric/pool", "internal/hostfacts", "internal/mig",
		"internal/sched", "internal/topology"},
}

func TestCoreImportsAreDrawn(t *testing.T) {
	pkgs := listModule(t)
	for p, allowed := range allowedImports {
		info, ok := pkgs[p]
		if !ok {
			t.Errorf("%s: no such package: update allowedImports with the code", p)
			continue
		}
		for _, imp := range info.imports {
			if strings.HasPrefix(imp, "internal/") && !slices.Contains(allowed, imp) {
				t.Errorf("%s imports %s, an arrow docs/architecture.md does not draw (allowed: %v)", p, imp, allowed)
			}
		}
	}
}
