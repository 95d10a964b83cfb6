package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/slurm"
)

// TestBridgeWithSlurmctld runs the bridge between Debian's slurmctld and an
// in-process jobfabric server whose servers are the Slurm nodes: held
// jobs are submitted once, released on exactly the servers jobfabric placed
// them on, a job of an unmapped account stays held with the reason, a
// restarted bridge submits nothing twice, and cancelling on either side
// reaches the other.
func TestBridgeWithSlurmctld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := startPair(t, ctx, 1, 4, "training", 32, "")
	sc, admin := p.sc, p.admin

	sbatch := func(args ...string) string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", append([]string{"--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	wide := sbatch("-A", "phys", "-N", "2", "--gres=gpu:8", "-t", "90")
	one := sbatch("-A", "phys", "-N", "1", "--gres=gpu:8")
	perJob := sbatch("-A", "phys", "-N", "1", "--gpus=8")
	waits := sbatch("-A", "phys", "-N", "1", "--gres=gpu:8") // no room left in jobfabric
	stray := sbatch("-A", "zzz", "-N", "1", "--gres=gpu:8")
	released := []string{wide, one, perJob}

	mapping := slurm.Mapping{Accounts: map[string]string{"phys": "acme"}, Workspaces: map[string]string{"gpu": "training"}}
	newBridge := func() *slurm.Bridge {
		b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, Mapping: mapping,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := newBridge()
	var total slurm.Stats
	sync := func(b *slurm.Bridge) slurm.Stats {
		t.Helper()
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		return st
	}
	show := func(id string) map[string]string {
		out, err := sc.Command(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		return slurm.ParseShowJob(string(out))
	}
	sc.Poll(t, "the bridge did not release the three jobs that fit", func() (bool, string) {
		sync(b)
		return total.Released == 3, fmt.Sprintf("%+v", total)
	})
	if total.Submitted != 4 {
		t.Errorf("submitted %d jobfabric jobs, want 4 (the unmapped account's job is not one)", total.Submitted)
	}

	// Slurm runs each released job exactly on jobfabric's placement.
	for _, id := range released {
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		want := slurm.PlacedNodes(j)
		slices.Sort(want)
		var got []string
		sc.Poll(t, "slurm job "+id+" was not allocated", func() (bool, string) {
			f := show(id)
			if f["NodeList"] == "" {
				return false, f["JobState"] + " " + f["Reason"]
			}
			out, err := sc.Command(ctx, "scontrol", "show", "hostnames", f["NodeList"])
			if err != nil {
				t.Fatal(err)
			}
			got = strings.Fields(string(out))
			return true, ""
		})
		slices.Sort(got)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("slurm job %s runs on %v, jobfabric placed job %d on %v", id, got, j.ID, want)
		}
		if j.GPUs != 8*len(want) || j.Tenant != "acme" || j.Workspace != "training" {
			t.Errorf("slurm job %s became %s/%s with %d GPUs on %d servers", id, j.Tenant, j.Workspace, j.GPUs, len(want))
		}
	}
	if f := show(wide); f["TimeLimit"] != "01:30:00" {
		t.Errorf("wide job time limit %s", f["TimeLimit"])
	} else if j, _ := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, wide), ""); j.TimeLimitSeconds != 5400 {
		t.Errorf("wide job's jobfabric time limit %ds, want 5400", j.TimeLimitSeconds)
	}

	// The unmapped account's job stays held, saying why; the job without
	// room stays held too.
	for _, id := range []string{stray, waits} {
		if f := show(id); f["JobState"] != "PENDING" || f["Reason"] != "JobHeldUser" {
			t.Errorf("slurm job %s is %s (%s), want held", id, f["JobState"], f["Reason"])
		}
	}
	out, _ := sc.Command(ctx, "squeue", "-h", "-j", stray, "-o", "%k")
	if got := strings.TrimSpace(string(out)); got != "jobfabric: account zzz has no tenant in the account map" {
		t.Errorf("unmapped job's comment %q", got)
	}

	// A restarted bridge finds what it submitted.
	b = newBridge()
	if st := sync(b); st.Submitted != 0 || st.Released != 0 {
		t.Errorf("a restarted bridge did %+v, want nothing", st)
	}
	all, err := admin.Jobs(ctx, client.JobQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Errorf("jobfabric has %d jobs after a restart, want 4", len(all))
	}

	// Cancelled in jobfabric: the held Slurm job is cancelled.
	wj, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, waits), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CancelJob(ctx, wj.ID); err != nil {
		t.Fatal(err)
	}
	sync(b)
	if f := show(waits); f["JobState"] != "CANCELLED" {
		t.Errorf("slurm job %s is %s after its jobfabric job was cancelled", waits, f["JobState"])
	}
	// Cancelled in Slurm: the jobfabric job is cancelled.
	if _, err := sc.Command(ctx, "scancel", one); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "scancel did not reach jobfabric", func() (bool, string) {
		sync(b)
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, one), "")
		if err != nil {
			t.Fatal(err)
		}
		return j.State == domain.JobCancelled, string(j.State)
	})
}
