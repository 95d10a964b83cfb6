package slurm_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := startPair(t, ctx, 1, servers, "gpu", 8*servers, "")
	sc, admin := p.sc, p.admin
	if err := p.sbatchHeld(ctx, jobs, func(int) []string { return []string{"-N", "1", "--gres=gpu:8"} }); err != nil {
		t.Fatal(err)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bctx, kill := context.WithCancel(ctx)
	first, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: &interrupting{Client: p.runtime, after: 300, cancel: kill}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Sync(bctx); err == nil {
		t.Fatal("the interrupted pass reported no error")
	}
	second, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, Logger: quiet})
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
