package state

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Retention keeps the state bounded: ended jobs and events past an age, or
// past a count per tenant, leave the state; what accounting needs of a
// removed job stays in the usage archive (data.Usage), which has its own
// age limit.
//
// The leader decides when (a periodic state.retain command, cutoffs
// computed from its clock and the policy); apply removes what the command's
// cutoffs select, so every replica removes the same jobs and events. Counts
// are per tenant, the newest kept: one tenant's churn cannot push out
// another tenant's history. Events without a tenant (the cluster's own)
// count as one more tenant.

// CmdRetain removes ended jobs and events past their retention.
const CmdRetain CommandType = "state.retain"

// Retain is the cutoffs of one retention pass; zero fields remove nothing.
type Retain struct {
	// JobsEndedBefore: ended jobs that ended before it are removed.
	JobsEndedBefore time.Time `json:"jobsEndedBefore"`
	// JobsPerTenant: of each tenant's ended jobs, only the newest this many
	// are kept (by end time)...
	JobsPerTenant int `json:"jobsPerTenant,omitempty"`
	// KeepEndedAfter: ...except that jobs ended after it stay whatever the
	// count: the scheduler's fair share reads them (its history horizon).
	KeepEndedAfter time.Time `json:"keepEndedAfter"`
	// EventsBefore: events before it are removed.
	EventsBefore time.Time `json:"eventsBefore"`
	// EventsPerTenant: of each tenant's events, only the newest this many
	// are kept.
	EventsPerTenant int `json:"eventsPerTenant,omitempty"`
	// UsageBefore: usage records of jobs that ended before it leave the
	// archive: usage over periods before it is no longer reported.
	UsageBefore time.Time `json:"usageBefore"`
}

// Retained is what a retention pass removed.
type Retained struct {
	Jobs     int `json:"jobs"`
	Archived int `json:"archived"` // removed jobs whose runs entered the usage archive
	Events   int `json:"events"`
	Usage    int `json:"usage"` // usage records dropped from the archive
}

func (r Retained) empty() bool { return r == Retained{} }

// Retention is the policy the leader turns into Retain commands. A zero
// age or count keeps forever.
type Retention struct {
	EndedJobs          time.Duration
	EndedJobsPerTenant int
	// KeepRecent: ended jobs younger than this are kept whatever the age
	// and count limits say (the scheduler's fair-share history).
	KeepRecent      time.Duration
	Events          time.Duration
	EventsPerTenant int
	Usage           time.Duration
}

// Enabled says whether the policy removes anything at all.
func (p Retention) Enabled() bool {
	return p.EndedJobs > 0 || p.EndedJobsPerTenant > 0 || p.Events > 0 || p.EventsPerTenant > 0 || p.Usage > 0
}

// Command is the policy's cutoffs at now.
func (p Retention) Command(now time.Time) Retain {
	var r Retain
	if p.EndedJobs > 0 {
		r.JobsEndedBefore = now.Add(-max(p.EndedJobs, p.KeepRecent))
	}
	if p.EndedJobsPerTenant > 0 {
		r.JobsPerTenant = p.EndedJobsPerTenant
		r.KeepEndedAfter = now.Add(-p.KeepRecent)
	}
	if p.Events > 0 {
		r.EventsBefore = now.Add(-p.Events)
	}
	r.EventsPerTenant = p.EventsPerTenant
	if p.Usage > 0 {
		r.UsageBefore = now.Add(-p.Usage)
	}
	return r
}

// Retainable is what a pass with these cutoffs would remove now, without
// removing it: the leader proposes only passes that remove something.
func (f *FSM) Retainable(p Retain) Retained {
	f.mu.RLock()
	defer f.mu.RUnlock()
	jobs := f.retainJobs(&p)
	r := Retained{Jobs: len(jobs), Usage: f.retainUsage(&p)}
	for _, j := range jobs {
		if len(j.Runs) > 0 {
			r.Archived++
		}
	}
	for _, keep := range f.retainEvents(&p) {
		if !keep {
			r.Events++
		}
	}
	return r
}

func (f *FSM) applyRetain(c *Command) (any, *domain.Error) {
	p, derr := decode[Retain](c)
	if derr != nil {
		return nil, derr
	}
	if p.JobsPerTenant < 0 {
		return nil, domain.Invalid("jobsPerTenant", "jobsPerTenant %d is negative", p.JobsPerTenant)
	}
	if p.EventsPerTenant < 0 {
		return nil, domain.Invalid("eventsPerTenant", "eventsPerTenant %d is negative", p.EventsPerTenant)
	}
	for _, cut := range []struct {
		field string
		t     time.Time
	}{{"jobsEndedBefore", p.JobsEndedBefore}, {"eventsBefore", p.EventsBefore}, {"usageBefore", p.UsageBefore}} {
		if field, t := cut.field, cut.t; t.After(c.At) {
			return nil, domain.Invalid(field, "%s %s is after the command's time %s: retention removes only the past", field, t.UTC().Format(time.RFC3339), c.At.UTC().Format(time.RFC3339))
		}
	}
	if c.check {
		return nil, nil
	}
	var r Retained
	// Drop old usage first: records archived now are never older than
	// what they would be dropped for in the same pass.
	if n := f.retainUsage(p); n > 0 {
		f.d.Usage = slices.Clone(f.d.Usage[n:]) // a new array: the old prefix is freed
		r.Usage = n
	}
	if jobs := f.retainJobs(p); len(jobs) > 0 {
		r.Jobs, r.Archived = f.removeJobs(jobs, p.UsageBefore)
	}
	r.Events = f.removeEvents(p)
	if r.empty() {
		return r, nil
	}
	f.event(c, string(CmdRetain), "state", "", "", fmt.Sprintf("removed %d ended jobs (%d archived for usage), %d events, %d usage records", r.Jobs, r.Archived, r.Events, r.Usage))
	// The pass's own record counts within the cluster's events: trimmed
	// now, the cap holds after the pass, and the next finds nothing to do
	// (rather than trading one event for another every time).
	if p.EventsPerTenant > 0 {
		r.Events += f.removeEvents(&Retain{EventsPerTenant: p.EventsPerTenant})
	}
	return r, nil
}

// removeEvents removes the events p selects; it returns how many.
func (f *FSM) removeEvents(p *Retain) int {
	keep := f.retainEvents(p)
	if keep == nil {
		return 0
	}
	kept := make([]domain.Event, 0, len(f.d.Events))
	for i, e := range f.d.Events {
		if keep[i] {
			kept = append(kept, e)
		}
	}
	n := len(f.d.Events) - len(kept)
	f.d.Events = kept
	f.reads.events.stale = true // positions moved (readindex.go)
	return n
}

// retainJobs selects the ended jobs p removes, oldest first.
func (f *FSM) retainJobs(p *Retain) []*domain.Job {
	ended := f.jobs.ended
	var out []*domain.Job
	// By age: a prefix of the ended list (by end time; a job without an
	// end time sorts first and is the oldest).
	n := 0
	if !p.JobsEndedBefore.IsZero() {
		n, _ = slices.BinarySearchFunc(ended, p.JobsEndedBefore, func(j *domain.Job, t time.Time) int {
			if endedAt(j).Before(t) {
				return -1
			}
			return 1
		})
		out = append(out, ended[:n]...)
	}
	if p.JobsPerTenant <= 0 {
		return out
	}
	// By count: walk the rest from the newest; past a tenant's count, its
	// older jobs go unless they ended after KeepEndedAfter.
	seen := map[string]int{}
	var over []*domain.Job
	for i := len(ended) - 1; i >= n; i-- {
		j := ended[i]
		seen[j.Tenant]++
		if seen[j.Tenant] > p.JobsPerTenant && (p.KeepEndedAfter.IsZero() || !endedAt(j).After(p.KeepEndedAfter)) {
			over = append(over, j)
		}
	}
	slices.Reverse(over)
	return append(out, over...)
}

// retainUsage counts the archive's records p drops: a prefix.
func (f *FSM) retainUsage(p *Retain) int {
	if p.UsageBefore.IsZero() {
		return 0
	}
	n, _ := slices.BinarySearchFunc(f.d.Usage, p.UsageBefore, func(u domain.UsageRecord, t time.Time) int {
		if u.EndedAt.Before(t) {
			return -1
		}
		return 1
	})
	return n
}

// retainEvents says which events p keeps (nil: all of them).
func (f *FSM) retainEvents(p *Retain) []bool {
	ev := f.d.Events
	var keep []bool
	drop := func(i int) {
		if keep == nil {
			keep = make([]bool, len(ev))
			for k := range keep {
				keep[k] = true
			}
		}
		keep[i] = false
	}
	// Events are appended in order, their times the leaders' clocks: by
	// age, each is judged on its own.
	if !p.EventsBefore.IsZero() {
		for i := range ev {
			if ev[i].At.Before(p.EventsBefore) {
				drop(i)
			}
		}
	}
	if p.EventsPerTenant > 0 {
		seen := map[string]int{}
		for i := len(ev) - 1; i >= 0; i-- {
			seen[ev[i].Tenant]++
			if seen[ev[i].Tenant] > p.EventsPerTenant {
				drop(i)
			}
		}
	}
	return keep
}

// removeJobs takes ended jobs out of the state, archiving the runs of those
// that held GPUs (unless they ended before usageBefore: the archive would
// drop them at once).
func (f *FSM) removeJobs(jobs []*domain.Job, usageBefore time.Time) (removed, archived int) {
	gone := make(map[*domain.Job]bool, len(jobs))
	var recs []domain.UsageRecord
	for _, j := range jobs {
		gone[j] = true
		delete(f.d.Jobs, j.ID)
		f.jobs.vers.forget(j.ID)
		f.jobs.removeExt(j)
		if len(j.Runs) == 0 {
			continue
		}
		rec := usageRecord(j)
		if !usageBefore.IsZero() && rec.EndedAt.Before(usageBefore) {
			continue
		}
		recs = append(recs, rec)
	}
	kept := make([]*domain.Job, 0, len(f.jobs.ended)-len(gone))
	for _, j := range f.jobs.ended {
		if !gone[j] {
			kept = append(kept, j)
		}
	}
	f.jobs.ended = kept
	f.d.Usage = mergeUsage(f.d.Usage, recs)
	return len(jobs), len(recs)
}

// usageRecord is what the archive keeps of an ended job: times to the
// second (what usage counts), so the report over any period is unchanged.
func usageRecord(j *domain.Job) domain.UsageRecord {
	rec := domain.UsageRecord{Job: j.ID, Name: j.Name, Tenant: j.Tenant, Workspace: j.Workspace, SubmittedBy: j.SubmittedBy,
		EndedAt: endedAt(j).UTC().Truncate(time.Second), Runs: make([]domain.Run, len(j.Runs)), Split: j.RunsArchived > 0}
	for i, r := range j.Runs {
		end := rec.EndedAt
		if r.End != nil {
			end = r.End.UTC().Truncate(time.Second)
		}
		rec.Runs[i] = domain.Run{Start: r.Start.UTC().Truncate(time.Second), End: &end, GPUs: r.GPUs, Units: r.Units, BorrowedUnits: r.BorrowedUnits}
	}
	return rec
}

func byRecordEnd(a, b domain.UsageRecord) int {
	if c := a.EndedAt.Compare(b.EndedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Job, b.Job)
}

// mergeUsage adds recs to the archive, which stays ordered by end time.
// Jobs leave mostly in end order, so the new records usually append.
func mergeUsage(archive, recs []domain.UsageRecord) []domain.UsageRecord {
	if len(recs) == 0 {
		return archive
	}
	slices.SortFunc(recs, byRecordEnd)
	if n := len(archive); n == 0 || byRecordEnd(archive[n-1], recs[0]) < 0 {
		return append(archive, recs...)
	}
	out := make([]domain.UsageRecord, 0, len(archive)+len(recs))
	i, k := 0, 0
	for i < len(archive) && k < len(recs) {
		if byRecordEnd(archive[i], recs[k]) <= 0 {
			out = append(out, archive[i])
			i++
		} else {
			out = append(out, recs[k])
			k++
		}
	}
	out = append(out, archive[i:]...)
	return append(out, recs[k:]...)
}

// archivedSince yields the usage records of removed jobs that ended after
// since, by end time.
func (f *FSM) archivedSince(since time.Time) iter.Seq[*domain.UsageRecord] {
	return func(yield func(*domain.UsageRecord) bool) {
		u := f.d.Usage
		i, _ := slices.BinarySearchFunc(u, since, func(r domain.UsageRecord, t time.Time) int {
			if r.EndedAt.After(t) {
				return 1
			}
			return -1
		})
		for k := i; k < len(u); k++ {
			if !yield(&u[k]) {
				return
			}
		}
	}
}

// UsageArchived is the number of records in the usage archive.
func (f *FSM) UsageArchived() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.d.Usage)
}

// Sizes counts what retention bounds: the state's records by kind.
type Sizes struct {
	LiveJobs, EndedJobs, Events, UsageRecords int
}

// Sizes is the state's current Sizes.
func (f *FSM) Sizes() Sizes {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return Sizes{LiveJobs: f.jobs.liveCount(), EndedJobs: len(f.jobs.ended), Events: len(f.d.Events), UsageRecords: len(f.d.Usage)}
}
