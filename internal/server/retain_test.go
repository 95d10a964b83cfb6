package server_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
)

// TestRetentionKeepsUsage: the leader's retention pass removes acme's job
// two hours after it ended (GET /v1/jobs/ID is then 404) and the
// usage report over the same period is identical through the API, by
// every grouping, before and after; globex's tenant admin still sees
// none of acme's archived use; a restart from a snapshot answers the same.
func TestRetentionKeepsUsage(t *testing.T) {
	f := newUsageFixtureTuned(t, func(cfg *server.Config) {
		cfg.Retention = server.Retention{EndedJobs: 2 * time.Hour, Usage: 400 * 24 * time.Hour}
		cfg.RetainEvery = time.Hour
		// The fair-share history (8 half-lives) within the age: the job
		// may go two hours after it ended.
		cfg.FairShareHalfLife = 10 * time.Minute
	})
	admin := f.c.Client(0)
	url := f.c.Servers[0].URL()
	// Until now: globex's running job counts up to it before and after.
	until := f.clk.Now().UTC().Format(time.RFC3339)
	since := f.clk.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339)
	queries := []client.UsageQuery{}
	for _, by := range []string{"tenant", "workspace", "job", "token"} {
		queries = append(queries, client.UsageQuery{Since: since, Until: until, By: by}, client.UsageQuery{Tenant: "acme", Since: since, Until: until, By: by})
	}
	report := func() string {
		var out []any
		for _, q := range queries {
			u, err := admin.Usage(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, u)
		}
		b, _ := json.MarshalIndent(out, "", " ")
		return string(b)
	}
	before := report()

	f.clk.Advance(3 * time.Hour)
	waitState(t, f.c.Servers[0], "acme's ended job removed", func(s *state.FSM) bool {
		_, ok := s.Job(f.acme.ID)
		return !ok
	})
	if _, err := admin.Job(ctxT(t), f.acme.ID); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("acme's job after retention: %v, want not found", err)
	}
	if _, err := admin.Job(ctxT(t), f.globex.ID); err != nil {
		t.Fatalf("globex's running job: %v, want it kept", err)
	}
	if after := report(); after != before {
		t.Fatalf("usage after retention\n%+v\nbefore\n%+v", after, before)
	}

	// One pass, recorded; the next ticks find nothing to remove and
	// write nothing.
	f.clk.Advance(2 * time.Hour)
	all, err := admin.Events(ctxT(t), client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var passes []domain.Event
	for _, e := range all {
		if e.Action == string(state.CmdRetain) {
			passes = append(passes, e)
		}
	}
	if len(passes) != 1 || passes[0].Actor != "system" || passes[0].Tenant != "" || !strings.Contains(passes[0].Message, "removed 1 ended jobs (1 archived") {
		t.Fatalf("retention events %+v, want one pass by system removing acme's job", passes)
	}

	// The state's records as /metrics counts them: acme's job archived.
	code, body := scrape(t, url, f.c.AdminToken)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	fams := parseMetrics(t, body)
	for kind, want := range map[string]float64{"live_jobs": 1, "ended_jobs": 0, "usage_records": 1} {
		if v, ok := value(fams, "jobfabric_state_records", map[string]string{"kind": kind}); !ok || v != want {
			t.Errorf("jobfabric_state_records{kind=%q} = %v (found %v), want %v", kind, v, ok, want)
		}
	}

	// The state's sizes are the platform's: a tenant's scrape has none.
	if code, body := scrape(t, url, f.glxTok); code != 200 || strings.Contains(body, "jobfabric_state_records") {
		t.Errorf("globex's /metrics: %d, shows the state's records: %v", code, strings.Contains(body, "jobfabric_state_records"))
	}

	// The attacker's side: globex sees only its own, archive or not.
	for _, by := range []string{"tenant", "workspace", "job", "token"} {
		code, body = do(t, url, f.glxTok, "GET", "/v1/usage?since="+since+"&by="+by, "")
		if code != 200 {
			t.Fatalf("globex usage by %s: %d %s", by, code, body)
		}
		for _, leak := range []string{"acme", "research", f.acmeID, f.acme.Name} {
			if strings.Contains(body, leak) {
				t.Errorf("globex usage by %s after retention shows %q: %s", by, leak, body)
			}
		}
	}

	// From a snapshot: the archive travels with it.
	if err := f.c.Servers[0].Snapshot(ctxT(t)); err != nil {
		t.Fatal(err)
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
	admin = f.c.Client(0)
	if after := report(); after != before {
		t.Fatalf("usage after retention and a restart\n%+v\nbefore\n%+v", after, before)
	}
}
