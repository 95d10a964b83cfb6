package state

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestJobsShareWhatTheyShare: jobs that have the same tenant, workspace,
// submitter and GPU model hold one string of each, and jobs a cycle gives
// equal reasons hold one Reason (a reservation, one job's own, is not
// shared): as submitted, and as restored from a snapshot, which encodes
// the same bytes as the state it was taken from.
func TestJobsShareWhatTheyShare(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	for range 4 {
		h.must(CmdJobSubmit, MakeJob("research", 8).Model("H100-80GB").Obj())
	}
	wait := domain.Reason{Code: "capacity", Message: "waiting for 8 GPUs: every eligible server is busy"}
	own := domain.Reason{Code: "capacity", Message: wait.Message, Reservation: &domain.Reservation{Start: h.at.Add(time.Hour)}}
	h.must(CmdPlanApply, PlanApply{Reasons: map[uint64]domain.Reason{1: wait, 2: wait, 3: wait, 4: own}})

	same := func(t *testing.T, f *FSM, what string, of func(*domain.Job) string) {
		t.Helper()
		first := of(f.d.Jobs[1])
		for id := uint64(2); id <= 4; id++ {
			if s := of(f.d.Jobs[id]); s != first || unsafe.StringData(s) != unsafe.StringData(first) {
				t.Errorf("job %d's %s %q is not job 1's string %q but a copy", id, what, s, first)
			}
		}
	}
	check := func(t *testing.T, f *FSM) {
		t.Helper()
		same(t, f, "tenant", func(j *domain.Job) string { return j.Tenant })
		same(t, f, "workspace", func(j *domain.Job) string { return j.Workspace })
		same(t, f, "submitter", func(j *domain.Job) string { return j.SubmittedBy })
		same(t, f, "GPU model", func(j *domain.Job) string { return j.GPUModel })
		r1, r2, r3, r4 := f.d.Jobs[1].Reason, f.d.Jobs[2].Reason, f.d.Jobs[3].Reason, f.d.Jobs[4].Reason
		if *r1 != wait || r2 != r1 || r3 != r1 {
			t.Errorf("jobs 1-3 given one reason hold %p %p %p (%v)", r1, r2, r3, *r1)
		}
		if r4 == r1 || r4.Reservation == nil || !r4.Reservation.Start.Equal(own.Reservation.Start) {
			t.Errorf("job 4's reservation is shared or lost: %p %+v", r4, r4)
		}
	}
	t.Run("applied", func(t *testing.T) { check(t, h.f) })
	t.Run("restored", func(t *testing.T) {
		b := h.snapshot()
		f := New()
		if err := f.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
		check(t, f)
		s, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if got := snapshotBytes(t, s); !bytes.Equal(normalJSON(t, got), normalJSON(t, b)) {
			t.Fatalf("the restored state encodes differently:\nthen %s\nnow  %s", b, got)
		}
	})
	// Jobs submitted after: their values are the ones already held, and
	// they share the reason a new job has.
	h.must(CmdJobSubmit, MakeJob("research", 8).Model("H100-80GB").Obj())
	h.must(CmdJobSubmit, MakeJob("research", 8).Model("H100-80GB").Obj())
	j1, j5, j6 := h.f.d.Jobs[1], h.f.d.Jobs[5], h.f.d.Jobs[6]
	if unsafe.StringData(j5.Tenant) != unsafe.StringData(j1.Tenant) || unsafe.StringData(j6.Tenant) != unsafe.StringData(j1.Tenant) {
		t.Errorf("jobs 5 and 6 do not share job 1's tenant")
	}
	if j5.Reason != j6.Reason || j5.Reason.Code != domain.ReasonQueued {
		t.Errorf("jobs 5 and 6 hold reasons %p %p (%v)", j5.Reason, j6.Reason, *j5.Reason)
	}
}
