package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// waitFor polls a CLI command until its output contains want.
func waitFor(t *testing.T, env map[string]string, want string, args ...string) string {
	t.Helper()
	// A guard, not a timing: under -race on a loaded CI machine a first
	// deploy took over 10 s, and twice over 30 s (the server's leaves
	// waiting for revision 3; not root-caused, docs in the closing note).
	deadline := time.Now().Add(90 * time.Second)
	for {
		out := mustRun(t, env, args...)
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobfabric %s never showed %q:\n%s", strings.Join(args, " "), want, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSchedulingTour: MIG slices, shares, topology requirements, tenant
// quotas and sites, and node conditions through the CLI.
func TestSchedulingTour(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", file)
	mustRun(t, env, "tenant", "create", "glx", "--isolation", "gpu", "--guaranteed", "16", "--borrow-limit", "8", "--lend-limit", "8", "--sites", "dc1")
	mustRun(t, env, "workspace", "create", "glx/w", "--guaranteed", "16", "--borrow-limit", "8", "--lend-limit", "8")
	if out := mustRun(t, env, "tenant", "show", "glx"); !strings.Contains(out, "16+8 (lends 8)") || !strings.Contains(out, "dc1") {
		t.Fatalf("tenant show:\n%s", out)
	}

	mustRun(t, env, "job", "submit", "--workspace", "glx/w", "--mig", "3g.40gb", "--mig-count", "2", "--name", "slices")
	out := waitFor(t, env, "Placement:", "job", "show", "1")
	if !strings.Contains(out, "3g.40gb@0") || !strings.Contains(out, "3g.40gb@4") || !strings.Contains(out, "2x3g.40gb") {
		t.Fatalf("MIG job show:\n%s", out)
	}
	mustRun(t, env, "job", "submit", "--workspace", "glx/w", "--share", "0.25")
	var share struct {
		Placement []struct {
			GPUs  []int
			Share float64
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(share.Placement) == 0 && time.Now().Before(deadline) {
		json.Unmarshal([]byte(mustRun(t, env, "job", "show", "2", "-o", "json")), &share)
		time.Sleep(20 * time.Millisecond)
	}
	if len(share.Placement) != 1 || share.Placement[0].Share != 0.25 {
		t.Fatalf("share placement: %+v", share.Placement)
	}
	// 4 DGX servers, one NVLink domain each: 16 GPUs cannot stay in one domain.
	mustRun(t, env, "job", "submit", "--workspace", "glx/w", "--gpus", "16", "--gpus-per-node", "8", "--topology", "nvlink-domain:required")
	waitFor(t, env, "[topology]", "job", "explain", "3")

	// Residency: moving the tenant to another site leaves new work pending.
	mustRun(t, env, "tenant", "update", "glx", "--sites", "eu-west")
	mustRun(t, env, "job", "submit", "--workspace", "glx/w", "--gpus", "1", "--name", "elsewhere")
	waitFor(t, env, "tenant's sites", "job", "explain", "4")
	mustRun(t, env, "tenant", "update", "glx", "--sites", "")
	waitFor(t, env, "Ready", "job", "explain", "4")

	// Node conditions.
	if out := mustRun(t, env, "node", "cordon", "s1-gpu004", "--reason", "bad fan"); !strings.Contains(out, "cordoned") {
		t.Fatalf("cordon: %s", out)
	}
	if out := mustRun(t, env, "node", "list"); !strings.Contains(out, "bad fan") {
		t.Fatalf("node list:\n%s", out)
	}
	mustRun(t, env, "node", "uncordon", "s1-gpu004")

	// Each is refused with an error line (the exit status is checked too).
	runErrCases(t, map[string]errCase{
		"two kinds":     {env, []string{"job", "submit", "--workspace", "glx/w", "--gpus", "1", "--share", "0.5"}, "error:"},
		"bad topology":  {env, []string{"job", "submit", "--workspace", "glx/w", "--gpus", "1", "--topology", "rack"}, "error:"},
		"bad mode":      {env, []string{"job", "submit", "--workspace", "glx/w", "--gpus", "1", "--topology", "stripe:maybe"}, "error:"},
		"unknown MIG":   {env, []string{"job", "submit", "--workspace", "glx/w", "--mig", "5g.50gb"}, "error:"},
		"quota and rm":  {env, []string{"tenant", "update", "glx", "--guaranteed", "8", "--no-quota"}, "error:"},
		"unknown node":  {env, []string{"node", "drain", "nope"}, "error:"},
		"below its sum": {env, []string{"tenant", "update", "glx", "--guaranteed", "8"}, "error:"},
	})
}

// TestConditionNamesTheRuntime: node list tells a runtime's cordon (which
// the runtime lifts) from an operator's.
func TestConditionNamesTheRuntime(t *testing.T) {
	for want, c := range map[string]domain.NodeCondition{
		"ready":                           {},
		"cordoned":                        {Cordoned: true},
		"cordoned(slurm:jftest)":          {Cordoned: true, Runtime: "slurm:jftest"},
		"cordoned(slurm:jftest),draining": {Cordoned: true, Draining: true, Runtime: "slurm:jftest"},
		"unhealthy":                       {Unhealthy: true},
	} {
		if got := condition(c); got != want {
			t.Errorf("%+v: %q, want %q", c, got, want)
		}
	}
}
