package state

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// recordedFacts is the h100-roce recording (8 H100, driver 535.183.01,
// NIC mlx5_I closest to GPU I): what the generated topology declares.
func recordedFacts(t *testing.T) domain.HostFacts {
	t.Helper()
	dir := os.DirFS("../hostfacts/testdata/hosts/h100-roce")
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: "h100-roce"}
	f, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return *f
}

func (h *harness) reportFacts(node string, f domain.HostFacts) *domain.HostStatus {
	h.t.Helper()
	return h.must(CmdHostReport, HostReport{Node: node, Agent: "test", Facts: f, Hash: hostfacts.Fingerprint(&f)}).(*domain.HostStatus)
}

func (h *harness) events(action string) []domain.Event {
	var out []domain.Event
	for _, e := range h.f.Events(EventFilter{}) {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

func condTypes(cs []domain.HostCondition) string {
	var ts []string
	for _, c := range cs {
		ts = append(ts, c.Type)
	}
	return strings.Join(ts, ",")
}

func TestHostReportDriftAndCordonPolicy(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	node := h.firstServer()
	facts := recordedFacts(t)

	rec := h.reportFacts(node, facts)
	if len(rec.Baseline) != 8 || len(rec.Conditions) != 0 || rec.FirstSeen.IsZero() {
		t.Fatalf("first report: %+v", rec)
	}
	if n := h.f.node(node); !n.Schedulable() {
		t.Fatalf("a node matching its inventory is %+v", n)
	}

	steps := []struct {
		name          string
		facts         func(f *domain.HostFacts)
		operator      *NodeSet
		wantConds     string
		wantCordoned  bool
		wantForDrift  bool
		wantReasonHas string
	}{
		{name: "a driver upgrade the inventory does not know cordons", facts: func(f *domain.HostFacts) { f.Driver = "550.54.15" },
			wantConds: "driver", wantCordoned: true, wantForDrift: true, wantReasonHas: "drift: driver: driver 550.54.15 is running, the inventory declares 535.183.01"},
		{name: "recorded-only drift does not change the cordon", facts: func(f *domain.HostFacts) { f.Driver = "550.54.15"; f.GPUs[2].NVLinksDown = 2 },
			wantConds: "driver,nvlink", wantCordoned: true, wantForDrift: true},
		{name: "the operator uncordons: the policy lets it be", operator: &NodeSet{Cordoned: new(false)},
			wantConds: "driver,nvlink", wantCordoned: false},
		{name: "the same drift again does not re-cordon", facts: func(f *domain.HostFacts) { f.Driver = "550.54.15"; f.GPUs[2].NVLinksDown = 2 },
			wantConds: "driver,nvlink", wantCordoned: false},
		{name: "new cordoning drift cordons again", facts: func(f *domain.HostFacts) { f.Driver = "550.54.15"; f.NICs[1].State = "DOWN" },
			wantConds: "driver,nic-down", wantCordoned: true, wantForDrift: true, wantReasonHas: "nic-down: NIC nic1 (mlx5_1 port 1) is DOWN"},
		{name: "drift gone: the policy lifts its cordon", facts: func(f *domain.HostFacts) {},
			wantConds: "", wantCordoned: false},
	}
	for _, st := range steps {
		if st.operator != nil {
			st.operator.Server = node
			h.must(CmdNodeSet, *st.operator)
		} else {
			f := recordedFacts(t)
			st.facts(&f)
			h.reportFacts(node, f)
		}
		rec, _ := h.f.Host(node)
		n := h.f.node(node)
		if condTypes(rec.Conditions) != st.wantConds || n.Cordoned != st.wantCordoned || rec.CordonedForDrift != st.wantForDrift {
			t.Fatalf("%s: conditions %q cordoned %t (for drift %t); want %q %t %t", st.name, condTypes(rec.Conditions), n.Cordoned, rec.CordonedForDrift, st.wantConds, st.wantCordoned, st.wantForDrift)
		}
		if !strings.Contains(n.Reason, st.wantReasonHas) {
			t.Fatalf("%s: reason %q lacks %q", st.name, n.Reason, st.wantReasonHas)
		}
	}
	if got := len(h.events("node.cordon")); got != 2 {
		t.Errorf("%d node.cordon events, want 2", got)
	}
	if got := len(h.events("host.drift-cleared")); got < 2 {
		t.Errorf("%d host.drift-cleared events", got)
	}
	// The node view carries the agent's word.
	for _, v := range h.f.Nodes() {
		if v.Name == node && v.ReportedDriver != "535.183.01" {
			t.Errorf("node view %+v", v)
		}
	}
	h.replays()
}

func TestHostGPUVanishedWhileAJobRuns(t *testing.T) {
	h := lifecycleAt(t, domain.JobRunning, MakeJob("research", 8))
	node := h.firstServer()
	h.reportFacts(node, recordedFacts(t))
	f := recordedFacts(t)
	gone := f.GPUs[3]
	f.GPUs = slices.Delete(f.GPUs, 3, 4)
	f.NVLinkGroups = nil // topo -m no longer matches the GPU list
	for range 2 {        // the second identical report warns no more
		h.reportFacts(node, f)
	}
	j, _ := h.f.Job(1)
	if len(j.Warnings) != 1 || j.Warnings[0].Code != domain.WarningGPUVanished || !strings.Contains(j.Warnings[0].Message, gone.UUID) {
		t.Fatalf("job warnings %+v", j.Warnings)
	}
	if j.State != domain.JobRunning {
		t.Errorf("job is %s: a vanished GPU warns, the runtime decides", j.State)
	}
	rec, _ := h.f.Host(node)
	if condTypes(rec.Conditions) != "gpu-count,gpu-missing" || !h.f.node(node).Cordoned {
		t.Fatalf("conditions %q, node %+v", condTypes(rec.Conditions), h.f.node(node))
	}
	ev := h.f.Events(EventFilter{Tenant: "acme"})
	if !slices.ContainsFunc(ev, func(e domain.Event) bool { return e.Action == "job.warning" && e.Object == "job/1" }) {
		t.Error("the tenant's trail lacks the job warning")
	}
	// A replaced GPU accepted by the operator re-pins the baseline.
	h.must(CmdHostAccept, HostAccept{Node: node})
	rec, _ = h.f.Host(node)
	if len(rec.Baseline) != 7 || condTypes(rec.Conditions) != "gpu-count" {
		t.Fatalf("after accept: baseline %d, conditions %q", len(rec.Baseline), condTypes(rec.Conditions))
	}
	h.replays()
}

func TestHostHeartbeats(t *testing.T) {
	h := lifecycleAt(t, domain.JobRunning, MakeJob("research", 8))
	node := h.firstServer()
	h.reportFacts(node, recordedFacts(t))
	last := h.at
	h.advance(time.Minute)
	lost := h.must(CmdHostHeartbeat, HostHeartbeat{Nodes: []string{node, "never-reported"}, Lost: true, LastSeen: map[string]time.Time{node: last}, TimeoutSeconds: 60}).([]string)
	if len(lost) != 1 {
		t.Fatalf("lost %v", lost)
	}
	n := h.f.node(node)
	if !n.Unhealthy || !strings.HasPrefix(n.Reason, "heartbeat: no heartbeat since") {
		t.Fatalf("node %+v", n)
	}
	if j, _ := h.f.Job(1); len(j.Warnings) != 1 || j.Warnings[0].Code != domain.WarningHeartbeatLost {
		t.Fatalf("job warnings %+v", j.Warnings)
	}
	// Marking it lost twice changes nothing.
	h.refusedChangesNothingSoft(CmdHostHeartbeat, HostHeartbeat{Nodes: []string{node}, Lost: true, TimeoutSeconds: 60})
	h.must(CmdHostHeartbeat, HostHeartbeat{Nodes: []string{node}})
	if n := h.f.node(node); n.Unhealthy || n.Reason != "" {
		t.Fatalf("restored node %+v", n)
	}
	// An operator's unhealthy mark survives the agent coming back.
	h.must(CmdHostHeartbeat, HostHeartbeat{Nodes: []string{node}, Lost: true, TimeoutSeconds: 60})
	h.must(CmdNodeSet, NodeSet{Server: node, Unhealthy: new(true), Reason: "bad DIMM"})
	h.reportFacts(node, recordedFacts(t))
	if n := h.f.node(node); !n.Unhealthy || n.Reason != "bad DIMM" {
		t.Fatalf("operator's mark lost: %+v", n)
	}
	if rec, _ := h.f.Host(node); condTypes(rec.Conditions) != "" {
		t.Fatalf("a report did not clear the heartbeat condition: %+v", rec.Conditions)
	}
	h.replays()
}

// refusedChangesNothingSoft applies a command that succeeds but must not
// change the state.
func (h *harness) refusedChangesNothingSoft(ct CommandType, payload any) {
	h.t.Helper()
	before := h.snapshot()
	h.must(ct, payload)
	if !bytes.Equal(before, h.snapshot()) {
		h.t.Fatalf("%s changed the state", ct)
	}
}

func TestHostReportRefusals(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	node := h.firstServer()
	good := recordedFacts(t)
	tests := map[string]struct {
		payload   HostReport
		wantCode  domain.Code
		wantField string
	}{
		"unknown node":   {payload: HostReport{Node: "nope", Facts: good}, wantCode: domain.CodeNotFound},
		"duplicate UUID": {payload: HostReport{Node: node, Facts: func() domain.HostFacts { f := recordedFacts(t); f.GPUs[1].UUID = f.GPUs[0].UUID; return f }()}, wantCode: domain.CodeInvalidArgument, wantField: "gpus[1].uuid"},
		"odd device name": {payload: HostReport{Node: node, Facts: func() domain.HostFacts { f := recordedFacts(t); f.NICs[0].RDMADevice = "mlx5_0; rm -rf /"; return f }()},
			wantCode: domain.CodeInvalidArgument, wantField: "nics[0].rdmaDevice"},
		"bad driver": {payload: HostReport{Node: node, Facts: func() domain.HostFacts { f := recordedFacts(t); f.Driver = "latest"; return f }()}, wantCode: domain.CodeInvalidArgument, wantField: "driver"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := h.refusedChangesNothing(CmdHostReport, tc.payload)
			if r.Err == nil || r.Err.Code != tc.wantCode || r.Err.Field != tc.wantField {
				t.Fatalf("error %+v, want %s on %q", r.Err, tc.wantCode, tc.wantField)
			}
		})
	}
	r := h.refusedChangesNothing(CmdHostAccept, HostAccept{Node: node})
	if r.Err.Code != domain.CodeFailedPrecondition {
		t.Fatalf("accept without a report: %v", r.Err)
	}
}

func TestHostPolicy(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	tests := map[string]struct {
		policy    domain.HostPolicy
		wantField string
	}{
		"unknown kind":     {policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, CordonOn: []string{"gpu-color"}}, wantField: "cordonOn[0]"},
		"zero timeout":     {policy: domain.HostPolicy{}, wantField: "heartbeatTimeoutSeconds"},
		"twice":            {policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, CordonOn: []string{"driver", "driver"}}, wantField: "cordonOn[1]"},
		"unknown tenant":   {policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, TenantMinDriver: map[string]string{"globex": "535"}}, wantField: "tenantMinDriver.globex"},
		"not a version":    {policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, TenantMinDriver: map[string]string{"acme": "new"}}, wantField: "tenantMinDriver.acme"},
		"tenant not named": {policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, TenantMinDriver: map[string]string{"Acme!": "535"}}, wantField: "tenantMinDriver"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := h.refusedChangesNothing(CmdHostPolicy, HostPolicySet{Policy: tc.policy})
			if r.Err == nil || r.Err.Field != tc.wantField {
				t.Fatalf("error %+v, want one on %s", r.Err, tc.wantField)
			}
		})
	}
	// A tenant minimum driver applies to the scheduler's view of the
	// tenant's jobs, not to what the user asked.
	h.must(CmdHostPolicy, HostPolicySet{Policy: domain.HostPolicy{HeartbeatTimeoutSeconds: 30, CordonOn: []string{"driver"}, TenantMinDriver: map[string]string{"acme": "550.54"}}})
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	low := MakeJob("research", 8)
	low.MinDriver("470")
	h.must(CmdJobSubmit, low.Obj())
	high := MakeJob("research", 8)
	high.MinDriver("560.1")
	h.must(CmdJobSubmit, high.Obj())
	snap := snapshotOf(h.f, h.at)
	var got []string
	for _, j := range snap.Jobs {
		got = append(got, j.MinDriver)
	}
	if strings.Join(got, ",") != "550.54,550.54,560.1" {
		t.Fatalf("scheduler sees min drivers %v", got)
	}
	if j, _ := h.f.Job(2); j.MinDriver != "470" {
		t.Fatalf("stored job's min driver changed to %s", j.MinDriver)
	}
	if p := h.f.HostPolicy(); p.HeartbeatTimeout() != 30*time.Second || !p.Cordons("driver") || p.Cordons("gpu-count") {
		t.Fatalf("policy %+v", p)
	}
}

func TestExternalIDsAreUniqueAmongATenantsLiveJobs(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	j := MakeJob("research", 8)
	j.ExternalID("slurm:4242")
	h.must(CmdJobSubmit, j.Obj())
	r := h.refusedChangesNothing(CmdJobSubmit, j.Obj())
	if r.Err.Code != domain.CodeAlreadyExists || r.Err.Field != "externalId" {
		t.Fatalf("duplicate external id: %v", r.Err)
	}
	got, ok := h.f.JobByExternalID("slurm:4242", "acme")
	if !ok || got.ID != 1 {
		t.Fatalf("lookup: %+v %t", got, ok)
	}
	h.must(CmdJobCancel, JobCancel{ID: 1})
	h.must(CmdJobSubmit, j.Obj()) // the first one ended: the id is free
	if got, _ := h.f.JobByExternalID("slurm:4242", "acme"); got.ID != 2 {
		t.Fatalf("lookup prefers the live job, got %d", got.ID)
	}
	// Another tenant's id is its own: globex submitting with acme's live
	// id is no conflict, and each tenant's look-up finds its own job.
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("globex").Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("globex", "lab").Guaranteed(8).Borrow(8).Obj()})
	g := j.Obj()
	g.Spec.Tenant, g.Spec.Workspace = "globex", "lab"
	h.must(CmdJobSubmit, g)
	if got, _ := h.f.JobByExternalID("slurm:4242", "globex"); got.ID != 3 || got.Tenant != "globex" {
		t.Fatalf("globex's look-up found job %d of %s", got.ID, got.Tenant)
	}
	if got, _ := h.f.JobByExternalID("slurm:4242", "acme"); got.ID != 2 {
		t.Fatalf("acme's look-up found job %d after globex's submit", got.ID)
	}
	if _, ok := h.f.JobByExternalID("slurm:4242", "initech"); ok {
		t.Fatal("a tenant without the id found a job")
	}
	if all := h.f.JobsByExternalID("slurm:4242"); len(all) != 3 {
		t.Fatalf("JobsByExternalID: %d jobs, want 3", len(all))
	}
	// A second live job of globex with the id is refused, naming only
	// globex's own job.
	r = h.refusedChangesNothing(CmdJobSubmit, g)
	if r.Err.Code != domain.CodeAlreadyExists || !strings.Contains(r.Err.Message, "job 3 ") {
		t.Fatalf("globex's duplicate: %v", r.Err)
	}
}

func TestDrainWithGrace(t *testing.T) {
	h := lifecycleAt(t, domain.JobRunning, MakeJob("research", 8))
	node := h.firstServer()
	h.must(CmdNodeSet, NodeSet{Server: node, Draining: new(true), GraceSeconds: 600, Reason: "firmware"})
	j, _ := h.f.Job(1)
	if j.State != domain.JobPreempting || j.StopDeadline == nil || !j.StopDeadline.Equal(h.at.Add(10*time.Minute)) || j.Reason.Code != "drained" {
		t.Fatalf("job %+v", j)
	}
	r := h.refusedChangesNothing(CmdNodeSet, NodeSet{Server: node, Draining: new(true), GraceSeconds: -1})
	if r.Err.Field != "graceSeconds" {
		t.Fatalf("negative grace: %v", r.Err)
	}
	h.replays()
}

// TestHostRecordsAreCopiedAndRestored (the binder's input is built from
// the view in the server: internal/server/bindinput_test.go).
func TestHostRecordsAreCopiedAndRestored(t *testing.T) {
	h := lifecycleAt(t, domain.JobRunning, MakeJob("research", 8))
	node := h.firstServer()
	h.reportFacts(node, recordedFacts(t))
	rec, ok := h.f.Host(node)
	if !ok || len(rec.Baseline) != 8 {
		t.Fatalf("record %+v", rec)
	}
	// Reads are copies.
	rec.Facts.GPUs[0].UUID = "GPU-changed"
	if rec, _ := h.f.Host(node); rec.Facts.GPUs[0].UUID == "GPU-changed" {
		t.Fatal("a read aliases the state")
	}
	// Hosts survive a snapshot and restore.
	r := New()
	if err := r.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
		t.Fatal(err)
	}
	if rec, ok := r.Host(node); !ok || len(rec.Facts.GPUs) != 8 {
		t.Fatalf("restored host %+v", rec)
	}
}

func TestHostsOfServersLeavingTheInventory(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	topo := h.f.Topology().Topology
	gone := topo.Sites[0].Fabrics[0].Servers[1].Name
	h.reportFacts(gone, recordedFacts(t))
	f := &topo.Sites[0].Fabrics[0]
	f.Servers = f.Servers[:1]
	var cables []domain.Cable
	for _, c := range f.Cables {
		if c.Server != gone {
			cables = append(cables, c)
		}
	}
	f.Cables = cables
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	if _, tracked := h.f.HeartbeatState()[gone]; tracked {
		t.Fatal("a server no longer in the inventory is still watched for heartbeats")
	}
	h.refusedChangesNothingSoft(CmdHostHeartbeat, HostHeartbeat{Nodes: []string{gone}, Lost: true, TimeoutSeconds: 60})
	if _, ok := h.f.Host(gone); !ok {
		t.Fatal("the record of a removed server is gone")
	}
}
