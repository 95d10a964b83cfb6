package server_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// usageFixture runs, on a server with a stepped clock, acme/research's
// 16-GPU job for exactly an hour (submitted by a member token; the
// workspace guarantees 8, so 8 are borrowed) and globex/infer's 8-GPU job
// (within its guarantee) from the same time on, still running.
type usageFixture struct {
	c                *devcluster.Cluster
	clk              *tstime.Fake
	acme, globex     *domain.Job
	acmeTok, glxTok  string
	acmeID, globexID string // the submitting tokens, ROLE:ID
}

func newUsageFixture(t *testing.T) *usageFixture {
	t.Helper()
	return newUsageFixtureTuned(t, nil)
}

// newUsageFixtureTuned is newUsageFixture on a server tune configures too.
func newUsageFixtureTuned(t *testing.T, tune func(*server.Config)) *usageFixture {
	t.Helper()
	clk := tstime.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Clock, cfg.PreemptionGrace = clk, stepGrace
		if tune != nil {
			tune(cfg)
		}
	})
	admin := c.Client(0)
	seed(t, admin)
	f := &usageFixture{c: c, clk: clk}
	acmeTok, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleMember, "acme", "research"))
	if err != nil {
		t.Fatal(err)
	}
	glxTok, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleTenantAdmin, "globex", ""))
	if err != nil {
		t.Fatal(err)
	}
	f.acmeTok, f.glxTok = acmeTok.Secret, glxTok.Secret
	f.acmeID, f.globexID = "member:"+acmeTok.Token.ID, "tenant-admin:"+glxTok.Token.ID
	f.acme = submit(t, as(t, c.Servers[0].URL(), f.acmeTok), "acme", "research", 16)
	f.globex = submit(t, as(t, c.Servers[0].URL(), f.glxTok), "globex", "infer", 8)
	for _, j := range []*domain.Job{f.acme, f.globex} {
		waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	}
	clk.Advance(time.Hour)
	if _, err := admin.Report(ctxT(t), f.acme.ID, "succeeded", ""); err != nil {
		t.Fatal(err)
	}
	f.acme = waitJob(t, admin, f.acme.ID, "Succeeded", func(j *domain.Job) bool { return j.State == domain.JobSucceeded })
	if got := f.acme.EndedAt.Sub(*f.acme.PlacedAt); got != time.Hour {
		t.Fatalf("fixture: acme's job held its GPUs %v, want an hour", got)
	}
	return f
}

func byJob(t *testing.T, u *api.Usage) map[uint64]api.UsageRow {
	t.Helper()
	m := map[uint64]api.UsageRow{}
	for _, r := range u.Rows {
		m[r.Job] = r
	}
	return m
}

// TestUsageAPI: a job placed for an hour on 8 GPUs is 8 GPU-hours exactly,
// a running one counts up to now; tenants see only their own usage, and
// another tenant's is 404 without its names; bad input names its field.
func TestUsageAPI(t *testing.T) {
	f := newUsageFixture(t)
	url := f.c.Servers[0].URL()
	admin := f.c.Client(0)
	f.clk.Advance(30 * time.Minute) // globex's job: 1h30m so far

	u, err := admin.Usage(ctxT(t), client.UsageQuery{Since: "1d", By: "job"})
	if err != nil {
		t.Fatal(err)
	}
	rows := byJob(t, u)
	want := map[uint64]api.UsageRow{
		f.acme.ID: {Tenant: "acme", Workspace: "research", Job: f.acme.ID, JobName: f.acme.Name, Token: f.acmeID,
			UsageFigures: api.UsageFigures{GPUHours: 16, GPUEquivalentHours: 16, GuaranteedHours: 8, BorrowedHours: 8, Jobs: 1, GPUSeconds: 16 * 3600, UnitSeconds: 16 * 7000 * 3600}},
		f.globex.ID: {Tenant: "globex", Workspace: "infer", Job: f.globex.ID, JobName: f.globex.Name, Token: f.globexID,
			UsageFigures: api.UsageFigures{GPUHours: 12, GPUEquivalentHours: 12, GuaranteedHours: 12, Jobs: 1, GPUSeconds: 8 * 5400, UnitSeconds: 8 * 7000 * 5400}},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("usage by job\n got %+v\nwant %+v", rows, want)
	}
	if u.Total.GPUHours != 28 || u.Total.BorrowedHours != 8 || u.Total.Jobs != 2 {
		t.Fatalf("total %+v, want 28 GPU-hours (8 borrowed) of 2 jobs", u.Total)
	}

	// A period that ends before the job ended clips it, to the second.
	placed := f.acme.PlacedAt.UTC()
	u, err = admin.Usage(ctxT(t), client.UsageQuery{Tenant: "acme", Since: placed.Add(15 * time.Minute).Format(time.RFC3339), Until: placed.Add(45*time.Minute + time.Second).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Rows) != 1 || u.Rows[0].GPUSeconds != 16*1801 {
		t.Fatalf("acme between 15m and 45m1s: %+v, want 16 x 1801 GPU-seconds", u.Rows)
	}

	// The attacker's side: globex's tenant admin.
	glx := as(t, url, f.glxTok)
	if _, err := glx.Usage(ctxT(t), client.UsageQuery{Tenant: "acme", Since: "1d"}); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("globex asking acme's usage: %v, want not found", err)
	}
	for _, by := range []string{"tenant", "workspace", "job", "token"} {
		code, body := do(t, url, f.glxTok, "GET", "/v1/usage?since=1d&by="+by, "")
		if code != 200 {
			t.Fatalf("globex usage by %s: %d %s", by, code, body)
		}
		for _, leak := range []string{"acme", "research", f.acmeID, f.acme.Name} {
			if strings.Contains(body, leak) {
				t.Errorf("globex usage by %s shows %q: %s", by, leak, body)
			}
		}
		var gu api.Usage
		if err := json.Unmarshal([]byte(body), &gu); err != nil || len(gu.Rows) != 1 || gu.Rows[0].Tenant != "globex" || gu.Total.GPUSeconds != 8*5400 {
			t.Errorf("globex usage by %s: %s, want its own job's 8 x 5400 GPU-seconds only", by, body)
		}
	}
	code, body := do(t, url, f.glxTok, "GET", "/v1/usage?tenant=acme&workspace=research&since=1d&by=job", "")
	if code != 404 || strings.Contains(body, f.acmeID) || strings.Contains(body, "GPU") {
		t.Errorf("globex asking acme/research by job: %d %s, want a bare 404", code, body)
	}
	// A member sees its workspace only, even asking for its whole tenant.
	mu, err := as(t, url, f.acmeTok).Usage(ctxT(t), client.UsageQuery{Tenant: "acme", Since: "1d", By: "workspace"})
	if err != nil || len(mu.Rows) != 1 || mu.Rows[0].Workspace != "research" {
		t.Fatalf("acme member by workspace: %+v, %v", mu, err)
	}

	// Bad input: 400 naming the field, whoever asks.
	for q, field := range map[string]string{
		"":                              "since",
		"since=yesterday":               "since",
		"since=1d&until=soon":           "until",
		"since=1h&until=2h":             "until", // ends before it starts
		"since=1d&by=gpu":               "by",
		"since=1d&workspace=research":   "tenant",
		"since=2026-11-23":              "since",
		"since=-1h":                     "since",
		"since=1d&until=1d&tenant=acme": "until",
	} {
		code, body := do(t, url, f.c.AdminToken, "GET", "/v1/usage?"+q, "")
		var e struct{ Code, Field string }
		if code != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Field != field {
			t.Errorf("GET /v1/usage?%s: %d %s, want 400 on %s", q, code, body, field)
		}
	}
}

// TestUsageSurvivesRestart: the report is the same after the server
// restarts from its data directory (log replay), and again from a snapshot.
func TestUsageSurvivesRestart(t *testing.T) {
	f := newUsageFixture(t)
	q := client.UsageQuery{Since: "1d", By: "job"}
	before, err := f.c.Client(0).Usage(ctxT(t), q)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		if round == 1 {
			if err := f.c.Servers[0].Snapshot(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.c.Stop(0); err != nil {
			t.Fatal(err)
		}
		if err := f.c.Restart(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.WaitLeader(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		after, err := f.c.Client(0).Usage(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("round %d: after restart\n%+v\nbefore\n%+v", round, after, before)
		}
	}
}

// TestUsageSurvivesFailover: a 3-server cluster answers the same report
// after its leader dies, from the new leader.
func TestUsageSurvivesFailover(t *testing.T) {
	clk := tstime.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(ctxT(t), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 3, devcluster.Options{Logger: quietLogger(), RaftTimeout: 300 * time.Millisecond,
		Tune: func(cfg *server.Config) { cfg.Clock = clk }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := c.Client(leader)
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	clk.Advance(time.Hour)
	if _, err := admin.Report(ctx, j.ID, "succeeded", ""); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j.ID, "Succeeded", func(j *domain.Job) bool { return j.State == domain.JobSucceeded })
	q := client.UsageQuery{Since: "1d", By: "workspace"}
	before, err := admin.Usage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if before.Total.GPUSeconds != 8*3600 {
		t.Fatalf("before failover: %+v, want 8 GPU-hours", before.Total)
	}
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after, err := c.Client(next).Usage(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("after failover\n%+v\nbefore\n%+v", after, before)
	}
}
