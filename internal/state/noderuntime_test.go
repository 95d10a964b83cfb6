package state

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestNodeRuntimeCordonsWhatTheRuntimeCannotUse: a runtime's unusable
// server is cordoned with its reason and uncordoned when usable again; it
// never lifts (or rewrites) a cordon an operator or the host policy set,
// and an operator's word replaces its own.
func TestNodeRuntimeCordonsWhatTheRuntimeCannotUse(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 8)
	s0, s1, s2 := h.server(0), h.server(1), h.server(2)
	const rt = "slurm:jftest"
	h.must(CmdNodeSet, NodeSet{Server: s1, Cordoned: new(true), Reason: "rack work"})

	changed := h.must(CmdNodeRuntime, NodeRuntime{Runtime: rt, Usable: []string{s2},
		Unusable: map[string]string{s0: "slurm: node is DOWN: maint", s1: "slurm: node is DRAIN: x", "not-ours": "slurm: node is DOWN"}}).([]domain.NodeCondition)
	if len(changed) != 1 || changed[0].Server != s0 {
		t.Fatalf("changed %+v, want only %s", changed, s0)
	}
	if n := h.f.node(s0); n.Schedulable() || !n.Cordoned || n.Runtime != rt || n.Reason != "slurm: node is DOWN: maint" {
		t.Fatalf("unusable server %+v", n)
	}
	if n := h.f.node(s1); n.Runtime != "" || n.Reason != "rack work" {
		t.Fatalf("the operator's cordon was rewritten: %+v", n)
	}
	// The same report again changes nothing; a new reason is recorded.
	h.refusedChangesNothingSoft(CmdNodeRuntime, NodeRuntime{Runtime: rt, Unusable: map[string]string{s0: "slurm: node is DOWN: maint"}})
	h.must(CmdNodeRuntime, NodeRuntime{Runtime: rt, Unusable: map[string]string{s0: "slurm: node is NOT_RESPONDING"}})
	if n := h.f.node(s0); n.Reason != "slurm: node is NOT_RESPONDING" {
		t.Fatalf("reason not updated: %+v", n)
	}
	// Another runtime's usable word does not lift it; this one's does,
	// and never lifts the operator's.
	h.refusedChangesNothingSoft(CmdNodeRuntime, NodeRuntime{Runtime: "slurm:other", Usable: []string{s0, s1}})
	h.must(CmdNodeRuntime, NodeRuntime{Runtime: rt, Usable: []string{s0, s1}})
	if n := h.f.node(s0); !n.Schedulable() || n.Reason != "" || n.Runtime != "" {
		t.Fatalf("usable again, still %+v", n)
	}
	if n := h.f.node(s1); !n.Cordoned || n.Reason != "rack work" {
		t.Fatalf("the runtime lifted the operator's cordon: %+v", n)
	}
	// An operator's uncordon replaces the runtime's cordon: a later
	// usable report leaves the server alone.
	h.must(CmdNodeRuntime, NodeRuntime{Runtime: rt, Unusable: map[string]string{s2: "slurm: node is DOWN"}})
	h.must(CmdNodeSet, NodeSet{Server: s2, Cordoned: new(true), Reason: "mine now"})
	h.refusedChangesNothingSoft(CmdNodeRuntime, NodeRuntime{Runtime: rt, Usable: []string{s2}})
	if n := h.f.node(s2); !n.Cordoned || n.Runtime != "" || n.Reason != "mine now" {
		t.Fatalf("operator's cordon after the runtime's: %+v", n)
	}
	if len(h.events("node.cordon")) != 2 || len(h.events("node.uncordon")) != 1 {
		t.Fatalf("events: %d cordons, %d uncordons", len(h.events("node.cordon")), len(h.events("node.uncordon")))
	}
	h.replays()
}

func TestNodeRuntimeRefusals(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	s0 := h.server(0)
	for name, tc := range map[string]struct {
		cmd   NodeRuntime
		field string
	}{
		"no runtime":      {NodeRuntime{Unusable: map[string]string{s0: "down"}}, "runtime"},
		"long runtime":    {NodeRuntime{Runtime: strings.Repeat("r", 129)}, "runtime"},
		"both lists":      {NodeRuntime{Runtime: "slurm:c", Usable: []string{s0}, Unusable: map[string]string{s0: "down"}}, "usable"},
		"no reason":       {NodeRuntime{Runtime: "slurm:c", Unusable: map[string]string{s0: ""}}, "unusable." + s0},
		"too long reason": {NodeRuntime{Runtime: "slurm:c", Unusable: map[string]string{s0: strings.Repeat("x", 257)}}, "unusable." + s0},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.refusedChangesNothing(CmdNodeRuntime, tc.cmd)
			if r.Err == nil || r.Err.Code != domain.CodeInvalidArgument || r.Err.Field != tc.field {
				t.Fatalf("got %v, want invalid %s", r.Err, tc.field)
			}
		})
	}
}

// TestRuntimeNodesNeedRules4: under the rules before runtime cordons (a
// cluster with a member that does not know them), node.runtime and a
// rejected report are refused, so a member that would stop at them never
// meets one; at 4 both apply.
func TestRuntimeNodesNeedRules4(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: h.server(0), GPUs: eightGPUs}}}}})
	cordon := NodeRuntime{Runtime: "slurm:c", Unusable: map[string]string{h.server(1): "slurm c: node gpu1 is DOWN"}}
	reject := JobReport{ID: 1, State: ReportRejected, Message: "slurm job 7 stayed pending on gpu0: ReqNodeNotAvail"}
	h.rules = RulesBlockedKeepsDevices
	if r := h.refusedChangesNothing(CmdNodeRuntime, cordon); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition || !strings.Contains(r.Err.Message, "rules 3") {
		t.Fatalf("node.runtime under rules 3: %v, want failed_precondition naming the rules", r.Err)
	}
	if r := h.refusedChangesNothing(CmdJobReport, reject); r.Err == nil || r.Err.Field != "state" {
		t.Fatalf("a rejected report under rules 3: %v, want refused naming state", r.Err)
	}
	h.rules = RulesRuntimeNodes
	h.must(CmdNodeRuntime, cordon)
	h.must(CmdJobReport, reject)
	if j := h.f.d.Jobs[1]; j.State != domain.JobPending {
		t.Fatalf("rejected at rules 4: job is %s, want Pending", j.State)
	}
	h.replays()
}
