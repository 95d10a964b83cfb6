package sched

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Source is what a Snapshot is built from: the replicated state's
// read-only view (state.View), or any other holder of tenants, workspaces
// and jobs. It hands out its own values; SnapshotOf copies what it keeps.
type Source interface {
	Topology() *domain.Topology
	// Static is NewStatic(Topology()), built once per topology (nil: the
	// scheduler builds it).
	Static() *Static
	Tenants() iter.Seq[*domain.Tenant]
	Workspaces() iter.Seq[*domain.Workspace]
	// Nodes are the conditions of servers that are not plainly schedulable.
	Nodes() iter.Seq[*domain.NodeCondition]
	// ServerPools are the server pools (replaced whole, never changed in
	// place: the snapshot shares them).
	ServerPools() iter.Seq[*domain.ServerPool]
	// LiveJobs are the non-terminal jobs, by ID.
	LiveJobs() iter.Seq[*domain.Job]
	// EndedSince are the terminal jobs that ended after since.
	EndedSince(since time.Time) iter.Seq[*domain.Job]
	// TenantMinDriver is the oldest driver a tenant's jobs accept ("" for
	// no floor).
	TenantMinDriver(tenant string) string
}

// Versioned is a Source that numbers its jobs' changes (state.View): a
// job's version changes whenever the job does and never returns to an
// earlier value, so a copy taken at a version is current while the
// version holds.
type Versioned interface {
	JobVersion(id uint64) uint64
	// JobVersionOwner is who numbers the versions (comparable): the
	// versions of two owners say nothing of each other.
	JobVersionOwner() any
}

// Changelog is a Versioned source that also lists which jobs changed
// since a generation (state.View): a Snapshotter then visits those jobs
// only, and takes the others from its previous snapshot, so building a
// snapshot of 100,000 live jobs holds the source's lock for the few that
// changed rather than a look-up per job.
type Changelog interface {
	Versioned
	// JobGeneration is the generation of the source's latest job change.
	JobGeneration() uint64
	// JobsChangedSince lists the jobs changed, added or removed after
	// generation gen (an ID may repeat), or false when the source no
	// longer knows (it then reads every job).
	JobsChangedSince(gen uint64) ([]uint64, bool)
	// LiveJob is job id if it is in the source and not terminal.
	LiveJob(id uint64) (*domain.Job, bool)
}

// SnapshotOf builds the scheduler's view of src: its tenants, workspaces
// and node conditions, the non-terminal jobs, and the placed jobs that
// ended after since (fair-share history), each job copied by clone. The
// topology is shared, not copied: it is replaced whole, never changed in
// place, and the scheduler only reads it. A job's minimum driver is raised
// to its tenant's in the copy; the source keeps what its user asked.
func SnapshotOf(src Source, since time.Time, clone func(*domain.Job) *domain.Job) *Snapshot {
	return buildSnapshot(src, since, &jobCopier{clone: clone, src: src})
}

// Snapshotter builds successive snapshots of one source (the scheduling
// loop's, one per cycle), copying only the jobs that changed since its
// previous snapshot: the others it shares from that snapshot. The source
// is read under its lock, so the lock is held for a version look-up per
// job rather than a deep copy of each. Snapshots it hands out share job
// copies with each other; the scheduler never changes a snapshot, and
// neither may its other readers.
//
// A source that is not Versioned is copied whole every time. A
// Snapshotter is not safe for concurrent use.
type Snapshotter struct {
	// Clone copies a job out of the source (state.CopyJob), or hands out
	// a copy no one changes (state.FSM.CopyOf).
	Clone func(*domain.Job) *domain.Job
	owner any                // of the versions the copies were taken at
	live  []keptJob          // the previous snapshot's live jobs, by ID
	ended map[uint64]keptJob // its history, by ID
	// With a Changelog source: the generation the previous snapshot was
	// taken at, and the driver floors its copies were made with, by
	// tenant (a floor that moved invalidates every copy of its tenant).
	gen    uint64
	hasGen bool
	floors map[string]string
	// The buffers of the snapshot before, refilled for the next one: a
	// cycle allocates only the copies it makes.
	spareLive  []keptJob
	spareEnded map[uint64]keptJob
}

// keptJob is a copy and what it was copied at.
type keptJob struct {
	ver   uint64
	floor string // the tenant's minimum driver folded in
	job   *domain.Job
}

// Of builds the snapshot of src now, as SnapshotOf(src, since, s.Clone).
func (s *Snapshotter) Of(src Source, since time.Time) *Snapshot {
	return s.Begin(src, since)()
}

// Begin is Of in two steps: it reads the source now (the caller holds its
// lock) and returns finish, which the caller runs after releasing the
// lock. With a Changelog source it copies only the changed jobs now and
// leaves finish to merge them with the previous snapshot's others: that
// merge walks every live job (100,000 of them, 5 to 10 ms), and under the
// state's read lock every apply waited for it each cycle, and every API
// read behind the waiting apply. finish must be called once, before the
// next Begin.
func (s *Snapshotter) Begin(src Source, since time.Time) (finish func() *Snapshot) {
	c := &jobCopier{clone: s.Clone, src: src}
	if v, ok := src.(Versioned); ok {
		clear(s.spareLive) // drop the copies they point to
		clear(s.spareEnded)
		if s.spareEnded == nil {
			s.spareEnded = map[uint64]keptJob{}
		}
		c.vers, c.nextLive, c.nextEnded = v, s.spareLive[:0], s.spareEnded
		if owner := v.JobVersionOwner(); owner == s.owner {
			c.prevLive, c.prevEnded = s.live, s.ended
			if cl, ok := src.(Changelog); ok && s.hasGen {
				c.changed, c.patch = s.changedSince(src, cl)
			}
		} else {
			s.owner = owner // another state: copy it whole
		}
	}
	snap := buildSnapshot(src, since, c)
	if c.patch {
		c.copyChanged(src.(Changelog))
	}
	cl, isLog := src.(Changelog)
	var gen uint64
	if isLog {
		gen = cl.JobGeneration()
	}
	return func() *Snapshot {
		if c.patch {
			c.src = nil // the source's lock is released: the merge reads the copies only
			snap.Jobs = liveSlice(c, len(c.prevLive))
		}
		if c.vers != nil {
			s.live, s.spareLive = c.nextLive, s.live
			s.ended, s.spareEnded = c.nextEnded, s.ended
			s.hasGen = false
			if isLog {
				s.gen, s.hasGen = gen, true
				if !c.patch || s.floors == nil {
					s.floors = map[string]string{} // a whole copy looked up every job's tenant
				}
				maps.Copy(s.floors, c.floors)
			}
		}
		return snap
	}
}

// changedSince is the jobs to copy again since the previous snapshot,
// sorted and unique, and whether the previous snapshot can be patched
// with them: the source still lists its changes since then, and no
// tenant's driver floor moved.
func (s *Snapshotter) changedSince(src Source, cl Changelog) ([]uint64, bool) {
	ids, ok := cl.JobsChangedSince(s.gen)
	if !ok {
		return nil, false
	}
	for tenant, floor := range s.floors {
		if src.TenantMinDriver(tenant) != floor {
			return nil, false
		}
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids), true
}

// jobCopier copies the jobs of one snapshot, reusing the previous
// snapshot's copies of jobs whose version and driver floor are unchanged
// when the source is Versioned.
type jobCopier struct {
	clone     func(*domain.Job) *domain.Job
	src       Source
	floors    map[string]string // by tenant, looked up once per snapshot
	vers      Versioned         // nil: copy every job
	prevLive  []keptJob
	at        int // the next of prevLive to compare: live jobs come by ID
	prevEnded map[uint64]keptJob
	nextLive  []keptJob
	nextEnded map[uint64]keptJob
	// patch: the live jobs are prevLive with changed (sorted, unique)
	// copied again, added or dropped, instead of every live job visited.
	patch   bool
	changed []uint64
	// copies are the changed jobs' copies, made under the source's lock
	// (copyChanged), by the index of their ID in changed; a nil job is
	// one no longer live.
	copies []keptJob
}

// copyChanged copies the changed jobs that are live, under the source's
// lock; the merge with the unchanged ones waits for finish.
func (c *jobCopier) copyChanged(cl Changelog) {
	c.copies = make([]keptJob, len(c.changed))
	for i, id := range c.changed {
		if j, ok := cl.LiveJob(id); ok {
			floor := c.floor(j.Tenant)
			c.copies[i] = keptJob{ver: c.vers.JobVersion(id), floor: floor, job: c.copy(j, floor)}
		}
	}
}

// liveJobs yields the copies of the source's live jobs, by ID.
func (c *jobCopier) liveJobs(src Source) iter.Seq[*domain.Job] {
	if !c.patch {
		return func(yield func(*domain.Job) bool) {
			for j := range src.LiveJobs() {
				if !yield(c.liveJob(j)) {
					return
				}
			}
		}
	}
	return func(yield func(*domain.Job) bool) {
		prev, ids, copies := c.prevLive, c.changed, c.copies
		for len(prev) > 0 || len(ids) > 0 {
			if len(ids) == 0 || (len(prev) > 0 && prev[0].job.ID < ids[0]) {
				c.nextLive = append(c.nextLive, prev[0]) // unchanged
				if !yield(prev[0].job) {
					return
				}
				prev = prev[1:]
				continue
			}
			id, k := ids[0], copies[0]
			ids, copies = ids[1:], copies[1:]
			if len(prev) > 0 && prev[0].job.ID == id {
				prev = prev[1:] // changed: its copy is stale
			}
			if k.job == nil {
				continue // ended or removed
			}
			c.nextLive = append(c.nextLive, k)
			if !yield(k.job) {
				return
			}
		}
	}
}

func (c *jobCopier) floor(tenant string) string {
	f, ok := c.floors[tenant]
	if !ok {
		if c.floors == nil {
			c.floors = map[string]string{}
		}
		f = c.src.TenantMinDriver(tenant)
		c.floors[tenant] = f
	}
	return f
}

// copy copies j with its tenant's driver floor folded in.
// The clone may be shared (state.FSM.CopyOf hands out the raft
// snapshot's copy), so the fold goes into a copy of its own.
func (c *jobCopier) copy(j *domain.Job, floor string) *domain.Job {
	cp := c.clone(j)
	if floor != "" {
		if v, ok := domain.CompareVersions(floor, cp.MinDriver); cp.MinDriver == "" || (ok && v > 0) {
			own := *cp // shallow: only MinDriver, a string, differs
			own.MinDriver = floor
			cp = &own
		}
	}
	return cp
}

// liveJob is the copy of a live job; they come by ID.
func (c *jobCopier) liveJob(j *domain.Job) *domain.Job {
	floor := c.floor(j.Tenant)
	if c.vers == nil {
		return c.copy(j, floor)
	}
	ver := c.vers.JobVersion(j.ID)
	for c.at < len(c.prevLive) && c.prevLive[c.at].job.ID < j.ID {
		c.at++ // ended (or otherwise gone) since
	}
	k := keptJob{ver: ver, floor: floor}
	if c.at < len(c.prevLive) {
		if p := c.prevLive[c.at]; p.job.ID == j.ID && p.ver == ver && p.floor == floor {
			k.job = p.job
		}
	}
	if k.job == nil {
		k.job = c.copy(j, floor)
	}
	c.nextLive = append(c.nextLive, k)
	return k.job
}

// endedJob is the copy of a job of the history (no driver floor: the
// history counts usage only).
func (c *jobCopier) endedJob(j *domain.Job) *domain.Job {
	if c.vers == nil {
		return c.clone(j)
	}
	ver := c.vers.JobVersion(j.ID)
	k, ok := c.prevEnded[j.ID]
	if !ok || k.ver != ver {
		k = keptJob{ver: ver, job: c.clone(j)}
	}
	c.nextEnded[j.ID] = k
	return k.job
}

// liveSlice is the live jobs' copies by ID; n is about how many.
func liveSlice(c *jobCopier, n int) []*domain.Job {
	var jobs []*domain.Job
	if n > 0 {
		jobs = make([]*domain.Job, 0, n+n/8) // about as many as last time
	}
	for j := range c.liveJobs(c.src) {
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil // as a whole copy has it
	}
	return jobs
}

func buildSnapshot(src Source, since time.Time, c *jobCopier) *Snapshot {
	s := &Snapshot{Topology: src.Topology(), Static: src.Static(), Tenants: map[string]*domain.Tenant{},
		Workspaces: map[string]*domain.Workspace{}, Nodes: map[string]domain.NodeCondition{}}
	for t := range src.Tenants() {
		cp := *t
		s.Tenants[t.Name] = &cp
	}
	for w := range src.Workspaces() {
		cp := *w
		cp.Models = slices.Clone(w.Models) // a snapshot never aliases its source
		s.Workspaces[w.Ref()] = &cp
	}
	for n := range src.Nodes() {
		s.Nodes[n.Server] = *n
	}
	for p := range src.ServerPools() {
		if s.Pools == nil {
			s.Pools = map[string]*domain.ServerPool{}
		}
		s.Pools[p.Name] = p
	}
	if !c.patch { // else Begin's finish, outside the source's lock
		s.Jobs = liveSlice(c, len(c.prevLive))
	}
	for j := range src.EndedSince(since) {
		if j.EndedAt != nil && j.PlacedAt != nil {
			s.History = append(s.History, c.endedJob(j))
		}
	}
	// By ID, as the scheduler has always seen them: the decayed usage is
	// a float sum, and the order of a sum is part of its result.
	slices.SortFunc(s.History, func(a, b *domain.Job) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return s
}
