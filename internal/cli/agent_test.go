package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

const h100Fixture = "../hostfacts/testdata/hosts/h100-roce"

func TestAgentFacts(t *testing.T) {
	out := mustRun(t, nil, "agent", "facts", "--fixture", h100Fixture)
	for _, want := range []string{"driver 535.183.01, CUDA 12.2, 8 GPUs, 12 RDMA ports", "GPU-566e6f65-c38e-b12f-4824-6944218668b9", "H100-80GB", "mlx5_7", "7 (PIX)"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent facts lacks %q:\n%s", want, out)
		}
	}
	var f domain.HostFacts
	if err := json.Unmarshal([]byte(mustRun(t, nil, "agent", "facts", "--fixture", "../hostfacts/testdata/hosts/a100-mig", "-o", "json")), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.GPUs) != 1 || len(f.GPUs[0].MIG) != 4 || f.GPUs[0].MIG[1].Start != 2 {
		t.Fatalf("MIG facts %+v", f.GPUs)
	}
	runErrCases(t, map[string]errCase{
		"no such fixture":    {args: []string{"agent", "facts", "--fixture", filepath.Join(t.TempDir(), "missing")}, want: "is not a directory"},
		"agent needs node":   {args: []string{"agent", "--fixture", h100Fixture}, want: "--node NAME is required"},
		"unreachable server": {args: []string{"host", "policy", "--server", "http://127.0.0.1:1", "--cordon-on", "gpu-color"}, want: "cannot reach"},
		"job env needs int":  {args: []string{"job", "env", "x"}, want: "not a positive integer"},
		"slurm needs env":    {env: map[string]string{"SLURM_JOB_ID": "", "SLURM_JOBID": ""}, args: []string{"slurm", "prolog"}, want: "SLURM_JOB_ID is not set"},
	})
}

// TestAgentAndSlurmFlow: an agent reports a recorded host with its node
// token, a job submitted with a Slurm id gets its environment through
// job env and through the Slurm Prolog, TaskProlog and Epilog.
func TestAgentAndSlurmFlow(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	admin := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	dir := t.TempDir()
	topoFile := filepath.Join(dir, "topo.yaml")
	if err := os.WriteFile(topoFile, []byte(mustRun(t, admin, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "1", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, admin, "topology", "apply", "-f", topoFile)
	mustRun(t, admin, "tenant", "create", "acme", "--isolation", "server", "--network", "pure-rt5")
	mustRun(t, admin, "workspace", "create", "acme/research", "--guaranteed", "8")
	node := "s1-gpu001"
	agentTok := strings.TrimSpace(mustRun(t, admin, "token", "create", "--role", "runtime", "--node", node))
	agent := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": agentTok}

	out := mustRun(t, agent, "agent", "--node", node, "--fixture", h100Fixture, "--once")
	if !strings.Contains(out, node) || !strings.Contains(out, "535.183.01") {
		t.Fatalf("agent --once:\n%s", out)
	}
	if out := mustRun(t, admin, "host", "list"); !strings.Contains(out, node) || !strings.Contains(out, "12") {
		t.Fatalf("host list:\n%s", out)
	}
	if out := mustRun(t, admin, "host", "policy", "--heartbeat-timeout", "45s", "--cordon-on", "driver,gpu-missing", "--tenant-min-driver", "acme=535.104"); !strings.Contains(out, "heartbeat timeout: 45s") ||
		!strings.Contains(out, "drift that cordons: driver,gpu-missing") || !strings.Contains(out, "acme=535.104") {
		t.Fatalf("host policy:\n%s", out)
	}

	var j domain.Job
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "submit", "--workspace", "acme/research", "--gpus", "4", "--external-id", "slurm:4242", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for j.State != domain.JobReady {
		if time.Now().After(deadline) {
			t.Fatalf("job never ready: %+v", j)
		}
		time.Sleep(50 * time.Millisecond)
		if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "show", "1", "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
	}
	env := mustRun(t, admin, "job", "env", "1")
	for _, want := range []string{"export CUDA_VISIBLE_DEVICES=GPU-", "export NCCL_IB_HCA==mlx5_", "export NCCL_CROSS_NIC=0", "export JOBFABRIC_TENANT=acme"} {
		if !strings.Contains(env, want) {
			t.Errorf("job env lacks %q:\n%s", want, env)
		}
	}
	var spec binding.CDI
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "env", "1", "--format", "cdi")), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.CDIVersion != "0.6.0" || spec.Kind != "jobfabric.io/job" || spec.Devices[0].Name != "job-1" || len(spec.Devices[0].ContainerEdits.DeviceNodes) < 5 {
		t.Fatalf("CDI spec %+v", spec)
	}

	// The recorded RoCE host reports its NICs through ibstat, which gives
	// no PCI address: a VM's hostdevs are refused, naming the NIC.
	if out, errs, code := run(t, admin, "job", "env", "1", "--format", "libvirt"); code == 0 || out != "" ||
		!strings.Contains(errs, "NIC nic0 (mlx5_0, rail 0) of node s1-gpu001: PCI address unknown") {
		t.Fatalf("job env --format libvirt on a host without NIC addresses: exit %d\n%s\n%s", code, out, errs)
	}

	spool, cdi := filepath.Join(dir, "spool"), filepath.Join(dir, "cdi")
	if err := os.MkdirAll(cdi, 0o755); err != nil {
		t.Fatal(err)
	}
	slurm := func(extra map[string]string) map[string]string {
		m := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": agentTok, "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": node, "SLURM_JOB_ACCOUNT": "acme", "SLURM_JOB_EXIT_CODE2": ""}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	runErrCases(t, map[string]errCase{
		"another account": {env: slurm(map[string]string{"SLURM_JOB_ACCOUNT": "globex"}), args: []string{"slurm", "prolog"}, want: "refusing to bind another tenant's GPUs"},
		"required job":    {env: slurm(map[string]string{"SLURM_JOB_ID": "7"}), args: []string{"slurm", "prolog", "--require"}, want: "not found"},
	})
	if out, errs, code := run(t, slurm(map[string]string{"SLURM_JOB_ID": "7"}), "slurm", "prolog"); code != 0 || out != "" || !strings.Contains(errs, "runs without a jobfabric binding") {
		t.Fatalf("a Slurm job jobfabric does not know: exit %d, out %q, err %q", code, out, errs)
	}
	// Another tenant takes the same id (a guess; each tenant's ids are
	// its own): acme's Slurm job still binds acme's job, never runs
	// unbound for want of finding it.
	mustRun(t, admin, "tenant", "create", "globex", "--isolation", "gpu", "--network", "pure-rt5")
	mustRun(t, admin, "workspace", "create", "globex/lab", "--guaranteed", "0", "--borrow-limit", "8")
	guesser := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": strings.TrimSpace(mustRun(t, admin, "token", "create", "--role", "member", "--tenant", "globex", "--workspace", "lab"))}
	mustRun(t, guesser, "job", "submit", "--gpus", "1", "--external-id", "slurm:4242")
	lines := mustRun(t, slurm(nil), "slurm", "prolog", "--spool", spool, "--cdi-dir", cdi)
	if lines != env {
		t.Fatalf("prolog lines differ from job env:\n%s\n%s", lines, env)
	}
	if _, err := os.Stat(filepath.Join(cdi, "jobfabric-job-1.json")); err != nil {
		t.Fatal(err)
	}
	// The TaskProlog runs as the user, without a token: it reads the spool.
	if out := mustRun(t, map[string]string{"JOBFABRIC_TOKEN": "", "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": node}, "slurm", "task-prolog", "--spool", spool); out != env {
		t.Fatalf("task-prolog:\n%s", out)
	}
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "show", "1", "-o", "json")), &j); err != nil || j.State != domain.JobRunning {
		t.Fatalf("after the prolog the job is %s (%v), want Running", j.State, err)
	}
	// The node's Epilog cleans up; EpilogSlurmctld reports the outcome.
	mustRun(t, slurm(nil), "slurm", "epilog", "--spool", spool, "--cdi-dir", cdi)
	if _, err := os.Stat(filepath.Join(cdi, "jobfabric-job-1.json")); !os.IsNotExist(err) {
		t.Fatalf("CDI spec left behind: %v", err)
	}
	ctld := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken, "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "", "SLURM_JOB_ACCOUNT": "acme", "SLURM_JOB_EXIT_CODE2": "0:0"}
	mustRun(t, ctld, "slurm", "epilog")
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "show", "1", "-o", "json")), &j); err != nil || j.State != domain.JobSucceeded {
		t.Fatalf("after EpilogSlurmctld the job is %s (%v), want Succeeded", j.State, err)
	}
	mustRun(t, ctld, "slurm", "epilog") // again: already ended, not an error

	// Drain with a grace, over the CLI.
	if out := mustRun(t, admin, "node", "drain", node, "--grace", "10m", "--reason", "driver rollout"); !strings.Contains(out, "draining") {
		t.Fatalf("drain: %s", out)
	}
}
