package state

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// TestPoolSetListDelete: pool.set stores the sorted set, lists the
// servers the inventory lacks as unknown, changes nothing (and writes no
// event) when the set is the same, and deletes the pool when given no
// servers.
func TestPoolSetListDelete(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 8)
	s0, s1 := h.server(0), h.server(1)
	r := h.must(CmdPoolSet, PoolSet{Name: "slurm:c1:a100", Servers: []string{s1, "gpu-not-ours", s0}}).(*PoolSetResult)
	if !r.Changed || r.Pool == nil || strings.Join(r.Pool.Servers, ",") != strings.Join([]string{"gpu-not-ours", s0, s1}, ",") {
		t.Fatalf("set: %+v", r)
	}
	ps := h.f.Pools()
	if len(ps) != 1 || ps[0].Name != "slurm:c1:a100" || strings.Join(ps[0].Unknown, ",") != "gpu-not-ours" || ps[0].UpdatedBy != "admin:test" {
		t.Fatalf("list: %+v", ps)
	}
	events := len(h.events("pool.set"))
	if r := h.must(CmdPoolSet, PoolSet{Name: "slurm:c1:a100", Servers: []string{s0, s1, "gpu-not-ours"}}).(*PoolSetResult); r.Changed {
		t.Fatalf("the same set again changed it: %+v", r)
	}
	if len(h.events("pool.set")) != events {
		t.Fatal("the same set again wrote an event")
	}
	if r := h.must(CmdPoolSet, PoolSet{Name: "slurm:c1:a100"}).(*PoolSetResult); !r.Changed || r.Pool != nil {
		t.Fatalf("delete: %+v", r)
	}
	if ps := h.f.Pools(); len(ps) != 0 {
		t.Fatalf("after delete: %+v", ps)
	}
	if r := h.must(CmdPoolSet, PoolSet{Name: "slurm:c1:a100"}).(*PoolSetResult); r.Changed {
		t.Fatal("deleting a pool that does not exist changed something")
	}
	if len(h.events("pool.delete")) != 1 {
		t.Fatalf("%d pool.delete events, want 1", len(h.events("pool.delete")))
	}
	h.replays()
}

func TestPoolSetRefusals(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	for name, tc := range map[string]struct {
		cmd   PoolSet
		field string
	}{
		"no name":          {PoolSet{Servers: []string{"a"}}, "name"},
		"long name":        {PoolSet{Name: strings.Repeat("p", 129), Servers: []string{"a"}}, "name"},
		"empty part":       {PoolSet{Name: "slurm::a100", Servers: []string{"a"}}, "name"},
		"trailing colon":   {PoolSet{Name: "slurm:c1:", Servers: []string{"a"}}, "name"},
		"space in name":    {PoolSet{Name: "slurm:c1:a 100", Servers: []string{"a"}}, "name"},
		"slash in name":    {PoolSet{Name: "a/b", Servers: []string{"a"}}, "name"},
		"empty server":     {PoolSet{Name: "p", Servers: []string{"a", ""}}, "servers[1]"},
		"server twice":     {PoolSet{Name: "p", Servers: []string{"a", "b", "a"}}, "servers[2]"},
		"space in server":  {PoolSet{Name: "p", Servers: []string{"a b"}}, "servers[0]"},
		"too long server":  {PoolSet{Name: "p", Servers: []string{strings.Repeat("s", 254)}}, "servers[0]"},
		"too many servers": {PoolSet{Name: "p", Servers: make([]string, domain.MaxPoolServers+1)}, "servers"},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.refusedChangesNothing(CmdPoolSet, tc.cmd)
			if r.Err == nil || r.Err.Code != domain.CodeInvalidArgument || r.Err.Field != tc.field {
				t.Fatalf("got %v, want invalid %s", r.Err, tc.field)
			}
		})
	}
}

// TestPoolsNeedRules5: below rules 5 (a member without pools) pool.set is
// refused, and so is a submit naming a pool (the member would place it
// anywhere); at 5 both apply, and a submit naming a pool that does not
// exist is refused naming pool.
func TestPoolsNeedRules5(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	set := PoolSet{Name: "slurm:c:b", Servers: []string{h.server(1)}}
	h.rules = RulesRuntimeNodes
	if r := h.refusedChangesNothing(CmdPoolSet, set); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || !strings.Contains(r.Err.Message, "rules 4") {
		t.Fatalf("pool.set under rules 4: %v, want failed_precondition naming the rules", r.Err)
	}
	h.rules = RulesPools
	h.must(CmdPoolSet, set)
	h.rules = RulesRuntimeNodes
	if r := h.refusedChangesNothing(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:b").Obj()); r.Err == nil || r.Err.Field != "pool" || !strings.Contains(r.Err.Message, "rules 4") {
		t.Fatalf("a submit naming a pool under rules 4: %v, want invalid pool naming the rules", r.Err)
	}
	h.rules = RulesPools
	if r := h.refusedChangesNothing(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:nope").Obj()); r.Err == nil || r.Err.Code != domain.CodeInvalidArgument || r.Err.Field != "pool" || !strings.Contains(r.Err.Message, "does not exist") {
		t.Fatalf("a submit naming an unknown pool: %v, want invalid pool", r.Err)
	}
	if r := h.refusedChangesNothing(CmdJobSubmit, MakeJob("research", 8).Pool("bad pool").Obj()); r.Err == nil || r.Err.Field != "pool" {
		t.Fatalf("a submit naming an invalid pool: %v, want invalid pool", r.Err)
	}
	h.must(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:b").Obj())
	h.replays()
}

// TestPoolPlacement: a job of a pool is placed on the pool's servers only;
// the plan applier refuses a placement outside it (the fit re-check); a
// pool changed later moves the pending job to the new set, and one deleted
// leaves it pending saying so.
func TestPoolPlacement(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 32)
	s0, s1, s2, s3 := h.server(0), h.server(1), h.server(2), h.server(3)
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:b", Servers: []string{s2}})
	h.must(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:b").Obj())

	// A plan placing it outside the pool (a stale or wrong plan) is refused.
	res := h.must(CmdPlanApply, PlanApply{Placements: []sched.Placement{{JobID: 1, Placement: []domain.Placement{{Server: s0, GPUs: eightGPUs}}, Level: sched.LevelServer}}}).(*PlanResult)
	if why := res.Rejected[1]; len(res.Placed) != 0 || !strings.Contains(why, "not in the job's pool slurm:c:b") {
		t.Fatalf("placement outside the pool: placed %v, rejected %q", res.Placed, why)
	}

	// The pool moves before the job is placed: the scheduler follows it.
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:b", Servers: []string{s3}})
	snap, plan := h.schedule(0)
	if got := placedOn(t, plan, 1).Server; got != s3 {
		t.Fatalf("placed on %s, want %s (the pool's server now)", got, s3)
	}
	// The leader's commit re-checks it against the pool: placed.
	if res := h.commitPlan(snap, plan); len(res.Placed) != 1 {
		t.Fatalf("plan refused: %+v", res)
	}

	// A second job of the pool waits: the pool's one server is full.
	h.must(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:b").Obj())
	_, plan = h.schedule(0)
	if r, ok := plan.Pending.Get(2); !ok || len(plan.Placements) != 0 {
		t.Fatalf("job 2 placed beyond its pool: %+v (pending %v)", plan.Placements, r)
	}
	// The pool is deleted: the job waits, saying so.
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:b"})
	_, plan = h.schedule(0)
	if r := plan.Pending.Of(2); !strings.Contains(r.Message, "pool slurm:c:b does not exist") {
		t.Fatalf("deleted pool: reason %q", r.Message)
	}
	// A pool of servers jobfabric does not have: it says so.
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:b", Servers: []string{"gpu-elsewhere"}})
	_, plan = h.schedule(0)
	if r := plan.Pending.Of(2); !strings.Contains(r.Message, "no server of pool slurm:c:b is in the inventory") {
		t.Fatalf("foreign pool: reason %q", r.Message)
	}
	// Pools do not restrict a job that names none.
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	_, plan = h.schedule(0)
	if p := placedOn(t, plan, 3).Server; p != s0 && p != s1 && p != s2 {
		t.Fatalf("a job without a pool placed on %s", p)
	}
	h.replays()
}
