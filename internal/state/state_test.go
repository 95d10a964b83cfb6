package state

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// harness applies commands to an FSM the way Raft would.
type harness struct {
	t   testing.TB
	f   *FSM
	log [][]byte
	at  time.Time
	// snaps follows the state as the scheduling loop does; every command
	// checks it against a whole copy (checkJobVersions).
	snaps sched.Snapshotter
	// rules is the apply-rules version commands are proposed under (0:
	// RulesLatest; RulesAbsent: none written, as before versions).
	rules int
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return &harness{t: t, f: New(), at: t0, snaps: sched.Snapshotter{Clone: CopyJob}}
}

func (h *harness) apply(ct CommandType, payload any) *Result {
	h.t.Helper()
	h.at = h.at.Add(time.Second)
	rules := cmp.Or(h.rules, RulesLatest)
	if h.rules == rulesAbsent {
		rules = 0
	}
	c, b, err := EncodeCommand(ct, rules, h.at, "admin:test", payload)
	if err != nil {
		h.t.Fatal(err)
	}
	h.log = append(h.log, b)
	// Every command of every test is checked first, as the leader does
	// before proposing: Check must change nothing and refuse exactly what
	// Apply refuses.
	before := h.snapshot()
	chk := h.f.Check(b)
	if after := h.snapshot(); !bytes.Equal(before, after) {
		h.t.Fatalf("Check(%s) changed the state", ct)
	}
	// The leader checks the command EncodeCommand returned, not the entry.
	if chkc := h.f.CheckCommand(c); fmt.Sprint(chkc) != fmt.Sprint(chk) {
		h.t.Fatalf("%s: CheckCommand answered %v, Check %v", ct, chkc, chk)
	}
	vers := h.jobVersions()
	r := h.f.Apply(&raft.Log{Index: uint64(len(h.log)), Type: raft.LogCommand, Data: b}).(*Result)
	h.checkJobVersions(ct, vers)
	if fmt.Sprint(chk) != fmt.Sprint(r.Err) {
		h.t.Fatalf("%s: Check answered %v, Apply %v", ct, chk, r.Err)
	}
	return r
}

func (h *harness) must(ct CommandType, payload any) any {
	h.t.Helper()
	r := h.apply(ct, payload)
	if r.Err != nil {
		h.t.Fatalf("%s: %v", ct, r.Err)
	}
	return r.Value
}

func (h *harness) snapshot() []byte {
	h.t.Helper()
	s, err := h.f.Snapshot()
	if err != nil {
		h.t.Fatal(err)
	}
	return snapshotBytes(h.t, s)
}

// cluster seeds a generated topology (stripes x servers x 8 GPUs), tenant
// acme and workspace acme/research.
func (h *harness) cluster(stripes, servers, guaranteed int) *harness {
	h.t.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: stripes, ServersPerStripe: servers, GPUsPerServer: 8})
	if err != nil {
		h.t.Fatal(err)
	}
	h.must(CmdTopologyApply, TopologyApply{Topology: *topo})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("acme").Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "research").Guaranteed(guaranteed).Borrow(guaranteed).Obj()})
	return h
}

// The shared fluent builders (domaintest); the jobs of these tests are
// acme's, and Obj submits them.
var (
	MakeTenant    = domaintest.MakeTenant
	MakeWorkspace = domaintest.MakeWorkspace
)

type jobB = domaintest.JobBuilder[JobSubmit]

// MakeJob starts acme's job in workspace ws.
func MakeJob(ws string, gpus int) *jobB {
	return domaintest.MakeJobOf("acme/"+ws, gpus, func(s domain.JobSpec) JobSubmit { return JobSubmit{Spec: s} })
}

func TestJobSubmit(t *testing.T) {
	cases := map[string]struct {
		job       JobSubmit
		wantCode  domain.Code
		wantField string
	}{
		"fits":                      {job: MakeJob("research", 16).PerNode(8).Model("H100-80GB").Obj()},
		"default name":              {job: MakeJob("research", 1).Obj()},
		"zero gpus":                 {job: MakeJob("research", 0).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpus"},
		"negative gpus":             {job: MakeJob("research", -4).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpus"},
		"absurd gpus":               {job: MakeJob("research", 1<<40).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpus"},
		"beyond borrow limit":       {job: MakeJob("research", 40).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpus"},
		"per node not a divisor":    {job: MakeJob("research", 12).PerNode(8).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpusPerNode"},
		"per node beyond a server":  {job: MakeJob("research", 16).PerNode(16).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpusPerNode"},
		"unknown model":             {job: MakeJob("research", 8).Model("H900").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpuModel"},
		"model not in inventory":    {job: MakeJob("research", 8).Model("A100-80GB").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpuModel"},
		"unknown workspace":         {job: MakeJob("nope", 8).Obj(), wantCode: domain.CodeNotFound, wantField: "workspace"},
		"models, one in inventory":  {job: MakeJob("research", 8).Models("A100-80GB", "H100-80GB").Obj()},
		"models, none in inventory": {job: MakeJob("research", 8).Models("A100-80GB", "B200-180GB").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpuModels"},
		"model and models":          {job: MakeJob("research", 8).Model("H100-80GB").Models("H100-80GB").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpuModels"},
		"model listed twice":        {job: MakeJob("research", 8).Models("H100-80GB", "H100-80GB").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "gpuModels[1]"},
		"expected within limit":     {job: MakeJob("research", 8).Expect(3600, 7200).Obj()},
		"expected beyond limit":     {job: MakeJob("research", 8).Expect(7200, 3600).Obj(), wantCode: domain.CodeInvalidArgument, wantField: "expectedDurationSeconds"},
		"bad name":                  {job: MakeJob("research", 8).Name("Bad_Name").Obj(), wantCode: domain.CodeInvalidArgument, wantField: "name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t).cluster(1, 4, 16)
			before := h.snapshot()
			r := h.apply(CmdJobSubmit, tc.job)
			if tc.wantCode != "" {
				if r.Err == nil || r.Err.Code != tc.wantCode || r.Err.Field != tc.wantField {
					t.Fatalf("got %v, want code %s field %s", r.Err, tc.wantCode, tc.wantField)
				}
				if !bytes.Equal(before, h.snapshot()) {
					t.Fatal("a refused command changed the state")
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			j := r.Value.(*domain.Job)
			if j.ID != 1 || j.State != domain.JobPending || j.Reason == nil || j.Reason.Code != domain.ReasonQueued {
				t.Fatalf("job = %+v, want ID 1 Pending with reason %s", j, domain.ReasonQueued)
			}
			if j.Name == "" || j.SubmittedAt.IsZero() || j.SubmittedBy != "admin:test" {
				t.Fatalf("job name/time/actor not set: %+v", j)
			}
		})
	}
}

func TestTenancyRules(t *testing.T) {
	cases := map[string]struct {
		steps    func(h *harness) *Result
		wantCode domain.Code
		wantFld  string
	}{
		"duplicate tenant": {steps: func(h *harness) *Result {
			return h.apply(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("acme").Obj()})
		}, wantCode: domain.CodeAlreadyExists, wantFld: "name"},
		"bad isolation": {steps: func(h *harness) *Result {
			return h.apply(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("x").Isolation("rack").Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "isolation"},
		"workspace of unknown tenant": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("ghost", "a").Obj()})
		}, wantCode: domain.CodeNotFound},
		"duplicate workspace": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "research").Obj()})
		}, wantCode: domain.CodeAlreadyExists, wantFld: "name"},
		"guarantees beyond inventory": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "big").Guaranteed(17).Obj()})
		}, wantCode: domain.CodeFailedPrecondition, wantFld: "guaranteed"},
		"lend above guarantee": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "b").Guaranteed(4).Lend(8).Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "lendLimit"},
		"zero weight": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "b").Weight(0).Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "weight"},
		"update beyond inventory": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(33).Obj()})
		}, wantCode: domain.CodeFailedPrecondition, wantFld: "guaranteed"},
		"delete tenant with workspaces": {steps: func(h *harness) *Result {
			return h.apply(CmdTenantDelete, TenantDelete{Name: "acme"})
		}, wantCode: domain.CodeFailedPrecondition},
		"delete workspace with pending job": {steps: func(h *harness) *Result {
			h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			return h.apply(CmdWorkspaceDelete, WorkspaceDelete{Tenant: "acme", Name: "research"})
		}, wantCode: domain.CodeFailedPrecondition},
		"cancel twice": {steps: func(h *harness) *Result {
			h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
			h.must(CmdJobCancel, JobCancel{ID: 1})
			return h.apply(CmdJobCancel, JobCancel{ID: 1})
		}, wantCode: domain.CodeFailedPrecondition},
		"token for unknown workspace": {steps: func(h *harness) *Result {
			return h.apply(CmdTokenCreate, TokenCreate{Token: domain.Token{ID: "abc", Role: domain.RoleMember, Tenant: "acme", Workspace: "nope"}, Hash: HashSecret("x")})
		}, wantCode: domain.CodeNotFound},
		"model quota": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "m").Guaranteed(8).ModelQuota("H100-80GB", 8, 8, 4).Obj()})
		}},
		"model guarantees beyond the workspace's": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "m").Guaranteed(4).ModelQuota("H100-80GB", 8, 0, 0).Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "models"},
		"model guarantee without that model": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "m").Guaranteed(8).ModelQuota("A100-80GB", 8, 0, 0).Obj()})
		}, wantCode: domain.CodeFailedPrecondition, wantFld: "models[0].guaranteed"},
		"model listed twice in a workspace": {steps: func(h *harness) *Result {
			h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(16).Borrow(16).ModelQuota("H100-80GB", 16, 0, 0).Obj()})
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "m").Guaranteed(16).ModelQuota("H100-80GB", 0, 0, 0).ModelQuota("A100-80GB", 0, 4, 0).ModelQuota("H100-80GB", 1, 0, 0).Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "models[2].model"},
		"model lend above its guarantee": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "m").Guaranteed(8).ModelQuota("H100-80GB", 2, 0, 4).Obj()})
		}, wantCode: domain.CodeInvalidArgument, wantFld: "models[0].lendLimit"},
		"job beyond its model quota": {steps: func(h *harness) *Result {
			h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(16).Borrow(16).ModelQuota("H100-80GB", 8, 4, 0).Obj()})
			return h.apply(CmdJobSubmit, MakeJob("research", 16).Obj())
		}, wantCode: domain.CodeInvalidArgument, wantFld: "gpus"},
		"valid update": {steps: func(h *harness) *Result {
			return h.apply(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(32).Borrow(0).Obj()})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t).cluster(1, 4, 16) // 32 GPUs, 16 guaranteed
			r := tc.steps(h)
			if tc.wantCode == "" {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				return
			}
			if r.Err == nil || r.Err.Code != tc.wantCode || r.Err.Field != tc.wantFld {
				t.Fatalf("got %v, want code %s field %q", r.Err, tc.wantCode, tc.wantFld)
			}
		})
	}
}

func TestTopologyReapplyIsNoop(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 0)
	topo, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	events := len(h.f.Events(EventFilter{}))
	before := h.snapshot()
	res := h.must(CmdTopologyApply, TopologyApply{Topology: *topo}).(*domain.TopologyResult)
	if res.Changed || res.Revision != 1 {
		t.Fatalf("re-apply: changed=%t revision=%d, want unchanged revision 1", res.Changed, res.Revision)
	}
	if !bytes.Equal(before, h.snapshot()) || len(h.f.Events(EventFilter{})) != events {
		t.Fatal("re-applying the same topology changed the state or logged an event")
	}
}

func TestTopologyRefusesRemovingBusyServer(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 16)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	big, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	busy := big.Sites[0].Fabrics[0].Servers[3].Name
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: busy, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}}).(*PlanResult); len(res.Placed) != 1 {
		t.Fatalf("plan not applied: %+v", res)
	}
	small, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 3, GPUsPerServer: 8})
	before := h.snapshot()
	r := h.apply(CmdTopologyApply, TopologyApply{Topology: *small})
	if r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition {
		t.Fatalf("removing %s under a running job: got %v, want failed_precondition", busy, r.Err)
	}
	if !bytes.Equal(before, h.snapshot()) {
		t.Fatal("refused topology changed the state")
	}
	// Once the job is cancelled the server may go.
	h.must(CmdJobCancel, JobCancel{ID: 1})
	if r := h.apply(CmdTopologyApply, TopologyApply{Topology: *small}); r.Err != nil {
		t.Fatalf("after cancel: %v", r.Err)
	}
}

func TestTopologyRefusesShrinkBelowGuarantees(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 32)
	small, _ := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 3, GPUsPerServer: 8})
	if r := h.apply(CmdTopologyApply, TopologyApply{Topology: *small}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition {
		t.Fatalf("got %v, want failed_precondition", r.Err)
	}
}

func TestPlanRecheck(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 16)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 4).Obj())
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: srv, GPUs: all}}}}})
	if j, _ := h.f.Job(1); j.State != domain.JobReady || len(j.Placement) != 1 {
		t.Fatalf("placed job 1 = %+v, want Ready with its placement", j)
	}
	// A stale plan reusing job 1's GPUs is refused for that job only; the
	// rest of the plan commits, and reasons reach pending jobs.
	res := h.must(CmdJobsPlace, JobsPlace{
		Jobs: []JobPlacement{
			{ID: 2, Placements: []domain.Placement{{Server: srv, GPUs: all}}},
			{ID: 3, Placements: []domain.Placement{{Server: "nope", GPUs: []int{0}}}},
		},
		Reasons: map[uint64]domain.Reason{2: {Code: "capacity", Message: "full"}},
	}).(*PlanResult)
	if len(res.Placed) != 0 || res.Rejected[2] == "" || res.Rejected[3] == "" {
		t.Fatalf("plan result %+v: want jobs 2 and 3 rejected", res)
	}
	if j, _ := h.f.Job(2); j.State != domain.JobPending || j.Reason.Code != "capacity" {
		t.Fatalf("job 2 = %s %+v, want Pending with the plan's reason", j.State, j.Reason)
	}
}

func TestPlanRecheckIsolation(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("glx").Isolation(domain.IsolationGPU).Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("glx", "w").Guaranteed(8).Obj()})
	h.must(CmdJobSubmit, MakeJob("research", 2).Obj())
	h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", GPUs: 2}})
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
	h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: srv, GPUs: []int{0, 1}}}}}})
	// acme is server-isolated: glx may not join its server even on free GPUs.
	res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 2, Placements: []domain.Placement{{Server: srv, GPUs: []int{2, 3}}}}}}).(*PlanResult)
	if res.Rejected[2] == "" {
		t.Fatalf("a GPU-isolated tenant joined a server-isolated tenant's server: %+v", res)
	}
}

func TestDeterministicReplayAndSnapshot(t *testing.T) {
	h := newHarness(t).cluster(2, 2, 16)
	for i := 0; i < 20; i++ {
		h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	}
	h.must(CmdJobCancel, JobCancel{ID: 3})
	h.apply(CmdJobCancel, JobCancel{ID: 999}) // refused; must not diverge replicas
	want := h.snapshot()

	// Replaying the same log on a fresh FSM gives the same bytes.
	replica := New()
	for i, b := range h.log {
		replica.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	s, _ := replica.Snapshot()
	if got := snapshotBytes(t, s); !bytes.Equal(got, want) {
		t.Fatal("replaying the log on another FSM produced a different state")
	}

	// Restoring a snapshot gives the same state and the same answers.
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
		t.Fatal(err)
	}
	s2, _ := restored.Snapshot()
	if !bytes.Equal(snapshotBytes(t, s2), want) {
		t.Fatal("snapshot does not round-trip")
	}
	if got := len(restored.Jobs(JobFilter{State: domain.JobPending})); got != 19 {
		t.Fatalf("restored pending jobs = %d, want 19", got)
	}
	if total, g := restored.Capacity(); total != 32 || g != 16 {
		t.Fatalf("restored capacity = %d/%d, want 32 GPUs, 16 guaranteed (derived index rebuilt)", total, g)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func TestEventsAndAuthentication(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("globex").Obj()})
	h.must(CmdTokenCreate, TokenCreate{Token: domain.Token{ID: "t1", Role: domain.RoleTenantAdmin, Tenant: "acme"}, Hash: HashSecret("jf_t1_secret")})
	if _, ok := h.f.Authenticate("t1", "jf_t1_secret"); !ok {
		t.Fatal("valid secret refused")
	}
	if _, ok := h.f.Authenticate("t1", "jf_t1_wrong"); ok {
		t.Fatal("wrong secret accepted")
	}
	raw, _ := json.Marshal(h.f.Tokens(nil))
	if bytes.Contains(raw, []byte(HashSecret("jf_t1_secret"))) {
		t.Fatal("token listing leaks the hash")
	}
	acme := h.f.Events(EventFilter{Tenant: "acme"})
	for _, e := range acme {
		if e.Tenant != "acme" {
			t.Fatalf("tenant filter leaked %+v", e)
		}
	}
	if len(acme) != 3 { // tenant, workspace, token
		t.Fatalf("acme events = %d, want 3: %+v", len(acme), acme)
	}
	if got := h.f.Events(EventFilter{Since: h.at}); len(got) != 1 || got[0].Action != "token.create" {
		t.Fatalf("since filter: %+v", got)
	}
	if got := h.f.Events(EventFilter{Limit: 2}); len(got) != 2 || got[1].Action != "token.create" {
		t.Fatalf("limit keeps the newest: %+v", got)
	}
}

func TestSubmitIdempotency(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 16)
	sub := func(key string) *domain.Job {
		t.Helper()
		return h.must(CmdJobSubmit, JobSubmit{Spec: MakeJob("research", 1).Obj().Spec, IdempotencyKey: key}).(*domain.Job)
	}
	a := sub("k1")
	if b := sub("k1"); b.ID != a.ID {
		t.Fatalf("retry with the same key made job %d, want %d", b.ID, a.ID)
	}
	if c := sub("k2"); c.ID == a.ID {
		t.Fatal("a new key returned an old job")
	}
	if d := sub(""); d.ID == a.ID {
		t.Fatal("no key deduplicated")
	}
	// Another caller's identical key finds nothing of ours.
	b, _ := Encode(CmdJobSubmit, h.at, "member:other", JobSubmit{Spec: MakeJob("research", 1).Obj().Spec, IdempotencyKey: "k1"})
	if r := h.f.ApplyCommand(b); r.Err != nil || r.Value.(*domain.Job).ID == a.ID {
		t.Fatalf("another actor's key k1 returned job %v (%v)", r.Value, r.Err)
	}
	if got := len(h.f.Jobs(JobFilter{})); got != 4 {
		t.Fatalf("%d jobs, want 4", got)
	}
}

func TestNodeConditions(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
	yes, no := true, false
	if r := h.apply(CmdNodeSet, NodeSet{Server: "ghost", Cordoned: &yes}); r.Err == nil || r.Err.Code != domain.CodeNotFound {
		t.Fatalf("cordon of an unknown server: %v", r.Err)
	}
	h.must(CmdNodeSet, NodeSet{Server: srv, Draining: &yes, Reason: "firmware update"})
	nodes := h.f.Nodes()
	if len(nodes) != 2 || !nodes[0].Condition.Draining || nodes[0].Condition.Reason != "firmware update" || nodes[0].Condition.Schedulable() {
		t.Fatalf("nodes after drain: %+v", nodes)
	}
	if snap := snapshotOf(h.f, t0); !snap.Nodes[srv].Draining {
		t.Fatal("the scheduler does not see the drain")
	}
	h.must(CmdNodeSet, NodeSet{Server: srv, Draining: &no})
	if got := h.f.Nodes()[0].Condition; !got.Schedulable() {
		t.Fatalf("after undrain: %+v", got)
	}
}

func TestTenantQuotaRules(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 8) // 32 GPUs; acme/research guarantees 8
	q := &domain.TenantQuota{Guaranteed: 16, BorrowLimit: 8, LendLimit: 8}
	h.must(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: q, Sites: []string{"dc1"}})
	if r := h.apply(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "big").Guaranteed(9).Obj()}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition {
		t.Fatalf("workspaces beyond the tenant's guarantee: %v", r.Err)
	}
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("acme", "big").Guaranteed(8).Obj()})
	if r := h.apply(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: &domain.TenantQuota{Guaranteed: 12}}); r.Err == nil || r.Err.Field != "quota.guaranteed" {
		t.Fatalf("tenant quota below its workspaces: %v", r.Err)
	}
	if r := h.apply(CmdTenantCreate, TenantCreate{Tenant: domain.Tenant{Name: "huge", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5, Quota: &domain.TenantQuota{Guaranteed: 17}}}); r.Err == nil || r.Err.Code != domain.CodeFailedPrecondition {
		t.Fatalf("tenant guarantee beyond the inventory (16 of 32 left): %v", r.Err)
	}
	if r := h.apply(CmdTenantUpdate, TenantUpdate{Name: "acme", Quota: &domain.TenantQuota{Guaranteed: 16, LendLimit: 20}}); r.Err == nil || r.Err.Field != "quota.lendLimit" {
		t.Fatalf("lend above guarantee: %v", r.Err)
	}
	if total, g := h.f.Capacity(); total != 32 || g != 16 {
		t.Fatalf("capacity %d, guaranteed %d; want 32, 16 (the tenant's reservation)", total, g)
	}
}

func TestFractionalSubmitAndRecheck(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8) // acme/research: 8 + 8, server-isolated
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("glx").Isolation(domain.IsolationGPU).Obj()})
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("ini").Isolation(domain.IsolationGPU).Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("glx", "w").Borrow(4).Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("ini", "w").Borrow(4).Obj()})
	cases := map[string]struct {
		spec      domain.JobSpec
		wantField string
	}{
		"mig ok":            {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "3g.40gb", MIGCount: 2}},
		"share ok":          {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", Share: 0.25}},
		"unknown profile":   {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "9g.90gb", MIGCount: 1}, wantField: "migProfile"},
		"too many slices":   {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "7g.80gb", MIGCount: 9}, wantField: "migProfile"},
		"beyond workspace":  {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "7g.80gb", MIGCount: 5}, wantField: "migCount"},
		"share and gpus":    {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", GPUs: 1, Share: 0.5}, wantField: "gpus"},
		"share of 1":        {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", Share: 1}, wantField: "share"},
		"share too precise": {spec: domain.JobSpec{Tenant: "glx", Workspace: "w", Share: 0.0001}, wantField: "share"},
	}
	ids := map[string]uint64{}
	for name, tc := range cases {
		r := h.apply(CmdJobSubmit, JobSubmit{Spec: tc.spec})
		if r.Err == nil {
			ids[name] = r.Value.(*domain.Job).ID
		}
		switch {
		case tc.wantField == "" && r.Err != nil:
			t.Errorf("%s: %v", name, r.Err)
		case tc.wantField != "" && (r.Err == nil || r.Err.Field != tc.wantField):
			t.Errorf("%s: got %v, want an error on %s", name, r.Err, tc.wantField)
		}
	}
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[1].Name
	mig := func(start int) []domain.Placement {
		return []domain.Placement{{Server: srv, GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "3g.40gb", Start: 0}, {GPU: 0, Profile: "3g.40gb", Start: start}}}}
	}
	// 2 x 3g.40gb: a start the geometry forbids is refused, a real one committed.
	m := ids["mig ok"]
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: m, Placements: mig(2)}}}).(*PlanResult); res.Rejected[m] == "" {
		t.Fatal("3g.40gb at slot 2 accepted")
	}
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: m, Placements: mig(4)}}}).(*PlanResult); len(res.Placed) != 1 {
		t.Fatalf("2 x 3g.40gb at 0 and 4 refused: %+v", res)
	}
	// glx's 0.25 share on GPU 1; a share of another tenant may not join it.
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: ids["share ok"], Placements: []domain.Placement{{Server: srv, GPUs: []int{1}, Share: 0.25}}}}}).(*PlanResult); len(res.Placed) != 1 {
		t.Fatalf("share refused: %+v", res)
	}
	other := h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "ini", Workspace: "w", Share: 0.5}}).(*domain.Job)
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: other.ID, Placements: []domain.Placement{{Server: srv, GPUs: []int{1}, Share: 0.5}}}}}).(*PlanResult); res.Rejected[other.ID] == "" {
		t.Fatal("two tenants time-slice one GPU")
	}
	// Whole GPUs may not take a GPU holding slices.
	whole := h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", GPUs: 1}}).(*domain.Job)
	if res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: whole.ID, Placements: []domain.Placement{{Server: srv, GPUs: []int{0}}}}}}).(*PlanResult); res.Rejected[whole.ID] == "" {
		t.Fatal("a whole-GPU job took a GPU running MIG instances")
	}
}

// The plan applier re-checks quotas and GPU models against the state it
// applies to: a plan computed before a quota change is refused, not
// committed over the new limit.
func TestPlanApplierRechecksQuotaAndModel(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 8) // research: guaranteed 8, borrow 8
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 8).Models("A100-80GB", "H100-80GB").Obj())
	srv := func(i int) string { return fmt.Sprintf("s1-gpu%03d", i) }
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	// The quota shrinks after the scheduler planned both jobs.
	h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(8).Borrow(0).Obj()})
	res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{
		{ID: 1, Placements: []domain.Placement{{Server: srv(1), GPUs: all}}},
		{ID: 2, Placements: []domain.Placement{{Server: srv(2), GPUs: all}}},
	}}).(*PlanResult)
	if len(res.Placed) != 1 || res.Placed[0] != 1 || !strings.Contains(res.Rejected[2], "would exceed its limit") {
		t.Fatalf("placed %v rejected %v: want job 1 placed and job 2 refused by the new limit", res.Placed, res.Rejected)
	}
	// A model quota on H100 with no room refuses job 3 on H100.
	h.must(CmdWorkspaceUpdate, WorkspaceUpdate{Workspace: MakeWorkspace("acme", "research").Guaranteed(8).Borrow(8).ModelQuota("H100-80GB", 8, 0, 0).Obj()})
	res = h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 3, Placements: []domain.Placement{{Server: srv(3), GPUs: all}}}}}).(*PlanResult)
	if len(res.Placed) != 0 || !strings.Contains(res.Rejected[3], "exceed its H100-80GB limit") {
		t.Fatalf("placed %v rejected %v: want job 3 refused by the H100 quota", res.Placed, res.Rejected)
	}
}
