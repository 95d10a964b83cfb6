package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-5 * time.Second:                          "0s",
		0:                                         "0s",
		45 * time.Second:                          "45s",
		119 * time.Second:                         "119s",
		2 * time.Minute:                           "2m",
		3*time.Minute + 20*time.Second:            "3m20s",
		45 * time.Minute:                          "45m",
		3 * time.Hour:                             "3h",
		5*time.Hour + 3*time.Minute:               "5h3m",
		30 * time.Hour:                            "30h",
		3*24*time.Hour + 4*time.Hour:              "3d4h",
		12 * 24 * time.Hour:                       "12d",
		(3*365 + 10) * 24 * time.Hour:             "3y10d",
		2*time.Minute + 59*time.Second:            "2m59s",
		8*time.Hour + 59*time.Minute:              "8h",
		7*24*time.Hour + 23*time.Hour:             "7d23h",
		729 * 24 * time.Hour:                      "729d",
		9*time.Minute + 59*time.Second:            "9m59s",
		10*time.Minute + 59*time.Second:           "10m",
		2*time.Hour + 59*time.Minute:              "179m",
		47*time.Hour + 59*time.Minute:             "47h",
		48 * time.Hour:                            "2d",
		730 * 24 * time.Hour:                      "2y0d",
		time.Duration(1.5 * float64(time.Second)): "1s",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestTimesInTheLocalZone: every time a command prints is in the zone it
// is given (the local zone in the field), with the zone's name, and ages
// count from its clock.
func TestTimesInTheLocalZone(t *testing.T) {
	zone := time.FixedZone("JFT", 5*3600+30*60)
	at := time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)
	p := &printing{loc: zone, now: func() time.Time { return at.Add(5*time.Hour + 3*time.Minute) }}
	if got, want := p.when(at), "2026-11-23 21:30:00 JFT"; got != want {
		t.Errorf("when = %q, want %q", got, want)
	}
	if got := p.age(at); got != "5h3m" {
		t.Errorf("age = %q, want 5h3m", got)
	}
	if got := p.when(time.Time{}); got != "-" {
		t.Errorf("when(zero) = %q, want -", got)
	}

	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	setupCluster(t, env)
	var j domain.Job
	if err := json.Unmarshal([]byte(mustRun(t, env, "job", "show", "1", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return j.SubmittedAt.Add(3*time.Hour + 10*time.Second) }
	out := runWith(t, &globals{printing: printing{output: "table", loc: zone, now: later}}, "job", "show", "1")
	if want := `Submitted:\s+` + regexp.QuoteMeta(j.SubmittedAt.In(zone).Format("2006-01-02 15:04:05")+" JFT (3h ago)"); !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("job show does not match %q:\n%s", want, out)
	}
	out = runWith(t, &globals{printing: printing{output: "table", loc: zone, now: later}}, "job", "list")
	if !regexp.MustCompile(`(?m)^1\s+train\s+acme/research\s+8\s+\S+\s+3h\s`).MatchString(out) {
		t.Errorf("job list has no AGE 3h for job 1:\n%s", out)
	}
	out = runWith(t, &globals{printing: printing{output: "wide", loc: zone, now: later}}, "events", "--limit", "1")
	if !strings.Contains(out, " JFT ") {
		t.Errorf("events does not show times in the given zone:\n%s", out)
	}
}

// runWith runs the CLI with the given globals (clock, zone, poll interval)
// against the server in JOBFABRIC_SERVER, failing the test on an error.
func runWith(t *testing.T, g *globals, args ...string) string {
	t.Helper()
	out, errs, err := runG(context.Background(), g, args...)
	if err != nil {
		t.Fatalf("jobfabric %s: %v\n%s", strings.Join(args, " "), err, errs)
	}
	return out
}

func runG(ctx context.Context, g *globals, args ...string) (string, string, error) {
	var out, errb syncBuffer
	g.stdout, g.stderr = &out, &errb
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// setupCluster gives a fresh server a topology, a tenant with a
// workspace, job 1 (8 GPUs, named train) and three small jobs (2, 3, 4),
// and the node agent of job 1's server (its name is returned).
func setupCluster(t *testing.T, env map[string]string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	topo := mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4", "--gpus-per-server", "8")
	if err := os.WriteFile(file, []byte(topo), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", file)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/research", "--guaranteed", "16", "--borrow-limit", "16")
	mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "8", "--gpus-per-node", "8", "--name", "train")
	for range 3 {
		mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "1")
	}
	var j domain.Job
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := json.Unmarshal([]byte(mustRun(t, env, "job", "show", "1", "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.State == domain.JobReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job 1 is %s after 30s, want Ready", j.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	node := j.Placement[0].Server
	tok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "runtime", "--node", node))
	mustRun(t, map[string]string{"JOBFABRIC_TOKEN": tok}, "agent", "--node", node, "--fixture", h100Fixture, "--once")
	t.Setenv("JOBFABRIC_TOKEN", env["JOBFABRIC_TOKEN"])
	return node
}

// outCase says how the output test runs one command: args for the run
// with -o json and for the run with --no-headers (nil: the same), whether
// its table has a header row, and checks of the JSON.
type outCase struct {
	json, plain []string
	env         map[string]string
	header      bool
	check       func(t *testing.T, out string)
	skip        string // why the command is not run here
	// argsAt, when set, makes json and plain when the case runs (for a
	// command on an object the earlier cases must not see).
	argsAt func() (json, plain []string)
}

// headerLine is a table's header: two or more upper-case column names.
var headerLine = regexp.MustCompile(`(?m)^\s*[A-Z][A-Z0-9%@/-]*(\s{2,}[A-Z][A-Z0-9%@/-]*)+\s*$`)

// TestEveryCommandHonoursOutput walks the command tree: every command
// that prints must print valid JSON with -o json and no header line with
// --no-headers, or say here why it is not run. A new command fails this
// test until it is listed.
func TestEveryCommandHonoursOutput(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	node := setupCluster(t, env)
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(file, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenID := func() string {
		var tc api.TokenCreated
		if err := json.Unmarshal([]byte(mustRun(t, env, "token", "create", "--role", "member", "--workspace", "acme/research", "-o", "json")), &tc); err != nil {
			t.Fatal(err)
		}
		return tc.Token.ID
	}
	nodeTok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "runtime", "--node", node))
	other := "s1-gpu004"
	if node == other {
		other = "s1-gpu003"
	}
	args := func(a ...string) []string { return a }
	// held submits a job to a pool of a server the inventory does not
	// hold: it waits, so it can be moved.
	held := func() string {
		mustRun(t, env, "pool", "set", "nowhere", "gone-9")
		var j domain.Job
		if err := json.Unmarshal([]byte(mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "1", "--pool", "nowhere", "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
		return strconv.FormatUint(j.ID, 10)
	}
	cfgEnv := map[string]string{"JOBFABRIC_CONFIG": filepath.Join(t.TempDir(), "config.yaml")}
	long := "long-running; prints a log, not a result"

	// In order: later commands may depend on earlier ones.
	cases := []struct {
		path string
		outCase
	}{
		{"topology generate", outCase{json: args("topology", "generate")}},
		{"topology validate", outCase{json: args("topology", "validate", "-f", file), check: func(t *testing.T, out string) {
			var v topologyValid
			if err := json.Unmarshal([]byte(out), &v); err != nil || !v.Valid || v.Summary.Servers != 4 {
				t.Errorf("topology validate -o json = %s (%v)", out, err)
			}
		}}},
		{"topology apply", outCase{json: args("topology", "apply", "-f", file)}},
		{"topology show", outCase{json: args("topology", "show"), header: true}},
		{"topology export", outCase{skip: "writes another scheduler's format (--format kueue|volcano|slurm|slurm-yaml|node-labels): -o does not apply (TestTopologyExport)"}},
		{"tenant create", outCase{json: args("tenant", "create", "t1"), plain: args("tenant", "create", "t2"), header: true}},
		{"tenant update", outCase{json: args("tenant", "update", "t1", "--sites", "dc1"), header: true}},
		{"tenant list", outCase{json: args("tenant", "list"), header: true}},
		{"tenant show", outCase{json: args("tenant", "show", "acme"), header: true}},
		{"tenant delete", outCase{json: args("tenant", "delete", "t1"), plain: args("tenant", "delete", "t2")}},
		{"workspace create", outCase{json: args("workspace", "create", "acme/w1"), plain: args("workspace", "create", "acme/w2"), header: true}},
		{"workspace update", outCase{json: args("workspace", "update", "acme/w1", "--weight", "2"), header: true}},
		{"workspace list", outCase{json: args("workspace", "list", "acme"), header: true}},
		{"workspace show", outCase{json: args("workspace", "show", "acme/research"), header: true}},
		{"workspace delete", outCase{json: args("workspace", "delete", "acme/w1"), plain: args("workspace", "delete", "acme/w2")}},
		{"token create", outCase{json: args("token", "create", "--role", "member", "--workspace", "acme/research")}},
		{"token list", outCase{json: args("token", "list"), header: true}},
		{"token revoke", outCase{json: args("token", "revoke", tokenID()), plain: args("token", "revoke", tokenID())}},
		{"whoami", outCase{json: args("whoami")}},
		{"job submit", outCase{json: args("job", "submit", "--workspace", "acme/research", "--gpus", "1"), header: true}},
		{"job list", outCase{json: args("job", "list"), header: true}},
		{"job show", outCase{json: args("job", "show", "1")}},
		{"job explain", outCase{json: args("job", "explain", "1")}},
		{"job cancel", outCase{json: args("job", "cancel", "2"), plain: args("job", "cancel", "3")}},
		{"job watch", outCase{json: args("job", "watch", "2"), plain: args("job", "watch", "3")}}, // ended: one line
		{"job report", outCase{json: args("job", "report", "1", "--state", "running")}},
		{"job health", outCase{json: args("job", "health", "1"), header: true}},
		{"job env", outCase{json: args("job", "env", "1", "--node", node)}},
		{"events", outCase{json: args("events", "--tenant", "acme"), header: true}},
		{"usage", outCase{json: args("usage", "--since", "1h", "--by", "workspace"), header: true}},
		{"cluster status", outCase{json: args("cluster", "status"), header: true}},
		{"cluster remove", outCase{json: args("cluster", "remove", "gone-1"), plain: args("cluster", "remove", "gone-2")}},
		{"cluster secret", outCase{json: args("cluster", "secret")}},
		{"cluster tls", outCase{json: args("cluster", "tls")}},
		{"node list", outCase{json: args("node", "list"), header: true}},
		{"node cordon", outCase{json: args("node", "cordon", other)}},
		{"node uncordon", outCase{json: args("node", "uncordon", other)}},
		{"node unhealthy", outCase{json: args("node", "unhealthy", other)}},
		{"node healthy", outCase{json: args("node", "healthy", other)}},
		{"pool set", outCase{json: args("pool", "set", "p1", other), plain: args("pool", "set", "p2", other, "gone-1")}},
		{"pool list", outCase{json: args("pool", "list"), header: true}},
		{"job move", outCase{argsAt: func() ([]string, []string) {
			return args("job", "move", held(), "--pool", "p1"), args("job", "move", held(), "--pool", "")
		}}},
		{"pool delete", outCase{json: args("pool", "delete", "p1"), plain: args("pool", "delete", "p2")}},
		{"fabric status", outCase{json: args("fabric", "status"), header: true}},
		{"fabric hotspots", outCase{json: args("fabric", "hotspots"), header: true}},
		{"fabric revisions", outCase{json: args("fabric", "revisions"), header: true}},
		{"fabric render", outCase{json: args("fabric", "render", "--device", "s1-leaf0")}},
		{"fabric diff", outCase{json: args("fabric", "diff"), plain: args("fabric", "diff", "--stat"), check: func(t *testing.T, out string) {
			var d api.FabricDiff
			if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Devices) == 0 {
				t.Errorf("fabric diff -o json = %.300s (%v)", out, err)
			}
		}}},
		{"fabric deploy", outCase{json: args("fabric", "deploy"), header: true}},
		{"fabric verify", outCase{json: args("fabric", "verify")}},
		{"fabric options", outCase{json: args("fabric", "options"), plain: args("fabric", "options", "--vrf-placement", "used"), check: func(t *testing.T, out string) {
			var o api.FabricOptions
			if err := json.Unmarshal([]byte(out), &o); err != nil || o.VRFPlacement == "" || o.L3VLANMin == 0 {
				t.Errorf("fabric options -o json = %.300s (%v)", out, err)
			}
		}}},
		{"agent", outCase{json: args("agent", "--node", node, "--fixture", h100Fixture, "--once"), env: map[string]string{"JOBFABRIC_TOKEN": nodeTok}, header: true}},
		{"agent facts", outCase{json: args("agent", "facts", "--fixture", h100Fixture), header: true}},
		{"host list", outCase{json: args("host", "list"), header: true}},
		{"host show", outCase{json: args("host", "show", node), header: true}},
		{"host accept", outCase{json: args("host", "accept", node), header: true}},
		{"host policy", outCase{json: args("host", "policy")}},
		// Last: it stops job 1.
		{"node drain", outCase{json: args("node", "drain", node, "--grace", "1m"), plain: args("node", "drain", other), check: func(t *testing.T, out string) {
			var d nodeDrain
			if err := json.Unmarshal([]byte(out), &d); err != nil || !d.Draining || len(d.Stopping) != 1 || d.Stopping[0].ID != 1 {
				t.Errorf("node drain -o json = %.400s (%v), want draining and job 1 stopping", out, err)
			}
		}}},

		{"server", outCase{skip: long}},
		{"server migrate-log-store", outCase{skip: "needs a stopped server's data dir: TestMigrateLogStoreCommand checks its -o json"}},
		{"demo", outCase{skip: long}},
		{"bench submit", outCase{skip: "a measurement of minutes (docs/benchmarks.md); prints through the same emit"}},
		{"bench sched", outCase{skip: "a measurement of minutes"}},
		{"bench fabric", outCase{skip: "a measurement of minutes"}},
		{"bench soak", outCase{skip: "a measurement of minutes (TestSoakSmall runs it briefly); prints through the same emit"}},
		{"bench fabric-plot", outCase{skip: "writes an SVG, not a result to format (internal/bench TestFabricScaleSVG)"}},
		{"bench sched-plot", outCase{skip: "writes an SVG, not a result to format (internal/bench TestSchedScaleSVG)"}},
		{"bench soak-plot", outCase{skip: "writes SVGs, not a result to format (internal/bench TestSoakSmall reads the CSV back)"}},
		{"sim openb", outCase{skip: "needs the openb traces (sim_test.go)"}},
		{"sim jobs", outCase{skip: "needs a job trace (sim_test.go)"}},
		{"sim report", outCase{skip: "needs sim output (sim_test.go)"}},
		{"slurm prolog", outCase{skip: "prints export lines for slurmd: -o does not apply"}},
		{"slurm bridge", outCase{skip: "needs a slurmctld: TestSlurmBridgeCommand checks its -o json"}},
		{"slurm job-submit-lua", outCase{skip: "prints a job_submit.lua for slurmctld: -o does not apply (TestJobSubmitLuaHoldsForTheBridge runs it)"}},
		{"kube", outCase{skip: "a group: its one command is kube run"}},
		{"kube run", outCase{skip: "a long-running bridge that logs (needs a kube-apiserver: internal/kube TestBridge); it prints no result to format"}},
		{"slurm task-prolog", outCase{skip: "prints export lines for slurmd: -o does not apply"}},
		{"slurm epilog", outCase{skip: "prints nothing on success"}},
		{"lab up", outCase{skip: "needs root and FRR (internal/lab tests)"}},
		{"lab status", outCase{skip: "needs a running lab"}},
		{"lab wait", outCase{skip: "needs a running lab"}},
		{"lab ping", outCase{skip: "needs a running lab"}},
		{"lab down", outCase{skip: "needs a running lab"}},
		{"version", outCase{json: args("version")}},
		{"config set-context", outCase{json: args("config", "set-context", "c1", "--server", env["JOBFABRIC_SERVER"]), plain: args("config", "set-context", "c2", "--server", env["JOBFABRIC_SERVER"]), env: cfgEnv}},
		{"config use-context", outCase{json: args("config", "use-context", "c1"), env: cfgEnv}},
		{"config get-contexts", outCase{json: args("config", "get-contexts"), env: cfgEnv, header: true}},
		{"config current-context", outCase{json: args("config", "current-context"), env: cfgEnv}},
		{"config view", outCase{json: args("config", "view"), env: cfgEnv}},
		{"config delete-context", outCase{json: args("config", "delete-context", "c2"), plain: args("config", "delete-context", "c1"), env: cfgEnv}},
		{"completion bash", outCase{skip: "a shell script"}},
		{"completion zsh", outCase{skip: "a shell script"}},
		{"completion fish", outCase{skip: "a shell script"}},
		{"completion powershell", outCase{skip: "a shell script"}},
	}

	// Groups print their help (and refuse an unknown subcommand): nothing to format.
	for _, grp := range []string{"jobfabric", "bench", "cluster", "completion", "config", "fabric", "host", "job", "lab", "node", "pool", "sim", "slurm", "tenant", "token", "topology", "workspace"} {
		cases = append(cases, struct {
			path string
			outCase
		}{grp, outCase{skip: "a group: prints its help"}})
	}
	listed := map[string]bool{}
	for _, c := range cases {
		listed[c.path] = true
	}
	root := newRoot(&globals{})
	root.InitDefaultCompletionCmd()
	var missing []string
	walk(root, func(cmd *cobra.Command) {
		p := strings.TrimPrefix(cmd.CommandPath(), "jobfabric ")
		if cmd.Runnable() && !cmd.Hidden && p != "help" && !listed[p] {
			missing = append(missing, p)
		}
	})
	if len(missing) > 0 {
		t.Fatalf("commands not listed in TestEveryCommandHonoursOutput (say how they honour -o json and --no-headers, or why they are not run): %s", strings.Join(missing, ", "))
	}

	for _, c := range cases {
		if c.skip != "" {
			continue
		}
		if c.argsAt != nil {
			c.json, c.plain = c.argsAt()
		}
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range c.env {
			e[k] = v
		}
		out := mustRun(t, e, append(c.json, "-o", "json")...)
		if !json.Valid([]byte(out)) {
			t.Errorf("%s -o json is not valid JSON:\n%.500s", c.path, out)
		} else if c.check != nil {
			c.check(t, out)
		}
		plain := c.plain
		if plain == nil {
			plain = c.json
		}
		if c.header && c.plain == nil {
			if out := mustRun(t, e, plain...); !headerLine.MatchString(out) {
				t.Errorf("%s prints no header line (the test's header flag is wrong):\n%.500s", c.path, out)
			}
		}
		out = mustRun(t, e, append(plain, "--no-headers")...)
		if h := headerLine.FindString(out); h != "" {
			t.Errorf("%s --no-headers still prints the header %q:\n%.500s", c.path, strings.TrimSpace(h), out)
		}
	}
}

// TestSectionsAndStats: host show prints a table per section, fabric
// diff --stat a line per device, node drain the jobs it stops.
func TestSectionsAndStats(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	node := setupCluster(t, env)

	out := mustRun(t, env, "host", "show", node)
	for _, re := range []string{`(?m)^Node:\s+` + node + `$`, `(?m)^Last heartbeat:\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ \(\d+s ago\)$`,
		`(?m)^Conditions:\n  none$`, `(?m)^GPUs:\n  GPU\s+UUID\s+MODEL`, `(?m)^RDMA ports:\n  NIC\s+PORT\s+NETDEV`, `(?m)^  mlx5_0\s+1\s`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("host show does not match %s:\n%s", re, out)
		}
	}

	out = mustRun(t, env, "fabric", "diff", "--stat")
	if !regexp.MustCompile(`(?m)^DEVICE\s+ADDED\s+REMOVED\n(\S+\s+\+\d+\s+-\d+\n)+total\s+\+\d+\s+-\d+$`).MatchString(out) {
		t.Errorf("fabric diff --stat:\n%s", out)
	}

	out = mustRun(t, env, "node", "drain", node, "--grace", "10m")
	if !regexp.MustCompile(`(?m)^` + node + `: draining\nstopping 1 job within 10m0s:\nID\s+NAME.*\n1\s+train\s`).MatchString(out) {
		t.Errorf("node drain does not list job 1:\n%s", out)
	}
	if out := mustRun(t, env, "node", "drain", "s1-gpu004", "-o", "name"); out != "node/s1-gpu004\n" {
		t.Errorf("node drain of an idle server -o name = %q, want only the node", out)
	}
}

// watchUntil runs a watching command until its output matches want (or
// 30s pass), then stops it as Ctrl-C would and returns the output.
func watchUntil(t *testing.T, args []string, act func(), want ...*regexp.Regexp) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	g := &globals{stdout: &out, stderr: &errb, printing: printing{output: "table", poll: 50 * time.Millisecond}}
	for i, a := range args {
		if a == "-o" {
			g.output = args[i+1]
		}
	}
	root := newRoot(g)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	// The first print, before the change.
	deadline := time.Now().Add(30 * time.Second)
	for out.String() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	act()
	matches := func() bool {
		for _, w := range want {
			if !w.MatchString(out.String()) {
				return false
			}
		}
		return true
	}
	for !matches() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("jobfabric %s never printed %q:\n%s%s", strings.Join(args, " "), want, out.String(), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("jobfabric %s ended with %v after Ctrl-C, want success", strings.Join(args, " "), err)
	}
	return out.String()
}

func TestWatch(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	setupCluster(t, env)

	// job list -w: the whole list, then the new job and job 4's change,
	// under one header.
	out := watchUntil(t, []string{"job", "list", "-w"}, func() {
		mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "1", "--name", "late")
		mustRun(t, env, "job", "cancel", "4")
	}, regexp.MustCompile(`(?m)^5\s+late\s.*Ready`), regexp.MustCompile(`(?m)^4\s.*Cancelled`))
	if n := len(headerLine.FindAllString(out, -1)); n != 1 {
		t.Errorf("job list -w printed %d headers, want 1:\n%s", n, out)
	}
	if n := len(regexp.MustCompile(`(?m)^1\s+train\s`).FindAllString(out, -1)); n != 1 {
		t.Errorf("job list -w printed unchanged job 1 %d times, want once:\n%s", n, out)
	}

	// events -f -o json: one object per line, new events as they come.
	out = watchUntil(t, []string{"events", "-f", "-o", "json", "--tenant", "acme"}, func() {
		mustRun(t, env, "job", "submit", "--workspace", "acme/research", "--gpus", "1")
	}, regexp.MustCompile(`"object":"job/6"`))
	seqs := map[uint64]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e domain.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("events -f -o json line %q: %v", l, err)
		}
		if seqs[e.Seq] {
			t.Errorf("events -f printed event %d twice", e.Seq)
		}
		seqs[e.Seq] = true
	}

	// fabric status -w: printed again when a deploy changes it.
	out = watchUntil(t, []string{"fabric", "status", "-w", "-o", "json"}, func() {
		mustRun(t, env, "job", "cancel", "1") // its VRF ports go: a new revision
	}, regexp.MustCompile(`(?s)"revision".*\n.*"revision"`))
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var st api.FabricStatus
		if err := json.Unmarshal([]byte(l), &st); err != nil {
			t.Fatalf("fabric status -w -o json line %q: %v", l, err)
		}
	}
}

func TestOutputFormats(t *testing.T) {
	jobs := []domain.Job{{ID: 7, JobSpec: domain.JobSpec{Name: "a"}}, {ID: 9, JobSpec: domain.JobSpec{Name: "b"}}}
	for _, tc := range []struct {
		output, want, err string
	}{
		{output: "name", want: "job/7\njob/9\n"},
		{output: "jsonpath={[*].id}", want: "7 9\n"},
		{output: `jsonpath='{range [*]}{.name}{"\n"}{end}'`, want: "a\nb\n"},
		{output: "jsonpath=[0].name", want: "a\n"},
		{output: "jsonpath={[*", err: "not a JSONPath template"},
		{output: "xml", err: `-o "xml" is not one of`},
		{output: "table", want: "ID  NAME  WORKSPACE  GPUS  STATE  AGE  SERVERS  REASON\n7   a     /          0            -    -        -\n9   b     /          0            -    -        -\n"},
	} {
		var out syncBuffer
		g := &globals{stdout: &out, printing: printing{output: tc.output}}
		err := g.emit(jobs, func(w io.Writer) { g.jobTable(w, jobs) })
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("-o %s: error %v, want %q", tc.output, err, tc.err)
			}
		case err != nil:
			t.Errorf("-o %s: %v", tc.output, err)
		case out.String() != tc.want:
			t.Errorf("-o %s printed %q, want %q", tc.output, out.String(), tc.want)
		}
	}
	var out syncBuffer
	g := &globals{stdout: &out, printing: printing{output: "name"}}
	if err := g.emit(api.DryRun{}, nil); err == nil || !strings.Contains(err.Error(), "has no name") {
		t.Errorf("-o name of a dry run: %v, want an error", err)
	}
}

func TestDiffStat(t *testing.T) {
	d := api.FabricDiff{From: 1, To: 2, Devices: []api.DeviceDiff{
		{Device: "s1-leaf0", Text: "--- a/s1-leaf0/frr.conf\n+++ b/s1-leaf0/frr.conf\n@@ -3 +3,2 @@ router bgp 65001\n- neighbor swp5 activate\n+ neighbor swp6 activate\n+ neighbor swp7 activate\n--- /dev/null\n+++ b/s1-leaf0/new.conf\n@@ -0,0 +1 @@\n+---\n"},
		{Device: "j1", Text: "# j1/config.set (junos, changed)\ndelete interfaces et-0/0/1\nset interfaces et-0/0/2 unit 0\n"},
	}}
	got := diffStat(d)
	want := []deviceDiffStat{{"s1-leaf0", 3, 1}, {"j1", 1, 1}}
	if !slices.Equal(got.Devices, want) {
		t.Errorf("diffStat = %+v, want %+v", got.Devices, want)
	}
}
