package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/store/raftinject"
)

// run executes the CLI in-process as a user would, returning stdout,
// stderr and the exit status.
func run(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	// No config file of the machine's user leaks in; a test that wants
	// one sets JOBFABRIC_CONFIG or HOME in env.
	if _, ok := env["JOBFABRIC_CONFIG"]; !ok {
		t.Setenv("JOBFABRIC_CONFIG", filepath.Join(t.TempDir(), "no-config.yaml"))
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := Run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

func mustRun(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, errs, code := run(t, env, args...)
	if code != 0 {
		t.Fatalf("jobfabric %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// startServer starts a real single-server cluster for the test.
func startServer(t *testing.T) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// errCase is a command line that must fail with want in its error output.
type errCase struct {
	env  map[string]string
	args []string
	want string
}

func runErrCases(t *testing.T, cases map[string]errCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs, code := run(t, tc.env, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero")
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q does not contain %q", errs, tc.want)
			}
		})
	}
}

// TestCLI checks through the CLI, against a real server, what the README's
// tour does not show: JSON and YAML shapes, a tenant-admin's view, fabric
// subcommands, model quotas and error messages. The tour itself runs as
// written in internal/doctest.
func TestCLI(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}

	yamlFile := filepath.Join(t.TempDir(), "cluster.yaml")
	topo := mustRun(t, env, "topology", "generate", "--stripes", "2", "--servers-per-stripe", "16", "--gpus-per-server", "8", "--gpu-model", "H100-80GB")
	if err := os.WriteFile(yamlFile, []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", yamlFile)
	var view struct {
		Summary struct{ Servers, GPUs, Leaves, Spines, Rails, NVLinkDomains int }
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "topology", "show", "-o", "json")), &view); err != nil {
		t.Fatal(err)
	}
	if s := view.Summary; s.Servers != 32 || s.GPUs != 256 || s.Leaves != 16 || s.Spines != 2 || s.Rails != 8 || s.NVLinkDomains != 32 {
		t.Fatalf("topology show summary = %+v", s)
	}
	if out := mustRun(t, env, "topology", "show", "-o", "yaml"); !strings.Contains(out, "fingerprint:") {
		t.Fatalf("topology show -o yaml:\n%.300s", out)
	}

	mustRun(t, env, "tenant", "create", "acme", "--isolation", "server", "--network", "pure-rt5", "--job-segmentation")
	mustRun(t, env, "tenant", "create", "globex", "--isolation", "gpu", "--network", "vlan-aware")
	mustRun(t, env, "workspace", "create", "acme/research", "--guaranteed", "16", "--borrow-limit", "32", "--lend-limit", "16", "--weight", "1", "--priority", "0")
	mustRun(t, env, "workspace", "create", "globex/infer", "--guaranteed", "8")
	acmeTok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "tenant-admin", "--tenant", "acme"))
	if !strings.HasPrefix(acmeTok, "jf_") {
		t.Fatalf("token create printed %q", acmeTok)
	}
	acme := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": acmeTok}

	var job struct {
		ID        uint64 `json:"id"`
		Name      string `json:"name"`
		Workspace string `json:"workspace"`
		State     string `json:"state"`
		Reason    struct{ Code string }
	}
	out := mustRun(t, acme, "job", "submit", "--workspace", "acme/research", "--gpus", "16", "--gpus-per-node", "8", "--gpu-model", "H100-80GB", "--priority", "5", "--preemptible", "--name", "llama", "-o", "json")
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatalf("job submit -o json: %v\n%s", err, out)
	}
	if job.ID == 0 || job.Name != "llama" || job.Workspace != "research" || job.State != "Pending" || job.Reason.Code != "queued" {
		t.Fatalf("submitted job = %+v", job)
	}
	mustRun(t, env, "job", "submit", "--workspace", "globex/infer", "--gpus", "2")

	var list []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, acme, "job", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("acme's tenant admin sees %d jobs, want only its own 1", len(list))
	}
	for _, k := range []string{"id", "name", "workspace", "state"} {
		if _, ok := list[0][k]; !ok {
			t.Fatalf("job list -o json lacks %q: %v", k, list[0])
		}
	}
	// The leader's scheduler places it: 2 whole servers of one stripe.
	var placed struct {
		State     string
		Placement []struct {
			Server string
			GPUs   []int
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for placed.State != "Ready" {
		if time.Now().After(deadline) {
			t.Fatalf("job 1 not placed: %+v", placed)
		}
		time.Sleep(20 * time.Millisecond)
		if err := json.Unmarshal([]byte(mustRun(t, acme, "job", "show", "1", "-o", "json")), &placed); err != nil {
			t.Fatal(err)
		}
	}
	if len(placed.Placement) != 2 || len(placed.Placement[0].GPUs) != 8 || !strings.HasPrefix(placed.Placement[0].Server, "s1-") || !strings.HasPrefix(placed.Placement[1].Server, "s1-") {
		t.Fatalf("placement %+v: want 2 whole servers of stripe 1", placed.Placement)
	}
	// The fabric carries it: device configs per revision, diffs.
	if out := mustRun(t, env, "fabric", "render", "--device", "s1-leaf0"); !strings.Contains(out, "==== s1-leaf0/frr.conf") || !strings.Contains(out, "router bgp") {
		t.Fatalf("fabric render:\n%.500s", out)
	}
	if out := mustRun(t, env, "fabric", "render", "--device", "s1-leaf0", "--nos", "eos"); !strings.Contains(out, "interface Vxlan1") {
		t.Fatalf("fabric render --nos eos:\n%.500s", out)
	}
	if out := mustRun(t, env, "fabric", "diff", "--from", "0"); !strings.Contains(out, "devices differ") || !strings.Contains(out, "+") {
		t.Fatalf("fabric diff --from 0:\n%.500s", out)
	}
	if out := mustRun(t, env, "fabric", "revisions"); !strings.Contains(out, "REV") {
		t.Fatalf("fabric revisions:\n%s", out)
	}
	if out := mustRun(t, env, "fabric", "verify", "--matrix"); !strings.Contains(out, "s1-leaf0/") || !strings.Contains(out, " -> ") {
		t.Fatalf("fabric verify --matrix:\n%.800s", out)
	}
	// A dry run beyond the quota says it would wait, and why.
	if out := mustRun(t, acme, "job", "submit", "--dry-run", "--workspace", "acme/research", "--gpus", "40"); !strings.Contains(out, "would wait") || !strings.Contains(out, "workspace_quota") {
		t.Fatalf("dry run beyond quota:\n%s", out)
	}
	if out := mustRun(t, acme, "job", "cancel", "1"); !strings.Contains(out, "Cancelled") {
		t.Fatalf("job cancel:\n%s", out)
	}
	// Model quotas, several accepted models and an expected duration.
	if out := mustRun(t, env, "workspace", "create", "globex/train", "--guaranteed", "8", "--borrow-limit", "8", "--model-quota", "H100-80GB=8:0:4"); !strings.Contains(out, "H100-80GB=8:0:4") {
		t.Fatalf("workspace create --model-quota:\n%s", out)
	}
	if out := mustRun(t, env, "workspace", "update", "globex/train", "--no-model-quotas"); strings.Contains(out, "H100-80GB=") {
		t.Fatalf("workspace update --no-model-quotas:\n%s", out)
	}
	out = mustRun(t, env, "job", "submit", "--workspace", "globex/train", "--gpus", "4", "--gpu-models", "A100-80GB,H100-80GB", "--expected-duration", "90m", "--name", "any-model")
	if !strings.Contains(out, "any-model") {
		t.Fatalf("job submit --gpu-models:\n%s", out)
	}
	if out := mustRun(t, env, "job", "show", "3"); !strings.Contains(out, "A100-80GB or H100-80GB") || !strings.Contains(out, "1h30m0s") {
		t.Fatalf("job show lacks models or expected duration:\n%s", out)
	}
	if out := mustRun(t, env, "events", "--tenant", "acme", "--since", "1h"); !strings.Contains(out, "job.cancel") || strings.Contains(out, "globex") {
		t.Fatalf("events --tenant acme:\n%s", out)
	}

	// Errors exit non-zero and name the field.
	errCases := map[string]errCase{
		"other tenant's job":   {acme, []string{"job", "show", "2"}, "not found"},
		"explain other's job":  {acme, []string{"job", "explain", "2"}, "not found"},
		"other tenant":         {acme, []string{"tenant", "show", "globex"}, "not found"},
		"negative gpus":        {env, []string{"job", "submit", "--workspace", "acme/research", "--gpus", "-1"}, "--gpus is -1"},
		"bad workspace ref":    {env, []string{"job", "submit", "--workspace", "research", "--gpus", "1"}, "TENANT/WORKSPACE"},
		"no token":             {map[string]string{"JOBFABRIC_TOKEN": ""}, []string{"job", "list"}, "no token was given"},
		"bad output":           {env, []string{"job", "list", "-o", "xml"}, `-o "xml" is not one of`},
		"no server":            {map[string]string{"JOBFABRIC_SERVER": "http://127.0.0.1:1"}, []string{"--token", "x", "job", "list"}, "cannot reach"},
		"missing file":         {env, []string{"topology", "apply", "-f", "/nonexistent.yaml"}, "cannot read"},
		"tenant-admin apply":   {acme, []string{"topology", "apply", "-f", yamlFile}, "admin token"},
		"unknown subcommand":   {env, []string{"jobs", "list"}, "unknown command"},
		"quota above inv":      {env, []string{"workspace", "create", "acme/big", "--guaranteed", "1000"}, "never overcommitted"},
		"bad model quota":      {env, []string{"workspace", "create", "acme/m", "--guaranteed", "8", "--model-quota", "H100-80GB=x"}, "--model-quota"},
		"model quota no model": {env, []string{"workspace", "create", "acme/m", "--guaranteed", "8", "--model-quota", "A100-80GB=8"}, "field models[0].guaranteed"},
		"model and models":     {env, []string{"job", "submit", "--workspace", "acme/research", "--gpus", "1", "--gpu-model", "H100-80GB", "--gpu-models", "A100-80GB"}, "give --gpu-model or --gpu-models, not both"},
		"bootstrap with join":  {env, []string{"server", "--data-dir", t.TempDir(), "--bootstrap", "--join", "http://x"}, "give one of them"},
	}
	runErrCases(t, errCases)
}

// TestDemoSeeds: the demo command starts a server and fills it through the
// API; its admin token works and its jobs are listed. It listens on the API
// port only: a single server has no raft listener.
func TestDemoSeeds(t *testing.T) {
	before, err := raftinject.ListeningPorts()
	if err != nil {
		t.Skipf("cannot list listening ports: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb, printing: printing{output: "table"}}
	done := make(chan error, 1)
	ready := make(chan [2]string, 1)
	go func() {
		done <- runDemo(ctx, g, demoOptions{listen: "127.0.0.1:0", stripes: 1, sps: 4}, func(url, tok string) { ready <- [2]string{url, tok} })
	}()
	var r [2]string
	select {
	case r = <-ready:
	case err := <-done:
		t.Fatalf("demo ended early: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("demo did not become ready")
	}
	after, err := raftinject.ListeningPorts()
	if err != nil {
		t.Fatal(err)
	}
	var opened []string
	for p := range after {
		if !before[p] {
			opened = append(opened, strconv.Itoa(p))
		}
	}
	if u, _ := url.Parse(r[0]); len(opened) != 1 || opened[0] != u.Port() {
		t.Fatalf("the demo listens on ports %v; want only its API's (%s)", opened, r[0])
	}
	env := map[string]string{"JOBFABRIC_SERVER": r[0], "JOBFABRIC_TOKEN": r[1]}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, env, "job", "list", "-o", "json")), &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 {
		t.Fatalf("demo has %d jobs, want 3", len(jobs))
	}
	if !strings.Contains(out.String(), r[1]) || !strings.Contains(out.String(), r[0]) {
		t.Fatalf("demo did not print its URL and token:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
