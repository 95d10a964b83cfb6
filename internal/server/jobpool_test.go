package server_test

import (
	"errors"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestRuntimeMovesItsMirrorsPool: POST /v1/jobs/{id}/pool moves a job that
// has not started to another pool; a platform runtime may move a mirror a
// runtime submitted (the Slurm bridge, when a user moves a held job to
// another partition), a tenant's runtime its own tenant's, an admin any.
// From the attacker's side: another tenant's runtime or member gets 404
// for acme's mirror, acme's own member and a node agent cannot move it,
// a runtime cannot move a user's job, and a pool that does not exist or
// cannot be one is refused naming pool; none of it changes the job.
func TestRuntimeMovesItsMirrorsPool(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	ctx := ctxT(t)
	servers := nodeNames(t, admin)
	for name, ss := range map[string][]string{"slurm:c1:a": servers, "slurm:c1:b": servers} {
		if _, err := admin.SetPool(ctx, name, ss); err != nil {
			t.Fatal(err)
		}
	}
	platform := as(t, url, mustToken(t, admin, domain.RoleRuntime, "", ""))
	acmeRT := as(t, url, mustToken(t, admin, domain.RoleRuntime, "acme", ""))
	globexRT := as(t, url, mustToken(t, admin, domain.RoleRuntime, "globex", ""))
	globexMember := as(t, url, mustToken(t, admin, domain.RoleMember, "globex", "infer"))
	acmeMember := as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))
	agent := as(t, url, nodeToken(t, admin, servers[0]))

	mirror, err := platform.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1, ExternalID: "slurm:c1:1", Pool: "slurm:c1:a"})
	if err != nil {
		t.Fatal(err)
	}
	userJob, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1, Pool: "slurm:c1:a"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		err   error
		want  domain.Code
		field string
	}{
		"globex runtime moves acme's mirror": {err: second(globexRT.SetJobPool(ctx, mirror.ID, "slurm:c1:b")), want: domain.CodeNotFound},
		"globex member moves acme's mirror":  {err: second(globexMember.SetJobPool(ctx, mirror.ID, "slurm:c1:b")), want: domain.CodeNotFound},
		"node agent moves a mirror":          {err: second(agent.SetJobPool(ctx, mirror.ID, "slurm:c1:b")), want: domain.CodeNotFound},
		"acme member moves acme's mirror":    {err: second(acmeMember.SetJobPool(ctx, mirror.ID, "slurm:c1:b")), want: domain.CodePermissionDenied},
		"runtime moves a user's job":         {err: second(platform.SetJobPool(ctx, userJob.ID, "slurm:c1:b")), want: domain.CodePermissionDenied},
		"a pool that does not exist":         {err: second(platform.SetJobPool(ctx, mirror.ID, "slurm:c1:nope")), want: domain.CodeInvalidArgument, field: "pool"},
		"a name that is no pool's":           {err: second(platform.SetJobPool(ctx, mirror.ID, "a b")), want: domain.CodeInvalidArgument, field: "pool"},
	} {
		var de *domain.Error
		if got := domain.CodeOf(tc.err); got != tc.want {
			t.Errorf("%s: %v (%s), want %s", name, tc.err, got, tc.want)
		} else if tc.field != "" && (!errors.As(tc.err, &de) || de.Field != tc.field) {
			t.Errorf("%s: %v, want the field %s named", name, tc.err, tc.field)
		}
	}
	for _, id := range []uint64{mirror.ID, userJob.ID} {
		if j, err := admin.Job(ctx, id); err != nil || j.Pool != "slurm:c1:a" {
			t.Fatalf("job %d after the refused moves: %+v, %v; want pool slurm:c1:a", id, j, err)
		}
	}
	j, err := platform.SetJobPool(ctx, mirror.ID, "slurm:c1:b")
	if err != nil || j.Pool != "slurm:c1:b" {
		t.Fatalf("the platform runtime moving its mirror: %+v, %v", j, err)
	}
	if j, err = acmeRT.SetJobPool(ctx, mirror.ID, ""); err != nil || j.Pool != "" {
		t.Fatalf("acme's runtime moving acme's mirror to any server: %+v, %v", j, err)
	}
	if j, err = admin.SetJobPool(ctx, userJob.ID, "slurm:c1:b"); err != nil || j.Pool != "slurm:c1:b" {
		t.Fatalf("an admin moving a user's job: %+v, %v", j, err)
	}
}
