package state

import (
	"cmp"
	"iter"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// jobIndex orders the jobs for the reads that must not sort every job ever
// submitted: the live (non-terminal) jobs by ID, the ended ones by end
// time. Every scheduling cycle, plan apply and fabric compile needs the
// live jobs, and the scheduler the jobs ended since its history horizon;
// ended jobs accumulate until retention removes them (retain.go), so
// those reads cost what they return, not what the state holds.
//
// The index is derived from data.Jobs: apply maintains it (submit adds a
// job, end moves it), reset rebuilds it from a restored snapshot, and it
// is never persisted. A job leaves the live list only through FSM.end, the
// one place a job becomes terminal.
type jobIndex struct {
	// live holds the non-terminal jobs by ID, and the jobs ended since
	// the list was last compacted (terminal: readers skip them; dead
	// names them): taking an ended job out of 100,000 live ones moved
	// half the list under the write lock. Compacted once half of it has
	// ended.
	live  []*domain.Job
	dead  map[uint64]bool
	ended []*domain.Job // terminal, by (EndedAt, ID); a terminal job without EndedAt sorts first
	vers  jobVersions   // what changed since a reader's copy (jobversion.go)
	// byExt holds the jobs (live and ended) with an external id, by that
	// id, each list by ID: a runtime's submit checks that no live job has
	// its id and its prolog looks a job up by it, and a scan of 100,000
	// live jobs did both under the lock. An external id comes with the
	// spec at submit and never changes.
	byExt map[string][]*domain.Job
}

func newJobIndex(jobs map[uint64]*domain.Job) jobIndex {
	var ix jobIndex
	for _, j := range jobs {
		if j.State.Terminal() {
			ix.ended = append(ix.ended, j)
		} else {
			ix.live = append(ix.live, j)
		}
	}
	slices.SortFunc(ix.live, byID)
	slices.SortFunc(ix.ended, byEnd)
	for _, j := range jobs {
		ix.addExt(j)
	}
	for _, js := range ix.byExt {
		slices.SortFunc(js, byID)
	}
	return ix
}

// addExt indexes j by its external id, if it has one.
func (ix *jobIndex) addExt(j *domain.Job) {
	if j.ExternalID == "" {
		return
	}
	if ix.byExt == nil {
		ix.byExt = map[string][]*domain.Job{}
	}
	js := ix.byExt[j.ExternalID]
	i, _ := slices.BinarySearchFunc(js, j, byID)
	ix.byExt[j.ExternalID] = slices.Insert(js, i, j)
}

// removeExt drops j (removed from the state) from the external-id index.
func (ix *jobIndex) removeExt(j *domain.Job) {
	if j.ExternalID == "" {
		return
	}
	js := slices.DeleteFunc(ix.byExt[j.ExternalID], func(x *domain.Job) bool { return x == j })
	if len(js) == 0 {
		delete(ix.byExt, j.ExternalID)
		return
	}
	ix.byExt[j.ExternalID] = js
}

// withExt lists the jobs with external id ext, live and ended, by ID.
func (ix *jobIndex) withExt(ext string) []*domain.Job { return ix.byExt[ext] }

func byID(a, b *domain.Job) int { return cmp.Compare(a.ID, b.ID) }

// endedAt is a terminal job's end time; zero when it has none (a record
// from before EndedAt existed).
func endedAt(j *domain.Job) time.Time {
	if j.EndedAt == nil {
		return time.Time{}
	}
	return *j.EndedAt
}

func byEnd(a, b *domain.Job) int {
	if c := endedAt(a).Compare(endedAt(b)); c != 0 {
		return c
	}
	return byID(a, b)
}

// add indexes a new job. IDs only grow, so this appends; the search keeps
// the order should that ever change.
func (ix *jobIndex) add(j *domain.Job) {
	ix.vers.touch(j.ID)
	ix.addExt(j)
	if j.State.Terminal() {
		ix.insertEnded(j)
		return
	}
	if n := len(ix.live); n == 0 || ix.live[n-1].ID < j.ID {
		ix.live = append(ix.live, j)
		return
	}
	i, _ := slices.BinarySearchFunc(ix.live, j, byID)
	ix.live = slices.Insert(ix.live, i, j)
}

// ended moves a job that just became terminal (j.EndedAt set) from the
// live list to the ended one. Commands carry the leader's clock, which may
// step back across a leader change, so the insert searches rather than
// appends.
func (ix *jobIndex) end(j *domain.Job) {
	ix.vers.touch(j.ID)
	if i, ok := slices.BinarySearchFunc(ix.live, j, byID); ok && ix.live[i] == j && !ix.dead[j.ID] {
		if ix.dead == nil {
			ix.dead = map[uint64]bool{}
		}
		if ix.dead[j.ID] = true; len(ix.dead) > len(ix.live)/2 {
			ix.compact()
		}
	} else if i := slices.Index(ix.ended, j); i >= 0 {
		ix.ended = slices.Delete(ix.ended, i, i+1) // ended twice: re-sort by the new time
	}
	ix.insertEnded(j)
}

// compact drops the ended jobs from live.
func (ix *jobIndex) compact() {
	ix.live = slices.DeleteFunc(ix.live, func(j *domain.Job) bool { return ix.dead[j.ID] })
	ix.dead = nil
}

// liveCount is the number of live jobs.
func (ix *jobIndex) liveCount() int { return len(ix.live) - len(ix.dead) }

func (ix *jobIndex) insertEnded(j *domain.Job) {
	if n := len(ix.ended); n == 0 || byEnd(ix.ended[n-1], j) < 0 {
		ix.ended = append(ix.ended, j)
		return
	}
	i, _ := slices.BinarySearchFunc(ix.ended, j, byEnd)
	ix.ended = slices.Insert(ix.ended, i, j)
}

// touch records that apply changed j: every change to a job's fields
// calls it (or add, or end), so readers that keep copies see it.
func (ix *jobIndex) touch(j *domain.Job) { ix.vers.touch(j.ID) }

// liveJobs yields the non-terminal jobs by ID.
func (ix *jobIndex) liveJobs() iter.Seq[*domain.Job] {
	return func(yield func(*domain.Job) bool) {
		for _, j := range ix.live {
			if j.State.Terminal() {
				continue // ended since the last compaction
			}
			if !yield(j) {
				return
			}
		}
	}
}

// endedSince yields the terminal jobs that ended after since, by end time.
func (ix *jobIndex) endedSince(since time.Time) iter.Seq[*domain.Job] {
	return func(yield func(*domain.Job) bool) {
		i, _ := slices.BinarySearchFunc(ix.ended, since, func(j *domain.Job, t time.Time) int {
			if endedAt(j).After(t) {
				return 1
			}
			return -1
		})
		for _, j := range ix.ended[i:] {
			if !yield(j) {
				return
			}
		}
	}
}
