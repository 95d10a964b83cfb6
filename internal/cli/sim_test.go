package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCommands runs sim openb, sim jobs and sim report on the small
// traces of internal/sim/testdata.
func TestSimCommands(t *testing.T) {
	td := filepath.Join("..", "sim", "testdata")
	dir := t.TempDir()
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, &out, &errb)
		return out.String(), errb.String(), code
	}
	out, errs, code := run("sim", "openb", "--pods", filepath.Join(td, "pods.csv"), "--nodes", filepath.Join(td, "nodes.csv"),
		"--policy", "bestfit,fgd,jobfabric", "--seeds", "42-43", "--tune", "1.3", "--out", filepath.Join(dir, "openb"))
	if code != 0 || !strings.Contains(out, "07-JobFabric") || !strings.Contains(errs, "[6/6") {
		t.Fatalf("sim openb: %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = run("sim", "jobs", "--trace", filepath.Join(td, "itp0.csv"), "--trace", filepath.Join(td, "itp1.csv"),
		"--cluster", "3x8", "--out", filepath.Join(dir, "jobs"))
	if code != 0 || !strings.Contains(out, "quota attainment") {
		t.Fatalf("sim jobs: %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = run("sim", "report", filepath.Join(dir, "openb"), filepath.Join(dir, "jobs"), "--out", filepath.Join(dir, "report"))
	if code != 0 || !strings.Contains(out, "report.md") {
		t.Fatalf("sim report: %d\n%s\n%s", code, out, errs)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	if err != nil || !strings.Contains(string(md), "jobfabric against FGD") || !strings.Contains(string(md), "Job traces") {
		t.Fatalf("report.md: %v\n%s", err, md)
	}
	for _, tc := range []struct{ args, want string }{
		{"sim openb --pods " + filepath.Join(td, "pods.csv") + " --nodes " + filepath.Join(td, "nodes.csv") + " --policy worstfit --out " + dir, "policy-name"},
		{"sim openb --pods " + filepath.Join(td, "itp0.csv") + " --nodes " + filepath.Join(td, "nodes.csv") + " --out " + dir, "lacks column"},
		{"sim jobs --trace " + filepath.Join(td, "itp0.csv") + " --cluster 3 --out " + dir, "cluster-shape"},
		{"sim jobs --trace " + filepath.Join(td, "itp0.csv") + " --policy fifo --out " + dir, "--policy \"fifo\""},
		{"sim report " + td, "no sim output"},
	} {
		_, errs, code := run(strings.Fields(tc.args)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: code %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
