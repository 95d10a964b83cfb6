package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tstime"
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

// waitJob follows the job's watch stream (pushed at every change, never
// polled) until it satisfies ok, for at most 15s.
func waitJob(t *testing.T, c *client.Client, id uint64, what string, ok func(*domain.Job) bool) *domain.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 15*time.Second)
	defer cancel()
	var last *domain.Job
	errDone := errors.New("done")
	err := c.Watch(ctx, id, func(j *domain.Job) error {
		last = j
		if ok(j) {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("job %d never became %s (%v): %+v", id, what, err, last)
	}
	return last
}

// startStepped starts a server whose loops wait on a fake clock: the
// schedule interval and the grace deadlines pass only when the test steps
// it; a change still kicks a cycle at once (at the clock's time).
func startStepped(t *testing.T, grace time.Duration) (*devcluster.Cluster, *tstime.Fake) {
	t.Helper()
	clk := tstime.NewFake(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	return startTuned(t, func(cfg *server.Config) { cfg.Clock, cfg.PreemptionGrace = clk, grace }), clk
}

// stepGrace is the preemption grace of the stepped tests: a whole number
// of schedule intervals (2s), so the interval's tick and the deadline's
// timer both fall at the deadline.
const stepGrace = 30 * time.Second

// TestDrainMovesAPreemptibleJob: draining a server stops its job at the
// grace deadline (nobody reports it stopped), the preemptible job is
// requeued and placed on another server; cordoned servers take nothing.
func TestDrainMovesAPreemptibleJob(t *testing.T) {
	c, clk := startStepped(t, stepGrace)
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
	j = waitJob(t, admin, j.ID, "Preempting", func(j *domain.Job) bool { return j.State == domain.JobPreempting && j.Reason.Code == "drained" })
	deadline := clk.Now().Add(stepGrace)
	if j.StopDeadline == nil || !j.StopDeadline.Equal(deadline) {
		t.Fatalf("stop deadline %v, want the grace from now, %v", j.StopDeadline, deadline)
	}
	clk.Advance(stepGrace)
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
	var released []time.Time
	for _, e := range events {
		if e.Action == "job.release" {
			released = append(released, e.At)
		}
	}
	if len(released) != 1 || !released[0].Equal(deadline) {
		t.Fatalf("releases at %v: want one, at the grace deadline %v", released, deadline)
	}
}

// TestReclaimOverAPI: a workspace's guaranteed demand takes back GPUs
// another workspace borrowed at the grace deadline, in the cycle the
// deadline's timer runs.
func TestReclaimOverAPI(t *testing.T) {
	c, clk := startStepped(t, stepGrace)
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
	start := clk.Now()
	p1, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "prod", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, p1.ID, "waiting on a reclaim", func(j *domain.Job) bool { return j.Reason != nil && j.Reason.Code == sched.ReasonReclaim })
	clk.Advance(stepGrace)
	p := waitJob(t, admin, p1.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	if want := start.Add(stepGrace); p.PlacedAt == nil || !p.PlacedAt.Equal(want) {
		t.Fatalf("guaranteed job placed at %v, want at the grace deadline %v", p.PlacedAt, want)
	}
	// Exactly one borrowing job was reclaimed, and it went back to the queue.
	bj, _ := admin.Job(ctxT(t), b1.ID)
	rj, _ := admin.Job(ctxT(t), r1.ID)
	if bj.Requeues+rj.Requeues != 1 {
		t.Fatalf("requeues: globex %d, research %d; want exactly one reclaimed job", bj.Requeues, rj.Requeues)
	}
}
