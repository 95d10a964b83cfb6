package server_test

import (
	"errors"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestRuntimeNodesCordonForTheRuntime: a platform runtime (the Slurm
// bridge) cordons the servers Slurm cannot use, with Slurm's reason; the
// scheduler places the next job elsewhere; usable again, they are
// uncordoned. Tenants' tokens and node agents cannot (403), and the
// conditions stay as they were; bad bodies are refused naming the field.
func TestRuntimeNodesCordonForTheRuntime(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	nodes, err := admin.Nodes(ctxT(t))
	if err != nil || len(nodes) != 4 {
		t.Fatalf("nodes %v %v", nodes, err)
	}
	bridge := as(t, url, mustToken(t, admin, domain.RoleRuntime, "", ""))
	const rt = "slurm:jftest"
	down := []api.RuntimeNode{}
	for _, n := range nodes[:3] {
		down = append(down, api.RuntimeNode{Server: n.Name, Reason: "slurm jftest: node " + n.Name + " is DOWN: maint"})
	}

	// The attackers first: nothing changes.
	agent, err := admin.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime, Node: nodes[3].Name})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"acme's tenant admin": mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""),
		"acme's runtime":      mustToken(t, admin, domain.RoleRuntime, "acme", ""),
		"globex's member":     mustToken(t, admin, domain.RoleMember, "globex", "infer"),
		"a node agent":        agent.Secret,
	} {
		_, err := as(t, url, tok).ReportRuntimeNodes(ctxT(t), api.RuntimeNodesRequest{Runtime: rt, Unusable: down})
		if domain.CodeOf(err) != domain.CodePermissionDenied {
			t.Errorf("%s reported nodes unusable: %v, want permission denied", name, err)
		}
	}
	if after, _ := admin.Nodes(ctxT(t)); !after[0].Condition.Schedulable() || !after[1].Condition.Schedulable() {
		t.Fatalf("a refused report changed conditions: %+v", after[0].Condition)
	}

	for name, req := range map[string]struct {
		body  api.RuntimeNodesRequest
		field string
	}{
		"no runtime":   {api.RuntimeNodesRequest{Unusable: down}, "runtime"},
		"no reason":    {api.RuntimeNodesRequest{Runtime: rt, Unusable: []api.RuntimeNode{{Server: nodes[0].Name}}}, "unusable[0].reason"},
		"no server":    {api.RuntimeNodesRequest{Runtime: rt, Unusable: []api.RuntimeNode{{Reason: "x"}}}, "unusable[0].server"},
		"listed twice": {api.RuntimeNodesRequest{Runtime: rt, Unusable: []api.RuntimeNode{down[0], down[0]}}, "unusable[1].server"},
		"both at once": {api.RuntimeNodesRequest{Runtime: rt, Unusable: down[:1], Usable: []string{nodes[0].Name}}, "usable[0]"},
	} {
		_, err := bridge.ReportRuntimeNodes(ctxT(t), req.body)
		var de *domain.Error
		if domain.CodeOf(err) != domain.CodeInvalidArgument || !errors.As(err, &de) || de.Field != req.field {
			t.Errorf("%s: %v, want invalid %s", name, err, req.field)
		}
	}

	changed, err := bridge.ReportRuntimeNodes(ctxT(t), api.RuntimeNodesRequest{Runtime: rt, Unusable: down, Usable: []string{nodes[3].Name}})
	if err != nil || len(changed) != 3 {
		t.Fatalf("report: %v, changed %+v", err, changed)
	}
	after, _ := admin.Nodes(ctxT(t))
	if c := after[0].Condition; c.Schedulable() || c.Runtime != rt || c.Reason != down[0].Reason {
		t.Fatalf("unusable server's condition %+v", c)
	}
	// The same report again writes nothing.
	if again, err := bridge.ReportRuntimeNodes(ctxT(t), api.RuntimeNodesRequest{Runtime: rt, Unusable: down}); err != nil || len(again) != 0 {
		t.Fatalf("repeated report: %v, changed %+v", err, again)
	}
	// Two usable again: uncordoned. (Three servers down leave the
	// research job no GPUs beside the other workspaces' guarantees.)
	usable := []string{nodes[1].Name, nodes[2].Name}
	if changed, err := bridge.ReportRuntimeNodes(ctxT(t), api.RuntimeNodesRequest{Runtime: rt, Usable: usable, Unusable: down[:1]}); err != nil || len(changed) != 2 {
		t.Fatalf("usable again: %v, changed %+v", err, changed)
	}
	after, _ = admin.Nodes(ctxT(t))
	for i, n := range after {
		if n.Condition.Schedulable() != (i != 0) {
			t.Errorf("%s: %+v", n.Name, n.Condition)
		}
	}
	// The scheduler packs a job on the first server it can: not the
	// runtime's unusable one.
	j := submit(t, admin, "acme", "research", 8)
	j = waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	if j.Placement[0].Server == nodes[0].Name {
		t.Fatalf("placed on %s, which the runtime cannot use", j.Placement[0].Server)
	}
}

// TestRejectedReportRequeues: a runtime that cannot start a Ready job on
// its placement reports it rejected: Pending again with the runtime's
// reason, one requeue, not failed; placed again. Another tenant's runtime
// gets 404; a rejected report without a message is refused naming it.
func TestRejectedReportRequeues(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	j := submit(t, admin, "acme", "research", 8)
	j = waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })

	globex := as(t, url, mustToken(t, admin, domain.RoleRuntime, "globex", ""))
	if _, err := globex.Report(ctxT(t), j.ID, "rejected", "slurm job 1 stayed pending"); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("another tenant's runtime rejected acme's job: %v, want not found", err)
	}
	rt := as(t, url, mustToken(t, admin, domain.RoleRuntime, "", ""))
	var de *domain.Error
	if _, err := rt.Report(ctxT(t), j.ID, "rejected", ""); !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field != "message" {
		t.Fatalf("rejected without a message: %v, want invalid message", err)
	}
	why := "slurm job 1 stayed pending 1m0s on " + j.Placement[0].Server + ": ReqNodeNotAvail"
	got, err := rt.Report(ctxT(t), j.ID, "rejected", why)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != domain.JobPending || got.Requeues != 1 || got.Reason == nil || got.Reason.Code != "requeued" {
		t.Fatalf("rejected job %+v (reason %+v), want Pending, requeued once", got, got.Reason)
	}
	waitJob(t, admin, j.ID, "placed again", func(j *domain.Job) bool { return j.State == domain.JobReady && j.Requeues == 1 })
}
