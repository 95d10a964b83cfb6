package sched

import (
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// jobTable is what the cycle's passes over every job read of each, one
// dense row per job of the snapshot (rows[i] is jobs[i]'s): a pass over
// 100,000 jobs then walks one array instead of loading each job (a cache
// miss apiece), and names a job's tenant/workspace by a number instead
// of hashing two strings. A Carry keeps its table across cycles, reading
// only the jobs that changed; a cycle without one builds it in one pass.
type jobTable struct {
	jobs []*domain.Job
	rows []jobRow
	// pairs names the tenant/workspace pairs the rows number (a Carry's
	// keep the numbers of pairs no live job names until it starts over).
	pairs  [][2]string
	pairID map[[2]string]int32
	// refs is each pair's "tenant/workspace", and refOf numbers the
	// distinct refs (two pairs may name one ref: names with '/'), made
	// once per pair instead of once per pair and cycle.
	refs  []string
	refOf []int32
	refID map[string]int32
	// ixFor is the numbering of the usage index pairIndex last answered
	// for; ixWS and ixT are its answers, each pair's workspace and tenant
	// there. A Carry keeps its table and, while the workspaces and
	// tenants stay, its usage index's numbering: pairs are only ever
	// added, so the answers stand and only new pairs are looked up
	// (5,000 look-ups by two names a cycle, and as many again when step
	// read each workspace's usage).
	ixFor     *numbering
	ixWS, ixT []int32
	// locs are the locations the rows' times name by number.
	locs []*time.Location
}

// jobRow is one job's fields as the passes over every job read them.
type jobRow struct {
	id           uint64
	preemptedFor uint64
	placedAt     rowTime // PlacedAt, when hasPlacedAt (jobTable.placedAt)
	since        rowTime // StartedAt, else PlacedAt, when hasSince (cost; jobTable.since)
	minRuntime   int64   // MinRuntimeSeconds
	expected     int64   // ExpectedDurationSeconds
	timeLimit    int64   // TimeLimitSeconds
	prio         int
	demand       int // demand(j)
	held         int // held(j)
	pair         int32
	// srv is the server of the job's one placement in its Carry's Static
	// numbering (-1: none, several, unknown, or no Carry).
	srv   int32
	state rowState
	// placed: it has a placement; hasPlacedAt: PlacedAt is set; ended:
	// EndedAt is set (never on a live job the state hands out, read from
	// the job when it is); reclaimWait: its reason is reclaim_pending.
	placed, hasPlacedAt, hasSince, ended, reclaimWait, stoppable bool
}

// rowTime is a time.Time without its pointer, the location, which the
// table numbers (locs): rows without pointers are not scanned by the
// collector (two tables of 100,000 rows, 27 MB, each collection at
// issue 18's scale) nor copied under its write barrier. A time with a
// monotonic reading (never one the state hands out) is read from the
// job.
type rowTime struct {
	sec  int64
	nsec int32
	loc  uint8 // 0: UTC; rowTimeOfJob: read the job's; else locs[loc-1]
}

const rowTimeOfJob = 255

// rowTime is x as a row holds it.
func (t *jobTable) rowTime(x time.Time) rowTime {
	if x != x.Round(0) {
		return rowTime{loc: rowTimeOfJob} // a monotonic reading
	}
	r := rowTime{sec: x.Unix(), nsec: int32(x.Nanosecond())}
	if l := x.Location(); l != time.UTC {
		i := slices.Index(t.locs, l)
		if i < 0 {
			if len(t.locs) >= rowTimeOfJob-1 {
				return rowTime{loc: rowTimeOfJob}
			}
			t.locs = append(t.locs, l)
			i = len(t.locs) - 1
		}
		r.loc = uint8(i + 1)
	}
	return r
}

// timeOf is the time.Time r holds, equal (==) to the one it was made of;
// at is what the job has (for rowTimeOfJob).
func (t *jobTable) timeOf(r rowTime, at func() time.Time) time.Time {
	switch r.loc {
	case 0:
		return time.Unix(r.sec, int64(r.nsec)).UTC()
	case rowTimeOfJob:
		return at()
	}
	return time.Unix(r.sec, int64(r.nsec)).In(t.locs[r.loc-1])
}

// placedAt is row k's PlacedAt (hasPlacedAt).
func (t *jobTable) placedAt(k int) time.Time {
	return t.timeOf(t.rows[k].placedAt, func() time.Time { return *t.jobs[k].PlacedAt })
}

// since is row k's StartedAt, else its PlacedAt (hasSince).
func (t *jobTable) since(k int) time.Time {
	return t.timeOf(t.rows[k].since, func() time.Time {
		if j := t.jobs[k]; j.StartedAt != nil {
			return *j.StartedAt
		}
		return *t.jobs[k].PlacedAt
	})
}

// rowState is the job states the passes tell apart.
type rowState uint8

const (
	rowOther rowState = iota
	rowPending
	rowRunning
	rowReady
	rowPreempting
)

func newJobTable(jobs []*domain.Job) *jobTable {
	t := &jobTable{pairID: map[[2]string]int32{}}
	t.fill(jobs)
	return t
}

// fill makes the rows of jobs afresh.
func (t *jobTable) fill(jobs []*domain.Job) {
	t.jobs = append(t.jobs[:0], jobs...)
	t.rows = t.rows[:0]
	for _, j := range jobs {
		t.rows = append(t.rows, t.rowOf(j))
	}
}

func (t *jobTable) intern(tenant, workspace string) int32 {
	k := [2]string{tenant, workspace}
	if id, ok := t.pairID[k]; ok {
		return id
	}
	id := int32(len(t.pairs))
	t.pairs = append(t.pairs, k)
	t.pairID[k] = id
	ref := tenant + "/" + workspace
	if t.refID == nil {
		t.refID = map[string]int32{}
	}
	r, ok := t.refID[ref]
	if !ok {
		r = int32(len(t.refID))
		t.refID[ref] = r
	}
	t.refs, t.refOf = append(t.refs, ref), append(t.refOf, r)
	return id
}

func (t *jobTable) rowOf(j *domain.Job) jobRow {
	return t.rowIn(j, t.intern(j.Tenant, j.Workspace))
}

// rowIn is rowOf, j's tenant/workspace pair numbered pair already.
func (t *jobTable) rowIn(j *domain.Job, pair int32) jobRow {
	r := jobRow{id: j.ID, srv: -1, preemptedFor: j.PreemptedFor, expected: j.ExpectedDurationSeconds, timeLimit: j.TimeLimitSeconds,
		prio: j.Priority, demand: demand(j), held: held(j), pair: pair,
		placed: len(j.Placement) > 0, hasPlacedAt: j.PlacedAt != nil, ended: j.EndedAt != nil,
		reclaimWait: j.Reason != nil && j.Reason.Code == ReasonReclaim, stoppable: j.State.Stoppable()}
	if j.PlacedAt != nil {
		r.placedAt = t.rowTime(*j.PlacedAt)
	}
	r.minRuntime = j.MinRuntimeSeconds
	if since := j.PlacedAt; j.StartedAt != nil || since != nil {
		if j.StartedAt != nil {
			since = j.StartedAt
		}
		r.since, r.hasSince = t.rowTime(*since), true
	}
	switch j.State {
	case domain.JobPending:
		r.state = rowPending
	case domain.JobRunning:
		r.state = rowRunning
	case domain.JobReady:
		r.state = rowReady
	case domain.JobPreempting:
		r.state = rowPreempting
	}
	return r
}

// pairIndex maps the table's pairs to the usage index's workspaces (-1:
// unknown), looked up once per pair and usage index (pairTenants has the
// tenants). The answer is the table's: read, not changed.
func (t *jobTable) pairIndex(ix *usageIndex) []int32 {
	if t.ixFor != ix.numbered {
		t.ixFor, t.ixWS, t.ixT = ix.numbered, t.ixWS[:0], t.ixT[:0]
	}
	for i := len(t.ixWS); i < len(t.pairs); i++ {
		p := t.pairs[i]
		wi, ti := ix.of(p[0], p[1])
		t.ixWS, t.ixT = append(t.ixWS, int32(wi)), append(t.ixT, int32(ti))
	}
	return t.ixWS
}

// pairTenants is each pair's tenant in the usage index pairIndex last
// answered for (-1: unknown).
func (t *jobTable) pairTenants() []int32 { return t.ixT }
