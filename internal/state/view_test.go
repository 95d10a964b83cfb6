package state

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// snapshotOf is the scheduler's view of f, as the leader's cycle builds it.
func snapshotOf(f *FSM, since time.Time) (s *sched.Snapshot) {
	f.Read(func(v View) { s = sched.SnapshotOf(v, since, CopyJob) })
	return s
}

// TestSnapshotOfTheView: the scheduler's snapshot built through the view
// holds the live jobs by ID and the placed jobs ended since the cut,
// copies them, and folds a tenant's minimum driver into its jobs' copies
// only.
func TestSnapshotOfTheView(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.placeFirst()
	h.must(CmdJobReport, JobReport{ID: 1, State: ReportRunning})
	h.must(CmdJobReport, JobReport{ID: 1, State: ReportSucceeded})
	ended := h.at
	h.must(CmdJobSubmit, MakeJob("research", 2).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 3).Obj())
	h.must(CmdJobCancel, JobCancel{ID: 3}) // never placed: no fair-share history
	pol := domain.DefaultHostPolicy()
	pol.TenantMinDriver = map[string]string{"acme": "550.54.15"}
	h.must(CmdHostPolicy, HostPolicySet{Policy: pol})

	s := snapshotOf(h.f, ended.Add(-time.Second))
	live := func(jobs []*domain.Job) (out []uint64) {
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	if got := live(s.Jobs); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("live jobs %v, want [2]", got)
	}
	if got := live(s.History); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("history %v, want [1]", got)
	}
	if s := snapshotOf(h.f, ended); len(s.History) != 0 {
		t.Fatalf("a job that ended at the cut is history: %v", live(s.History))
	}
	if s.Jobs[0].MinDriver != "550.54.15" {
		t.Fatalf("tenant floor not folded in: %q", s.Jobs[0].MinDriver)
	}
	if j, _ := h.f.Job(2); j.MinDriver != "" {
		t.Fatalf("the fold changed the stored job: %q", j.MinDriver)
	}
	if s.Tenants["acme"] == nil || s.Workspaces["acme/research"] == nil || s.Static == nil || s.Topology == nil {
		t.Fatalf("snapshot misses tenants, workspaces or the topology: %+v", s)
	}
	s.Workspaces["acme/research"].Guaranteed = 99
	if w, _ := h.f.Workspace("acme", "research"); w.Guaranteed == 99 {
		t.Fatal("the snapshot aliases the state")
	}
}

// TestReadWhileApplying (run with -race): builders read through the view
// while commands apply, and change their copies freely.
func TestReadWhileApplying(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	f, at := h.f, h.at
	entries := make([][]byte, 0, 300)
	for i := range 150 {
		at = at.Add(time.Second)
		sub, err := Encode(CmdJobSubmit, at, "admin:test", MakeJob("research", 1).Obj())
		if err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Second)
		cancel, err := Encode(CmdJobCancel, at, "admin:test", JobCancel{ID: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, sub, cancel)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, e := range entries {
			if i%2 == 1 && i%6 != 1 {
				continue // keep two thirds of the jobs live
			}
			if r := f.ApplyCommand(e); r.Err != nil {
				t.Errorf("apply: %v", r.Err)
				return
			}
		}
	}()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		s := snapshotOf(f, time.Time{})
		for _, j := range s.Jobs {
			j.Name, j.Placement = "changed", nil
		}
		for _, w := range s.Workspaces {
			w.Models = append(w.Models, domain.ModelQuota{})
		}
	}
	s := snapshotOf(f, time.Time{})
	if len(s.Jobs) != 100 {
		t.Fatalf("%d live jobs, want 100", len(s.Jobs))
	}
	for _, j := range s.Jobs {
		if j.Name == "changed" {
			t.Fatal("a snapshot's copy changed the state")
		}
	}
}

// TestSnapshotterFinishesWithoutTheState: the scheduling loop's snapshot
// copies the changed jobs under the read lock (Snapshotter.Begin) and
// merges them with the unchanged ones after releasing it (finish), while
// apply goes on. What finish returns is the state as of Begin, whatever
// was submitted, reported, placed or cancelled in between (a merge that
// read the state would see those), and the next snapshot is the state
// again.
func TestSnapshotterFinishesWithoutTheState(t *testing.T) {
	h := newHarness(t).cluster(2, 2, 16)
	var ids []uint64
	for range 12 {
		ids = append(ids, h.must(CmdJobSubmit, MakeJob("research", 4).Obj()).(*domain.Job).ID)
	}
	snaps := sched.Snapshotter{Clone: CopyJob}
	h.f.Read(func(v View) { snaps.Of(v, h.at) })
	jobIDs := func(s *sched.Snapshot) []string {
		var out []string
		for _, j := range s.Jobs {
			out = append(out, fmt.Sprintf("%d:%s:%d", j.ID, j.State, len(j.Placement)))
		}
		return out
	}
	change := func() {
		ids = append(ids, h.must(CmdJobSubmit, MakeJob("research", 2).Obj()).(*domain.Job).ID)
		h.must(CmdJobCancel, JobCancel{ID: ids[0]})
		ids = ids[1:]
		plan := sched.Schedule(snapshotOf(h.f, h.at), h.at)
		reasons := map[uint64]domain.Reason{}
		for id, r := range plan.Pending.All() {
			reasons[id] = r
		}
		h.must(CmdPlanApply, PlanApply{Placements: plan.Placements, Reasons: reasons})
	}
	for round := range 4 {
		change()
		var want *sched.Snapshot
		var finish func() *sched.Snapshot
		h.f.Read(func(v View) {
			want = sched.SnapshotOf(v, h.at, CopyJob)
			finish = snaps.Begin(v, h.at)
		})
		change() // applied between Begin and finish
		if got := finish(); !slices.Equal(jobIDs(got), jobIDs(want)) {
			t.Fatalf("round %d: finish gave %v, the state at Begin was %v", round, jobIDs(got), jobIDs(want))
		}
	}
	var got, want *sched.Snapshot
	h.f.Read(func(v View) { got, want = snaps.Of(v, h.at), sched.SnapshotOf(v, h.at, CopyJob) })
	if !slices.Equal(jobIDs(got), jobIDs(want)) {
		t.Fatalf("the next snapshot is %v, the state %v", jobIDs(got), jobIDs(want))
	}
}
