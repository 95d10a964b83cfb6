package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestPoolsPlaceAndScope: a platform runtime sets a pool; a job naming it
// is placed on its servers only, and follows the pool when it changes;
// tenants cannot write pools (403, the pool unchanged), and a tenant's
// list holds only the pools its own live jobs name, without who set them:
// globex never learns acme's pool through pools.
func TestPoolsPlaceAndScope(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	nodes, err := admin.Nodes(ctxT(t))
	if err != nil || len(nodes) != 4 {
		t.Fatalf("nodes %v %v", nodes, err)
	}
	bridge := as(t, url, mustToken(t, admin, domain.RoleRuntime, "", ""))
	const name = "slurm:jftest:b"
	p, err := bridge.SetPool(ctxT(t), name, []string{nodes[3].Name, "gpu-not-ours"})
	if err != nil || strings.Join(p.Servers, ",") != "gpu-not-ours,"+nodes[3].Name || strings.Join(p.Unknown, ",") != "gpu-not-ours" || p.UpdatedBy == "" {
		t.Fatalf("set: %+v %v", p, err)
	}

	acme := as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))
	globex := as(t, url, mustToken(t, admin, domain.RoleTenantAdmin, "globex", ""))
	// The attackers: no tenant token writes a pool, whether it exists or not.
	for who, cl := range map[string]*client.Client{"acme's member": acme, "globex's tenant admin": globex,
		"acme's runtime": as(t, url, mustToken(t, admin, domain.RoleRuntime, "acme", ""))} {
		if _, err := cl.SetPool(ctxT(t), name, []string{nodes[0].Name}); domain.CodeOf(err) != domain.CodePermissionDenied {
			t.Errorf("%s set a pool: %v, want permission denied", who, err)
		}
		for _, n := range []string{name, "slurm:jftest:nope"} {
			if _, err := cl.DeletePool(ctxT(t), n); domain.CodeOf(err) != domain.CodePermissionDenied {
				t.Errorf("%s deleted pool %s: %v, want permission denied (whether it exists or not)", who, n, err)
			}
		}
	}
	if ps, _ := admin.Pools(ctxT(t)); len(ps) != 1 || ps[0].Servers[1] != nodes[3].Name {
		t.Fatalf("a refused write changed the pools: %+v", ps)
	}

	// Bad input names the field and changes nothing.
	for what, tc := range map[string]struct {
		pool    string
		servers []string
		field   string
	}{
		"no servers":   {name, nil, "servers"},
		"server twice": {name, []string{"a", "a"}, "servers[1]"},
		"bad name":     {"slurm::b", []string{"a"}, "pool"},
	} {
		_, err := bridge.SetPool(ctxT(t), tc.pool, tc.servers)
		var de *domain.Error
		if domain.CodeOf(err) != domain.CodeInvalidArgument || !errors.As(err, &de) || de.Field != tc.field {
			t.Errorf("%s: %v, want invalid %s", what, err, tc.field)
		}
	}

	// Before acme has a job in the pool, its list is empty; so is globex's.
	for who, cl := range map[string]*client.Client{"acme": acme, "globex": globex} {
		if ps, err := cl.Pools(ctxT(t)); err != nil || len(ps) != 0 {
			t.Fatalf("%s's pools before any job of its names one: %+v %v", who, ps, err)
		}
	}
	if _, err := acme.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Pool: "slurm:jftest:nope"}); domain.CodeOf(err) != domain.CodeInvalidArgument {
		t.Fatalf("a job naming an unknown pool: %v, want invalid_argument", err)
	}
	j, err := acme.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Pool: name})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, acme, j.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	if j.Placement[0].Server != nodes[3].Name {
		t.Fatalf("placed on %s, want the pool's %s", j.Placement[0].Server, nodes[3].Name)
	}
	ps, err := acme.Pools(ctxT(t))
	if err != nil || len(ps) != 1 || ps[0].Name != name || ps[0].UpdatedBy != "" || len(ps[0].Unknown) != 0 {
		t.Fatalf("acme's pools with a job in one: %+v %v (want the pool, without who set it)", ps, err)
	}
	if ps, err := globex.Pools(ctxT(t)); err != nil || len(ps) != 0 {
		t.Fatalf("globex sees acme's pool: %+v %v", ps, err)
	}

	// The pool moves: a second job follows it; the first keeps its GPUs.
	if _, err := bridge.SetPool(ctxT(t), name, []string{nodes[1].Name}); err != nil {
		t.Fatal(err)
	}
	j2, err := acme.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Pool: name})
	if err != nil {
		t.Fatal(err)
	}
	j2 = waitJob(t, acme, j2.ID, "placed", func(j *domain.Job) bool { return len(j.Placement) > 0 })
	if j2.Placement[0].Server != nodes[1].Name {
		t.Fatalf("after the pool moved, placed on %s, want %s", j2.Placement[0].Server, nodes[1].Name)
	}
	// Deleted, a new job of it is refused, and the list is empty.
	if _, err := bridge.DeletePool(ctxT(t), name); err != nil {
		t.Fatal(err)
	}
	if _, err := bridge.DeletePool(ctxT(t), name); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("deleting it again: %v, want not found", err)
	}
	if ps, _ := admin.Pools(ctxT(t)); len(ps) != 0 {
		t.Fatalf("pools after delete: %+v", ps)
	}
	if _, err := acme.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Pool: name}); domain.CodeOf(err) != domain.CodeInvalidArgument {
		t.Fatalf("a job naming a deleted pool: %v, want invalid_argument", err)
	}
}
