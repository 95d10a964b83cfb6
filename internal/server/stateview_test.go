package server

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestBindingInputFromTheView: the binder's input, built from the state's
// view, holds copies of the job and its server, the other jobs holding
// GPUs on that node (not those elsewhere, not ended ones) and the ids the
// pools gave the job's tenant.
func TestBindingInputFromTheView(t *testing.T) {
	fsm := state.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(ct state.CommandType, payload any) any {
		t.Helper()
		at = at.Add(time.Second)
		b, err := state.Encode(ct, at, "admin:test", payload)
		if err != nil {
			t.Fatal(err)
		}
		r := fsm.ApplyCommand(b)
		if r.Err != nil {
			t.Fatalf("%s: %v", ct, r.Err)
		}
		return r.Value
	}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	apply(state.CmdTopologyApply, state.TopologyApply{Topology: *topo})
	apply(state.CmdTenantCreate, state.TenantCreate{Tenant: domaintest.MakeTenant("acme").Isolation(domain.IsolationGPU).Obj()})
	apply(state.CmdWorkspaceCreate, state.WorkspaceCreate{Workspace: domaintest.MakeWorkspace("acme", "research").Guaranteed(16).Obj()})
	for _, gpus := range []int{4, 4, 8, 1} {
		apply(state.CmdJobSubmit, state.JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: gpus}})
	}
	plan := sched.Schedule(schedSnapshot(fsm, at), at)
	apply(state.CmdPlanApply, state.PlanApply{Placements: plan.Placements})
	apply(state.CmdJobCancel, state.JobCancel{ID: 4}) // ended: holds nothing
	in, ids, jobs, err := fsm.FabricInput(at, nil)
	if err != nil || len(in.Allocations) == 0 {
		t.Fatalf("fabric input: %v %+v", err, in)
	}
	apply(state.CmdFabricRevision, state.FabricRevisionCmd{SyncAt: at, IDsHash: ids, Jobs: jobs})

	j1, _ := fsm.Job(1)
	node := j1.Placement[0].Server
	bin, derr := bindingInput(fsm, 1, node)
	if derr != nil {
		t.Fatal(derr)
	}
	var others []uint64
	for _, o := range bin.Others {
		others = append(others, o.ID)
		if o.Placement[0].Server != node {
			t.Errorf("job %d on %s is among the jobs of %s", o.ID, o.Placement[0].Server, node)
		}
	}
	if bin.Job.ID != 1 || bin.Server.Name != node || bin.Node != node || !bin.RailOptimized || bin.Host != nil {
		t.Fatalf("input %+v", bin)
	}
	if len(others) != 1 || others[0] != 2 {
		t.Fatalf("other jobs on %s: %v, want [2] (jobs 1 and 2 share it, 3 is elsewhere, 4 ended)", node, others)
	}
	if bin.Fabric.Tenant != "acme" || bin.Fabric.Workspace != "research" || bin.Fabric.L3VNI == 0 || bin.Fabric.VRF == "" || bin.Fabric.Isolation != domain.IsolationGPU {
		t.Fatalf("fabric identity %+v", bin.Fabric)
	}
	bin.Job.Placement[0].GPUs[0] = 99
	if j, _ := fsm.Job(1); j.Placement[0].GPUs[0] == 99 {
		t.Fatal("the input aliases the state's job")
	}
	for name, want := range map[string]domain.Code{"unknown job": domain.CodeNotFound, "unknown node": domain.CodeNotFound} {
		id, n := uint64(99), node
		if name == "unknown node" {
			id, n = 1, "nope"
		}
		if _, derr := bindingInput(fsm, id, n); derr == nil || derr.Code != want {
			t.Errorf("%s: %v, want %s", name, derr, want)
		}
	}
}
