package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/slurm"
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
)

// TestBridgeReclaimRequeuesBorrower: on 4 servers x 8 GPUs two Slurm jobs
// borrow every GPU, one of a workspace that requeues preempted jobs and
// one of a workspace that cancels them; a job of the workspace that owns
// the GPUs reclaims them. At the grace deadline the bridge requeues the
// first Slurm job held (scontrol requeuehold: PENDING, requeued in held
// state, Restarts=1; its jobfabric job Pending again, Requeues 1) and
// cancels the second (its jobfabric job Preempted); the owner's job runs
// on jobfabric's placement. Once the owner's job is cancelled the
// requeued one is released again, on its new placement.
func TestBridgeReclaimRequeuesBorrower(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := startPairTuned(t, ctx, 1, 4, "prod", 32,
		"PartitionName=scratch Nodes=ALL State=UP MaxTime=INFINITE\nPartitionName=batch Nodes=ALL State=UP MaxTime=INFINITE\nPartitionName=prod Nodes=ALL State=UP MaxTime=INFINITE",
		func(c *server.Config) { c.PreemptionGrace, c.ReclaimBackoff = 2*time.Second, time.Second })
	sc, admin := p.sc, p.admin
	lend := 32 // prod lends its idle guarantee: the others borrow it
	if err := admin.Do(ctx, "PATCH", "/v1/tenants/acme/workspaces/prod", api.WorkspaceUpdateRequest{LendLimit: &lend}, nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range []api.WorkspaceCreateRequest{
		{Name: "scratch", BorrowLimit: 32, Preemption: domain.PreemptRequeue},
		{Name: "batch", BorrowLimit: 32, Preemption: domain.PreemptCancel},
	} {
		if _, err := admin.CreateWorkspace(ctx, "acme", w); err != nil {
			t.Fatal(err)
		}
	}
	sbatch := func(args ...string) string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", append([]string{"--parsable", "--hold", "-o", "/dev/null", "-A", "acme", "--wrap", "true"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	show := func(id string) map[string]string {
		t.Helper()
		out, err := sc.Command(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		return slurm.ParseShowJob(string(out))
	}
	jobOf := func(id string) *domain.Job {
		t.Helper()
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	// nodesOf waits until slurmctld allocated the job and returns its nodes.
	nodesOf := func(id string) []string {
		t.Helper()
		var got []string
		sc.Poll(t, "slurm job "+id+" was not allocated", func() (bool, string) {
			f := show(id)
			if f["NodeList"] == "" || f["NodeList"] == "(null)" || f["JobState"] == "PENDING" {
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
		return got
	}
	placed := func(j *domain.Job) []string {
		n := slurm.PlacedNodes(j)
		slices.Sort(n)
		return n
	}

	// No account map: the account is the tenant, the partition the workspace.
	b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, PageSize: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var total slurm.Stats
	pass := func() {
		t.Helper()
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		total.Preempted += st.Preempted
	}
	requeued := sbatch("-p", "scratch", "-N", "2", "--gres=gpu:8")
	cancelled := sbatch("-p", "batch", "-N", "2", "--gres=gpu:8")
	sc.Poll(t, "the borrowers were not released", func() (bool, string) {
		pass()
		return total.Released == 2, fmt.Sprintf("%+v %v", total, jobOf(requeued).Reason)
	})
	for _, id := range []string{requeued, cancelled} {
		if got, want := nodesOf(id), placed(jobOf(id)); !slices.Equal(got, want) {
			t.Fatalf("borrower %s runs on %v, placed on %v", id, got, want)
		}
	}
	if !jobOf(requeued).Preemptible || jobOf(cancelled).Preemptible {
		t.Fatalf("preemptible: scratch job %v, batch job %v; want true, false (the workspaces' preemption)", jobOf(requeued).Preemptible, jobOf(cancelled).Preemptible)
	}

	// The owner reclaims its 32 GPUs.
	owner := sbatch("-p", "prod", "-N", "4", "--gres=gpu:8")
	sc.Poll(t, "the borrowers were not preempted at their grace deadline", func() (bool, string) {
		pass()
		return total.Preempted == 2, fmt.Sprintf("%+v", total)
	})
	if f := show(requeued); f["JobState"] != "PENDING" || f["Reason"] != "job_requeued_in_held_state" || f["Restarts"] != "1" {
		t.Errorf("requeued borrower %s: %s %s restarts %s, want PENDING, requeued held, 1", requeued, f["JobState"], f["Reason"], f["Restarts"])
	}
	if j := jobOf(requeued); j.State != domain.JobPending || j.Requeues != 1 || len(j.Placement) != 0 {
		t.Errorf("requeued borrower's jobfabric job is %s, requeues %d, placement %v; want Pending, 1, none", j.State, j.Requeues, j.Placement)
	}
	sc.Poll(t, "the cancelled borrower did not end", func() (bool, string) {
		f := show(cancelled)
		return f["JobState"] == "CANCELLED", f["JobState"]
	})
	if j := jobOf(cancelled); j.State != domain.JobPreempted {
		t.Errorf("cancelled borrower's jobfabric job is %s, want Preempted", j.State)
	}
	sc.Poll(t, "the owner's job was not released", func() (bool, string) {
		pass()
		j := jobOf(owner)
		return j.State == domain.JobReady && show(owner)["JobState"] != "PENDING", string(j.State)
	})
	if got, want := nodesOf(owner), placed(jobOf(owner)); !slices.Equal(got, want) || len(want) != 4 {
		t.Errorf("owner's job runs on %v, placed on %v", got, want)
	}
	// A pass while the owner runs changes nothing: the requeued job
	// waits, held, for GPUs.
	before := total
	pass()
	if total != before {
		t.Errorf("a pass with nothing to do did %+v after %+v", total, before)
	}

	// The owner's job ends: the requeued one is placed and released again.
	if _, err := sc.Command(ctx, "scancel", owner); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the requeued borrower was not released again", func() (bool, string) {
		pass()
		j := jobOf(requeued)
		return j.State == domain.JobReady && show(requeued)["JobState"] != "PENDING", string(j.State) + " " + show(requeued)["JobState"]
	})
	if got, want := nodesOf(requeued), placed(jobOf(requeued)); !slices.Equal(got, want) {
		t.Errorf("requeued borrower runs on %v after its second release, placed on %v", got, want)
	}
	if j := jobOf(requeued); len(j.Runs) != 2 || j.Requeues != 1 {
		t.Errorf("requeued borrower has %d runs and %d requeues, want 2 and 1", len(j.Runs), j.Requeues)
	}
	if c := show(requeued)["Comment"]; c != fmt.Sprintf("jobfabric_job_%d_run_1", jobOf(requeued).ID) {
		t.Errorf("requeued borrower's comment %q names another placement", c)
	}
}

// TestBridgeTakesBackAJobReleasedElsewhere: a user may release a job held
// for the bridge (scontrol release) before jobfabric placed it; Slurm then
// allocates it servers of its own choosing. The bridge requeues it held at
// its next pass, and releases it on jobfabric's placement once it has one.
func TestBridgeTakesBackAJobReleasedElsewhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := startPair(t, ctx, 1, 4, "gpu", 8, "") // room in jobfabric for one job
	sc, admin := p.sc, p.admin
	b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, PageSize: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var total slurm.Stats
	pass := func() {
		t.Helper()
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Submitted += st.Submitted
		total.Released += st.Released
		total.Misplaced += st.Misplaced
	}
	sbatch := func() string {
		t.Helper()
		out, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "-A", "acme", "-N", "1", "--gres=gpu:8", "--wrap", "true")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	first, second := sbatch(), sbatch()
	sc.Poll(t, "the first job was not released", func() (bool, string) {
		pass()
		return total.Released == 1 && total.Submitted == 2, fmt.Sprintf("%+v", total)
	})
	state := func(id string) (string, string) {
		out, _ := sc.Command(ctx, "squeue", "-h", "-t", "all", "-j", id, "-o", "%T|%r")
		st, reason, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
		return st, reason
	}
	// The second waits in jobfabric; its user releases it in Slurm.
	if _, err := sc.Command(ctx, "scontrol", "release", second); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "slurmctld did not allocate the job released by its user", func() (bool, string) {
		st, reason := state(second)
		return st == "CONFIGURING" || st == "RUNNING", st + " " + reason
	})
	pass()
	if total.Misplaced != 1 {
		t.Fatalf("the bridge did not take back the job released outside it: %+v", total)
	}
	if st, reason := state(second); st != "PENDING" || reason != "job requeued in held state" {
		t.Errorf("slurm job %s is %s (%s), want requeued held", second, st, reason)
	}
	if _, err := sc.Command(ctx, "scancel", first); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the taken-back job was not released on its placement", func() (bool, string) {
		pass()
		j, err := admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, second), "")
		if err != nil {
			t.Fatal(err)
		}
		out, _ := sc.Command(ctx, "squeue", "-h", "-t", "CONFIGURING,RUNNING", "-j", second, "-o", "%N")
		nl := strings.TrimSpace(string(out))
		return j.State == domain.JobReady && nl != "" && nl == strings.Join(slurm.PlacedNodes(j), ","), string(j.State) + " on " + nl
	})
	if total.Misplaced != 1 {
		t.Errorf("the bridge took back a job it released itself: %+v", total)
	}
}

// TestBridgeSignalsAPreemptedJob runs real jobs (a slurmd per node): a
// Slurm job whose script traps SIGTERM runs on its placement; jobfabric
// drains its server with a minute's grace, so the job is Preempting. The
// bridge sends SIGTERM at once (scancel --signal=TERM --full), as
// Slurm's own preemption does at the start of GraceTime: the script gets
// it exactly once over several passes, runs on (a signal, not a cancel)
// and its comment carries the mark a restarted bridge reads. Before, the
// job heard nothing from Slurm until the deadline's requeue.
func TestBridgeSignalsAPreemptedJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := startPairWith(t, ctx, 1, 2, "training", 16, slurmtest.Options{Slurmd: true}, nil)
	sc := p.sc
	got := filepath.Join(t.TempDir(), "signals")
	out, err := sc.Command(ctx, "sbatch", "--parsable", "--hold", "-o", "/dev/null", "-A", "acme", "-N", "1", "--gres=gpu:8",
		"--wrap", fmt.Sprintf("trap 'echo TERM >> %[1]s' TERM; trap 'echo USR1 >> %[1]s' USR1; while true; do sleep 1; done", got))
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(out))
	b, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, PageSize: 1, Mapping: slurm.Mapping{DefaultWorkspace: "training"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var total slurm.Stats
	pass := func() {
		t.Helper()
		st, err := b.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total.Signalled += st.Signalled
		total.Preempted += st.Preempted
	}
	jobOf := func() *domain.Job {
		t.Helper()
		j, err := p.admin.JobByExternalID(ctx, slurm.ExternalID(sc.Name, id), "")
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	slurmState := func() string {
		out, _ := sc.Command(ctx, "squeue", "-h", "-t", "all", "-j", id, "-o", "%T|%N|%k")
		return strings.TrimSpace(string(out))
	}
	sc.Poll(t, "the job did not run", func() (bool, string) {
		pass()
		return jobOf().State == domain.JobRunning, string(jobOf().State) + " " + slurmState()
	})
	server := jobOf().Placement[0].Server
	drain := true
	if err := p.admin.Do(ctx, "PATCH", "/v1/nodes/"+server, api.NodeUpdateRequest{Draining: &drain, Reason: "test", GraceSeconds: 60}, nil); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the preempted job's script was not sent SIGTERM", func() (bool, string) {
		pass()
		b, _ := os.ReadFile(got)
		return strings.Contains(string(b), "TERM"), fmt.Sprintf("%+v; jobfabric %s; slurm %s", total, jobOf().State, slurmState())
	})
	for range 3 {
		pass()
	}
	// A signal of the test's own, after the passes: once the script has
	// trapped it, it has trapped every SIGTERM the passes sent.
	if _, err := sc.Command(ctx, "scancel", "--signal=USR1", "--full", id); err != nil {
		t.Fatal(err)
	}
	sc.Poll(t, "the script did not trap the test's SIGUSR1", func() (bool, string) {
		b, _ := os.ReadFile(got)
		return strings.Contains(string(b), "USR1"), string(b)
	})
	if b, _ := os.ReadFile(got); string(b) != "TERM\nUSR1\n" || total.Signalled != 1 {
		t.Errorf("the script got %q, the bridge signalled %d times; want one SIGTERM, then the test's SIGUSR1", b, total.Signalled)
	}
	j := jobOf()
	if j.State != domain.JobPreempting || total.Preempted != 0 {
		t.Errorf("jobfabric job %s, preempted %d: want Preempting until the deadline", j.State, total.Preempted)
	}
	if st := slurmState(); !strings.HasPrefix(st, "RUNNING|"+server+"|") || !strings.HasSuffix(st, fmt.Sprintf("jobfabric_job_%d_run_0_term", j.ID)) {
		t.Errorf("slurm job %s: %s; want RUNNING on %s with the signal's mark", id, st, server)
	}
}
