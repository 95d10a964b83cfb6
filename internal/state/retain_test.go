package state

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// retainHarness: acme/research and beta/lab on 2x2 servers of 8 GPUs.
func retainHarness(t *testing.T) *harness {
	h := newHarness(t).cluster(2, 2, 16)
	h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("beta").Obj()})
	h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("beta", "lab").Guaranteed(8).Borrow(8).Obj()})
	return h
}

// endJob submits a job of ref, runs it for d on 8 GPUs when run is set
// (else cancels it pending) and returns its ID and end time.
func (h *harness) endJob(ref string, run bool, d time.Duration) (uint64, time.Time) {
	h.t.Helper()
	spec := domaintest.MakeJobOf(ref, 8, func(s domain.JobSpec) JobSubmit { return JobSubmit{Spec: s} }).Obj()
	id := h.must(CmdJobSubmit, spec).(*domain.Job).ID
	if !run {
		h.must(CmdJobCancel, JobCancel{ID: id})
		return id, h.at
	}
	h.place(id, domain.Placement{Server: h.server(0), GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	h.at = h.at.Add(d - time.Second) // the report is one second after h.at
	h.must(CmdJobReport, JobReport{ID: id, State: ReportSucceeded})
	return id, h.at
}

func (h *harness) jobIDs() []uint64 {
	var out []uint64
	for _, j := range h.f.Jobs(JobFilter{}) {
		out = append(out, j.ID)
	}
	return out
}

// TestRetainEndedJobs: by age, the jobs ended before the cutoff go; by
// count, each tenant keeps its own newest N, so acme's churn does not push
// out beta's older history; jobs ended after KeepEndedAfter stay whatever
// the count; live jobs never go; the runs of removed jobs that held GPUs
// are in the archive, to the second.
func TestRetainEndedJobs(t *testing.T) {
	h := retainHarness(t)
	b1, _ := h.endJob("beta/lab", true, 90*time.Minute+500*time.Millisecond)
	b2, _ := h.endJob("beta/lab", false, 0)
	h.at = h.at.Add(time.Hour)
	var acme []uint64
	var ends []time.Time
	for i := range 6 {
		id, end := h.endJob("acme/research", i%2 == 0, time.Hour)
		acme, ends = append(acme, id), append(ends, end)
		h.at = h.at.Add(time.Minute)
	}
	live := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID

	cases := []struct {
		name string
		p    Retain
		gone []uint64
	}{
		{"nothing", Retain{}, nil},
		{"by age", Retain{JobsEndedBefore: ends[2]}, []uint64{b1, b2, acme[0], acme[1]}},
		{"age at the oldest end keeps it", Retain{JobsEndedBefore: time.Time{}.Add(time.Second)}, nil},
		// A global count of 3 would remove both of beta's jobs (the oldest).
		{"by count per tenant", Retain{JobsPerTenant: 3}, acme[:3]},
		{"by count, recent kept", Retain{JobsPerTenant: 3, KeepEndedAfter: ends[1]}, acme[:2]},
		{"age and count", Retain{JobsEndedBefore: ends[1], JobsPerTenant: 1}, append([]uint64{b1, b2}, acme[:5]...)},
	}
	base := h.snapshot()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.f.Restore(nopCloser{bytes.NewReader(base)}); err != nil {
				t.Fatal(err)
			}
			before := h.jobIDs()
			want := slices.DeleteFunc(slices.Clone(before), func(id uint64) bool { return slices.Contains(tc.gone, id) })
			if dry := h.f.Retainable(tc.p); dry.Jobs != len(tc.gone) {
				t.Errorf("Retainable: %d jobs, want %d", dry.Jobs, len(tc.gone))
			}
			r := h.must(CmdRetain, tc.p).(Retained)
			if got := h.jobIDs(); !slices.Equal(got, want) {
				t.Fatalf("jobs after retention %v, want %v (removed %v)", got, want, tc.gone)
			}
			if !slices.Contains(h.jobIDs(), live) {
				t.Fatalf("live job %d removed", live)
			}
			// The archive holds exactly the removed jobs that ran.
			var ran []uint64
			for _, id := range tc.gone {
				if id == b1 || slices.Index(acme, id)%2 == 0 && slices.Contains(acme, id) {
					ran = append(ran, id)
				}
			}
			var archived []uint64
			for _, u := range h.f.d.Usage {
				archived = append(archived, u.Job)
			}
			slices.Sort(ran)
			slices.Sort(archived)
			if !slices.Equal(archived, ran) || r.Jobs != len(tc.gone) || r.Archived != len(ran) {
				t.Fatalf("archive %v (result %+v), want the removed jobs that ran %v", archived, r, ran)
			}
			checkIndex(t, h.f)
		})
	}
	// b1's record: its 90m0.5s run, to the second, without its spec.
	if err := h.f.Restore(nopCloser{bytes.NewReader(base)}); err != nil {
		t.Fatal(err)
	}
	job := h.job(b1)
	h.must(CmdRetain, Retain{JobsEndedBefore: ends[0]})
	rec := h.f.d.Usage[0]
	start := job.Runs[0].Start.Truncate(time.Second)
	sameRuns(t, "archived", rec.Runs, []domain.Run{{Start: start, End: at(job.Runs[0].End.Truncate(time.Second)), GPUs: 8, Units: 8 * domain.UnitsPerGPU}})
	if rec.Tenant != "beta" || rec.Workspace != "lab" || rec.Name != job.Name || rec.SubmittedBy != job.SubmittedBy {
		t.Fatalf("archived record %+v, want job %d's tenant, workspace, name and token", rec, b1)
	}
}

// TestRetainEvents: by age and by count per tenant (the cluster's own
// events a tenant of their own): acme's many events do not push out
// beta's few.
func TestRetainEvents(t *testing.T) {
	h := retainHarness(t)
	h.at = h.at.Add(time.Hour)
	for range 5 {
		h.endJob("acme/research", false, 0)
	}
	h.endJob("beta/lab", false, 0)
	count := func() map[string]int {
		n := map[string]int{}
		for _, e := range h.f.Events(EventFilter{}) {
			n[e.Tenant]++
		}
		return n
	}
	before := count()
	if before["acme"] < 11 || before["beta"] < 3 || before[""] == 0 {
		t.Fatalf("events per tenant %v: the setup changed", before)
	}
	r := h.must(CmdRetain, Retain{EventsPerTenant: 2}).(Retained)
	got := count()
	// The retention pass records its own event, the cluster's.
	if got["acme"] != 2 || got["beta"] != 2 || got[""] != min(before[""], 2)+1 {
		t.Fatalf("events per tenant after keeping 2 each: %v (before %v)", got, before)
	}
	if want := before["acme"] + before["beta"] + before[""] - 4 - min(before[""], 2); r.Events != want {
		t.Fatalf("removed %d events, want %d", r.Events, want)
	}
	// By age: the setup's events (before cut) go, the jobs' and the
	// retention's own stay.
	h = retainHarness(t)
	h.at = h.at.Add(time.Hour)
	cut := h.at
	h.endJob("beta/lab", false, 0)
	h.must(CmdRetain, Retain{EventsBefore: cut})
	for _, e := range h.f.Events(EventFilter{}) {
		if e.At.Before(cut) {
			t.Fatalf("event %+v before the cutoff %s kept", e, cut)
		}
	}
	if n := len(h.f.Events(EventFilter{})); n != 2+1 {
		t.Fatalf("%d events kept, want beta's job's 2 and the retention's", n)
	}
}

// TestRetainUsageArchive: the archive drops records of jobs ended before
// UsageBefore, and a job removed with an end before it is not archived.
func TestRetainUsageArchive(t *testing.T) {
	h := retainHarness(t)
	a, _ := h.endJob("acme/research", true, time.Hour)
	h.at = h.at.Add(time.Hour)
	b, endB := h.endJob("acme/research", true, time.Hour)
	h.at = h.at.Add(time.Hour)
	h.must(CmdRetain, Retain{JobsEndedBefore: h.at})
	if n := h.f.UsageArchived(); n != 2 {
		t.Fatalf("%d records archived, want 2 (jobs %d, %d)", n, a, b)
	}
	r := h.must(CmdRetain, Retain{UsageBefore: endB}).(Retained)
	if r.Usage != 1 || len(h.f.d.Usage) != 1 || h.f.d.Usage[0].Job != b {
		t.Fatalf("after dropping records before job %d's end: %+v, archive %+v", b, r, h.f.d.Usage)
	}
	c, _ := h.endJob("acme/research", true, time.Hour)
	h.at = h.at.Add(time.Hour)
	r = h.must(CmdRetain, Retain{JobsEndedBefore: h.at, UsageBefore: h.at}).(Retained)
	if r.Jobs != 1 || r.Archived != 0 || r.Usage != 1 || len(h.f.d.Usage) != 0 {
		t.Fatalf("job %d removed past the usage retention: %+v, archive %+v", c, r, h.f.d.Usage)
	}
}

// TestRetainRefusesBadCutoffs: a negative count, or a cutoff after the
// command's own time, is refused and changes nothing.
func TestRetainRefusesBadCutoffs(t *testing.T) {
	h := retainHarness(t)
	h.endJob("acme/research", false, 0)
	for name, p := range map[string]Retain{
		"jobsPerTenant":   {JobsPerTenant: -1},
		"eventsPerTenant": {EventsPerTenant: -1},
		"jobsEndedBefore": {JobsEndedBefore: h.at.Add(time.Hour)},
		"eventsBefore":    {EventsBefore: h.at.Add(time.Hour)},
		"usageBefore":     {UsageBefore: h.at.Add(time.Hour)},
	} {
		before := h.snapshot()
		r := h.apply(CmdRetain, p)
		if r.Err == nil || !strings.Contains(r.Err.Error(), name) {
			t.Errorf("%s: %v, want a refusal naming %s", name, r.Err, name)
		}
		if !bytes.Equal(before, h.snapshot()) {
			t.Errorf("%s: a refused retention changed the state", name)
		}
	}
}

// TestRetainReplayAndSnapshot: replaying a log with retention passes gives
// the same bytes; the snapshot carries the archive and round-trips; a
// snapshot from before the archive (no usageArchive key) loads.
func TestRetainReplayAndSnapshot(t *testing.T) {
	h := retainHarness(t)
	for i := range 8 {
		h.endJob([]string{"acme/research", "beta/lab"}[i%2], i%3 != 0, time.Hour)
		if i == 4 {
			h.must(CmdRetain, Retain{JobsEndedBefore: h.at, EventsPerTenant: 5})
		}
	}
	h.must(CmdRetain, Retain{JobsPerTenant: 1, EventsBefore: h.at.Add(-time.Hour)})
	want := h.snapshot()
	if !bytes.Contains(want, []byte(`"usageArchive":[`)) {
		t.Fatal("the snapshot does not carry the usage archive")
	}
	replica := New()
	for i, b := range h.log {
		replica.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	s, _ := replica.Snapshot()
	if !bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("replaying the log with retention produced a different state")
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(want)}); err != nil {
		t.Fatal(err)
	}
	s2, _ := restored.Snapshot()
	if !bytes.Equal(snapshotBytes(t, s2), want) {
		t.Fatal("a snapshot with an archive does not round-trip")
	}

	// An old snapshot: no archive key.
	var old map[string]json.RawMessage
	if err := json.Unmarshal(want, &old); err != nil {
		t.Fatal(err)
	}
	delete(old, "usageArchive")
	b, _ := json.Marshal(old)
	legacy := New()
	if err := legacy.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
		t.Fatalf("a snapshot without the archive: %v", err)
	}
	if legacy.UsageArchived() != 0 || len(legacy.Jobs(JobFilter{})) != len(restored.Jobs(JobFilter{})) {
		t.Fatal("a snapshot without the archive loaded differently")
	}
}

// TestRetentionCommand: the policy's cutoffs at now; zero limits none;
// ended jobs younger than KeepRecent are never cut by age or count.
func TestRetentionCommand(t *testing.T) {
	now := t0
	d := 24 * time.Hour
	for name, tc := range map[string]struct {
		p    Retention
		want Retain
	}{
		"none": {Retention{}, Retain{}},
		"defaults": {Retention{EndedJobs: 30 * d, EndedJobsPerTenant: 10, KeepRecent: 8 * time.Hour, Events: 90 * d, EventsPerTenant: 20, Usage: 400 * d},
			Retain{JobsEndedBefore: now.Add(-30 * d), JobsPerTenant: 10, KeepEndedAfter: now.Add(-8 * time.Hour), EventsBefore: now.Add(-90 * d), EventsPerTenant: 20, UsageBefore: now.Add(-400 * d)}},
		"age under the fair-share history": {Retention{EndedJobs: time.Hour, KeepRecent: 8 * time.Hour}, Retain{JobsEndedBefore: now.Add(-8 * time.Hour)}},
	} {
		if got := tc.p.Command(now); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
		if tc.p.Enabled() != (tc.want != Retain{}) {
			t.Errorf("%s: Enabled %v", name, tc.p.Enabled())
		}
	}
}
