package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

// TestRestartKeepsEverything: every acknowledged object survives a restart
// of a single server (log replay, and snapshot + replay).
func TestRestartKeepsEverything(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	tok := mustToken(t, admin, domain.RoleMember, "acme", "research")
	var ids []uint64
	for i := 0; i < 25; i++ {
		ids = append(ids, submit(t, admin, "acme", "research", 1).ID)
	}
	if _, err := admin.CancelJob(ctxT(t), ids[3]); err != nil {
		t.Fatal(err)
	}
	wantEvents, _ := admin.Events(ctxT(t), client.EventQuery{})

	for round := 0; round < 2; round++ {
		if err := c.Stop(0); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
		admin = c.Client(0)
		if _, err := c.WaitLeader(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		jobs, err := admin.Jobs(ctxT(t), client.JobQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != len(ids) {
			t.Fatalf("round %d: %d jobs after restart, want %d", round, len(jobs), len(ids))
		}
		if jobs[3].State != domain.JobCancelled {
			t.Fatalf("round %d: job %d is %s after restart, want Cancelled", round, jobs[3].ID, jobs[3].State)
		}
		ts, _ := admin.Tenants(ctxT(t))
		ws, _ := admin.Workspaces(ctxT(t), "acme")
		if len(ts) != 2 || len(ws) != 2 {
			t.Fatalf("round %d: tenants %d workspaces %d after restart", round, len(ts), len(ws))
		}
		events, _ := admin.Events(ctxT(t), client.EventQuery{})
		if len(events) < len(wantEvents) {
			t.Fatalf("round %d: %d events after restart, want at least %d", round, len(events), len(wantEvents))
		}
		// The member token still works; the bootstrap token was not recreated.
		if _, err := as(t, c.Servers[0].URL(), tok).WhoAmI(ctxT(t)); err != nil {
			t.Fatalf("round %d: member token after restart: %v", round, err)
		}
		if c.Servers[0].AdminToken() != "" {
			t.Fatal("a restart created a second bootstrap admin token")
		}
		if round == 0 {
			// Next round restores from a snapshot, then replays the log tail.
			if err := c.Servers[0].Snapshot(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			submit(t, admin, "acme", "research", 1)
			ids = append(ids, 0)
		}
	}
}

// TestFailover: a 3-server cluster on loopback survives the loss of its
// leader with no acknowledged write lost; writes continue after
// re-election through any member; the old leader rejoins and catches up.
func TestFailover(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxT(t)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, c.Client(leader))
	follower := (leader + 1) % 3

	acked := map[uint64]bool{}
	write := func(via int, n int) {
		t.Helper()
		cl := c.Client(via)
		for i := 0; i < n; i++ {
			j, err := cl.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1, Name: fmt.Sprintf("w%d", len(acked))})
			if err != nil {
				t.Fatalf("write via server %d: %v", via+1, err)
			}
			acked[j.ID] = true
		}
	}
	write(leader, 20)
	write(follower, 20) // forwarded to the leader

	// Writes keep flowing from a client while the leader dies.
	bg, stopBG := context.WithCancel(ctx)
	bgDone := make(chan map[uint64]bool)
	flowing := make(chan struct{}) // closed at the background writer's first ack
	go func() {
		got := map[uint64]bool{}
		cl := c.Client(follower)
		for bg.Err() == nil {
			j, err := cl.SubmitJob(bg, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1})
			if err == nil {
				if len(got) == 0 {
					close(flowing)
				}
				got[j.ID] = true
			} else if !errors.Is(err, context.Canceled) && domain.CodeOf(err) != domain.CodeUnavailable {
				t.Errorf("background write: %v", err)
			}
		}
		bgDone <- got
	}()
	select {
	case <-flowing:
	case <-ctx.Done():
		t.Fatal("the background writer never got a write acknowledged")
	}
	old := leader
	if err := c.Stop(old); err != nil {
		t.Fatal(err)
	}
	newLeader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newLeader == old {
		t.Fatal("stopped server still reported as leader")
	}
	write(newLeader, 10)
	survivor := 3 - old - newLeader
	write(survivor, 10) // forwarded to the new leader
	stopBG()
	for id := range <-bgDone {
		acked[id] = true
	}

	check := func(i int) {
		t.Helper()
		jobs, err := c.Client(i).Jobs(ctx, client.JobQuery{})
		if err != nil {
			t.Fatalf("list via server %d: %v", i+1, err)
		}
		have := map[uint64]bool{}
		for _, j := range jobs {
			have[j.ID] = true
		}
		for id := range acked {
			if !have[id] {
				t.Fatalf("acknowledged job %d lost (via server %d)", id, i+1)
			}
		}
	}
	check(newLeader)

	// The old leader rejoins as a follower and catches up: its own state
	// machine (not a forwarded read) has every acknowledged job.
	if err := c.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	waitState(t, c.Servers[old], fmt.Sprintf("the old leader holds the %d acknowledged jobs", len(acked)), func(f *state.FSM) bool {
		return len(f.Jobs(stateFilterAll)) >= len(acked)
	})
	for _, j := range c.Servers[old].State().Jobs(stateFilterAll) {
		delete(acked, j.ID)
	}
	if len(acked) != 0 {
		t.Fatalf("old leader misses acknowledged jobs %v", acked)
	}
	write(old, 5) // and it serves (forwarding) again
}

// TestIdempotentSubmitOverHTTP: the same Idempotency-Key twice, through a
// follower, creates one job.
func TestIdempotentSubmitOverHTTP(t *testing.T) {
	c := startCluster(t, 3)
	leader, err := c.WaitLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	seed(t, c.Client(leader))
	url := c.Servers[(leader+1)%3].URL()
	body := `{"tenant":"acme","workspace":"research","gpus":1}`
	ids := map[string]bool{}
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", url+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		req.Header.Set("Idempotency-Key", "retry-me")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var j domain.Job
		json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		ids[fmt.Sprint(j.ID)] = true
	}
	if len(ids) != 1 {
		t.Fatalf("two submits with one key created jobs %v", ids)
	}
}

// TestIdempotencyKeyOfAnotherTenant: a key is its caller's own. Another
// tenant's token sending a victim's key (guessed or seen in a log) over raw
// HTTP gets a job of its own tenant, never the victim's job back (its
// tenant, workspace and ID would leak), and the victim's retry still finds
// its first job.
func TestIdempotencyKeyOfAnotherTenant(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	victim := mustToken(t, admin, domain.RoleTenantAdmin, "acme", "")
	attacker := mustToken(t, admin, domain.RoleTenantAdmin, "globex", "")
	submit := func(token, body string) (int, domain.Job) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", c.Servers[0].URL()+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "nightly-train")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var j domain.Job
		json.NewDecoder(resp.Body).Decode(&j)
		return resp.StatusCode, j
	}
	code, first := submit(victim, `{"tenant":"acme","workspace":"research","gpus":1}`)
	if code != 201 || first.Tenant != "acme" {
		t.Fatalf("victim's submit: status %d, job %d of %q", code, first.ID, first.Tenant)
	}
	// The attacker's own body, and then the victim's: neither answers with
	// the victim's job.
	for _, c := range []struct {
		body   string
		code   int
		tenant string // of the job answered; "" when refused
	}{
		{`{"tenant":"globex","workspace":"infer","gpus":1}`, 201, "globex"},
		// Another tenant's workspace is not found for it: no hint it exists.
		{`{"tenant":"acme","workspace":"research","gpus":1}`, 404, ""},
	} {
		code, got := submit(attacker, c.body)
		if got.ID == first.ID || got.Tenant == "acme" {
			t.Fatalf("another tenant's token with the victim's key (body %s): status %d, job %d of %q: the victim's job", c.body, code, got.ID, got.Tenant)
		}
		if code != c.code || got.Tenant != c.tenant {
			t.Fatalf("another tenant's token with the victim's key (body %s): status %d, job %d of %q; want %d and a job of %q", c.body, code, got.ID, got.Tenant, c.code, c.tenant)
		}
	}
	if code, again := submit(victim, `{"tenant":"acme","workspace":"research","gpus":1}`); code != 201 || again.ID != first.ID {
		t.Fatalf("victim's retry: status %d, job %d, want its first job %d", code, again.ID, first.ID)
	}
}
