package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
)

// ledger is the jobfabric policy's cluster state: the control plane's own
// state machine (internal/state), changed only by the commands a server
// proposes (topology, tenants, workspaces, submits, the runtimes' reports
// and each cycle's plan.apply, whose applier re-checks every placement
// with the scheduler's fit rule). The replay reads every scheduling
// snapshot from it, so what it measures is what a leader would commit.
type ledger struct {
	fsm *state.FSM
	// snaps builds the cycles' snapshots as the leader's loop does,
	// copying only the jobs changed since the previous cycle.
	snaps sched.Snapshotter
}

// newLedger seeds a state machine with the pool, its tenants and their
// workspaces.
func newLedger(topo *domain.Topology, tenants map[string]*domain.Tenant, workspaces map[string]*domain.Workspace) (*ledger, error) {
	l := &ledger{fsm: state.New(state.WithLazySnapshots()), snaps: sched.Snapshotter{Clone: state.CopyJob}}
	if _, err := l.apply(state.CmdTopologyApply, 0, state.TopologyApply{Topology: *topo}); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(tenants)) {
		t := *tenants[name]
		if t.Network == "" {
			t.Network = domain.NetworkPureRT5 // the state requires one; the scheduler never reads it
		}
		if _, err := l.apply(state.CmdTenantCreate, 0, state.TenantCreate{Tenant: t}); err != nil {
			return nil, err
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(workspaces)) {
		if _, err := l.apply(state.CmdWorkspaceCreate, 0, state.WorkspaceCreate{Workspace: *workspaces[ref]}); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// apply commits one command at simulated second now through the state
// machine's apply (the path of a committed Raft entry).
func (l *ledger) apply(t state.CommandType, now int64, payload any) (any, error) {
	b, err := state.Encode(t, at(now), "sim", payload)
	if err != nil {
		return nil, err
	}
	r := l.fsm.ApplyCommand(b)
	if r.Err != nil {
		return nil, fmt.Errorf("the state machine refused %s at %s: %w", t, at(now).Format("2006-01-02T15:04:05Z"), r.Err)
	}
	return r.Value, nil
}

// submit enqueues a job; the state machine numbers jobs in submit order,
// as the replay does.
func (l *ledger) submit(now int64, s *simJob) error {
	spec := s.j.JobSpec
	if domain.ValidateName("name", spec.Name) != nil {
		spec.Name = "" // a trace's id that is no valid name: the state names the job job-ID
	}
	v, err := l.apply(state.CmdJobSubmit, now, state.JobSubmit{Spec: spec})
	if err != nil {
		return err
	}
	j := v.(*domain.Job)
	if j.ID != s.j.ID {
		return fmt.Errorf("the state machine numbered job %s %d, the replay %d", s.j.Name, j.ID, s.j.ID)
	}
	s.j = j
	return nil
}

// report sends a runtime's report for s and refreshes s.j.
func (l *ledger) report(now int64, s *simJob, st string) error {
	if _, err := l.apply(state.CmdJobReport, now, state.JobReport{ID: s.j.ID, State: st}); err != nil {
		return err
	}
	l.refresh(s)
	return nil
}

// refresh makes s.j the state machine's record of the job again.
func (l *ledger) refresh(s *simJob) {
	if j, ok := l.fsm.Job(s.j.ID); ok {
		s.j = j
	}
}

// cycle runs one scheduling cycle as the leader does (server/schedule.go):
// the snapshot from the state machine, sched.Schedule, and the plan
// committed as one plan.apply. A plan made from the state it commits to
// must commit whole: an entry the applier refuses is an error (the
// scheduler and the applier's fit rule disagree).
func (l *ledger) cycle(now int64, pol sched.Policy) (*sched.Plan, *state.PlanResult, error) {
	var snap *sched.Snapshot
	l.fsm.Read(func(v state.View) { snap = l.snaps.Of(v, at(now).Add(-pol.HistoryHorizon())) })
	snap.Policy = pol
	plan := sched.Schedule(snap, at(now))
	cmd := state.PlanApply{Releases: plan.Releases, Preemptions: plan.Preemptions, Placements: plan.Placements, Reasons: plan.Pending.Changed(snap.Jobs)}
	if len(cmd.Releases) == 0 && len(cmd.Preemptions) == 0 && len(cmd.Placements) == 0 && len(cmd.Reasons) == 0 {
		return plan, &state.PlanResult{}, nil
	}
	v, err := l.apply(state.CmdPlanApply, now, cmd)
	if err != nil {
		return nil, nil, err
	}
	res := v.(*state.PlanResult)
	if len(res.Rejected) > 0 {
		return nil, nil, fmt.Errorf("the plan applier refused %v of a plan made at %s from the state it commits to: the scheduler and its fit rule disagree",
			res.Rejected, at(now).Format("2006-01-02T15:04:05Z"))
	}
	return plan, res, nil
}
