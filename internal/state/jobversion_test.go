package state

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// jobVersion is a job as encoded, and its version, before a command.
type jobVersion struct {
	ver uint64
	b   []byte
}

// jobVersions records every job and its version; checkJobVersions, after
// the command, fails the test if a job changed but kept its version: a
// change apply made without touching the job, which a reader keeping
// copies (sched.Snapshotter) would miss. harness.apply runs it around
// every command of every test.
func (h *harness) jobVersions() map[uint64]jobVersion {
	h.t.Helper()
	out := make(map[uint64]jobVersion, len(h.f.d.Jobs))
	for id, j := range h.f.d.Jobs {
		b, err := json.Marshal(j)
		if err != nil {
			h.t.Fatal(err)
		}
		out[id] = jobVersion{ver: h.f.jobs.vers.of(id), b: b}
	}
	return out
}

func (h *harness) checkJobVersions(ct CommandType, before map[uint64]jobVersion) {
	h.t.Helper()
	for id, j := range h.f.d.Jobs {
		was, ok := before[id]
		ver := h.f.jobs.vers.of(id)
		if !ok {
			if ver <= h.f.jobs.vers.base {
				h.t.Fatalf("%s added job %d without a version of its own", ct, id)
			}
			continue
		}
		b, err := json.Marshal(j)
		if err != nil {
			h.t.Fatal(err)
		}
		if ver == was.ver && !bytes.Equal(b, was.b) {
			h.t.Fatalf("%s changed job %d without touching it (version %d):\nbefore %s\nafter  %s", ct, id, ver, was.b, b)
		}
		if ver < was.ver {
			h.t.Fatalf("%s: job %d's version went back from %d to %d", ct, id, was.ver, ver)
		}
	}
	// The fabric fingerprint's jobs, hashed again only where changed, sum
	// as hashing every job does.
	var whole, kept uint64
	h.f.Read(func(View) {
		for j := range h.f.jobs.liveJobs() {
			whole += jobFingerprint(j)
		}
		for _, t := range h.f.d.Tenants {
			whole += tenantFingerprint(t)
		}
		kept = h.f.fingerprintJobs.of(h.f) + h.f.fingerprintTenants.of(h.f.d.Tenants)
	})
	if whole != kept {
		h.t.Fatalf("after %s the fabric fingerprint's jobs and tenants sum to %x, hashing them all gives %x", ct, kept, whole)
	}
	// What the versions are for: the loop's incremental snapshot is the
	// whole copy, job for job.
	var inc, full *sched.Snapshot
	h.f.Read(func(v View) {
		inc = h.snaps.Of(v, time.Time{})
		full = sched.SnapshotOf(v, time.Time{}, CopyJob)
	})
	if !reflect.DeepEqual(inc.Jobs, full.Jobs) || !reflect.DeepEqual(inc.History, full.History) {
		h.t.Fatalf("after %s the incremental snapshot differs from a whole copy:\nincremental %s\nwhole       %s", ct, jobsJSON(h.t, inc), jobsJSON(h.t, full))
	}
}

func jobsJSON(t testing.TB, s *sched.Snapshot) []byte {
	b, err := json.Marshal([][]*domain.Job{s.Jobs, s.History})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotterCopiesWhatChanged: the loop's snapshotter shares the
// copies of unchanged jobs with its previous snapshot and copies again a
// job that changed, one whose tenant's driver floor changed, and all of
// them after a restore; its copies never alias the state.
//
// With CopyOf (the server's), the copies are the raft snapshot's, and the
// floor's fold goes into a copy of its own, not into that one.
func TestSnapshotterCopiesWhatChanged(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "CopyJob", true: "CopyOf"}[shared], func(t *testing.T) { snapshotterCopiesWhatChanged(t, shared) })
	}
}

func snapshotterCopiesWhatChanged(t *testing.T, shared bool) {
	h := newHarness(t).cluster(1, 2, 8)
	for _, g := range []int{8, 2, 3} {
		h.must(CmdJobSubmit, MakeJob("research", g).Obj())
	}
	h.placeFirst() // job 1
	snaps := sched.Snapshotter{Clone: CopyJob}
	if shared {
		snaps.Clone = h.f.CopyOf
	}
	of := func() map[uint64]*domain.Job {
		var s *sched.Snapshot
		h.f.Read(func(v View) { s = snaps.Of(v, time.Time{}) })
		m := map[uint64]*domain.Job{}
		for _, j := range slices.Concat(s.Jobs, s.History) {
			m[j.ID] = j
		}
		return m
	}
	same := func(a, b map[uint64]*domain.Job) (ids []uint64) {
		for id, j := range b {
			if a[id] == j {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		return ids
	}
	s1 := of()
	if got := same(s1, of()); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("nothing changed, yet only jobs %v were shared", got)
	}
	s2 := of()
	h.must(CmdJobReport, JobReport{ID: 1, State: ReportRunning})
	h.must(CmdJobCancel, JobCancel{ID: 3}) // never placed: leaves the snapshot
	s3 := of()
	if got := same(s2, s3); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("jobs 1 and 3 changed, yet jobs %v were shared (want [2])", got)
	}
	if s3[1].State != domain.JobRunning || s3[3] != nil {
		t.Fatalf("the snapshot missed the changes: job 1 %s, job 3 %v", s3[1].State, s3[3])
	}
	h.must(CmdJobReport, JobReport{ID: 1, State: ReportSucceeded})
	s4 := of()
	if s4[1] == nil || s4[1].State != domain.JobSucceeded || s4[1] == s3[1] {
		t.Fatalf("the ended job is not in the history as it ended: %+v", s4[1])
	}
	pol := domain.DefaultHostPolicy()
	pol.TenantMinDriver = map[string]string{"acme": "550.54.15"}
	h.must(CmdHostPolicy, HostPolicySet{Policy: pol})
	s5 := of()
	if s5[2] == s4[2] || s5[2].MinDriver != "550.54.15" {
		t.Fatalf("the tenant's new driver floor is not in the copy: %q", s5[2].MinDriver)
	}
	if j, _ := h.f.Job(2); j.MinDriver != "" {
		t.Fatalf("the fold changed the stored job: %q", j.MinDriver)
	}
	if e := h.f.snapJobs.byID[2]; e.job != nil && e.job.MinDriver != "" {
		t.Fatalf("the fold changed the raft snapshot's copy: %q", e.job.MinDriver)
	}
	if got := same(s5, of()); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("nothing changed, yet only jobs %v were shared", got)
	}
	s6 := of()
	if err := h.f.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
		t.Fatal(err)
	}
	if got := same(s6, of()); len(got) != 0 {
		t.Fatalf("after a restore jobs %v were shared from before it", got)
	}
	s7 := of()
	s7[2].Name = "changed"
	if j, _ := h.f.Job(2); j.Name == "changed" {
		t.Fatal("the snapshot aliases the state")
	}
}

// TestJobVersionsRestart: a state restored from a snapshot numbers every
// job above any version handed out before, so no copy taken before the
// restore passes for current.
func TestJobVersionsRestart(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdJobSubmit, spec("acme", "research", 1))
	h.must(CmdJobSubmit, spec("acme", "research", 2))
	var high uint64
	for id := range h.f.d.Jobs {
		high = max(high, h.f.jobs.vers.of(id))
	}
	snap := h.snapshot()
	r := New()
	r.jobs.vers = h.f.jobs.vers // the same FSM, restored in place
	if err := r.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	for id := range r.d.Jobs {
		if v := r.jobs.vers.of(id); v <= high {
			t.Errorf("job %d restored at version %d; versions before the restore reach %d", id, v, high)
		}
	}
}
