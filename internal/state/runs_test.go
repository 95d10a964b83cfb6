package state

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// place commits one placement of job id and fails the test if refused; it
// returns the command's time.
func (h *harness) place(id uint64, pl ...domain.Placement) time.Time {
	h.t.Helper()
	res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: id, Placements: pl}}}).(*PlanResult)
	if len(res.Placed) != 1 {
		h.t.Fatalf("place job %d: %+v", id, res)
	}
	return h.at
}

func (h *harness) server(i int) string {
	return h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[i].Name
}

func (h *harness) job(id uint64) *domain.Job {
	h.t.Helper()
	j, ok := h.f.Job(id)
	if !ok {
		h.t.Fatalf("job %d not found", id)
	}
	return j
}

func at(t time.Time) *time.Time { return &t }

// sameRuns compares runs by value (times with Equal).
func sameRuns(t *testing.T, what string, got, want []domain.Run) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d runs %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		endOK := (g.End == nil) == (w.End == nil) && (g.End == nil || g.End.Equal(*w.End))
		if !g.Start.Equal(w.Start) || !endOK || g.GPUs != w.GPUs || g.Units != w.Units || g.BorrowedUnits != w.BorrowedUnits {
			t.Fatalf("%s: run %d = %+v (end %v), want %+v (end %v)", what, i, g, g.End, w, w.End)
		}
	}
}

// TestRunsRecordEveryHolding: each placement opens a run with its whole
// GPUs, capacity units and borrowed part, each release closes it at the
// command's time, a requeued job gets a second run and the gap between is
// in neither; replay and snapshot keep them.
func TestRunsRecordEveryHolding(t *testing.T) {
	const u = domain.UnitsPerGPU
	cases := map[string]func(t *testing.T, h *harness){
		"8 GPUs for an hour, within the guarantee": func(t *testing.T, h *harness) {
			id := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
			start := h.place(id, domain.Placement{Server: h.server(0), GPUs: eightGPUs})
			sameRuns(t, "placed", h.job(id).Runs, []domain.Run{{Start: start, GPUs: 8, Units: 8 * u}})
			h.advance(time.Hour - time.Second)
			h.must(CmdJobReport, JobReport{ID: id, State: ReportSucceeded})
			if h.at != start.Add(time.Hour) {
				t.Fatalf("harness: ended at %v, want an hour after %v", h.at, start)
			}
			sameRuns(t, "ended", h.job(id).Runs, []domain.Run{{Start: start, End: at(start.Add(time.Hour)), GPUs: 8, Units: 8 * u}})
		},
		"preempted, requeued and placed again: two runs, not the gap": func(t *testing.T, h *harness) {
			id := h.must(CmdJobSubmit, MakeJob("research", 8).Preemptible().Obj()).(*domain.Job).ID
			s1 := h.place(id, domain.Placement{Server: h.server(0), GPUs: eightGPUs})
			h.advance(30 * time.Minute)
			h.must(CmdJobsPreempt, JobsPreempt{Jobs: []Preemption{{ID: id, Reason: domain.Reason{Code: "reclaimed", Message: "reclaimed"}, Deadline: h.at.Add(time.Minute)}}})
			h.advance(10 * time.Second)
			h.must(CmdJobReport, JobReport{ID: id, State: ReportStopped})
			e1 := h.at
			if j := h.job(id); j.State != domain.JobPending || j.Requeues != 1 {
				t.Fatalf("after stop: %s, %d requeues", j.State, j.Requeues)
			}
			h.advance(time.Hour)
			s2 := h.place(id, domain.Placement{Server: h.server(1), GPUs: eightGPUs})
			sameRuns(t, "placed again", h.job(id).Runs, []domain.Run{
				{Start: s1, End: &e1, GPUs: 8, Units: 8 * u},
				{Start: s2, GPUs: 8, Units: 8 * u}})
			h.must(CmdJobCancel, JobCancel{ID: id})
			sameRuns(t, "cancelled", h.job(id).Runs, []domain.Run{
				{Start: s1, End: &e1, GPUs: 8, Units: 8 * u},
				{Start: s2, End: at(h.at), GPUs: 8, Units: 8 * u}})
		},
		"grace deadline requeues: the run ends at the release": func(t *testing.T, h *harness) {
			id := h.must(CmdJobSubmit, MakeJob("research", 8).Preemptible().Obj()).(*domain.Job).ID
			s1 := h.place(id, domain.Placement{Server: h.server(0), GPUs: eightGPUs})
			h.must(CmdJobsPreempt, JobsPreempt{Jobs: []Preemption{{ID: id, Reason: domain.Reason{Code: "drained", Message: "drained"}, Deadline: h.at.Add(time.Minute)}}})
			h.advance(time.Minute)
			h.must(CmdJobsRelease, JobsRelease{Jobs: []Release{{ID: id, Cause: "deadline"}}})
			sameRuns(t, "released", h.job(id).Runs, []domain.Run{{Start: s1, End: at(h.at), GPUs: 8, Units: 8 * u}})
		},
		"a cancelled pending job has no run": func(t *testing.T, h *harness) {
			id := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
			h.must(CmdJobCancel, JobCancel{ID: id})
			sameRuns(t, "cancelled", h.job(id).Runs, nil)
		},
		"above the guarantee: the part beyond it is borrowed": func(t *testing.T, h *harness) {
			// acme/research guarantees 16 GPUs (the harness's cluster).
			a := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
			a2 := h.must(CmdJobSubmit, MakeJob("research", 4).Obj()).(*domain.Job).ID
			b := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
			c := h.must(CmdJobSubmit, MakeJob("research", 4).Obj()).(*domain.Job).ID
			sa := h.place(a, domain.Placement{Server: h.server(0), GPUs: eightGPUs})
			h.place(a2, domain.Placement{Server: h.server(1), GPUs: []int{0, 1, 2, 3}})
			sb := h.place(b, domain.Placement{Server: h.server(2), GPUs: eightGPUs})
			sameRuns(t, "a", h.job(a).Runs, []domain.Run{{Start: sa, GPUs: 8, Units: 8 * u}})
			sameRuns(t, "b straddles the guarantee", h.job(b).Runs, []domain.Run{{Start: sb, GPUs: 8, Units: 8 * u, BorrowedUnits: 4 * u}})
			// a ends: the workspace holds 12 of its 16, c fits in them.
			h.must(CmdJobCancel, JobCancel{ID: a})
			sc := h.place(c, domain.Placement{Server: h.server(1), GPUs: []int{4, 5, 6, 7}})
			sameRuns(t, "c within the guarantee again", h.job(c).Runs, []domain.Run{{Start: sc, GPUs: 4, Units: 4 * u}})
			// b's split was decided at its placement and stays.
			sameRuns(t, "b later", h.job(b).Runs, []domain.Run{{Start: sb, GPUs: 8, Units: 8 * u, BorrowedUnits: 4 * u}})
		},
		"MIG slices and shares count by capacity, as no whole GPU": func(t *testing.T, h *harness) {
			h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("glx").Isolation(domain.IsolationGPU).Obj()})
			h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("glx", "w").Borrow(4).Obj()})
			m := h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", MIGProfile: "3g.40gb", MIGCount: 2}}).(*domain.Job).ID
			s := h.must(CmdJobSubmit, JobSubmit{Spec: domain.JobSpec{Tenant: "glx", Workspace: "w", Share: 0.25}}).(*domain.Job).ID
			srv := h.server(3)
			sm := h.place(m, domain.Placement{Server: srv, GPUs: []int{0}, MIG: []domain.MIGSlice{{GPU: 0, Profile: "3g.40gb", Start: 0}, {GPU: 0, Profile: "3g.40gb", Start: 4}}})
			ss := h.place(s, domain.Placement{Server: srv, GPUs: []int{1}, Share: 0.25})
			// glx/w guarantees nothing: all of it is borrowed.
			sameRuns(t, "mig", h.job(m).Runs, []domain.Run{{Start: sm, GPUs: 0, Units: 6000, BorrowedUnits: 6000}})
			sameRuns(t, "share", h.job(s).Runs, []domain.Run{{Start: ss, GPUs: 0, Units: 1750, BorrowedUnits: 1750}})
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t).cluster(1, 4, 16)
			run(t, h)
			h.replays()
			// A snapshot keeps the runs.
			want := h.snapshot()
			restored := New()
			if err := restored.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
				t.Fatal(err)
			}
			s, _ := restored.Snapshot()
			if !bytes.Equal(snapshotBytes(t, s), want) {
				t.Fatal("runs do not survive a snapshot")
			}
		})
	}
}

// TestSnapshotWithoutRuns: a snapshot written before runs were recorded
// loads, and a job placed then ends without inventing a run.
func TestSnapshotWithoutRuns(t *testing.T) {
	h := newHarness(t).cluster(1, 4, 16)
	id := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
	h.place(id, domain.Placement{Server: h.server(0), GPUs: eightGPUs})
	var d map[string]any
	if err := json.Unmarshal(h.snapshot(), &d); err != nil {
		t.Fatal(err)
	}
	for _, j := range d["jobs"].(map[string]any) {
		if _, ok := j.(map[string]any)["runs"]; !ok {
			t.Fatal("the snapshot has no runs to remove: the test no longer tests an old snapshot")
		}
		delete(j.(map[string]any), "runs")
	}
	old, _ := json.Marshal(d)
	f := New()
	if err := f.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatal(err)
	}
	j, _ := f.Job(id)
	if j.Runs != nil || j.PlacedAt == nil {
		t.Fatalf("old job restored as %+v", j)
	}
	h.f = f
	h.must(CmdJobCancel, JobCancel{ID: id})
	if j := h.job(id); j.Runs != nil || j.State != domain.JobCancelled {
		t.Fatalf("old job ended as %s with runs %+v", j.State, j.Runs)
	}
}
