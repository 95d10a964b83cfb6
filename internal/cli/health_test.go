package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
)

// job health and fabric hotspots print a table and -o json; without
// telemetry every hop is unknown, and a pending job has no path.
func TestJobHealthAndHotspotsCommands(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "2", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme", "--isolation", "server", "--network", "pure-rt5")
	mustRun(t, env, "workspace", "create", "acme/research", "--guaranteed", "8")
	var j struct{ ID uint64 }
	if err := json.Unmarshal([]byte(mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "2", "--wait", "--timeout", "30s", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(j.ID)
	out := mustRun(t, env, "job", "health", id)
	for _, want := range []string{"Job " + id + " path: unknown", "KIND", "gpu", "nic", "port", "no data"} {
		if !strings.Contains(out, want) {
			t.Fatalf("job health table lacks %q:\n%s", want, out)
		}
	}
	var h api.JobHealth
	if err := json.Unmarshal([]byte(mustRun(t, env, "job", "health", id, "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	if h.Job != j.ID || len(h.Hops) != 6 || h.Verdict != "unknown" {
		t.Fatalf("job health -o json: %+v, want 6 hops (2 GPUs, NICs, ports), unknown", h)
	}
	var hs api.Hotspots
	if err := json.Unmarshal([]byte(mustRun(t, env, "fabric", "hotspots", "-o", "json")), &hs); err != nil || len(hs.Ports) != 0 {
		t.Fatalf("hotspots without telemetry: %+v %v", hs, err)
	}
	if out := mustRun(t, env, "fabric", "hotspots"); !strings.Contains(out, "PORT") {
		t.Fatalf("hotspots table:\n%s", out)
	}
	if _, errs, code := run(t, env, "job", "health", "999"); code == 0 || !strings.Contains(errs, "not found") {
		t.Fatalf("job health of a missing job: exit %d %s", code, errs)
	}
}

// A bad --health-config stops the server before it starts, naming the
// field and the rule.
func TestHealthConfigFlag(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"thresholds:\n  dropsPerSec: -1\n", "dropsPerSec is -1"},
		{"debounce:\n  settle: soon\n", "debounce.settle"},
		{"thresholds:\n  pfcPause: 5\n", `unknown field "pfcPause"`},
	} {
		f := filepath.Join(dir, "health.yaml")
		if err := os.WriteFile(f, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs, code := run(t, nil, "server", "--data-dir", filepath.Join(dir, "d"), "--listen", "127.0.0.1:0", "--health-config", f)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.body, code, errs, c.want)
		}
	}
}
