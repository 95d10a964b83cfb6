package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
)

// TestBridgeNeverTakesAGuessedID, with a real slurmctld: Slurm numbers
// its jobs in sequence, so a tenant (globex) can submit jobfabric jobs
// carrying the external ids of acme's Slurm jobs, the one it has seen and
// the next one, before the bridge mirrors them. The bridge must still
// submit acme's own jobs, release each Slurm job exactly onto acme's job's
// servers (never onto the guesser's), and leave the guesser's jobs alone.
func TestBridgeNeverTakesAGuessedID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := startPair(t, ctx, 1, 4, "gpu", 16, "SchedulerParameters=sched_interval=2")
	sc, admin := p.sc, p.admin
	if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "globex", api.WorkspaceCreateRequest{Name: "lab", Guaranteed: 0, BorrowLimit: 16}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleMember, Tenant: "globex", Workspace: "lab"})
	if err != nil {
		t.Fatal(err)
	}
	guesser, err := client.New(p.url, tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	sbatch := func() string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true", "-A", "acme", "-N", "1", "--gres=gpu:8")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	seen := sbatch()
	n, err := strconv.Atoi(seen)
	if err != nil {
		t.Fatalf("sbatch --parsable: %q", seen)
	}
	next := strconv.Itoa(n + 1)
	var squats []uint64
	for _, id := range []string{seen, next} {
		j, err := guesser.SubmitJob(ctx, domain.JobSpec{GPUs: 1, ExternalID: slurm.ExternalID(sc.Name, id)})
		if err != nil {
			t.Fatal(err)
		}
		squats = append(squats, j.ID)
	}
	if got := sbatch(); got != next {
		t.Fatalf("slurmctld numbered the next job %s, not %s", got, next)
	}

	// Pages of one job: the squatters' jobs come first, so a pass that
	// read only the first page would not see its own mirrors.
	b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, PageSize: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var total slurm.Stats
	sc.Poll(t, "the bridge did not release acme's two Slurm jobs", func() (bool, string) {
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		return total.Released == 2, fmt.Sprintf("%+v", total)
	})
	for _, id := range []string{seen, next} {
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(squats, j.ID) || j.Tenant != "acme" {
			t.Fatalf("slurm job %s's job is %d of %s", id, j.ID, j.Tenant)
		}
		out, err := sc.Command(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		f := slurm.ParseShowJob(string(out))
		if want := fmt.Sprintf("jobfabric_job_%d_run_0", j.ID); f["Comment"] != want {
			t.Errorf("slurm job %s released for %q, want %q (acme's job)", id, f["Comment"], want)
		}
		if want := strings.Join(slurm.PlacedNodes(j), ","); f["ReqNodeList"] != want {
			t.Errorf("slurm job %s asks for nodes %q, acme's job holds %q", id, f["ReqNodeList"], want)
		}
	}
	for _, id := range squats {
		j, err := admin.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Terminal() {
			t.Errorf("the bridge ended the guesser's job %d (%s)", id, j.State)
		}
	}
}
