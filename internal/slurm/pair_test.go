package slurm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// pair is a real slurmctld and an in-process jobfabric server whose
// servers are the Slurm nodes (stripes x perStripe, 8 GPUs each), with
// tenant acme and its workspace ws guaranteed guaranteed GPUs. The server
// deploys no fabric, so placed jobs are Ready at once.
type pair struct {
	sc    *slurmtest.Cluster
	admin *client.Client
	// runtime holds a platform runtime token: what a site gives the
	// bridge.
	runtime *client.Client
	url     string // the server's API
}

func startPair(tb testing.TB, ctx context.Context, stripes, perStripe int, ws string, guaranteed int, slurmExtra string) pair {
	tb.Helper()
	return startPairTuned(tb, ctx, stripes, perStripe, ws, guaranteed, slurmExtra, nil)
}

// startPairTuned is startPair with the server's configuration changed by
// tune (a short preemption grace, for instance).
func startPairTuned(tb testing.TB, ctx context.Context, stripes, perStripe int, ws string, guaranteed int, slurmExtra string, tune func(*server.Config)) pair {
	tb.Helper()
	return startPairWith(tb, ctx, stripes, perStripe, ws, guaranteed, slurmtest.Options{Extra: slurmExtra}, tune)
}

// startPairWith is startPair with the Slurm options given (Nodes and
// GPUsPerNode are set from the topology).
func startPairWith(tb testing.TB, ctx context.Context, stripes, perStripe int, ws string, guaranteed int, so slurmtest.Options, tune func(*server.Config)) pair {
	tb.Helper()
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: stripes, ServersPerStripe: perStripe, GPUsPerServer: 8})
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, s := range topo.Servers() {
		names = append(names, s.Name)
	}
	so.Nodes, so.GPUsPerNode = export.Hostlist(names), 8
	if so.Slurmd {
		so.Nodes = strings.Join(names, ",") // a slurmd per name
	}
	sc := slurmtest.Start(tb, so)
	jf, err := devcluster.Start(ctx, tb.TempDir(), 1, devcluster.Options{Tune: func(c *server.Config) {
		c.FabricDriver = "none"
		if tune != nil {
			tune(c)
		}
	}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { jf.Close() })
	admin := jf.Client(0)
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: ws, Guaranteed: guaranteed}); err != nil {
		tb.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleRuntime, Description: "slurm bridge"})
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := client.New(jf.Servers[0].URL(), tok.Secret, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return pair{sc: sc, admin: admin, runtime: rt, url: jf.Servers[0].URL()}
}

// sbatchHeld submits jobs held jobs of account acme, job i shaped by
// shape(i), in 4 parallel loops (munge and process start dominate).
func (p pair) sbatchHeld(ctx context.Context, jobs int, shape func(i int) []string) error {
	return sbatchMany(ctx, p.sc, jobs, []string{"--hold"}, shape)
}

// sbatchMany submits jobs jobs of account acme with the flags given, job
// i shaped by shape(i), in 4 parallel loops.
func sbatchMany(ctx context.Context, sc *slurmtest.Cluster, jobs int, flags []string, shape func(i int) []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += 4 {
				args := append(append([]string{"--parsable", "-o", "/dev/null", "-A", "acme", "--wrap", "true"}, flags...), shape(i)...)
				if _, err := sc.Command(ctx, "sbatch", args...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
