package state

import (
	"iter"
	"maps"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// readIndex keeps what the API's reads would otherwise walk every job for
// under the read lock (issue 18): while a reader walks, every apply waits,
// and a Go RWMutex makes new readers wait behind the waiting writer, so
// one walk of 100,000 live jobs stalled the whole API. It holds
//
//   - lists of jobs by ID: every job of a tenant and of a workspace, the
//     live ones of a tenant and of a workspace, every job in a state,
//     the live ones with a placement (on a server), so a filtered page starts where it is and
//     reads what it answers (JobsPage, LiveJobsOf, LiveJobsOn);
//   - each workspace's live tally (WorkspaceTally): pending and placed
//     counts, GPU units held, pending reasons, path verdicts, the pools
//     its jobs name: what the queue, the metrics and a tenant's pool list
//     sum up;
//   - the positions of each tenant's events (eventIndex).
//
// It is derived like jobIndex and never persisted: after every applied
// command the jobs the change log names (jobVersions: every change to a
// job touches it) are filed again, and a restore rebuilds it. Filing
// after the command, not at each change, keeps it out of the handlers:
// a handler that forgets a hook cannot leave it stale, only one that
// forgets to touch, which the raft snapshot would miss too.
type readIndex struct {
	gen   uint64            // the change log's generation filed up to
	filed map[uint64]filing // every job in the state, as last filed
	lists map[listKey]*jobList
	tally map[string]*WorkspaceTally // by workspace ref, only those with live jobs
	dirty map[listKey]bool           // lists with entries left since the last compaction
	// events are the positions in data.Events of each tenant's events.
	events eventIndex
}

// eventIndex holds the positions in data.Events of each tenant's events,
// in order: a tenant's event page reads its own. Apply only appends
// events but for retention, which marks the index stale (removeEvents):
// refile then rebuilds it, else indexes the events appended since.
type eventIndex struct {
	of    map[string][]int32
	n     int // the events indexed: data.Events[:n]
	stale bool
}

func (ix *eventIndex) sync(evs []domain.Event) {
	if ix.stale || ix.of == nil || ix.n > len(evs) {
		*ix = eventIndex{of: map[string][]int32{}}
	}
	for i := ix.n; i < len(evs); i++ {
		if t := evs[i].Tenant; t != "" {
			ix.of[t] = append(ix.of[t], int32(i))
		}
	}
	ix.n = len(evs)
}

// filing is what the index filed a job under: its lists and its share of
// its workspace's tally.
type filing struct {
	tenant, ws string
	ref        string // domain.Ref(tenant, ws), made once per job, not per filing
	live       bool
	state      domain.JobState
	placed     bool // a live job with a placement
	held       int  // its placement's GPU units (sched.Held)
	reason     string
	verdict    domain.PathVerdict
	pool       string
	ran        bool     // a live job with runs (usage counts only those)
	holds      bool     // a live job with a placement (its state may not hold GPUs: readers check)
	servers    []string // the servers of its placement
}

type listKind byte

const (
	listTenant     listKind = 'T' // every job of a tenant
	listWorkspace  listKind = 'W' // every job of a workspace (ref)
	listTenantLive listKind = 't'
	listWsLive     listKind = 'w'
	listState      listKind = 's' // every job in a state
	listServer     listKind = 'n' // live jobs with a placement on a server
	listHolding    listKind = 'g' // live jobs with a placement (name "")
	listRan        listKind = 'r' // live jobs that have held GPUs: runs (name "")
)

type listKey struct {
	kind listKind
	name string
}

// jobList is a list of jobs by ID. A job that leaves stays as an entry
// until half the list has left (gone counts them): taking one out of
// 100,000 moved half the list under the write lock. Readers skip the
// entries whose job no longer belongs (FSM.member); a job that comes back
// finds its entry.
type jobList struct {
	jobs []*domain.Job
	gone int
}

func (l *jobList) join(j *domain.Job) {
	if n := len(l.jobs); n == 0 || l.jobs[n-1].ID < j.ID {
		l.jobs = append(l.jobs, j)
		return
	}
	i, found := slices.BinarySearchFunc(l.jobs, j, byID)
	if found {
		l.jobs[i] = j
		l.gone--
		return
	}
	l.jobs = slices.Insert(l.jobs, i, j)
}

// from is the index of the first entry with an ID above after.
func (l *jobList) from(after uint64) int {
	i, _ := slices.BinarySearchFunc(l.jobs, after+1, func(j *domain.Job, id uint64) int {
		switch {
		case j.ID < id:
			return -1
		case j.ID > id:
			return 1
		}
		return 0
	})
	return i
}

func (f *filing) keys(yield func(listKey)) {
	yield(listKey{listTenant, f.tenant})
	yield(listKey{listWorkspace, f.ref})
	yield(listKey{listState, string(f.state)})
	if !f.live {
		return
	}
	yield(listKey{listTenantLive, f.tenant})
	yield(listKey{listWsLive, f.ref})
	if f.holds {
		yield(listKey{listHolding, ""})
	}
	if f.ran {
		yield(listKey{listRan, ""})
	}
	for _, s := range f.servers {
		yield(listKey{listServer, s})
	}
}

func (f *filing) hasKey(k listKey) bool {
	found := false
	f.keys(func(x listKey) { found = found || x == k })
	return found
}

// sameLists: a job filed as a and now as b is in the same lists (most
// changes: a pending job's reason, a placed job's report), so refiling it
// moves only its share of the tally.
func sameLists(a, b *filing) bool {
	return a.tenant == b.tenant && a.ws == b.ws && a.live == b.live && a.state == b.state &&
		a.holds == b.holds && a.ran == b.ran && slices.Equal(a.servers, b.servers)
}

// fileOf is how j is filed; prev is how it was (nil: not yet), whose
// workspace ref it reuses.
func fileOf(j *domain.Job, prev *filing) filing {
	fl := filing{tenant: j.Tenant, ws: j.Workspace, live: !j.State.Terminal(), state: j.State}
	if prev != nil && prev.tenant == j.Tenant && prev.ws == j.Workspace {
		fl.ref = prev.ref
	} else {
		fl.ref = domain.Ref(j.Tenant, j.Workspace)
	}
	if !fl.live {
		return fl
	}
	fl.pool = j.Pool
	if len(j.Placement) > 0 {
		fl.held = sched.Held(j.Placement)
		fl.placed = j.State != domain.JobPending
	}
	if j.State == domain.JobPending && j.Reason != nil {
		fl.reason = j.Reason.Code
	}
	if j.PathHealth != nil {
		fl.verdict = j.PathHealth.Verdict
	}
	fl.holds, fl.ran = len(j.Placement) > 0, len(j.Runs) > 0
	for _, p := range j.Placement {
		if !slices.Contains(fl.servers, p.Server) {
			fl.servers = append(fl.servers, p.Server)
		}
	}
	return fl
}

// member reports whether j belongs in the list under key now: readers
// (after apply filed every change) skip the entries for which it does not.
func (f *FSM) member(k listKey, j *domain.Job) bool {
	switch k.kind {
	case listTenant, listWorkspace:
		return f.d.Jobs[j.ID] == j
	case listTenantLive, listWsLive:
		return !j.State.Terminal()
	case listState:
		// A job object is the state's until retention removes it, which
		// only ends jobs: a live state needs no look-up (as the live
		// lists), and the pending list is the queue's walk (issue 18).
		return string(j.State) == k.name && (!j.State.Terminal() || f.d.Jobs[j.ID] == j)
	case listHolding:
		return !j.State.Terminal() && len(j.Placement) > 0
	case listRan:
		return !j.State.Terminal() && len(j.Runs) > 0
	case listServer:
		return !j.State.Terminal() && slices.ContainsFunc(j.Placement, func(p domain.Placement) bool { return p.Server == k.name })
	}
	return false
}

// WorkspaceTally sums up a workspace's live jobs (readIndex).
type WorkspaceTally struct {
	Tenant, Workspace string
	// Live counts the workspace's live jobs; Pending those pending;
	// Placed the others with a placement.
	Live, Pending, Placed int
	// Held is the GPU units the placements of its live jobs hold
	// (sched.Held; domain.UnitsPerGPU a GPU).
	Held int
	// PendingBy counts its pending jobs by their reason's code ("" for
	// none yet).
	PendingBy map[string]int
	// Paths counts its live jobs with a committed path verdict, by it;
	// Faulty names those whose verdict is a fault.
	Paths  map[domain.PathVerdict]int
	Faulty map[uint64]domain.PathVerdict
	// Pools counts its live jobs naming a server pool, by pool.
	Pools map[string]int
}

func (fl *filing) count(ix *readIndex, id uint64, sign int) {
	if !fl.live {
		return
	}
	ref := fl.ref
	t := ix.tally[ref]
	if t == nil {
		t = &WorkspaceTally{Tenant: fl.tenant, Workspace: fl.ws}
		ix.tally[ref] = t
	}
	t.Live += sign
	t.Held += sign * fl.held
	if fl.state == domain.JobPending {
		t.Pending += sign
		addCount(&t.PendingBy, fl.reason, sign)
	} else if fl.placed {
		t.Placed += sign
	}
	if fl.verdict != "" {
		addCount(&t.Paths, fl.verdict, sign)
		if fl.verdict.Faulty() {
			if sign > 0 {
				if t.Faulty == nil {
					t.Faulty = map[uint64]domain.PathVerdict{}
				}
				t.Faulty[id] = fl.verdict
			} else {
				delete(t.Faulty, id)
			}
		}
	}
	if fl.pool != "" {
		addCount(&t.Pools, fl.pool, sign)
	}
	if t.Live == 0 {
		delete(ix.tally, ref)
	}
}

// addCount adds n to (*m)[k], dropping the key at zero: a tally lists
// only what is there.
func addCount[K comparable](m *map[K]int, k K, n int) {
	if *m == nil {
		*m = map[K]int{}
	}
	if (*m)[k] += n; (*m)[k] == 0 {
		delete(*m, k)
	}
}

func newReadIndex(jobs map[uint64]*domain.Job, gen uint64) readIndex {
	ix := readIndex{gen: gen, filed: make(map[uint64]filing, len(jobs)), lists: map[listKey]*jobList{}, tally: map[string]*WorkspaceTally{}, dirty: map[listKey]bool{}}
	for _, id := range slices.Sorted(maps.Keys(jobs)) { // by ID: every list appends
		ix.file(id, jobs[id])
	}
	return ix
}

// file files job id (j, or nil when it left the state) afresh.
func (ix *readIndex) file(id uint64, j *domain.Job) {
	old, had := ix.filed[id]
	var now filing
	if j != nil {
		var prev *filing
		if had {
			prev = &old
		}
		now = fileOf(j, prev)
		if had && sameLists(&old, &now) {
			old.count(ix, id, -1)
			now.count(ix, id, +1)
			ix.filed[id] = now
			return
		}
	}
	if had {
		old.count(ix, id, -1)
		old.keys(func(k listKey) {
			if j == nil || !now.hasKey(k) {
				ix.lists[k].gone++
				ix.dirty[k] = true
			}
		})
	}
	if j == nil {
		delete(ix.filed, id)
		return
	}
	now.keys(func(k listKey) {
		if !had || !old.hasKey(k) {
			l := ix.lists[k]
			if l == nil {
				l = &jobList{}
				ix.lists[k] = l
			}
			l.join(j)
		}
	})
	now.count(ix, id, +1)
	ix.filed[id] = now
}

// refile files the jobs changed since the last apply, and compacts the
// lists half gone. Apply calls it after every command.
func (f *FSM) refile() {
	ix := &f.reads
	ix.events.sync(f.d.Events)
	changed, ok := f.jobs.vers.since(ix.gen)
	if !ok {
		ev := ix.events
		*ix = newReadIndex(f.d.Jobs, f.jobs.vers.gen)
		ix.events = ev
		f.snapJobs.follow(f)
		return
	}
	defer f.snapJobs.follow(f)
	for _, id := range changed {
		ix.file(id, f.d.Jobs[id])
	}
	ix.gen = f.jobs.vers.gen
	for k := range ix.dirty {
		l := ix.lists[k]
		if l.gone > len(l.jobs)/2 {
			l.jobs = slices.DeleteFunc(l.jobs, func(j *domain.Job) bool { return !f.member(k, j) })
			l.gone = 0
			if len(l.jobs) == 0 {
				delete(ix.lists, k)
			}
		}
		delete(ix.dirty, k)
	}
}

// listed yields the jobs of a list with an ID above after, by ID.
func (f *FSM) listed(k listKey, after uint64) iter.Seq[*domain.Job] {
	return func(yield func(*domain.Job) bool) {
		l := f.reads.lists[k]
		if l == nil {
			return
		}
		for _, j := range l.jobs[l.from(after):] {
			if f.member(k, j) && !yield(j) {
				return
			}
		}
	}
}

// entries counts the entries of lists (those gone included: what a
// walk of them reads).
func (ix *readIndex) entries(keys []listKey) int {
	n := 0
	for _, k := range keys {
		if l := ix.lists[k]; l != nil {
			n += len(l.jobs)
		}
	}
	return n
}

// listedUnion yields the jobs of several lists with an ID above after, by
// ID, each once: a merge of the lists (a job in two of them, as in a
// state's list and a tenant's, is yielded once).
func (f *FSM) listedUnion(keys []listKey, after uint64) iter.Seq[*domain.Job] {
	if len(keys) == 1 {
		return f.listed(keys[0], after)
	}
	return func(yield func(*domain.Job) bool) {
		type cursor struct {
			k    listKey
			jobs []*domain.Job
		}
		var cs []cursor
		for _, k := range keys {
			if l := f.reads.lists[k]; l != nil {
				cs = append(cs, cursor{k, l.jobs[l.from(after):]})
			}
		}
		last := after
		for {
			best := -1
			for i := range cs {
				for len(cs[i].jobs) > 0 && (cs[i].jobs[0].ID <= last || !f.member(cs[i].k, cs[i].jobs[0])) {
					cs[i].jobs = cs[i].jobs[1:]
				}
				if len(cs[i].jobs) > 0 && (best < 0 || cs[i].jobs[0].ID < cs[best].jobs[0].ID) {
					best = i
				}
			}
			if best < 0 {
				return
			}
			j := cs[best].jobs[0]
			last = j.ID
			if !yield(j) {
				return
			}
		}
	}
}
