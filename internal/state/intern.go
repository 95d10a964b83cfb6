package state

import (
	"unique"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A leader holding 100,000 pending jobs spent most of a submit's p99 on
// the garbage collector marking its heap (issue 18), and most of that heap
// was the same few values decoded again for every job: its tenant,
// workspace, submitter, GPU model, the reason the scheduler gives a whole
// queue. Where a job enters the state (submit, restore, a committed
// reason) those values are made canonical, so jobs that share them share
// one string or one Reason: the heap holds a handful of each instead of
// one per job, and the collector has fewer objects to mark. Values are
// unchanged, so nothing that reads, encodes or hashes them can tell.

// intern is s's canonical copy (unique.Make: a string nothing holds any
// more is freed, so the table does not grow with every value ever seen).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internSpec makes the strings jobs share canonical: their tenant,
// workspace, GPU models, MIG profile and drivers (not the name, nor the
// external id: one job's own).
func internSpec(s *domain.JobSpec) {
	s.Tenant, s.Workspace = intern(s.Tenant), intern(s.Workspace)
	s.GPUModel, s.MIGProfile = intern(s.GPUModel), intern(s.MIGProfile)
	s.MinDriver, s.Driver = intern(s.MinDriver), intern(s.Driver)
	for i, m := range s.GPUModels {
		s.GPUModels[i] = intern(m)
	}
}

// internJob makes a job's shared strings and its reason canonical (a job
// restored from a snapshot, decoded one by one).
func (f *FSM) internJob(j *domain.Job) {
	internSpec(&j.JobSpec)
	j.SubmittedBy = intern(j.SubmittedBy)
	if j.Reason != nil {
		j.Reason = f.reasons.of(*j.Reason)
	}
}

// queuedReason is every newly submitted job's reason: one value, shared.
// A job's reason is never changed in place (apply replaces the pointer),
// so jobs and the copies handed out may share it.
var queuedReason = &domain.Reason{Code: domain.ReasonQueued, Message: "queued: waiting for the next scheduling cycle"}

// reasonTable shares the reasons jobs are given: a scheduling cycle
// commits one for each pending job, and a long queue waits for the same
// few. Derived, never persisted; bounded (cleared when full: a reason
// made again is only a second copy, equal to the first).
type reasonTable struct {
	m map[domain.Reason]*domain.Reason
}

// maxSharedReasons bounds the table: the reasons of a queue are a few per
// workspace and shape; a table this large has met per-job texts, which
// sharing does not help.
const maxSharedReasons = 4096

// of is a Reason equal to r, shared with the jobs given an equal one. A
// reason with a reservation (one job's own time and servers) is not
// shared.
func (t *reasonTable) of(r domain.Reason) *domain.Reason {
	if r.Reservation != nil {
		return &r
	}
	if p, ok := t.m[r]; ok {
		return p
	}
	if t.m == nil || len(t.m) >= maxSharedReasons {
		t.m = make(map[domain.Reason]*domain.Reason)
	}
	r.Code = intern(r.Code)
	p := &r
	t.m[r] = p
	return p
}
