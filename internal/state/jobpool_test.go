package state

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestJobPoolMovesAJobThatHasNotStarted: job.pool moves a pending job to
// another pool (the next cycle places it there only) or to none; a job
// placed keeps its placement when the new pool holds it, and the change
// is refused when it does not (hand it back first), or once it runs;
// below RulesJobPool it is refused (a member without it would stop at
// it). Every refusal changes nothing and names the rule.
func TestJobPoolMovesAJobThatHasNotStarted(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 32)
	s0, s1, s2 := h.server(0), h.server(1), h.server(2)
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:a", Servers: []string{s0, s1}})
	h.must(CmdPoolSet, PoolSet{Name: "slurm:c:b", Servers: []string{s2}})
	h.must(CmdJobSubmit, MakeJob("research", 8).Pool("slurm:c:a").Obj())

	h.rules = RulesPools
	if r := h.refusedChangesNothing(CmdJobPool, JobPool{ID: 1, Pool: "slurm:c:b"}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || !strings.Contains(r.Err.Message, "rules 5") {
		t.Fatalf("job.pool under rules 5: %v, want failed_precondition naming the rules", r.Err)
	}
	h.rules = RulesJobPool
	for name, tc := range map[string]struct {
		cmd  JobPool
		code domain.Code
		want string
	}{
		"unknown job":  {JobPool{ID: 9, Pool: "slurm:c:b"}, domain.CodeNotFound, "job"},
		"unknown pool": {JobPool{ID: 1, Pool: "slurm:c:nope"}, domain.CodeInvalidArgument, "does not exist"},
		"invalid pool": {JobPool{ID: 1, Pool: "a b"}, domain.CodeInvalidArgument, "pool"},
	} {
		t.Run(name, func(t *testing.T) {
			if r := h.refusedChangesNothing(CmdJobPool, tc.cmd); r.Err == nil || r.Err.Code != tc.code || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("got %v, want %s naming %q", r.Err, tc.code, tc.want)
			}
		})
	}

	// Pending: moved; the scheduler places it in the new pool.
	if j := h.must(CmdJobPool, JobPool{ID: 1, Pool: "slurm:c:b"}).(*domain.Job); j.Pool != "slurm:c:b" {
		t.Fatalf("pool %q after the move", j.Pool)
	}
	if n := len(h.events("job.pool")); n != 1 {
		t.Fatalf("%d job.pool events, want 1", n)
	}
	h.must(CmdJobPool, JobPool{ID: 1, Pool: "slurm:c:b"}) // the same pool: nothing to do
	if n := len(h.events("job.pool")); n != 1 {
		t.Fatalf("moving a job to its own pool wrote an event (%d)", n)
	}
	_, plan := h.schedule(0)
	if got := placedOn(t, plan, 1).Server; got != s2 {
		t.Fatalf("placed on %s, want %s (pool slurm:c:b)", got, s2)
	}

	// Placed: kept where the new pool holds the placement, refused where
	// it does not.
	h.place(1, domain.Placement{Server: s2, GPUs: eightGPUs})
	if r := h.refusedChangesNothing(CmdJobPool, JobPool{ID: 1, Pool: "slurm:c:a"}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || !strings.Contains(r.Err.Message, "not in pool slurm:c:a") {
		t.Fatalf("a placed job moved off its placement's pool: %v", r.Err)
	}
	if j := h.must(CmdJobPool, JobPool{ID: 1}).(*domain.Job); j.Pool != "" || len(j.Placement) != 1 {
		t.Fatalf("a placed job moved to any server: pool %q, placement %v", j.Pool, j.Placement)
	}
	h.report("running")()
	if r := h.refusedChangesNothing(CmdJobPool, JobPool{ID: 1, Pool: "slurm:c:b"}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || !strings.Contains(r.Err.Message, "has not started") {
		t.Fatalf("a running job moved: %v", r.Err)
	}
	h.replays()
}
