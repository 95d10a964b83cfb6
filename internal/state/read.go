package state

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"iter"
	"slices"
	"sort"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Reads. Each takes the read lock and returns copies.

// AppliedIndex is the raft index of the last applied command.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// Topology returns a deep copy of the applied topology, nil when none.
func (f *FSM) Topology() *domain.TopologyView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.d.Topology == nil {
		return nil
	}
	return &domain.TopologyView{Revision: f.d.TopologyRev, Fingerprint: f.d.Fingerprint, Summary: f.d.Topology.Summary(), Topology: deepCopy(f.d.Topology)}
}

// Tenant returns one tenant.
func (f *FSM) Tenant(name string) (*domain.Tenant, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.d.Tenants[name]
	if !ok {
		return nil, false
	}
	cp := *t
	return &cp, true
}

// Tenants lists tenants sorted by name; keep filters which to return.
func (f *FSM) Tenants(keep func(*domain.Tenant) bool) []domain.Tenant {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []domain.Tenant{}
	for _, t := range f.d.Tenants {
		if keep == nil || keep(t) {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Workspace returns one workspace.
func (f *FSM) Workspace(tenant, name string) (*domain.Workspace, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	w, ok := f.d.Workspaces[domain.Ref(tenant, name)]
	if !ok {
		return nil, false
	}
	cp := *w
	cp.Models = slices.Clone(w.Models) // a read never aliases state
	return &cp, true
}

// Workspaces lists a tenant's workspaces (all when tenant is ""), sorted.
func (f *FSM) Workspaces(tenant string, keep func(*domain.Workspace) bool) []domain.Workspace {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []domain.Workspace{}
	for _, w := range f.d.Workspaces {
		if (tenant == "" || w.Tenant == tenant) && (keep == nil || keep(w)) {
			cp := *w
			cp.Models = slices.Clone(w.Models)
			out = append(out, cp)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Ref() < out[b].Ref() })
	return out
}

// Job returns one job.
func (f *FSM) Job(id uint64) (*domain.Job, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j, ok := f.d.Jobs[id]
	if !ok {
		return nil, false
	}
	return CopyJob(j), true
}

// JobFilter selects jobs; empty fields match everything.
type JobFilter struct {
	Tenant    string
	Workspace string
	State     domain.JobState
	// States, when set, keeps jobs in any of them (State too, if set).
	States []domain.JobState
	// AfterID and Limit page the list: jobs with a larger ID, at most
	// Limit of them (0: all).
	AfterID uint64
	Limit   int
}

func (q *JobFilter) keeps(j *domain.Job) bool {
	if (q.Tenant != "" && j.Tenant != q.Tenant) || (q.Workspace != "" && j.Workspace != q.Workspace) || j.ID <= q.AfterID {
		return false
	}
	if q.State == "" && len(q.States) == 0 {
		return true
	}
	return j.State == q.State || slices.Contains(q.States, j.State)
}

// Jobs lists jobs matching the filter, by ID.
func (f *FSM) Jobs(q JobFilter) []domain.Job {
	out, _ := f.JobsPage(q)
	return out
}

// JobsPage is Jobs, also reporting whether a Limit left matching jobs out.
func (f *FSM) JobsPage(q JobFilter) (out []domain.Job, more bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var match []*domain.Job
	for j := range f.jobsFor(&q) {
		if !q.keeps(j) {
			continue
		}
		if q.Limit > 0 && len(match) == q.Limit {
			more = true
			break
		}
		match = append(match, j)
	}
	out = make([]domain.Job, len(match))
	for i, j := range match {
		out[i] = *CopyJob(j)
	}
	return out, more
}

// JobIDs is the IDs of the jobs the filter and keep (nil: all) select, by
// ID. A list in an order the state does not keep (GET /v1/queue, by the
// scheduler's ranks) is ordered from these outside the read lock, then
// its page copied (JobsByID): under the lock a walk of IDs, not a copy of
// every job (issue 18).
func (f *FSM) JobIDs(q JobFilter, keep func(*domain.Job) bool) []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []uint64
	for j := range f.jobsFor(&q) {
		if !q.keeps(j) || (keep != nil && !keep(j)) {
			continue
		}
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
		out = append(out, j.ID)
	}
	return out
}

// JobsByID copies the jobs of ids that are in the state and keep (nil:
// all) accepts, in the order of ids.
func (f *FSM) JobsByID(ids []uint64, keep func(*domain.Job) bool) []domain.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]domain.Job, 0, len(ids))
	for _, id := range ids {
		if j, ok := f.d.Jobs[id]; ok && (keep == nil || keep(j)) {
			out = append(out, *CopyJob(j))
		}
	}
	return out
}

// jobsFor yields, by ID and without sorting, the jobs a filter may keep,
// from the shortest of the lists the read index has for it
// (readindex.go): a tenant's or a workspace's jobs (its live ones when
// the filter keeps only live states), or the jobs in the states it names,
// merged. With neither a tenant nor a state it walks every job after
// AfterID (IDs are handed out in order, so walking them is the order, and
// a page stops at its limit). The filter still decides what is kept: a
// list only spares the walk.
func (f *FSM) jobsFor(q *JobFilter) iter.Seq[*domain.Job] {
	states := q.States
	if q.State != "" {
		states = append([]domain.JobState{q.State}, states...)
	}
	live := len(states) > 0
	for _, s := range states {
		live = live && !s.Terminal()
	}
	var scoped []listKey
	switch kind := listWorkspace; {
	case q.Tenant != "" && q.Workspace != "":
		if live {
			kind = listWsLive
		}
		scoped = []listKey{{kind, domain.Ref(q.Tenant, q.Workspace)}}
	case q.Tenant != "":
		kind = listTenant
		if live {
			kind = listTenantLive
		}
		scoped = []listKey{{kind, q.Tenant}}
	}
	if len(states) > 0 {
		var byState []listKey
		for _, s := range states {
			if k := (listKey{listState, string(s)}); !slices.Contains(byState, k) {
				byState = append(byState, k)
			}
		}
		if scoped == nil || f.reads.entries(byState) < f.reads.entries(scoped) {
			scoped = byState
		}
	}
	if scoped != nil {
		return f.listedUnion(scoped, q.AfterID)
	}
	return func(yield func(*domain.Job) bool) {
		for id := q.AfterID + 1; id < f.d.NextJobID; id++ {
			if j, ok := f.d.Jobs[id]; ok && !yield(j) {
				return
			}
		}
	}
}

// Tokens lists tokens (without hashes) that keep accepts, by ID.
func (f *FSM) Tokens(keep func(*domain.Token) bool) []domain.Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []domain.Token{}
	for _, t := range f.d.Tokens {
		if keep == nil || keep(&t.Token) {
			out = append(out, t.Token)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Token returns one token (without its hash).
func (f *FSM) Token(id string) (*domain.Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.d.Tokens[id]
	if !ok {
		return nil, false
	}
	cp := t.Token
	return &cp, true
}

// HasAdminToken reports whether any admin token exists (the bootstrap check).
func (f *FSM) HasAdminToken() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.d.Tokens {
		if t.Role == domain.RoleAdmin {
			return true
		}
	}
	return false
}

// Authenticate returns the token whose ID is id when secret hashes to its
// stored hash. The comparison is constant-time.
func (f *FSM) Authenticate(id, secret string) (*domain.Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.d.Tokens[id]
	if !ok {
		return nil, false
	}
	if subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(t.Hash)) != 1 {
		return nil, false
	}
	cp := t.Token
	return &cp, true
}

// HashSecret is how token secrets are stored: hex SHA-256. Secrets are 256-bit
// random values, so a fast hash is enough (no password stretching needed).
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// EventFilter selects audit events.
type EventFilter struct {
	Tenant    string
	Workspace string
	Since     time.Time
	AfterSeq  uint64
	// BeforeSeq, when set, keeps events older than it: with Limit, the
	// page before one that started at BeforeSeq.
	BeforeSeq uint64
	Limit     int
	// TenantsOnly leaves out the platform's own events (no tenant).
	TenantsOnly bool
}

// Events returns events matching the filter, oldest first; with a Limit the
// newest Limit of them.
func (f *FSM) Events(q EventFilter) []domain.Event {
	out, _ := f.EventsPage(q)
	return out
}

// EventsPage is Events, also reporting whether a Limit left older matching
// events out. A tenant's events come from the read index's positions of
// them (readindex.go), not a walk of every tenant's; with a Limit the walk
// starts from the newest and stops once it has found one more than Limit.
func (f *FSM) EventsPage(q EventFilter) (out []domain.Event, more bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	evs := f.d.Events
	// Events are appended in seq order; skip by seq with a binary search.
	start := sort.Search(len(evs), func(i int) bool { return evs[i].Seq > q.AfterSeq })
	end := len(evs)
	if q.BeforeSeq > 0 {
		end = sort.Search(len(evs), func(i int) bool { return evs[i].Seq >= q.BeforeSeq })
	}
	end = max(start, end)
	n, at := end-start, func(i int) *domain.Event { return &evs[start+i] }
	if q.Tenant != "" {
		ps := f.reads.events.of[q.Tenant]
		lo := sort.Search(len(ps), func(i int) bool { return int(ps[i]) >= start })
		hi := sort.Search(len(ps), func(i int) bool { return int(ps[i]) >= end })
		ps = ps[lo:max(lo, hi)]
		n, at = len(ps), func(i int) *domain.Event { return &evs[ps[i]] }
	}
	keep := func(e *domain.Event) bool {
		return (q.Tenant == "" || e.Tenant == q.Tenant) && (!q.TenantsOnly || e.Tenant != "") &&
			(q.Workspace == "" || e.Workspace == q.Workspace) && (q.Since.IsZero() || !e.At.Before(q.Since))
	}
	out = []domain.Event{}
	if q.Limit <= 0 {
		for i := range n {
			if e := at(i); keep(e) {
				out = append(out, *e)
			}
		}
		return out, false
	}
	for i := n - 1; i >= 0 && len(out) <= q.Limit; i-- {
		if e := at(i); keep(e) {
			out = append(out, *e)
		}
	}
	if len(out) > q.Limit {
		out, more = out[:q.Limit], true
	}
	slices.Reverse(out)
	return out, more
}

// Members lists the control-plane servers recorded in the state.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Member, 0, len(f.d.Members))
	for _, m := range f.d.Members {
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Member returns one member by ID.
func (f *FSM) Member(id string) (Member, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m, ok := f.d.Members[id]
	return m, ok
}

// Capacity returns the inventory's GPU total.
func (f *FSM) Capacity() (total int, guaranteed int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cap.total, f.totalGuaranteed()
}

// CheckSubmit runs the state checks a job submit proposed under apply
// rules (RulesFor) would meet, without applying anything (dry runs).
func (f *FSM) CheckSubmit(spec *domain.JobSpec, rules int) *domain.Error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.checkSubmit(spec, rules)
}
