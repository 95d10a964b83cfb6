package server_test

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

// TestQueueOrderAndScope: GET /v1/queue lists pending jobs in the
// scheduler's order (a workspace's higher-priority job before its older
// one), with each workspace's use; a tenant sees only its own
// jobs and workspaces, a member only its workspace, and asking for another
// tenant answers 404.
func TestQueueOrderAndScope(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	acme := as(t, url, mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""))
	research := as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))
	globex := as(t, url, mustToken(t, admin, domain.RoleTenantAdmin, "globex", ""))
	// Fill the 32 GPUs: research holds 16 (8 borrowed), prod and globex 8.
	submit(t, research, "acme", "research", 16)
	submit(t, acme, "acme", "prod", 8)
	submit(t, globex, "globex", "infer", 8)
	waitState(t, c.Servers[0], "first jobs placed", func(f *state.FSM) bool {
		js, _ := f.JobsPage(state.JobFilter{State: domain.JobPending})
		return len(js) == 0
	})
	var q *api.Queue
	older := submit(t, research, "acme", "research", 8)
	newer, err := research.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Priority: 10})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c.Servers[0], "both ordered", func(f *state.FSM) bool {
		a, _ := f.Job(older.ID)
		b, _ := f.Job(newer.ID)
		return a.Reason != nil && a.Reason.Code != domain.ReasonQueued && b.Reason != nil && b.Reason.Code != domain.ReasonQueued
	})

	q, err = admin.Queue(ctxT(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Pending) != 2 || q.Pending[0].ID != newer.ID || q.Pending[1].ID != older.ID || q.OrderedAt.IsZero() {
		t.Fatalf("admin queue: %+v, want job %d (priority 10) before %d", q.Pending, newer.ID, older.ID)
	}
	// A dry run places a probe against the state: it is no cycle, and
	// leaves the queue's order as the last cycle made it.
	if _, err := research.DryRun(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if after, err := admin.Queue(ctxT(t), "", ""); err != nil || len(after.Pending) != 2 || after.Pending[0].ID != newer.ID || !after.OrderedAt.Equal(q.OrderedAt) {
		t.Fatalf("queue after a dry run: %+v (%v), want job %d first, ordered at %v", after, err, newer.ID, q.OrderedAt)
	}
	use := map[string][2]float64{}
	for _, w := range q.Workspaces {
		use[w.Tenant+"/"+w.Workspace] = [2]float64{w.Used, w.Borrowed}
	}
	if use["acme/research"] != [2]float64{16, 8} || use["acme/prod"] != [2]float64{8, 0} || use["globex/infer"] != [2]float64{8, 0} || len(q.Workspaces) != 3 {
		t.Errorf("workspace use: %+v", q.Workspaces)
	}

	// The attacker's side: globex sees none of acme's jobs or workspaces.
	g, err := globex.Queue(ctxT(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Pending) != 0 || len(g.Workspaces) != 1 || g.Workspaces[0].Tenant != "globex" {
		t.Errorf("globex's queue shows others: %+v", g)
	}
	if _, err := globex.Queue(ctxT(t), "acme", ""); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("globex asking for acme's queue: %v, want not_found", err)
	}
	m, err := research.Queue(ctxT(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pending) != 2 || m.Pending[0].ID != newer.ID || len(m.Workspaces) != 1 || m.Workspaces[0].Workspace != "research" {
		t.Errorf("a research member's queue: %+v", m)
	}
	a, err := acme.Queue(ctxT(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Pending) != 2 || a.Pending[0].ID != newer.ID || len(a.Workspaces) != 2 {
		t.Errorf("acme's queue: %+v", a)
	}
}
