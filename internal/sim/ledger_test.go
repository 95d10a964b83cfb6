package sim

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// TestLedgerCommitsThroughTheStateMachine: the jobfabric policy's jobs live
// in the state machine: submits, the cycle's plan and the reports are its
// commands, and a replay out of step with it is an error, not a guess.
func TestLedgerCommitsThroughTheStateMachine(t *testing.T) {
	tenants := map[string]*domain.Tenant{"a": {Name: "a", Isolation: domain.IsolationGPU}}
	workspaces := map[string]*domain.Workspace{"a/default": {Tenant: "a", Name: "default", Guaranteed: 8, BorrowLimit: 16, Weight: 1}}
	l, err := newLedger(poolTopology(2, 8), tenants, workspaces)
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]*simJob, 3)
	for i := range jobs {
		j := &domain.Job{ID: uint64(i + 1), State: domain.JobPending}
		j.Tenant, j.Workspace, j.Name, j.GPUs = "a", "default", []string{"x-1", "Not A Name", "x-3"}[i], 8
		jobs[i] = &simJob{j: j, gpus: 8}
		if err := l.submit(0, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if jobs[1].j.Name != "job-2" {
		t.Fatalf("a trace id that is no name: job named %q, want the state's job-2", jobs[1].j.Name)
	}
	plan, res, err := l.cycle(0, sched.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 2 || len(res.Placed) != 2 {
		t.Fatalf("plan %+v committed %+v: want two of three 8-GPU jobs placed on 2 x 8 GPUs", plan.Placements, res)
	}
	for _, id := range res.Placed {
		s := jobs[id-1]
		if err := l.report(0, s, state.ReportRunning); err != nil {
			t.Fatal(err)
		}
		if s.j.State != domain.JobRunning || len(s.j.Placement) != 1 {
			t.Fatalf("job %d after its report: %s on %+v", id, s.j.State, s.j.Placement)
		}
	}
	var snap *sched.Snapshot
	l.fsm.Read(func(v state.View) { snap = sched.SnapshotOf(v, at(0), state.CopyJob) })
	if len(snap.Jobs) != 3 || snap.Jobs[2].State != domain.JobPending || snap.Jobs[2].Reason == nil || snap.Jobs[2].Reason.Code != plan.Pending.Of(3).Code {
		t.Fatalf("the state's jobs after the cycle: %+v", snap.Jobs)
	}
	// A replay that numbers jobs otherwise than the state does stops.
	bad := &simJob{j: &domain.Job{ID: 9, JobSpec: jobs[0].j.JobSpec, State: domain.JobPending}}
	if err := l.submit(1, bad); err == nil || !strings.Contains(err.Error(), "numbered") {
		t.Fatalf("out-of-step submit: %v", err)
	}
	// A command the state refuses is the replay's error, naming it.
	if err := l.report(2, jobs[2], state.ReportSucceeded); err == nil || !strings.Contains(err.Error(), "job.report") {
		t.Fatalf("a pending job reported succeeded: %v", err)
	}
}
