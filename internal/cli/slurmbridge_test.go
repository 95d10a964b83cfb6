package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
)

// TestSlurmBridgeCommand runs `jobfabric slurm bridge --once` against a
// real slurmctld and server: the cluster name comes from scontrol show
// config, the account map from its file, and a held job of a mapped
// account is released while an unmapped one stays held.
func TestSlurmBridgeCommand(t *testing.T) {
	sc := slurmtest.Start(t, slurmtest.Options{Nodes: "s1-gpu[001-004]", GPUsPerNode: 8})
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/training", "--guaranteed", "16")
	amap := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(amap, []byte("accounts:\n  phys: acme\nworkspaces:\n  gpu: training\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sbatch := func(acct string) string {
		out, err := sc.Command(t.Context(), "sbatch", "--parsable", "--hold", "-o", "/dev/null", "-A", acct, "-N", "1", "--gres=gpu:8", "--wrap", "true")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	ok, stray := sbatch("phys"), sbatch("zzz")
	// A node Slurm has down is cordoned for the bridge's runtime.
	if _, err := sc.Command(t.Context(), "scontrol", "update", "nodename=s1-gpu004", "state=down", "reason=fan"); err != nil {
		t.Fatal(err)
	}
	// The bridge runs with a platform runtime token, as a site gives it.
	tok, err := c.Client(0).CreateToken(t.Context(), api.TokenCreateRequest{Role: domain.RoleRuntime, Description: "slurm bridge"})
	if err != nil {
		t.Fatal(err)
	}
	bridgeEnv := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": tok.Secret}
	conf := strings.TrimPrefix(sc.Env[0], "SLURM_CONF=")
	// The test's slurmctld keeps no accounting (no slurmdbd here): the
	// bridge refuses to start on it unless told that any user may act for
	// any mapped tenant.
	runErrCases(t, map[string]errCase{
		"accounts not enforced": {env: env, args: []string{"slurm", "bridge", "--once", "--slurm-conf", conf, "--account-map", amap},
			want: "AccountingStorageType=accounting_storage/none"},
	})
	args := []string{"slurm", "bridge", "--once", "-o", "json", "--slurm-conf", conf, "--account-map", amap, "--allow-unenforced-accounts"}
	var total struct{ Submitted, Released, Held int }
	sc.Poll(t, "the bridge command did not release the job", func() (bool, string) {
		out := mustRun(t, bridgeEnv, args...)
		var st struct{ Submitted, Released, Held int }
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		total.Held += st.Held
		return total.Released == 1, out
	})
	if total.Submitted != 1 || total.Held != 1 {
		t.Errorf("bridge passes did %+v, want 1 submitted, 1 kept held", total)
	}
	out := mustRun(t, env, "job", "show", "1", "-o", "json")
	if !strings.Contains(out, `"externalId": "slurm:jftest:`+ok+`"`) {
		t.Errorf("job 1 is not slurm job %s of cluster jftest:\n%s", ok, out)
	}
	if out := mustRun(t, env, "node", "list"); !strings.Contains(out, "cordoned(slurm:jftest)") || !strings.Contains(out, "slurm jftest: node s1-gpu004 is DOWN: fan") {
		t.Errorf("node list does not show s1-gpu004 cordoned for Slurm with its state and reason:\n%s", out)
	}
	q, _ := sc.Command(t.Context(), "squeue", "-h", "-t", "all", "-o", "%i %r %k")
	if !strings.Contains(string(q), stray+" JobHeldUser jobfabric: account zzz has no tenant") {
		t.Errorf("the unmapped job is not held with the reason:\n%s", q)
	}
	runErrCases(t, map[string]errCase{
		"bad map":     {env: env, args: []string{"slurm", "bridge", "--once", "--cluster", "x", "--account-map", "/nonexistent.yaml"}, want: "account-map"},
		"interval":    {env: env, args: []string{"slurm", "bridge", "--cluster", "x", "--interval", "0s"}, want: "--interval 0s must be above 0"},
		"stuck-after": {env: env, args: []string{"slurm", "bridge", "--cluster", "x", "--stuck-after", "0s"}, want: "--stuck-after 0s must be above 0"},
	})
}

// TestUnenforcedAccounts: the bridge starts only where slurmctld checks
// that a user may use an account (the account is the tenant).
func TestUnenforcedAccounts(t *testing.T) {
	for _, tc := range []struct {
		typ, enforce string
		ok           bool
	}{
		{"accounting_storage/none", "associations", false},
		{"", "", false},
		{"accounting_storage/slurmdbd", "none", false},
		{"accounting_storage/slurmdbd", "", false},
		{"accounting_storage/slurmdbd", "nojobs,nosteps", false},
		{"accounting_storage/slurmdbd", "associations", true},
		{"accounting_storage/slurmdbd", "associations,limits,qos", true},
		{"accounting_storage/slurmdbd", "limits", true},
		{"accounting_storage/slurmdbd", "safe", true},
		{"accounting_storage/slurmdbd", "QOS", true},
		{"accounting_storage/slurmdbd", "all", true},
	} {
		cfg := configValues("ClusterName             = c\nAccountingStorageType   = " + tc.typ + "\nAccountingStorageEnforce = " + tc.enforce + "\n")
		if why := unenforcedAccounts(cfg); (why == "") != tc.ok {
			t.Errorf("type %q enforce %q: %q, want enforced %t", tc.typ, tc.enforce, why, tc.ok)
		}
	}
}

// TestSlurmJobSubmitLua: the command prints the job_submit.lua of the
// account map (its accounts held, nothing else) or, without one, for every
// account; a map that does not parse is refused naming the flag.
func TestSlurmJobSubmitLua(t *testing.T) {
	m := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(m, []byte("accounts:\n  phys: acme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, nil, "slurm", "job-submit-lua", "--account-map", m)
	for _, want := range []string{`["phys"] = true, -- tenant acme`, "local every_account = false", "function slurm_job_submit(", "job_desc.priority = 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("job_submit.lua lacks %q:\n%s", want, out)
		}
	}
	if out := mustRun(t, nil, "slurm", "job-submit-lua"); !strings.Contains(out, "local every_account = true") {
		t.Errorf("without a map every account's GPU jobs are held:\n%s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("acounts: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, nil, "slurm", "job-submit-lua", "--account-map", bad); code == 0 || !strings.Contains(stderr, "account-map") {
		t.Errorf("a bad map: exit %d, stderr %q", code, stderr)
	}
}
