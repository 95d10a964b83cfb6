package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// flushEvery is how often (in fake time) token uses are committed.
const flushEvery = time.Second

// clockedTimers is how many timers a started server keeps pending on its
// clock: the token flush ticker, the heartbeat check timer, the schedule
// interval ticker, the scheduler's deadline timer (armed an hour away
// until a deadline is known) and the fabric loop's retry ticker.
const clockedTimers = 5

func startClocked(t *testing.T) (*devcluster.Cluster, *tstime.Fake) {
	t.Helper()
	clk := tstime.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: quietLogger(), RaftTimeout: 300 * time.Millisecond,
		Tune: func(cfg *server.Config) { cfg.Clock, cfg.TokenUseFlush = clk, flushEvery }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The loops arm their timers as they start: a step before that would
	// fire nothing. Wait for all of them (clockedTimers).
	if err := clk.BlockUntil(ctxT(t), clockedTimers); err != nil {
		t.Fatal(err)
	}
	return c, clk
}

// TestTokenExpiry: a token created with a TTL authenticates until then and
// answers 401 token_expired after; the expiry is listed; a TTL out of range
// is refused naming the field.
func TestTokenExpiry(t *testing.T) {
	c, clk := startClocked(t)
	admin := c.Client(0)
	created, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	want := clk.Now().Add(time.Hour)
	if e := created.Token.ExpiresAt; e == nil || !e.Equal(want) {
		t.Fatalf("expiresAt %v, want %v", e, want)
	}
	rt := as(t, c.Servers[0].URL(), created.Secret)
	if _, err := rt.WhoAmI(ctxT(t)); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	clk.Advance(time.Hour)
	_, err = rt.WhoAmI(ctxT(t))
	if domain.CodeOf(err) != domain.CodeTokenExpired {
		t.Fatalf("token at its expiry: %v, want token_expired", err)
	}
	status, code, _ := doH(t, c.Servers[0].URL(), created.Secret, "GET", "/v1/tokens", "", nil)
	if status != 401 || code != string(domain.CodeTokenExpired) {
		t.Fatalf("expired token: %d %s, want 401 token_expired", status, code)
	}
	tok, ok := c.Servers[0].State().Token(created.Token.ID)
	if !ok || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(want) {
		t.Fatalf("stored token %+v does not keep its expiry", tok)
	}
	for name, ttl := range map[string]int64{"negative": -1, "over a year": domain.MaxSeconds + 1} {
		_, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime, TTLSeconds: ttl})
		var de *domain.Error
		if domain.CodeOf(err) != domain.CodeInvalidArgument || !asErr(err, &de) || de.Field != "ttlSeconds" {
			t.Errorf("%s TTL: %v, want invalid_argument on ttlSeconds", name, err)
		}
	}
}

// TestTokenLastUsed: the leader commits a token's last use at most once a
// minute: uses within the minute do not move it; the first use after it
// does.
func TestTokenLastUsed(t *testing.T) {
	c, clk := startClocked(t)
	admin := c.Client(0)
	created, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime})
	if err != nil {
		t.Fatal(err)
	}
	if created.Token.LastUsedAt != nil {
		t.Fatalf("a new token was used at %v", created.Token.LastUsedAt)
	}
	rt := as(t, c.Servers[0].URL(), created.Secret)
	lastUsed := func() *time.Time {
		tok, _ := c.Servers[0].State().Token(created.Token.ID)
		return tok.LastUsedAt
	}
	// flush steps two flush ticks: the loop takes the second only once it
	// has committed what the first found due.
	flush := func() { clk.Advance(2 * flushEvery) }
	waitUsed := func(want time.Time) {
		t.Helper()
		flush()
		if u := lastUsed(); u == nil || !u.Equal(want) {
			t.Fatalf("last used %v, want %v", u, want)
		}
	}
	first := clk.Now()
	if _, err := rt.WhoAmI(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitUsed(first)
	applied := c.Servers[0].State().AppliedIndex()
	for range 20 {
		clk.Advance(2 * time.Second)
		if _, err := rt.WhoAmI(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	if u := lastUsed(); !u.Equal(first) {
		t.Fatalf("uses within a minute committed: last used %v, want %v", u, first)
	}
	if got := c.Servers[0].State().AppliedIndex(); got != applied {
		t.Fatalf("20 uses within a minute wrote %d raft entries, want 0", got-applied)
	}
	clk.Advance(21 * time.Second) // over a minute after the committed use
	now := clk.Now()
	if _, err := rt.WhoAmI(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitUsed(now)
}

func asErr(err error, de **domain.Error) bool {
	e, ok := err.(*domain.Error)
	*de = e
	return ok
}

// TestWatchEndsAtTokenExpiry: a watch opened with a token that expires ends
// at the expiry, not at the next heartbeat or never: the client's reconnect
// meets 401 token_expired.
func TestWatchEndsAtTokenExpiry(t *testing.T) {
	c, clk := startClocked(t)
	admin := c.Client(0)
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	created, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleMember, Tenant: "acme", Workspace: "research", TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	member := as(t, c.Servers[0].URL(), created.Secret)
	states, done := watchStates(ctxT(t), member, j.ID)
	select {
	case <-states: // the job as it is now: the stream is open
	case <-time.After(20 * time.Second):
		t.Fatal("no first event on the watch")
	}
	clk.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("the watch ended before its token expired: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		if domain.CodeOf(err) != domain.CodeTokenExpired {
			t.Fatalf("watch after its token expired ended with %v, want token_expired", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its token")
	}
}
