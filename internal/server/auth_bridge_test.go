package server_test

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestRuntimeMirrorsJobs: a runtime token that is not a node agent's may
// submit a job carrying its runtime's id for it (externalId) and cancel
// such a job a runtime submitted: what jobfabric slurm bridge needs. From
// the attacker's side: a runtime still cannot add a job without an
// externalId nor cancel a user's job; a tenant's runtime token cannot
// mirror into, see or cancel another tenant's jobs; a node agent's token
// and a member of another tenant cannot use the mechanism at all.
func TestRuntimeMirrorsJobs(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	ctx := ctxT(t)
	platform := as(t, url, mustToken(t, admin, domain.RoleRuntime, "", ""))
	acmeRT := as(t, url, mustToken(t, admin, domain.RoleRuntime, "acme", ""))
	globexRT := as(t, url, mustToken(t, admin, domain.RoleRuntime, "globex", ""))
	globexMember := as(t, url, mustToken(t, admin, domain.RoleMember, "globex", "infer"))
	agent := as(t, url, nodeToken(t, admin, nodeNames(t, admin)[0]))

	mirror := func(ext string) domain.JobSpec {
		return domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1, ExternalID: ext}
	}
	code := func(err error) domain.Code { return domain.CodeOf(err) }

	// The bridge's two calls.
	j, err := platform.SubmitJob(ctx, mirror("slurm:c1:1"))
	if err != nil {
		t.Fatalf("platform runtime mirroring a job: %v", err)
	}
	if j.SubmittedBy == "" || j.Tenant != "acme" {
		t.Fatalf("mirror %+v", j)
	}
	if _, err := platform.CancelJob(ctx, j.ID); err != nil {
		t.Fatalf("platform runtime cancelling its mirror: %v", err)
	}
	own, err := acmeRT.SubmitJob(ctx, mirror("slurm:c1:2"))
	if err != nil {
		t.Fatalf("acme's runtime mirroring an acme job: %v", err)
	}

	// What stays refused.
	userJob := submit(t, admin, "acme", "research", 1)
	userExt, err := admin.SubmitJob(ctx, mirror("slurm:c1:3")) // a user's job with an external id
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		err  error
		want domain.Code
	}{
		"runtime adds work without an externalId":         {err: second(platform.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1})), want: domain.CodePermissionDenied},
		"runtime cancels a user's job":                    {err: second(platform.CancelJob(ctx, userJob.ID)), want: domain.CodePermissionDenied},
		"runtime cancels a user's job with an externalId": {err: second(platform.CancelJob(ctx, userExt.ID)), want: domain.CodePermissionDenied},
		"globex runtime mirrors into acme":                {err: second(globexRT.SubmitJob(ctx, mirror("slurm:c1:4"))), want: domain.CodeNotFound},
		"globex runtime cancels acme's mirror":            {err: second(globexRT.CancelJob(ctx, own.ID)), want: domain.CodeNotFound},
		"globex runtime reads acme's mirror":              {err: second(globexRT.Job(ctx, own.ID)), want: domain.CodeNotFound},
		"globex member mirrors into acme":                 {err: second(globexMember.SubmitJob(ctx, mirror("slurm:c1:5"))), want: domain.CodeNotFound},
		"globex member cancels acme's mirror":             {err: second(globexMember.CancelJob(ctx, own.ID)), want: domain.CodeNotFound},
		"node agent mirrors a job":                        {err: second(agent.SubmitJob(ctx, mirror("slurm:c1:6"))), want: domain.CodeNotFound},
		"node agent cancels a mirror":                     {err: second(agent.CancelJob(ctx, own.ID)), want: domain.CodeNotFound},
	} {
		if got := code(tc.err); got != tc.want {
			t.Errorf("%s: %v (%s), want %s", name, tc.err, got, tc.want)
		}
	}
	// The refused calls changed nothing: acme has the three jobs above
	// and the cancelled mirror, globex none.
	all, err := admin.Jobs(ctx, client.JobQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Errorf("%d jobs after the refused calls, want 4", len(all))
	}
	for _, x := range all {
		if x.Tenant != "acme" {
			t.Errorf("job %d of %s", x.ID, x.Tenant)
		}
		if x.ID == userJob.ID || x.ID == userExt.ID {
			if x.State == domain.JobCancelled {
				t.Errorf("user job %d was cancelled by a runtime", x.ID)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }
