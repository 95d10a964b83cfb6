package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPoolCommands: pool set (arguments and --servers-file), list (table,
// wide, name), a job submitted with --pool placed on the pool's server,
// a tenant's token refused writes and shown only its own jobs' pools, and
// pool delete.
func TestPoolCommands(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	env := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/research", "--guaranteed", "16")
	user := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "member", "--tenant", "acme", "--workspace", "research"))}

	if out := mustRun(t, env, "pool", "set", "slurm:c1:b", "s1-gpu004", "gpu-elsewhere"); !strings.Contains(out, "pool slurm:c1:b: 2 servers (1 not in the inventory: gpu-elsewhere)") {
		t.Fatalf("pool set: %s", out)
	}
	list := filepath.Join(t.TempDir(), "servers.txt")
	if err := os.WriteFile(list, []byte("s1-gpu001\ns1-gpu002 s1-gpu003\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "pool", "set", "lowlat", "--servers-file", list)
	if out := mustRun(t, env, "pool", "list", "-o", "name"); out != "pool/lowlat\npool/slurm:c1:b\n" {
		t.Fatalf("pool list -o name: %q", out)
	}
	if out := mustRun(t, env, "pool", "list", "-o", "wide"); !strings.Contains(out, "s1-gpu001,s1-gpu002,s1-gpu003") {
		t.Fatalf("pool list -o wide: %s", out)
	}
	if _, errs, code := run(t, user, "pool", "set", "slurm:c1:b", "s1-gpu001"); code == 0 || !strings.Contains(errs, "only an admin or a platform runtime") {
		t.Fatalf("a member set a pool: exit %d: %s", code, errs)
	}
	if out := mustRun(t, user, "pool", "list", "-o", "name"); out != "" {
		t.Fatalf("a member with no job in a pool sees %q", out)
	}
	var job struct {
		ID        uint64
		Pool      string
		Placement []struct{ Server string }
	}
	out := mustRun(t, user, "job", "submit", "--gpus", "8", "--pool", "slurm:c1:b", "--wait", "--timeout", "30s", "-o", "json")
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	if job.Pool != "slurm:c1:b" || len(job.Placement) != 1 || job.Placement[0].Server != "s1-gpu004" {
		t.Fatalf("job %+v: want pool slurm:c1:b on s1-gpu004", job)
	}
	if out := mustRun(t, user, "pool", "list", "-o", "name"); out != "pool/slurm:c1:b\n" {
		t.Fatalf("a member with a job in slurm:c1:b sees %q", out)
	}
	if _, errs, code := run(t, user, "job", "submit", "--gpus", "8", "--pool", "nope"); code == 0 || !strings.Contains(errs, "pool \"nope\" does not exist") {
		t.Fatalf("a job naming an unknown pool: exit %d: %s", code, errs)
	}
	if out := mustRun(t, env, "pool", "delete", "lowlat"); !strings.Contains(out, "pool lowlat deleted (it had 3 servers)") {
		t.Fatalf("pool delete: %s", out)
	}
}
