package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/deploy"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// metricsWorld is a seeded server with a placed job in acme/research, one
// in globex/infer, and a job of globex/infer pending above its quota.
type metricsWorld struct {
	c       *devcluster.Cluster
	url     string
	pending *domain.Job
}

func newMetricsWorld(t *testing.T) *metricsWorld {
	t.Helper()
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	for _, j := range []*domain.Job{submit(t, admin, "acme", "research", 8), submit(t, admin, "globex", "infer", 4)} {
		waitJob(t, admin, j.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	}
	// globex/infer may hold 8 + 8; 4 held, 13 more is above it.
	p := submit(t, admin, "globex", "infer", 13)
	waitJob(t, admin, p.ID, "pending on its quota", func(j *domain.Job) bool {
		return j.State == domain.JobPending && j.Reason != nil && j.Reason.Code == "workspace_quota"
	})
	return &metricsWorld{c: c, url: c.Servers[0].URL(), pending: p}
}

func scrape(t *testing.T, base, token string) (int, string) {
	t.Helper()
	return do(t, base, token, "GET", "/metrics", "")
}

func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value finds the series of family name with exactly these labels (the
// family's other labels ignored); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for k, v := range labels {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetricsAfterSubmits(t *testing.T) {
	w := newMetricsWorld(t)
	code, body := scrape(t, w.url, w.c.AdminToken)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics as admin: %d %s", code, body)
	}
	fams := parseMetrics(t, body)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobfabric_scheduler_pending_jobs", map[string]string{"tenant": "globex", "workspace": "infer", "reason": "workspace_quota"}, 1},
		{"jobfabric_scheduler_placements_total", map[string]string{"tenant": "acme", "workspace": "research"}, 1},
		{"jobfabric_scheduler_placements_total", map[string]string{"tenant": "globex", "workspace": "infer"}, 1},
		{"jobfabric_workspace_quota_use_gpus", map[string]string{"tenant": "acme", "workspace": "research", "use": "guaranteed"}, 8},
		{"jobfabric_workspace_quota_use_gpus", map[string]string{"tenant": "globex", "workspace": "infer", "use": "guaranteed"}, 4},
		{"jobfabric_workspace_quota_use_gpus", map[string]string{"tenant": "acme", "workspace": "prod", "use": "borrowed"}, 0},
		{"jobfabric_workspace_quota_gpus", map[string]string{"tenant": "acme", "workspace": "research", "limit": "borrow"}, 16},
		{"jobfabric_tenant_quota_use_gpus", map[string]string{"tenant": "acme", "use": "guaranteed"}, 8},
		{"jobfabric_scheduler_admission_latency_seconds", nil, 2},
		{"jobfabric_http_requests_total", map[string]string{"method": "POST", "route": "/v1/jobs", "code": "201"}, 3},
	} {
		got, ok := value(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The single server became leader once, and its own commits were timed.
	if v, _ := value(fams, "jobfabric_raft_leader_changes_total", nil); v != 1 {
		t.Errorf("leader changes %v, want 1", v)
	}
	if v, _ := value(fams, "jobfabric_raft_apply_duration_seconds", nil); v < 5 {
		t.Errorf("%v commits timed, want at least the seed's and the submits'", v)
	}
	if _, ok := value(fams, "jobfabric_scheduler_pending_jobs", map[string]string{"tenant": "acme"}); ok {
		t.Errorf("acme has no pending job, but a series says so")
	}
	for _, name := range []string{"jobfabric_scheduler_cycle_duration_seconds", "jobfabric_raft_apply_duration_seconds",
		"jobfabric_scheduler_reclaim_bound_seconds", "jobfabric_fabric_revision", "go_goroutines", "process_open_fds",
		"jobfabric_raft_commit_time_seconds", "jobfabric_raft_state_leader_total", "jobfabric_raft_fsm_apply_seconds"} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	// Routes are patterns, never URLs: a job's ID is not a label value.
	for _, m := range fams["jobfabric_http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), fmt.Sprint(w.pending.ID)) {
				t.Errorf("route label %q carries a job ID", l.GetValue())
			}
		}
	}
}

// TestMetricsTenantScope reads /metrics from the attacker's side: a tenant
// token sees only series labelled with its own tenant (a member's, its
// workspace), never another tenant's or workspace's names; no token and a
// forged one are refused.
func TestMetricsTenantScope(t *testing.T) {
	w := newMetricsWorld(t)
	admin := w.c.Client(0)
	// Pending work in acme/prod too, so the member's filter has something
	// of its own tenant to hide.
	submit(t, admin, "acme", "prod", 16)
	for _, c := range []struct {
		name, token string
		want        []string // must appear
		never       []string // must not appear anywhere in the body
	}{
		{"acme tenant-admin", mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""),
			[]string{`tenant="acme",workspace="research"`, `workspace="prod"`}, []string{"globex", "infer", "go_goroutines", "jobfabric_http_requests_total"}},
		{"acme member of research", mustToken(t, admin, domain.RoleMember, "acme", "research"),
			[]string{`tenant="acme",workspace="research"`}, []string{"globex", "infer", `"prod"`, "jobfabric_tenant_quota_use_gpus"}},
		{"acme runtime", mustToken(t, admin, domain.RoleRuntime, "acme", ""),
			[]string{`tenant="acme"`}, []string{"globex", "infer"}},
		{"globex tenant-admin", mustToken(t, admin, domain.RoleTenantAdmin, "globex", ""),
			[]string{`tenant="globex",workspace="infer"`, `reason="workspace_quota"`}, []string{"acme", "research", `"prod"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := scrape(t, w.url, c.token)
			if code != http.StatusOK {
				t.Fatalf("GET /metrics: %d %s", code, body)
			}
			parseMetrics(t, body)
			for _, s := range c.want {
				if !strings.Contains(body, s) {
					t.Errorf("%q missing from its own scope:\n%s", s, body)
				}
			}
			for _, s := range c.never {
				if strings.Contains(body, s) {
					t.Errorf("%q leaked:\n%s", s, body)
				}
			}
		})
	}
	for name, tok := range map[string]string{"no token": "", "forged": "jf_000000000000_" + strings.Repeat("ab", 32)} {
		if code, body := scrape(t, w.url, tok); code != http.StatusUnauthorized || strings.Contains(body, "jobfabric_") {
			t.Errorf("%s: GET /metrics = %d %q, want 401 and no series", name, code, body)
		}
	}
}

func TestPprofAdminOnly(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	platformRT, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleRuntime, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	base := c.Servers[0].URL()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		for name, want := range map[string]int{c.AdminToken: 200, "": 401,
			mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""):    403,
			mustToken(t, admin, domain.RoleMember, "acme", "research"): 403,
			platformRT.Secret: 403} {
			code, body := do(t, base, name, "GET", path, "")
			if code != want {
				t.Errorf("GET %s with token %.12q: %d, want %d (%.200s)", path, name, code, want, body)
			}
			if want != 200 && strings.Contains(body, "goroutine") {
				t.Errorf("GET %s refused but answered a profile: %.200s", path, body)
			}
		}
	}
}

// TestMetricsPromtoolLint lints the exposition with Prometheus' own
// promtool (Debian package prometheus).
func TestMetricsPromtoolLint(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian package prometheus): cannot lint /metrics")
	}
	w := newMetricsWorld(t)
	_, body := scrape(t, w.url, w.c.AdminToken)
	cmd := exec.CommandContext(ctxT(t), promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestPrometheusScrapesMetrics runs Debian's prometheus server against a
// test server: it scrapes /metrics with a bearer token file, and its query
// API answers the pending-jobs series.
func TestPrometheusScrapesMetrics(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not found (Debian package prometheus): cannot scrape with the real server")
	}
	w := newMetricsWorld(t)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	// A tenant token: the scrape sees the tenant's series only.
	tok := mustToken(t, w.c.Client(0), domain.RoleTenantAdmin, "globex", "")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(w.url)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: jobfabric
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: %s
    static_configs:
      - targets: [%q]
`, tokFile, target.Host)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	// An external process on real time: poll its query API with a deadline.
	deadline := time.Now().Add(45 * time.Second)
	q := "http://" + addr + "/api/v1/query?query=" + url.QueryEscape(`jobfabric_scheduler_pending_jobs{tenant="globex",workspace="infer",reason="workspace_quota"}`)
	var last string
	for time.Now().Before(deadline) {
		if v, ok := queryValue(q, &last); ok {
			if v != "1" {
				t.Fatalf("prometheus answered %s pending jobs, want 1: %s", v, last)
			}
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctxT(t).Done():
		}
	}
	t.Fatalf("prometheus never answered the pending-jobs series; last answer %s\nprometheus log:\n%s", last, logs.String())
}

// queryValue asks prometheus' query API; ok when it answered one series.
func queryValue(q string, last *string) (string, bool) {
	resp, err := http.Get(q)
	if err != nil {
		*last = err.Error()
		return "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	*last = string(b)
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &r) != nil || r.Status != "success" || len(r.Data.Result) != 1 {
		return "", false
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	return v, true
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRequestAndDecisionLogs: a submit is logged as a request (route
// pattern, status, the token's ID and never its secret) and its placement
// as a decision naming job, tenant and workspace.
func TestRequestAndDecisionLogs(t *testing.T) {
	var logs lockedBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{RaftTimeout: time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	admin := c.Client(0)
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	waitJob(t, admin, j.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	do(t, c.Servers[0].URL(), c.AdminToken, "GET", fmt.Sprintf("/v1/jobs/%d", j.ID), "")
	tokID := strings.Split(c.AdminToken, "_")[1]

	var sawSubmit, sawGet, sawPlaced bool
	deadline := time.Now().Add(10 * time.Second)
	for !(sawSubmit && sawGet && sawPlaced) && time.Now().Before(deadline) {
		out := logs.String()
		if strings.Contains(out, c.AdminToken) || strings.Contains(out, strings.Split(c.AdminToken, "_")[2]) {
			t.Fatal("a token's secret is in the log")
		}
		sawSubmit, sawGet, sawPlaced = false, false, false
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line is not JSON: %q", line)
			}
			switch {
			case r["msg"] == "request" && r["route"] == "/v1/jobs" && r["method"] == "POST" && r["status"] == float64(201) && r["token"] == tokID && r["level"] == "INFO":
				sawSubmit = true
			case r["msg"] == "request" && r["route"] == "/v1/jobs/{id}" && r["method"] == "GET" && r["status"] == float64(200) && r["level"] == "DEBUG":
				sawGet = true
			case r["msg"] == "job placed" && r["job"] == float64(j.ID) && r["tenant"] == "acme" && r["workspace"] == "research":
				sawPlaced = true
			}
		}
		if !(sawSubmit && sawGet && sawPlaced) {
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	if !sawSubmit || !sawGet || !sawPlaced {
		t.Fatalf("submit request %v, get request %v, placement %v logged; log:\n%s", sawSubmit, sawGet, sawPlaced, logs.String())
	}
}

// TestReclaimMetrics: a guaranteed job reclaims GPUs a borrower holds; the
// borrower's runtime stops its job at once, so the reclaim is served well
// within its bound. The preemption is counted under the victim's tenant
// and the kind, the reclaim latency observed, none over the bound, and the
// lender's idle guarantee shows as lent while the borrower holds it.
func TestReclaimMetrics(t *testing.T) {
	const grace = time.Minute
	c := startTuned(t, func(cfg *server.Config) { cfg.PreemptionGrace, cfg.ScheduleInterval = grace, time.Second })
	admin := c.Client(0)
	ctx := ctxT(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"owner", "guest"} {
		if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: tn, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CreateWorkspace(ctx, "owner", api.WorkspaceCreateRequest{Name: "train", Guaranteed: 16, LendLimit: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "guest", api.WorkspaceCreateRequest{Name: "batch", BorrowLimit: 32}); err != nil {
		t.Fatal(err)
	}
	var borrowed []uint64
	for range 4 {
		j, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "guest", Workspace: "batch", GPUs: 8, Preemptible: true})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, admin, j.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
		borrowed = append(borrowed, j.ID)
	}
	_, body := scrape(t, c.Servers[0].URL(), c.AdminToken)
	if v, _ := value(parseMetrics(t, body), "jobfabric_workspace_quota_use_gpus", map[string]string{"tenant": "owner", "use": "lent"}); v != 16 {
		t.Errorf("owner/train lent %v GPUs while guest/batch borrows all 32, want 16", v)
	}

	owner := submit(t, admin, "owner", "train", 8)
	var victim uint64
	waitState(t, c.Servers[0], "a borrowed job preempting", func(f *state.FSM) bool {
		for _, id := range borrowed {
			if j, ok := f.Job(id); ok && j.State == domain.JobPreempting {
				victim = id
				return true
			}
		}
		return false
	})
	rt := as(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleRuntime, "guest", ""))
	if _, err := rt.Report(ctx, victim, "stopped", "checkpointed"); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, owner.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	// The placement's metrics are recorded when its commit returns to the
	// scheduler; the next cycle (a kick from any change) starts after it.
	if err := c.Servers[0].Settle(ctx); err != nil {
		t.Fatal(err)
	}

	_, body = scrape(t, c.Servers[0].URL(), c.AdminToken)
	fams := parseMetrics(t, body)
	for _, cs := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobfabric_scheduler_preemptions_total", map[string]string{"tenant": "guest", "workspace": "batch", "kind": "reclaimed"}, 1},
		{"jobfabric_scheduler_reclaim_latency_seconds", nil, 1},
		{"jobfabric_scheduler_reclaims_over_bound_total", nil, 0},
		{"jobfabric_scheduler_reclaim_bound_seconds", nil, (grace + time.Second).Seconds()},
		{"jobfabric_scheduler_placements_total", map[string]string{"tenant": "owner", "workspace": "train"}, 1},
	} {
		if got, ok := value(fams, cs.name, cs.labels); !ok || got != cs.want {
			t.Errorf("%s%v = %v (present %v), want %v", cs.name, cs.labels, got, ok, cs.want)
		}
	}
	// The owner's tenant admin sees its placement, not the guest's preemption.
	_, body = scrape(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleTenantAdmin, "owner", ""))
	if strings.Contains(body, "guest") || strings.Contains(body, "batch") || !strings.Contains(body, `tenant="owner"`) {
		t.Errorf("owner's view of /metrics:\n%s", body)
	}
}

// TestRequestLabelsBounded: paths and methods nobody routes are counted
// under one route and method, so a scanner cannot grow the label set.
func TestRequestLabelsBounded(t *testing.T) {
	c := startCluster(t, 1)
	base := c.Servers[0].URL()
	for i := range 5 {
		do(t, base, "", "GET", fmt.Sprintf("/scan/%d", i), "")
		do(t, base, "", fmt.Sprintf("BREW%d", i), "/debug/pprof/", "")
	}
	_, body := scrape(t, base, c.AdminToken)
	fams := parseMetrics(t, body)
	if v, _ := value(fams, "jobfabric_http_requests_total", map[string]string{"method": "GET", "route": "unmatched", "code": "404"}); v != 5 {
		t.Errorf("unmatched GETs counted %v, want 5", v)
	}
	if v, _ := value(fams, "jobfabric_http_requests_total", map[string]string{"method": "other", "route": "/debug/pprof/", "code": "401"}); v != 5 {
		t.Errorf("unknown methods counted %v, want 5 under method other", v)
	}
	if strings.Contains(body, "/scan/") || strings.Contains(body, "BREW") {
		t.Errorf("a client's path or method became a label:\n%s", body)
	}
}

// TestFabricMetrics: a device whose deploy fails is counted and shown out
// of sync by name; the others deployed, timed and in sync; the verifier
// passed. Devices are the platform's: a tenant's view has none.
func TestFabricMetrics(t *testing.T) {
	drv := &flaky{File: deploy.File{Dir: t.TempDir()}, fail: map[string]bool{"s1-leaf7": true}}
	c := startTuned(t, func(cfg *server.Config) { cfg.Driver = drv })
	admin := c.Client(0)
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	waitJob(t, admin, j.ID, "waiting on s1-leaf7", func(j *domain.Job) bool {
		return j.State == domain.JobPlaced && j.Reason != nil && strings.Contains(j.Reason.Message, "s1-leaf7 (deploy failed")
	})
	// The job's reason can name s1-leaf7 before the other devices' reports
	// of the same revision are committed: scrape until s1-leaf0's is.
	var body string
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = scrape(t, c.Servers[0].URL(), c.AdminToken)
		fams = parseMetrics(t, body)
		if v, _ := value(fams, "jobfabric_fabric_device_in_sync", map[string]string{"device": "s1-leaf0"}); v == 1 || time.Now().After(deadline) {
			break
		}
	}
	if v, _ := value(fams, "jobfabric_fabric_deploy_failures_total", map[string]string{"device": "s1-leaf7"}); v < 1 {
		t.Errorf("s1-leaf7's failed deploys counted %v, want at least 1", v)
	}
	if _, ok := value(fams, "jobfabric_fabric_deploy_failures_total", map[string]string{"device": "s1-leaf0"}); ok {
		t.Errorf("s1-leaf0 deployed, but a failure series names it")
	}
	for _, cs := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobfabric_fabric_device_in_sync", map[string]string{"device": "s1-leaf7"}, 0},
		{"jobfabric_fabric_device_in_sync", map[string]string{"device": "s1-leaf0"}, 1},
		{"jobfabric_fabric_verify_ok", nil, 1},
		{"jobfabric_fabric_verify_failures", nil, 0},
	} {
		if got, ok := value(fams, cs.name, cs.labels); !ok || got != cs.want {
			t.Errorf("%s%v = %v (present %v), want %v", cs.name, cs.labels, got, ok, cs.want)
		}
	}
	if v, _ := value(fams, "jobfabric_fabric_deploy_duration_seconds", map[string]string{"device": "s1-leaf0"}); v < 1 {
		t.Errorf("s1-leaf0's deploys timed %v times, want at least 1", v)
	}
	if v, _ := value(fams, "jobfabric_fabric_revision", nil); v < 1 {
		t.Errorf("fabric revision %v, want at least 1", v)
	}
	if v, _ := value(fams, "jobfabric_fabric_device_deployed_revision", map[string]string{"device": "s1-leaf7"}); v != 0 {
		t.Errorf("s1-leaf7 never deployed, but its deployed revision is %v", v)
	}
	_, body = scrape(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""))
	if strings.Contains(body, "s1-leaf") || strings.Contains(body, "jobfabric_fabric_") {
		t.Errorf("a tenant's view shows the platform's devices:\n%s", body)
	}
}

// TestFollowerMetrics: a follower answers /metrics itself (not forwarded):
// it runs no scheduling cycle, yet its state families show the replicated
// pending job.
func TestFollowerMetrics(t *testing.T) {
	c := startCluster(t, 3)
	li, err := c.WaitLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := c.Client(li)
	seed(t, admin)
	p := submit(t, admin, "globex", "infer", 16)
	waitJob(t, admin, p.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	q := submit(t, admin, "globex", "infer", 1)
	waitJob(t, admin, q.ID, "pending on its quota", func(j *domain.Job) bool {
		return j.State == domain.JobPending && j.Reason != nil && j.Reason.Code == "workspace_quota"
	})
	fi := (li + 1) % 3
	waitState(t, c.Servers[fi], "the follower has the reason", func(f *state.FSM) bool {
		j, ok := f.Job(q.ID)
		return ok && j.Reason != nil && j.Reason.Code == "workspace_quota"
	})
	_, body := scrape(t, c.Servers[fi].URL(), c.AdminToken)
	fams := parseMetrics(t, body)
	if v, _ := value(fams, "jobfabric_scheduler_pending_jobs", map[string]string{"tenant": "globex", "workspace": "infer", "reason": "workspace_quota"}); v != 1 {
		t.Errorf("follower's pending jobs %v, want 1", v)
	}
	if v, _ := value(fams, "jobfabric_workspace_quota_use_gpus", map[string]string{"tenant": "globex", "workspace": "infer", "use": "borrowed"}); v != 8 {
		t.Errorf("follower's borrowed GPUs of globex/infer %v, want 8", v)
	}
	if v, ok := value(fams, "jobfabric_scheduler_cycle_duration_seconds", nil); !ok || v != 0 {
		t.Errorf("a follower timed %v scheduling cycles (present %v): it answered for the leader", v, ok)
	}
}
