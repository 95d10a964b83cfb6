package server_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// recorded is the h100-roce recording, which matches a generated server.
func recorded(t *testing.T) domain.HostFacts {
	t.Helper()
	dir := os.DirFS("../hostfacts/testdata/hosts/h100-roce")
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir}
	f, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return *f
}

func nodeToken(t *testing.T, admin *client.Client, node string) string {
	t.Helper()
	tok, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime, Node: node, Description: "agent of " + node})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token.Node != node {
		t.Fatalf("token %+v is not scoped to %s", tok.Token, node)
	}
	return tok.Secret
}

func nodeNames(t *testing.T, admin *client.Client) []string {
	t.Helper()
	var ns []domain.NodeView
	if err := admin.Do(ctxT(t), "GET", "/v1/nodes", nil, &ns); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

func nodeView(t *testing.T, admin *client.Client, name string) domain.NodeView {
	t.Helper()
	var ns []domain.NodeView
	if err := admin.Do(ctxT(t), "GET", "/v1/nodes", nil, &ns); err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return domain.NodeView{}
}

func wantCode(t *testing.T, what string, err error, code domain.Code) {
	t.Helper()
	if domain.CodeOf(err) != code {
		t.Fatalf("%s: error %v, want %s", what, err, code)
	}
}

// TestNodeAgentScope: a node agent's token reports for its node only, sees
// no tenant's data, and reads the binding of (and reports on) exactly the
// jobs placed on its node.
func TestNodeAgentScope(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	nodes := nodeNames(t, admin)
	ctx := ctxT(t)

	_, err := admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleRuntime, Tenant: "acme", Node: nodes[0]})
	wantCode(t, "a tenant runtime scoped to a node", err, domain.CodeInvalidArgument)
	_, err = admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleMember, Tenant: "acme", Workspace: "research", Node: nodes[0]})
	wantCode(t, "a member scoped to a node", err, domain.CodeInvalidArgument)

	j, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, ExternalID: "slurm:77"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, ExternalID: "slurm:77"})
	wantCode(t, "a second live job with the same external id", err, domain.CodeAlreadyExists)
	j = waitJob(t, admin, j.ID, "Ready", isReady)
	mine := j.Placement[0].Server
	var other string
	for _, n := range nodes {
		if n != mine {
			other = n
		}
	}
	agent := as(t, url, nodeToken(t, admin, mine))
	stranger := as(t, url, nodeToken(t, admin, other))

	facts := recorded(t)
	rec, err := agent.ReportFacts(ctx, mine, api.HostReportRequest{Agent: "test-agent", Facts: facts})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Conditions) != 0 || len(rec.Baseline) != 8 || rec.LastHeartbeat == nil {
		t.Fatalf("record %+v", rec)
	}
	_, err = agent.ReportFacts(ctx, other, api.HostReportRequest{Facts: facts})
	wantCode(t, "facts for another node", err, domain.CodePermissionDenied)
	hb, err := agent.Heartbeat(ctx, mine, api.HeartbeatRequest{Agent: "test-agent", FactsHash: hostfacts.Fingerprint(&facts)})
	if err != nil || hb.NeedFacts || hb.TimeoutSeconds != 60 || hb.HeartbeatSeconds != 20 {
		t.Fatalf("heartbeat %+v %v", hb, err)
	}
	if hb, _ := stranger.Heartbeat(ctx, other, api.HeartbeatRequest{FactsHash: "x"}); !hb.NeedFacts {
		t.Fatal("a node without a report was not asked for facts")
	}

	// The agent sees no tenant's data through the tenant routes.
	_, err = agent.Jobs(ctx, client.JobQuery{})
	wantCode(t, "agent lists jobs", err, domain.CodePermissionDenied)
	_, err = agent.Events(ctx, client.EventQuery{})
	wantCode(t, "agent reads events", err, domain.CodePermissionDenied)
	_, err = agent.Job(ctx, j.ID)
	wantCode(t, "agent reads a job by id", err, domain.CodeNotFound)
	_, err = agent.Hosts(ctx)
	wantCode(t, "agent lists every host", err, domain.CodePermissionDenied)

	// ... but finds and binds the job placed on its node.
	found, err := agent.JobByExternalID(ctx, "slurm:77", "")
	if err != nil || found.ID != j.ID {
		t.Fatalf("by external id: %+v %v", found, err)
	}
	b, err := agent.Binding(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	env := b.Shell()
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=GPU-566e6f65", "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1", "NCCL_CROSS_NIC=0", "JOBFABRIC_TENANT=acme", "JOBFABRIC_VRF=acme", "JOBFABRIC_GROUP_ID="} {
		if !strings.Contains(env, want) {
			t.Errorf("binding lacks %s:\n%s", want, env)
		}
	}
	_, err = stranger.JobByExternalID(ctx, "slurm:77", "")
	wantCode(t, "another node's agent looks the job up", err, domain.CodeNotFound)
	_, err = stranger.Binding(ctx, j.ID, mine)
	wantCode(t, "another node's agent reads the binding", err, domain.CodeNotFound)

	// Users see their own job's binding, other tenants do not.
	member := as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))
	if _, err := member.Binding(ctx, j.ID, ""); err != nil {
		t.Fatal(err)
	}
	_, err = as(t, url, mustToken(t, admin, domain.RoleTenantAdmin, "globex", "")).Binding(ctx, j.ID, "")
	wantCode(t, "another tenant reads the binding", err, domain.CodeNotFound)

	// The agent reports the job running; a stranger cannot.
	_, err = stranger.ReportNodeJob(ctx, mine, j.ID, "running", "")
	wantCode(t, "a stranger reports", err, domain.CodePermissionDenied)
	_, err = stranger.ReportNodeJob(ctx, other, j.ID, "running", "")
	wantCode(t, "a report through a node the job is not on", err, domain.CodeNotFound)
	if got, err := agent.ReportNodeJob(ctx, mine, j.ID, "running", "slurm prolog"); err != nil || got.State != domain.JobRunning {
		t.Fatalf("report: %+v %v", got, err)
	}
}

// TestHeartbeatTimeoutMarksNodeUnhealthy: with a 1s timeout, a silent
// agent's node turns unhealthy (the scheduler places nothing there) and
// healthy again when heard.
func TestHeartbeatTimeoutMarksNodeUnhealthy(t *testing.T) {
	c, clk := startClocked(t)
	admin := c.Client(0)
	seed(t, admin)
	ctx := ctxT(t)
	node := nodeNames(t, admin)[0]
	if _, err := admin.SetHostPolicy(ctx, domain.HostPolicy{HeartbeatTimeoutSeconds: 1, CordonOn: []string{domain.DriftDriver}}); err != nil {
		t.Fatal(err)
	}
	facts := recorded(t)
	if _, err := admin.ReportFacts(ctx, node, api.HostReportRequest{Facts: facts}); err != nil {
		t.Fatal(err)
	}
	// Step the heartbeat loop check by check: each step waits for it to
	// arm its timer again, which it does only after its check committed.
	// Its first check was armed under the default policy, 5s away, and
	// counts silence from then on; from there it checks every 250ms, and
	// the fifth finds the node silent for the 1s timeout.
	step := func(d time.Duration) {
		t.Helper()
		if err := clk.BlockUntil(ctx, clockedTimers); err != nil {
			t.Fatal(err)
		}
		clk.Advance(d)
	}
	step(5 * time.Second)
	for range 5 {
		step(250 * time.Millisecond)
	}
	if err := clk.BlockUntil(ctx, clockedTimers); err != nil {
		t.Fatal(err)
	}
	v := nodeView(t, admin, node)
	if !v.Condition.Unhealthy {
		t.Fatalf("node %s silent for 1.25s of a 1s timeout is not unhealthy: %+v", node, v)
	}
	if len(v.Conditions) != 1 || v.Conditions[0].Type != domain.CondHeartbeat || !strings.HasPrefix(v.Condition.Reason, "heartbeat: no heartbeat since") {
		t.Fatalf("view %+v", v)
	}
	hb, err := admin.Heartbeat(ctx, node, api.HeartbeatRequest{FactsHash: hostfacts.Fingerprint(&facts)})
	if err != nil || hb.NeedFacts || hb.Condition.Unhealthy || len(hb.Conditions) != 0 {
		t.Fatalf("heartbeat after silence: %+v %v", hb, err)
	}
	events, _ := admin.Events(ctx, client.EventQuery{})
	var lost, back bool
	for _, e := range events {
		lost = lost || e.Action == "host.heartbeat-lost"
		back = back || e.Action == "host.heartbeat-restored"
	}
	if !lost || !back {
		t.Fatal("heartbeat loss and return are not in the audit trail")
	}
}

// TestDriftCordonsAndDrainGrace: a driver the inventory does not declare
// cordons the node (default policy); drain --grace stops its job by then.
func TestDriftCordonsAndDrainGrace(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	ctx := ctxT(t)
	j := waitJob(t, admin, submit(t, admin, "acme", "research", 8).ID, "Ready", isReady)
	node := j.Placement[0].Server
	facts := recorded(t)
	facts.Driver = "550.54.15"
	rec, err := admin.ReportFacts(ctx, node, api.HostReportRequest{Facts: facts})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Conditions) != 1 || rec.Conditions[0].Type != domain.DriftDriver || !rec.Conditions[0].Cordons {
		t.Fatalf("conditions %+v", rec.Conditions)
	}
	v := nodeView(t, admin, node)
	if !v.Condition.Cordoned || v.ReportedDriver != "550.54.15" || v.Driver != "535.183.01" {
		t.Fatalf("view %+v", v)
	}
	grace := int64(3600)
	yes := true
	if err := admin.Do(ctx, "PATCH", "/v1/nodes/"+node, api.NodeUpdateRequest{Draining: &yes, GraceSeconds: grace, Reason: "driver rollout"}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := admin.Job(ctx, j.ID)
	if got.State != domain.JobPreempting || got.StopDeadline == nil || time.Until(*got.StopDeadline) < 50*time.Minute {
		t.Fatalf("drained job %+v", got)
	}
}

// TestExternalIDsAreEachTenantsOwn, from a tenant that guesses: a runtime
// gives its jobs sequential ids (slurm:CLUSTER:N), so another tenant can
// submit first with the id of someone else's next job. That must neither
// block the runtime's submit nor tell the guesser anything, and each
// look-up finds the caller's tenant's job, never the guesser's.
func TestExternalIDsAreEachTenantsOwn(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	ctx := ctxT(t)
	const ext = "slurm:hpc:1001"

	guesser := as(t, url, mustToken(t, admin, domain.RoleMember, "globex", "infer"))
	squat, err := guesser.SubmitJob(ctx, domain.JobSpec{GPUs: 1, ExternalID: ext})
	if err != nil {
		t.Fatal(err)
	}
	// acme's bridge (a runtime token of acme) mirrors acme's Slurm job.
	bridge := as(t, url, mustToken(t, admin, domain.RoleRuntime, "acme", ""))
	mirror, err := bridge.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, ExternalID: ext})
	if err != nil {
		t.Fatalf("acme's runtime submit refused because globex took the id: %v", err)
	}
	// A second live job of acme with the id is refused, naming acme's own
	// job only; globex's second is refused naming globex's.
	_, err = bridge.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, ExternalID: ext})
	if domain.CodeOf(err) != domain.CodeAlreadyExists || !strings.Contains(err.Error(), fmt.Sprintf("job %d ", mirror.ID)) || strings.Contains(err.Error(), fmt.Sprintf("job %d ", squat.ID)) {
		t.Fatalf("acme's duplicate: %v", err)
	}
	_, err = guesser.SubmitJob(ctx, domain.JobSpec{GPUs: 1, ExternalID: ext})
	if domain.CodeOf(err) != domain.CodeAlreadyExists || strings.Contains(err.Error(), fmt.Sprintf("job %d ", mirror.ID)) {
		t.Fatalf("globex's duplicate: %v", err)
	}

	for name, tc := range map[string]struct {
		c      *client.Client
		tenant string
		want   uint64
		code   domain.Code
	}{
		"acme's runtime":                {c: bridge, want: mirror.ID},
		"acme's runtime names globex":   {c: bridge, tenant: "globex", code: domain.CodeNotFound},
		"the guesser":                   {c: guesser, want: squat.ID},
		"the guesser names acme":        {c: guesser, tenant: "acme", code: domain.CodeNotFound},
		"a platform runtime, no tenant": {c: as(t, url, mustToken(t, admin, domain.RoleRuntime, "", "")), code: domain.CodeFailedPrecondition},
		"a platform runtime names acme": {c: as(t, url, mustToken(t, admin, domain.RoleRuntime, "", "")), tenant: "acme", want: mirror.ID},
		"the admin names globex":        {c: admin, tenant: "globex", want: squat.ID},
		"acme's member":                 {c: as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research")), want: mirror.ID},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := tc.c.JobByExternalID(ctx, ext, tc.tenant)
			if tc.code != "" {
				wantCode(t, name, err, tc.code)
				if msg := err.Error(); tc.code == domain.CodeNotFound && (strings.Contains(msg, "globex") || strings.Contains(msg, "acme") || strings.Contains(msg, fmt.Sprintf("job %d", squat.ID)) || strings.Contains(msg, fmt.Sprintf("job %d", mirror.ID))) {
					t.Fatalf("the answer names a tenant or a job: %v", err)
				}
				return
			}
			if err != nil || j.ID != tc.want {
				t.Fatalf("found %+v (%v), want job %d", j, err, tc.want)
			}
		})
	}
}
