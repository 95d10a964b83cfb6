package sched

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// twoPools is two 8-GPU servers, one per pool (px: s1-gpu001, py:
// s1-gpu002), both full: workspace b/w (guarantee 8) runs an 8-GPU job on
// each, the one on py placed more recently (cheaper to stop); a/w
// (guarantee 8) holds nothing and waits with an 8-GPU job of pool px.
func twoPools(t *testing.T) *Snapshot {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).
		Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8)).
		Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(8).Borrow(16)).
		Running(domaintest.MakeJob("b/w", 8).Preemptible().Pool("py"), domaintest.On("s1-gpu002", domaintest.Seq(0, 8)...)).
		Running(domaintest.MakeJob("b/w", 8).Preemptible().Pool("px"), domaintest.On("s1-gpu001", domaintest.Seq(0, 8)...)).
		PlacedAgo(1, time.Minute).
		PlacedAgo(2, time.Hour).
		Pending(domaintest.MakeJob("a/w", 8).Pool("px"))
	s := snapshotOf(w)
	s.Pools = map[string]*domain.ServerPool{
		"px": {Name: "px", Servers: []string{"s1-gpu001"}},
		"py": {Name: "py", Servers: []string{"s1-gpu002"}},
	}
	return s
}

// TestReclaimForAPoolTakesBorrowersOnItsServers: a guaranteed job of pool
// px reclaims the borrower on px's server. On main the borrower on py came
// first (cheaper), used up what b/w borrowed, and the job waited with
// "frees no room of its shape" while b/w borrowed on px.
func TestReclaimForAPoolTakesBorrowersOnItsServers(t *testing.T) {
	s := twoPools(t)
	plan := Schedule(s, domaintest.Now)
	if len(plan.Preemptions) != 1 || plan.Preemptions[0].JobID != 2 || plan.Preemptions[0].ForJob != 3 {
		t.Fatalf("preemptions %+v, want job 2 (on px) stopped for job 3; job 3 waits with %q", plan.Preemptions, plan.Pending.Of(3).Message)
	}
	if r := plan.Pending.Of(3); r.Code != ReasonReclaim {
		t.Errorf("job 3 waits with %s %q, want %s", r.Code, r.Message, ReasonReclaim)
	}
}

// TestReclaimForAPoolWithNoBorrowerOnIt: the job on px is c/w's, within
// its guarantee; b/w (guarantee 0) borrows on py only. Reclaim for a job
// of px finds no victim on px, and the reason names the pool (on main:
// "frees no room of its shape", after a search of py's borrower).
func TestReclaimForAPoolWithNoBorrowerOnIt(t *testing.T) {
	s := twoPools(t)
	s.Tenants["c"] = &domain.Tenant{Name: "c", Isolation: domain.IsolationGPU}
	s.Workspaces["c/w"] = &domain.Workspace{Tenant: "c", Name: "w", Guaranteed: 8}
	s.Workspaces["b/w"].Guaranteed = 0
	s.Jobs[1].Tenant, s.Jobs[1].Workspace = "c", "w"
	plan := Schedule(s, domaintest.Now)
	if len(plan.Preemptions) != 0 {
		t.Fatalf("preemptions %+v, want none (only c/w's guaranteed job runs on px)", plan.Preemptions)
	}
	want := "reclaim cannot serve it: no other workspace's job above its guarantee runs on the servers of pool px"
	if r := plan.Pending.Of(3); !strings.Contains(r.Message, want) {
		t.Errorf("job 3 waits with %q, want it to say %q", r.Message, want)
	}
}

// TestPoolFullReasonNamesThePool: a job of pool px waits while px's
// server is full and the cluster has room elsewhere; its reason says how
// full px is, counts only (the jobs on it are another tenant's). On main
// it spoke of "eligible servers" and the cluster, never of the pool.
func TestPoolFullReasonNamesThePool(t *testing.T) {
	for name, tc := range map[string]struct {
		job  *domaintest.JobBuilder[domain.JobSpec]
		want string
	}{
		"one server": {domaintest.MakeJob("a/w", 8).Pool("px"),
			"pool px: 1 of its 16 GPUs free; needs 1 servers with 8 free GPUs each"},
		"a gang": {domaintest.MakeJob("a/w", 16).PerNode(8).Pool("px"),
			"pool px: 1 of its 16 GPUs free; needs 2 servers with 8 free GPUs each"},
		"a share": {domaintest.MakeJob("a/w", 0).Share(0.5).Pool("px"),
			"pool px: 0 of its 16 GPUs free; "},
	} {
		t.Run(name, func(t *testing.T) {
			w := domaintest.NewWorld(t, domaintest.DGX(1, 4)).
				Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
				Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
				Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(0).Borrow(64)).
				Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(0).Borrow(64)).
				Running(domaintest.MakeJob("b/w", 8).Pool("px"), domaintest.On("s1-gpu001", domaintest.Seq(0, 8)...)).
				Running(domaintest.MakeJob("b/w", 7).Pool("px"), domaintest.On("s1-gpu002", domaintest.Seq(0, 7)...))
			if name == "a share" {
				w.Running(domaintest.MakeJob("b/w", 1).Pool("px"), domaintest.On("s1-gpu002", 7))
			}
			w.Pending(tc.job)
			s := snapshotOf(w)
			s.Pools = map[string]*domain.ServerPool{"px": {Name: "px", Servers: []string{"s1-gpu001", "s1-gpu002"}}}
			plan := Schedule(s, domaintest.Now)
			id := w.Next - 1
			r, ok := plan.Pending.Get(id)
			if !ok {
				t.Fatalf("job %d placed: %+v", id, plan.Placements)
			}
			if !strings.HasPrefix(r.Message, tc.want) {
				t.Errorf("job %d waits with %q, want it to start %q", id, r.Message, tc.want)
			}
			if strings.Contains(r.Message, "b/w") || strings.Contains(r.Message, "job 1") {
				t.Errorf("the reason names the other tenant's work: %q", r.Message)
			}
		})
	}
}

// TestLeftoversServeTheNextJobOfAShape: the GPUs being freed (jobs 2 and
// 3 stopping, 2 on each server) give job 5 of a/w its quota but no room
// of its shape (4 on one server); it reclaims job 1's 6 GPUs on
// s1-gpu001, and job 6, of the same shape, then waits for the 4 left
// over there. freeingFits kept job 5's "no room" for the shape: the
// release into the future view (issue) must drop it, else job 6 finds
// none and no victim either.
func TestLeftoversServeTheNextJobOfAShape(t *testing.T) {
	by := domaintest.Now.Add(20 * time.Second)
	stopping := func(j *domain.Job) { j.State, j.StopDeadline = domain.JobPreempting, &by }
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).
		Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("d").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8)).
		Workspace(domaintest.MakeWorkspace("b", "w").Borrow(16)).
		Workspace(domaintest.MakeWorkspace("d", "w").Guaranteed(6)).
		Running(domaintest.MakeJob("b/w", 6).Preemptible(), domaintest.On("s1-gpu001", domaintest.Seq(0, 6)...)).
		Running(domaintest.MakeJob("b/w", 2).Preemptible(), domaintest.On("s1-gpu001", 6, 7)).
		Running(domaintest.MakeJob("b/w", 2).Preemptible(), domaintest.On("s1-gpu002", 0, 1)).
		Running(domaintest.MakeJob("d/w", 6), domaintest.On("s1-gpu002", domaintest.Seq(2, 8)...)).
		PlacedAgo(1, time.Hour).PlacedAgo(2, time.Hour).PlacedAgo(3, time.Hour).PlacedAgo(4, time.Hour).
		With(2, stopping).With(3, stopping).
		Pending(domaintest.MakeJob("a/w", 4)).
		Pending(domaintest.MakeJob("a/w", 4))
	s := snapshotOf(w)
	plan := Schedule(s, domaintest.Now)
	if len(plan.Preemptions) != 1 || plan.Preemptions[0].JobID != 1 || plan.Preemptions[0].ForJob != 5 {
		t.Fatalf("preemptions %+v, want job 1 stopped for job 5 (job 5 waits with %q)", plan.Preemptions, plan.Pending.Of(5).Message)
	}
	if r := plan.Pending.Of(6); r.Code != ReasonReclaim || !strings.Contains(r.Message, "being freed by other jobs' preemption") {
		t.Errorf("job 6 waits with %s %q, want it to wait for the GPUs left over", r.Code, r.Message)
	}
	ex := *s
	ex.exhaustive = true
	if !reflect.DeepEqual(Schedule(&ex, domaintest.Now), plan) {
		t.Error("the plan differs from the one decided exhaustively")
	}
}

// TestNoRoomOfOneTenantIsNotAServerIsolatedTenants: s1-gpu001 is
// server-isolated tenant s's (a job running, another stopping: 4 GPUs
// being freed there); job 4 of GPU-isolated g/w finds no room in them,
// job 5 of s/w waits for them. freeingFits keeps "no room" for a shape of
// whole GPUs whichever GPU-isolated tenant asks, never for a
// server-isolated one, whose room is the servers it holds.
func TestNoRoomOfOneTenantIsNotAServerIsolatedTenants(t *testing.T) {
	by := domaintest.Now.Add(20 * time.Second)
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).
		Tenant(domaintest.MakeTenant("g").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("s").Isolation(domain.IsolationServer)).
		Tenant(domaintest.MakeTenant("d").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("g", "w").Guaranteed(4).Lend(4)).
		Workspace(domaintest.MakeWorkspace("s", "w").Guaranteed(8).Lend(8)).
		Workspace(domaintest.MakeWorkspace("d", "w").Guaranteed(8)).
		Running(domaintest.MakeJob("s/w", 4), domaintest.On("s1-gpu001", domaintest.Seq(0, 4)...)).
		Running(domaintest.MakeJob("s/w", 4), domaintest.On("s1-gpu001", domaintest.Seq(4, 8)...)).
		Running(domaintest.MakeJob("d/w", 8), domaintest.On("s1-gpu002", domaintest.Seq(0, 8)...)).
		PlacedAgo(1, time.Hour).PlacedAgo(2, time.Hour).PlacedAgo(3, time.Hour).
		With(2, func(j *domain.Job) { j.State, j.StopDeadline = domain.JobPreempting, &by }).
		Pending(domaintest.MakeJob("g/w", 4)).
		Pending(domaintest.MakeJob("s/w", 4))
	plan := Schedule(snapshotOf(w), domaintest.Now)
	if r := plan.Pending.Of(4); r.Code == ReasonReclaim {
		t.Errorf("job 4 (g/w) waits with %q: it may not use s's server", r.Message)
	}
	if r := plan.Pending.Of(5); r.Code != ReasonReclaim || !strings.Contains(r.Message, "being freed by other jobs' preemption") {
		t.Errorf("job 5 (s/w) waits with %s %q, want it to wait for the 4 GPUs of its server being freed", r.Code, r.Message)
	}
}
