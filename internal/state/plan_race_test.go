package state

import (
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// commitPlan commits a scheduler plan the way the leader does
// (server/schedule.go): one plan.apply with the reasons of the pending
// jobs it did not place.
func (h *harness) commitPlan(snap *sched.Snapshot, plan *sched.Plan) *PlanResult {
	h.t.Helper()
	cmd := PlanApply{Releases: plan.Releases, Preemptions: plan.Preemptions, Placements: plan.Placements, Reasons: map[uint64]domain.Reason{}}
	for _, j := range snap.Jobs {
		if r, ok := plan.Pending.Get(j.ID); ok {
			cmd.Reasons[j.ID] = r
		}
	}
	return h.must(CmdPlanApply, cmd).(*PlanResult)
}

// schedule runs a cycle on the state now; without, when set, leaves that
// pending job out of the snapshot (the plan of a leader that had not seen
// it: a deposed leader's, or one computed from an older snapshot).
func (h *harness) schedule(without uint64) (*sched.Snapshot, *sched.Plan) {
	snap := snapshotOf(h.f, h.at)
	snap.Jobs = slices.DeleteFunc(snap.Jobs, func(j *domain.Job) bool { return j.ID == without })
	return snap, sched.Schedule(snap, h.at)
}

func placedOn(t testing.TB, plan *sched.Plan, id uint64) domain.Placement {
	t.Helper()
	for _, p := range plan.Placements {
		if p.JobID == id {
			return p.Placement[0]
		}
	}
	t.Fatalf("the plan does not place job %d (pending: %v): the race needs it placed", id, plan.Pending.Of(id))
	return domain.Placement{}
}

func spec(tenant, ws string, gpus int) JobSubmit {
	return JobSubmit{Spec: domain.JobSpec{Tenant: tenant, Workspace: ws, GPUs: gpus}}
}

// TestPlanRace: for every rule the scheduler enforces, a change landing
// between the scheduler's snapshot and the commit of its plan makes the
// plan applier refuse the placement that no longer fits (the job stays
// Pending with the reason), and commit the rest of the plan.
func TestPlanRace(t *testing.T) {
	yes := true
	cases := []struct {
		name string
		// setup seeds the state beyond a 4 x 8-GPU cluster with tenant acme
		// (server-isolated) and workspace acme/research (guaranteed 16,
		// borrow 16).
		setup func(h *harness)
		// change lands after the snapshot; the plan placed target.
		change func(h *harness, plan *sched.Plan)
		target uint64
		code   string
		// placed are other jobs of the plan that must still commit.
		placed []uint64
	}{
		{
			name: "cordon",
			setup: func(h *harness) {
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdNodeSet, NodeSet{Server: placedOn(h.t, p, 2).Server, Cordoned: &yes})
			},
			target: 2, code: sched.ReasonCapacity, placed: []uint64{1},
		},
		{
			name: "drain",
			setup: func(h *harness) {
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdNodeSet, NodeSet{Server: placedOn(h.t, p, 2).Server, Draining: &yes})
			},
			target: 2, code: sched.ReasonCapacity, placed: []uint64{1},
		},
		{
			name: "unhealthy",
			setup: func(h *harness) {
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdNodeSet, NodeSet{Server: placedOn(h.t, p, 2).Server, Unhealthy: &yes})
			},
			target: 2, code: sched.ReasonCapacity, placed: []uint64{1},
		},
		{
			name: "workspace quota lowered",
			setup: func(h *harness) {
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(8).Borrow(0).Obj()})
			},
			target: 2, code: sched.ReasonWorkspaceQuota, placed: []uint64{1},
		},
		{
			name: "tenant quota lowered",
			setup: func(h *harness) {
				h.must(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: &domain.TenantQuota{Guaranteed: 16, BorrowLimit: 16}})
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(8).Borrow(16).Obj()})
				h.must(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: &domain.TenantQuota{Guaranteed: 8}})
			},
			target: 2, code: sched.ReasonTenantQuota, placed: []uint64{1},
		},
		{
			// The case: two plans from one snapshot (a deposed
			// leader's and the new one's) each place an 8-GPU job of a
			// tenant whose quota is 8 guaranteed + 0 borrowable.
			name: "tenant quota taken by another plan",
			setup: func(h *harness) {
				h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(4).Borrow(4).Obj()})
				h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "infer").Guaranteed(4).Borrow(4).Obj()})
				h.must(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: &domain.TenantQuota{Guaranteed: 8}})
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("infer", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				// The other plan put job 2 on another server: the GPUs do
				// not collide, the tenant's quota does.
				other := "s1-gpu001"
				if placedOn(h.t, p, 1).Server == other {
					other = "s1-gpu002"
				}
				res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 2, Placements: []domain.Placement{{Server: other, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}}).(*PlanResult)
				if len(res.Placed) != 1 {
					h.t.Fatalf("the other plan: %+v", res)
				}
			},
			target: 1, code: sched.ReasonTenantQuota,
		},
		{
			name: "GPUs taken by another plan",
			setup: func(h *harness) {
				h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(16).Borrow(32).Obj()})
				for range 4 {
					h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				}
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, _ *sched.Plan) {
				// The rival plan placed job 5 where this plan puts job 4.
				snap, rival := h.schedule(4)
				placedOn(h.t, rival, 5)
				h.commitPlan(snap, rival)
			},
			target: 4, code: sched.ReasonCapacity,
		},
		{
			name: "model quota",
			setup: func(h *harness) {
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
				h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(16).Borrow(16).ModelQuota("H100-80GB", 8, 0, 0).Obj()})
			},
			target: 2, code: sched.ReasonWorkspaceQuota, placed: []uint64{1},
		},
		{
			name:  "tenant sites",
			setup: func(h *harness) { h.must(CmdJobSubmit, MakeJob("research", 8).Obj()) },
			change: func(h *harness, p *sched.Plan) {
				h.must(CmdTenantUpdate, TenantUpdate{Name: "acme", Sites: []string{"elsewhere"}})
			},
			target: 1, code: sched.ReasonCapacity,
		},
		{
			name:  "tenant minimum driver",
			setup: func(h *harness) { h.must(CmdJobSubmit, MakeJob("research", 8).Obj()) },
			change: func(h *harness, p *sched.Plan) {
				pol := domain.DefaultHostPolicy()
				pol.TenantMinDriver = map[string]string{"acme": "999.1"}
				h.must(CmdHostPolicy, HostPolicySet{Policy: pol})
			},
			target: 1, code: sched.ReasonCapacity,
		},
		{
			name: "server isolation",
			setup: func(h *harness) {
				h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("glx").Isolation(domain.IsolationGPU).Obj()})
				h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("glx", "w").Guaranteed(8).Obj()})
				h.must(CmdJobSubmit, spec("glx", "w", 2))
				h.must(CmdJobSubmit, MakeJob("research", 2).Obj())
			},
			change: func(h *harness, p *sched.Plan) {
				// Server-isolated acme lands, by another plan, on the server
				// this plan gives glx.
				srv := placedOn(h.t, p, 1).Server
				h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 2, Placements: []domain.Placement{{Server: srv, GPUs: []int{6, 7}}}}}})
			},
			target: 1, code: sched.ReasonCapacity,
		},
		{
			name: "shares never mix tenants",
			setup: func(h *harness) {
				for _, n := range []string{"glx", "ini"} {
					h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant(n).Isolation(domain.IsolationGPU).Obj()})
					h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace(n, "w").Guaranteed(4).Obj()})
				}
				h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", Share: 0.5}})
				h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "ini", Workspace: "w", Share: 0.25}})
			},
			change: func(h *harness, p *sched.Plan) {
				at := placedOn(h.t, p, 1)
				h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 2, Placements: []domain.Placement{{Server: at.Server, GPUs: at.GPUs, Share: 0.25}}}}})
			},
			target: 1, code: sched.ReasonCapacity,
		},
		{
			name: "MIG geometry",
			setup: func(h *harness) {
				h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("glx").Isolation(domain.IsolationGPU).Obj()})
				h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("glx", "w").Guaranteed(8).Obj()})
				h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "4g.40gb", MIGCount: 1}})
				h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "4g.40gb", MIGCount: 1}})
			},
			change: func(h *harness, p *sched.Plan) {
				// Job 2 takes, by another plan, the slots this plan gives
				// job 1 (both planned 4g.40gb on the same GPU, one fits).
				at := placedOn(h.t, p, 1)
				h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 2, Placements: []domain.Placement{at}}}})
			},
			target: 1, code: sched.ReasonCapacity,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t).cluster(1, 4, 16)
			tc.setup(h)
			snap, plan := h.schedule(0)
			placedOn(t, plan, tc.target)
			for _, id := range tc.placed {
				placedOn(t, plan, id)
			}
			tc.change(h, plan)
			res := h.commitPlan(snap, plan)
			j, _ := h.f.Job(tc.target)
			if j.State != domain.JobPending || res.Rejected[tc.target] == "" {
				t.Fatalf("job %d is %s after the change (rejected %v): the applier accepted a placement the scheduler would refuse", tc.target, j.State, res.Rejected)
			}
			if j.Reason == nil || j.Reason.Code != tc.code {
				t.Fatalf("job %d reason %+v, want code %s", tc.target, j.Reason, tc.code)
			}
			for _, id := range tc.placed {
				if !slices.Contains(res.Placed, id) {
					t.Errorf("job %d of the same plan was not committed: %+v", id, res)
				}
			}
			h.replays()
		})
	}
}

// TestPlanApplyOrder: one plan.apply commits a cycle's releases before its
// placements are re-checked, so GPUs the plan releases serve the jobs it
// places; an entry that no longer holds (a preemption of a job that ended)
// is refused alone.
func TestPlanApplyOrder(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	h.must(CmdJobSubmit, MakeJob("research", 8).Expect(0, 60).Obj())
	snap, plan := h.schedule(0)
	h.commitPlan(snap, plan)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.advance(2 * time.Minute) // job 1 is past its time limit
	snap, plan = h.schedule(0)
	if len(plan.Releases) != 1 || placedOn(t, plan, 2).Server == "" {
		t.Fatalf("plan %+v: want job 1 released and job 2 placed on its GPUs", plan)
	}
	plan.Preemptions = append(plan.Preemptions, sched.Preemption{JobID: 1, Deadline: h.at, Reason: domain.Reason{Code: "test"}})
	res := h.commitPlan(snap, plan)
	if !slices.Equal(res.Released, []uint64{1}) || !slices.Equal(res.Placed, []uint64{2}) || res.Rejected[1] == "" {
		t.Fatalf("result %+v: want job 1 released, its preemption refused, job 2 placed", res)
	}
	if j, _ := h.f.Job(1); j.State != domain.JobFailed || j.Reason.Code != "time_limit" {
		t.Fatalf("job 1: %s %+v", j.State, j.Reason)
	}
	h.replays()
}

// TestPreemptionForACancelledJob: a preemption freeing GPUs for a job
// cancelled between the snapshot and the commit is refused; the victim
// runs on.
func TestPreemptionForACancelledJob(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	// research lends its idle guarantee to prod, and reclaims it.
	h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(8).Lend(8).Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "prod").Borrow(8).Obj()})
	h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "prod", GPUs: 8, Preemptible: true}})
	snap, plan := h.schedule(0)
	h.commitPlan(snap, plan)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	snap, plan = h.schedule(0)
	if len(plan.Preemptions) != 1 || plan.Preemptions[0].ForJob != 2 {
		t.Fatalf("plan %+v: want job 1 reclaimed for job 2", plan)
	}
	h.must(CmdJobCancel, JobCancel{ID: 2})
	res := h.commitPlan(snap, plan)
	if j, _ := h.f.Job(1); j.State != domain.JobReady || res.Rejected[1] == "" {
		t.Fatalf("job 1 is %s (rejected %v): preempted for a cancelled job", j.State, res.Rejected)
	}
	h.replays()
}
