package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/jobfabric/jobfabric"

// pure packages decide; they must not do I/O or reach the store, so that the
// server, the simulator and the tests can all call them.
var pure = []string{"internal/domain", "internal/topology", "internal/topology/export", "internal/sched", "internal/mig",
	"internal/fabric", "internal/fabric/platform", "internal/fabric/pool", "internal/fabric/render", "internal/fabric/fabrictest", "internal/fabric/verify", "internal/fabric/lint",
	"internal/hostfacts", "internal/binding", "internal/agent", "internal/usage", "internal/topk"}

var forbidden = []string{
	"net", "net/http", "os/exec",
	"github.com/hashicorp/raft", "go.etcd.io/bbolt",
	module + "/internal/state", module + "/internal/store", module + "/internal/server", module + "/internal/client",
}

func TestPureCoresImportNoIO(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH: cannot list dependencies")
	}
	for _, p := range pure {
		out, err := exec.Command("go", "list", "-deps", module+"/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range forbidden {
			if deps[f] {
				t.Errorf("%s depends on %s: pure cores must not do I/O or reach the store", p, f)
			}
		}
	}
}

func TestEveryPackageHasADocComment(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dir := range strings.Fields(string(out)) {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		documented := false
		for _, p := range pkgs {
			for _, f := range p.Files {
				if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
					documented = true
				}
			}
		}
		if !documented {
			rel, _ := filepath.Rel(filepath.Join("..", ".."), dir)
			t.Errorf("package in %s has no doc comment (add a doc.go saying what it owns)", rel)
		}
	}
}
