package slurm_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// interrupting is the jobfabric API with the bridge's context cancelled
// after a number of submits: a bridge killed in the middle of a pass.
type interrupting struct {
	*client.Client
	after  int
	cancel context.CancelFunc
	n      int
}

func (a *interrupting) SubmitJob(ctx context.Context, s domain.JobSpec) (*domain.Job, error) {
	j, err := a.Client.SubmitJob(ctx, s)
	if a.n++; a.n == a.after {
		a.cancel()
	}
	return j, err
}

// TestBridge1000JobsInOrder queues 1,000 held jobs in slurmctld on 16
// servers: a bridge killed after 300 submits and a new one submit each
// exactly once, in Slurm's order, and the 16 that fit are released.
func TestBridge1000JobsInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 sbatch runs: not in -short")
	}
	const jobs, servers = 1000, 16
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: servers, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range topo.Servers() {
		names = append(names, s.Name)
	}
	sc := slurmtest.Start(t, slurmtest.Options{Nodes: export.Hostlist(names), GPUsPerNode: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jf, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Tune: func(c *server.Config) { c.FabricDriver = "none" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jf.Close() })
	admin := jf.Client(0)
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "gpu", Guaranteed: 8 * servers}); err != nil {
		t.Fatal(err)
	}

	// sbatch in 4 parallel loops (munge and process start dominate).
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < jobs; i += 4 {
				if _, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "-A", "acme", "-N", "1", "--gres=gpu:8", "--wrap", "true"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bctx, kill := context.WithCancel(ctx)
	first, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: &interrupting{Client: admin, after: 300, cancel: kill}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Sync(bctx); err == nil {
		t.Fatal("the interrupted pass reported no error")
	}
	second, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: admin, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var total slurm.Stats
	sc.Poll(t, "the restarted bridge did not release the jobs that fit", func() (bool, string) {
		st, err := second.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		return total.Released == servers, strconv.Itoa(total.Released)
	})
	if total.Submitted != jobs-300 {
		t.Errorf("the restarted bridge submitted %d jobs, want %d", total.Submitted, jobs-300)
	}
	all, err := admin.Jobs(ctx, client.JobQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != jobs {
		t.Fatalf("jobfabric has %d jobs, want %d", len(all), jobs)
	}
	// jobfabric ids follow Slurm's: the jobs were bridged in order.
	seen := map[string]bool{}
	last := -1
	for _, j := range all {
		if seen[j.ExternalID] {
			t.Fatalf("external id %s twice", j.ExternalID)
		}
		seen[j.ExternalID] = true
		n, err := strconv.Atoi(strings.TrimPrefix(j.ExternalID, "slurm:"+sc.Name+":"))
		if err != nil {
			t.Fatalf("job %d external id %q", j.ID, j.ExternalID)
		}
		if n <= last {
			t.Fatalf("job %d is slurm job %d, after slurm job %d: out of order", j.ID, n, last)
		}
		last = n
	}
}
