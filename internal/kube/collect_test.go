package kube_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// TestPoolCollection: against a real jobfabric server (no Kubernetes
// needed), a bridge collects its own pools no live job names once a gang
// last asked for them PoolGrace ago, and never sooner (a gang may be
// between setting its pool and submitting); a pool a live job of any
// tenant names (on any page of the job list), an admin's, another
// cluster's and one of a cluster named like a hash are never collected.
func TestPoolCollection(t *testing.T) {
	ctx := ctxT(t)
	jf, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: logger(),
		Tune: func(c *server.Config) { c.FabricDriver = "none" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jf.Close() })
	admin := jf.Client(0)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "globex", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "globex", api.WorkspaceCreateRequest{Name: "infer", Guaranteed: 8}); err != nil {
		t.Fatal(err)
	}
	const (
		asked   = "k8s:sel-00000000000000a1" // a gang asked for it just now
		ended   = "k8s:sel-00000000000000e2" // its gang ended
		named   = "k8s:sel-00000000000000b3" // another bridge's live job names it
		cluster = "k8s:east:sel-0123456789abcdef"
		oddName = "k8s:sel-x:sel-0123456789abcdef" // cluster sel-x's
		admins  = "gpu-a"
		upper   = "k8s:sel-0123456789ABCDEF"
	)
	for _, p := range []string{asked, ended, named, cluster, oddName, admins, upper} {
		if _, err := admin.SetPool(ctx, p, []string{"s1-gpu003", "s1-gpu004"}); err != nil {
			t.Fatal(err)
		}
	}
	// Live jobs with lower IDs, so that in pages of one job (below) the
	// one naming a pool is on the third page the bridge reads.
	for _, ext := range []string{"k8s:first", "k8s:second"} {
		if _, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "globex", Workspace: "infer", ExternalID: ext, GPUs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Another tenant's live job, placed in the pool.
	if _, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "globex", Workspace: "infer", ExternalID: "k8s:other", Pool: named,
		GPUs: 8, GPUsPerNode: 8}); err != nil {
		t.Fatal(err)
	}
	clock := tstime.NewFake(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	// The bridge reads the jobs a page of one at a time: it must read
	// every page (GET /v1/jobs answers one page, issue 18), or it collects
	// a pool a job on a later page names.
	paged := jf.Client(0)
	paged.PageSize = 1
	b := kube.New(kube.Config{Pools: paged, Clock: clock, PoolGrace: time.Minute})
	pools := func() []string {
		t.Helper()
		ps, err := admin.Pools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	collect := func() {
		t.Helper()
		if err := kube.CollectPools(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	all := pools()
	collect() // first seen: the grace starts
	clock.Advance(59 * time.Second)
	kube.AskPool(b, asked)
	collect()
	if got := pools(); !slices.Equal(got, all) {
		t.Fatalf("within the grace: pools %v, want all of %v", got, all)
	}
	clock.Advance(time.Second)
	collect()
	if got, want := pools(), slices.DeleteFunc(slices.Clone(all), func(p string) bool { return p == ended }); !slices.Equal(got, want) {
		t.Fatalf("after the grace: pools %v, want %v (only %s collected)", got, want, ended)
	}
	clock.Advance(time.Minute)
	collect()
	for _, p := range []string{named, cluster, oddName, admins, upper} {
		if !slices.Contains(pools(), p) {
			t.Errorf("pool %s collected", p)
		}
	}
	if slices.Contains(pools(), asked) {
		t.Errorf("pool %s kept a grace after its gang last asked for it", asked)
	}
}
