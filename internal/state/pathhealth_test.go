package state

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// pathEvents returns the actions of the path health events, oldest first.
func pathEvents(f *FSM) []string {
	var out []string
	for _, e := range f.Events(EventFilter{}) {
		if e.Action == EventPathUnhealthy || e.Action == EventPathRecovered {
			out = append(out, e.Action+" "+e.Object)
		}
	}
	return out
}

func TestJobsPathHealth(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 16)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
	h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: srv, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}})
	since := h.at

	// Bad input names the field and changes nothing.
	before := h.snapshot()
	for _, bad := range []JobsPathHealth{
		{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: "sick", Since: since}}}},
		{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: domain.PathHealthy}}}},
		{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: domain.PathHealthy, Since: since}}, {ID: 1, Health: domain.PathHealth{Verdict: domain.PathHealthy, Since: since}}}},
	} {
		if r := h.apply(CmdJobsPathHealth, bad); r.Err == nil || r.Err.Field == "" {
			t.Fatalf("%+v: err %v, want an invalid field", bad, r.Err)
		}
	}
	if !bytes.Equal(before, h.snapshot()) {
		t.Fatal("a refused path health command changed the state")
	}

	steps := []struct {
		verdict domain.PathVerdict
		msg     string
		events  []string
	}{
		{domain.PathHealthy, "", nil}, // a first healthy verdict is no news
		{domain.PathCongested, "leaf-1/swp1 pfc_pause_rx", []string{"job.path_unhealthy job/1"}},
		{domain.PathCongested, "leaf-1/swp2 pfc_pause_rx", []string{"job.path_unhealthy job/1"}}, // same verdict, new message: no event
		{domain.PathLinkErrors, "leaf-1/swp2 crc_errors", []string{"job.path_unhealthy job/1", "job.path_unhealthy job/1"}},
		{domain.PathHealthy, "", []string{"job.path_unhealthy job/1", "job.path_unhealthy job/1", "job.path_recovered job/1"}},
	}
	for i, s := range steps {
		// Job 2 is pending and job 99 does not exist: skipped, not refused.
		res := h.must(CmdJobsPathHealth, JobsPathHealth{Jobs: []JobPathHealth{
			{ID: 1, Health: domain.PathHealth{Verdict: s.verdict, Since: since, Message: s.msg}},
			{ID: 2, Health: domain.PathHealth{Verdict: s.verdict, Since: since}},
			{ID: 99, Health: domain.PathHealth{Verdict: s.verdict, Since: since}},
		}}).(*PathHealthResult)
		if len(res.Applied) != 1 || res.Applied[0] != 1 || res.Skipped[2] == "" || res.Skipped[99] == "" {
			t.Fatalf("step %d: result %+v, want job 1 applied and jobs 2, 99 skipped", i, res)
		}
		j, _ := h.f.Job(1)
		if j.PathHealth == nil || j.PathHealth.Verdict != s.verdict || j.PathHealth.Message != s.msg {
			t.Fatalf("step %d: job 1 path health %+v, want %s %q", i, j.PathHealth, s.verdict, s.msg)
		}
		if got := pathEvents(h.f); !equalStrings(got, s.events) {
			t.Fatalf("step %d: events %v, want %v", i, got, s.events)
		}
	}
	// The same verdict again changes nothing.
	res := h.must(CmdJobsPathHealth, JobsPathHealth{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: domain.PathHealthy, Since: since}}}}).(*PathHealthResult)
	if len(res.Applied) != 0 || res.Skipped[1] != "unchanged" {
		t.Fatalf("repeat: %+v, want job 1 skipped as unchanged", res)
	}
	// A job that ends loses its path and its verdict.
	h.must(CmdJobsPathHealth, JobsPathHealth{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: domain.PathLossy, Since: since}}}})
	h.must(CmdJobCancel, JobCancel{ID: 1})
	if j, _ := h.f.Job(1); j.PathHealth != nil {
		t.Fatalf("cancelled job keeps path health %+v", j.PathHealth)
	}

	// Deterministic: replaying the log gives the same bytes; a snapshot
	// round-trips.
	want := h.snapshot()
	replica := New()
	for i, b := range h.log {
		replica.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	s, _ := replica.Snapshot()
	if !bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("replaying the path health log on another FSM produced a different state")
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
		t.Fatal(err)
	}
	s2, _ := restored.Snapshot()
	if !bytes.Equal(snapshotBytes(t, s2), want) {
		t.Fatal("snapshot with path health does not round-trip")
	}
	if got := pathEvents(restored); len(got) != 4 {
		t.Fatalf("restored path events %v, want 4", got)
	}
}

func TestPathHealthSurvivesSnapshot(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	srv := h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
	h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: srv, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}}})
	since := h.at
	h.must(CmdJobsPathHealth, JobsPathHealth{Jobs: []JobPathHealth{{ID: 1, Health: domain.PathHealth{Verdict: domain.PathCongested, Since: since, Message: "m"}}}})
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
		t.Fatal(err)
	}
	j, _ := restored.Job(1)
	if j.PathHealth == nil || j.PathHealth.Verdict != domain.PathCongested || !j.PathHealth.Since.Equal(since) {
		t.Fatalf("restored path health %+v", j.PathHealth)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
