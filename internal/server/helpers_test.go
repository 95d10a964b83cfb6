package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// quietLogger discards logs (stopping members on purpose makes raft log
// errors); JOBFABRIC_TEST_LOG=1 shows them at debug level.
func quietLogger() *slog.Logger {
	if os.Getenv("JOBFABRIC_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func startCluster(t *testing.T, n int) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), n, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitState waits until cond holds on the server's state machine, looking
// again after every command it applies (FSM.Changed), for at most 20s.
func waitState(t testing.TB, s *server.Server, what string, cond func(*state.FSM) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	for {
		changed := s.State().Changed()
		if cond(s.State()) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

// backoff pauses a load generator after a refused request (an election
// in progress), so that it does not spin; it returns when ctx ends. It
// waits for no effect: the generator's next request is its check.
func backoff(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// seed applies a 1-stripe x 4-server x 8-GPU topology, tenants acme (server
// isolation) and globex (gpu isolation), workspaces acme/research,
// acme/prod and globex/infer.
func seed(t testing.TB, c *client.Client) {
	t.Helper()
	ctx := ctxT(t)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := c.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []api.TenantCreateRequest{
		{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true},
		{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware},
	} {
		if _, err := c.CreateTenant(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		t string
		r api.WorkspaceCreateRequest
	}{
		{"acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 8, BorrowLimit: 16}},
		{"acme", api.WorkspaceCreateRequest{Name: "prod", Guaranteed: 8, BorrowLimit: 8}},
		{"globex", api.WorkspaceCreateRequest{Name: "infer", Guaranteed: 8, BorrowLimit: 8}},
	} {
		if _, err := c.CreateWorkspace(ctx, w.t, w.r); err != nil {
			t.Fatal(err)
		}
	}
}

func mustToken(t *testing.T, c *client.Client, role domain.Role, tenant, ws string) string {
	t.Helper()
	tok, err := c.CreateToken(ctxT(t), api.TokenCreateRequest{Role: role, Tenant: tenant, Workspace: ws})
	if err != nil {
		t.Fatalf("create %s token: %v", role, err)
	}
	return tok.Secret
}

func as(t testing.TB, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.RetryFor = 0
	return c
}

func submit(t *testing.T, c *client.Client, tenant, ws string, gpus int) *domain.Job {
	t.Helper()
	j, err := c.SubmitJob(ctxT(t), domain.JobSpec{Tenant: tenant, Workspace: ws, GPUs: gpus})
	if err != nil {
		t.Fatalf("submit to %s/%s: %v", tenant, ws, err)
	}
	return j
}

func tokReq(role domain.Role, tenant, ws string) api.TokenCreateRequest {
	return api.TokenCreateRequest{Role: role, Tenant: tenant, Workspace: ws}
}

// requestEvents lists the events made by API callers: the leader's own loops
// (the fabric's revisions, the scheduler's placements) write events of their
// own whenever they run, which a test of refused requests must not count.
func requestEvents(t *testing.T, c *client.Client) []domain.Event {
	t.Helper()
	all, err := c.Events(ctxT(t), client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.Event
	for _, e := range all {
		if e.Actor != "fabric" && e.Actor != "scheduler" && e.Actor != "system" {
			out = append(out, e)
		}
	}
	return out
}
