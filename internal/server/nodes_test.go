package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
)

func startTuned(t *testing.T, tune func(*server.Config)) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: quietLogger(), RaftTimeout: 300 * time.Millisecond, Tune: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitJob polls until the job satisfies ok.
func waitJob(t *testing.T, c *client.Client, id uint64, what string, ok func(*domain.Job) bool) *domain.Job {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		j, err := c.Job(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d never became %s: %+v", id, what, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDrainMovesAPreemptibleJob: draining a server stops its job after the
// grace period (nobody reports it stopped), the preemptible job is
// requeued and placed on another server; cordoned servers take nothing.
func TestDrainMovesAPreemptibleJob(t *testing.T) {
	c := startTuned(t, func(cfg *server.Config) { cfg.PreemptionGrace = 300 * time.Millisecond })
	admin := c.Client(0)
	seed(t, admin)
	j, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Preemptible: true})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	first := j.Placement[0].Server
	yes := true
	var cond domain.NodeCondition
	if err := admin.Do(ctxT(t), "PATCH", "/v1/nodes/"+first, api.NodeUpdateRequest{Draining: &yes, Reason: "maintenance"}, &cond); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, j.ID, "Preempting", func(j *domain.Job) bool { return j.State == domain.JobPreempting && j.Reason.Code == "drained" })
	moved := waitJob(t, admin, j.ID, "placed elsewhere", func(j *domain.Job) bool {
		return j.State == domain.JobReady && j.Requeues == 1 && j.Placement[0].Server != first
	})
	if moved.Placement[0].Server == first {
		t.Fatal("requeued onto the draining server")
	}
	var nodes []domain.NodeView
	if err := admin.Do(ctxT(t), "GET", "/v1/nodes", nil, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == first && (!n.Condition.Draining || n.UsedGPUs != 0) {
			t.Fatalf("drained node %+v: want draining with no GPUs in use", n)
		}
	}
	events, _ := admin.Events(ctxT(t), client.EventQuery{Tenant: "acme"})
	var sawRelease bool
	for _, e := range events {
		if e.Action == "job.release" {
			sawRelease = true
		}
	}
	if !sawRelease {
		t.Fatal("the release at the grace deadline is not in the audit trail")
	}
}

// TestReclaimOverAPI: a workspace's guaranteed demand takes back GPUs
// another workspace borrowed, within grace + one cycle.
func TestReclaimOverAPI(t *testing.T) {
	c := startTuned(t, func(cfg *server.Config) { cfg.PreemptionGrace = 300 * time.Millisecond })
	admin := c.Client(0)
	seed(t, admin) // 32 GPUs; acme/research 8+16, acme/prod 8+8, globex/infer 8+8
	lend := 8
	if err := admin.Do(ctxT(t), "PATCH", "/v1/tenants/acme/workspaces/prod", api.WorkspaceUpdateRequest{LendLimit: &lend}, nil); err != nil {
		t.Fatal(err)
	}
	// globex borrows: 16 GPUs (its 8 + 8 borrowed), acme/research 24.
	b1, _ := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 16, GPUsPerNode: 8, Preemptible: true})
	r1, _ := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 16, GPUsPerNode: 8, Preemptible: true})
	waitJob(t, admin, b1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	waitJob(t, admin, r1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	// acme/prod's guarantee (8) is now borrowed by research: it asks for it.
	start := time.Now()
	p1, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "prod", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, p1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	if took := time.Since(start); took > 300*time.Millisecond+3*time.Second {
		t.Fatalf("guaranteed job placed after %v, want within grace + one cycle", took)
	}
	// Exactly one borrowing job was reclaimed, and it went back to the queue.
	bj, _ := admin.Job(ctxT(t), b1.ID)
	rj, _ := admin.Job(ctxT(t), r1.ID)
	if bj.Requeues+rj.Requeues != 1 {
		t.Fatalf("requeues: globex %d, research %d; want exactly one reclaimed job", bj.Requeues, rj.Requeues)
	}
}
