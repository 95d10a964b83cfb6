package state

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// View is a read-only view of the state, for the builders that turn it
// into another package's input: the scheduler's snapshot
// (sched.SnapshotOf), the host binder's input (the server's
// bindingInput). The builders live with what consumes their output, so the
// state machine keeps only what its deterministic apply needs.
//
// A View is valid only inside the FSM.Read call that hands it out (the
// read lock is held). It returns the state's own values, not copies: a
// builder copies what it keeps and changes nothing.
type View interface {
	sched.Source
	// JobVersion numbers a job's changes (sched.Versioned): a
	// sched.Snapshotter keeps its copies of the jobs whose version holds.
	JobVersion(id uint64) uint64
	JobVersionOwner() any
	// JobGeneration, JobsChangedSince and LiveJob (sched.Changelog) let
	// it visit only the jobs changed since its last snapshot.
	JobGeneration() uint64
	JobsChangedSince(gen uint64) ([]uint64, bool)
	LiveJob(id uint64) (*domain.Job, bool)
	// Job returns a job by ID.
	Job(id uint64) (*domain.Job, bool)
	// Server returns a server of the inventory.
	Server(name string) (*domain.Server, bool)
	// Tenant returns a tenant.
	Tenant(name string) (*domain.Tenant, bool)
	// Host returns a node agent's record.
	Host(node string) (*domain.HostStatus, bool)
	// PoolID returns the id the fabric's pool assigned owner
	// ("tenant/acme", "job/42"), as of the latest committed revision.
	PoolID(pool, owner string) (uint32, bool)
	// ArchivedSince yields the usage archive's records (jobs retention
	// removed) that ended after since, by end time.
	ArchivedSince(since time.Time) iter.Seq[*domain.UsageRecord]
	// LiveJobsOf yields a tenant's live jobs (of one workspace when
	// workspace is set) by ID, and LiveJobsOn those holding GPUs on a
	// server (any with a placement there: the caller checks the state):
	// read from the read index (readindex.go), they cost what
	// they yield, not a walk of every live job.
	LiveJobsOf(tenant, workspace string) iter.Seq[*domain.Job]
	LiveJobsOn(server string) iter.Seq[*domain.Job]
	// LiveJobsRan yields the live jobs that have held GPUs (runs), by
	// ID: the live jobs a usage report counts.
	LiveJobsRan() iter.Seq[*domain.Job]
	// HoldingJobs yields the live jobs with a placement, by ID (the
	// caller checks the state: HoldsGPUs).
	HoldingJobs() iter.Seq[*domain.Job]
	// Tallies yields, by workspace ref, the tally of each workspace with
	// live jobs, as apply keeps it: the state's own, valid inside Read.
	Tallies() iter.Seq[*WorkspaceTally]
}

// Read calls fn with a view of the state under the read lock: applies wait
// until fn returns, so fn only reads and copies.
func (f *FSM) Read(fn func(View)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(locked{f})
}

// locked is the FSM seen by a holder of its lock: apply (write lock) and
// FSM.Read (read lock) hand it to the builders.
type locked struct{ f *FSM }

var _ View = locked{}

func (v locked) Topology() *domain.Topology { return v.f.d.Topology }
func (v locked) Static() *sched.Static      { return v.f.cap.static }

func (v locked) Tenants() iter.Seq[*domain.Tenant] {
	return seqOf(v.f.d.Tenants)
}

func (v locked) Workspaces() iter.Seq[*domain.Workspace] {
	return seqOf(v.f.d.Workspaces)
}

func (v locked) Nodes() iter.Seq[*domain.NodeCondition] {
	return seqOf(v.f.d.Nodes)
}

// ServerPools are the state's own pools: applyPoolSet replaces a pool
// whole, so a snapshot may share them.
func (v locked) ServerPools() iter.Seq[*domain.ServerPool] {
	return seqOf(v.f.d.Pools)
}

// seqOf yields a map's values in key order: a View's iterations are
// deterministic.
func seqOf[K string, V any](m map[K]V) iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(m[k]) {
				return
			}
		}
	}
}

func (v locked) LiveJobs() iter.Seq[*domain.Job] { return v.f.jobs.liveJobs() }
func (v locked) EndedSince(since time.Time) iter.Seq[*domain.Job] {
	return v.f.jobs.endedSince(since)
}

func (v locked) LiveJobsOf(tenant, workspace string) iter.Seq[*domain.Job] {
	if workspace != "" {
		return v.f.listed(listKey{listWsLive, domain.Ref(tenant, workspace)}, 0)
	}
	return v.f.listed(listKey{listTenantLive, tenant}, 0)
}

func (v locked) LiveJobsOn(server string) iter.Seq[*domain.Job] {
	return v.f.listed(listKey{listServer, server}, 0)
}

func (v locked) LiveJobsRan() iter.Seq[*domain.Job] {
	return v.f.listed(listKey{listRan, ""}, 0)
}

func (v locked) HoldingJobs() iter.Seq[*domain.Job] {
	return v.f.listed(listKey{listHolding, ""}, 0)
}

func (v locked) Tallies() iter.Seq[*WorkspaceTally] { return seqOf(v.f.reads.tally) }

func (v locked) ArchivedSince(since time.Time) iter.Seq[*domain.UsageRecord] {
	return v.f.archivedSince(since)
}

func (v locked) JobVersion(id uint64) uint64 { return v.f.jobs.vers.of(id) }

func (v locked) JobGeneration() uint64 { return v.f.jobs.vers.gen }

func (v locked) JobsChangedSince(gen uint64) ([]uint64, bool) { return v.f.jobs.vers.since(gen) }

func (v locked) LiveJob(id uint64) (*domain.Job, bool) {
	j, ok := v.f.d.Jobs[id]
	if !ok || j.State.Terminal() {
		return nil, false
	}
	return j, true
}

// JobVersionOwner is the FSM: a restore renumbers in place (jobVersions.restart).
func (v locked) JobVersionOwner() any { return v.f }

func (v locked) TenantMinDriver(tenant string) string {
	return v.f.hostPolicy().TenantMinDriver[tenant]
}

func (v locked) Job(id uint64) (*domain.Job, bool) {
	j, ok := v.f.d.Jobs[id]
	return j, ok
}

func (v locked) Server(name string) (*domain.Server, bool) {
	s, ok := v.f.cap.servers[name]
	return s, ok
}

func (v locked) Tenant(name string) (*domain.Tenant, bool) {
	t, ok := v.f.d.Tenants[name]
	return t, ok
}

func (v locked) Host(node string) (*domain.HostStatus, bool) {
	h, ok := v.f.d.Hosts.Records[node]
	return h, ok
}

func (v locked) PoolID(pool, owner string) (uint32, bool) {
	if v.f.d.Fabric.Pools == nil {
		return 0, false
	}
	return v.f.d.Fabric.Pools.Lookup(pool, owner)
}
