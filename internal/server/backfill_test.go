package server_test

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestReservationInDryRunAndExplain: with three of the four servers taken
// by jobs that declare expected durations, a 16-GPU dry run and the same
// job submitted both wait with a reservation, by expected duration: not
// from the first end (acme/prod's then idle guarantee is not lent) but
// from the second, on the server it frees.
func TestReservationInDryRunAndExplain(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	ctx := ctxT(t)
	fill := []struct {
		ws       string
		expected time.Duration
	}{{"prod", time.Hour}, {"research", 2 * time.Hour}, {"research", 3 * time.Hour}}
	var short *domain.Job
	for _, f := range fill {
		j, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: f.ws, GPUs: 8,
			ExpectedDurationSeconds: int64(f.expected / time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		j = waitJob(t, admin, j.ID, "Ready", isReady)
		if f.expected == 2*time.Hour {
			short = j
		}
	}
	want := short.PlacedAt.Add(2 * time.Hour)
	check := func(what string, r *domain.Reason) {
		t.Helper()
		if r == nil || r.Reservation == nil {
			t.Fatalf("%s: no reservation in %+v", what, r)
		}
		res := r.Reservation
		on := map[string]bool{}
		for _, p := range res.Placement {
			on[p.Server] = true
		}
		if !res.Start.Equal(want) || len(res.Placement) != 2 || !on[short.Placement[0].Server] ||
			len(res.Basis) != 1 || res.Basis[0] != domain.BasisExpectedDuration {
			t.Fatalf("%s: reservation %+v, want from %s on %s by expected_duration", what, res, want, short.Placement[0].Server)
		}
	}
	spec := domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 16}
	d, err := admin.DryRun(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	check("dry run", d.Reason)
	j, err := admin.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, admin, j.ID, "reserved", func(j *domain.Job) bool { return j.Reason != nil && j.Reason.Reservation != nil })
	check("pending job", j.Reason)
}

// TestDryRunSeesEachChange: a dry run's snapshot copies only the jobs
// with a placement (drySnapshot), and must still see every one of them:
// a 16-GPU dry run lands on an empty cluster, waits once three of the
// four servers are taken, and lands again once one of them is freed.
func TestDryRunSeesEachChange(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	ctx := ctxT(t)
	spec := domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 16}
	dry := func(what string, placed bool) {
		t.Helper()
		d, err := admin.DryRun(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(d.Placement) > 0; got != placed {
			t.Fatalf("%s: dry run placed %t (%+v, reason %+v), want %t", what, got, d.Placement, d.Reason, placed)
		}
	}
	dry("empty cluster", true)
	var fill []*domain.Job
	for _, ws := range []string{"prod", "research", "research"} {
		j, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: ws, GPUs: 8})
		if err != nil {
			t.Fatal(err)
		}
		fill = append(fill, waitJob(t, admin, j.ID, "Ready", isReady))
	}
	dry("three servers taken", false)
	if _, err := admin.CancelJob(ctx, fill[1].ID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, admin, fill[1].ID, "ended", func(j *domain.Job) bool { return j.State.Terminal() })
	dry("one freed", true)
}
