package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// TestTopologyExport: the applied topology and the file it came from export
// the same, in every format; a tenant token cannot read the inventory
// through it; a server with no topology and an unknown format are refused.
func TestTopologyExport(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	runErrCases(t, map[string]errCase{
		"nothing applied": {env: env, args: []string{"topology", "export", "--format", "slurm"}, want: "no topology has been applied"},
	})
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte(mustRun(t, env, "topology", "generate", "--stripes", "2", "--servers-per-stripe", "3", "--gpus-per-server", "4")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", file)
	top, _, err := loadTopologyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range export.Formats() {
		fromServer := mustRun(t, env, "topology", "export", "--format", f)
		fromFile := mustRun(t, nil, "topology", "export", "--format", f, "--file", file)
		want, err := export.Render(top, f, export.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if fromServer != string(want) || fromFile != string(want) {
			t.Errorf("--format %s: server and file exports differ from the package's:\nserver:\n%s\nfile:\n%s", f, fromServer, fromFile)
		}
	}
	if out := mustRun(t, env, "topology", "export", "--format", "slurm"); !strings.Contains(out, "SwitchName=dc1-fabric1 Switches=dc1-fabric1-stripe[1-2]") {
		t.Errorf("slurm export:\n%s", out)
	}
	mustRun(t, env, "tenant", "create", "acme", "--isolation", "server")
	tok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "tenant-admin", "--tenant", "acme"))
	tenant := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": tok}
	out, _, code := run(t, tenant, "topology", "export", "--format", "slurm")
	if code == 0 || strings.Contains(out, "SwitchName") {
		t.Errorf("a tenant token exported the inventory (exit %d):\n%s", code, out)
	}
	runErrCases(t, map[string]errCase{
		"unknown format": {env: env, args: []string{"topology", "export", "--format", "lsf"}, want: `format "lsf" is not one of kueue, volcano, slurm, slurm-yaml, node-labels`},
		"bad file":       {args: []string{"topology", "export", "--format", "slurm", "--file", filepath.Join(t.TempDir(), "none.yaml")}, want: "cannot read"},
	})
}
