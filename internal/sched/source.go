package sched

import (
	"iter"
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
	// LiveJobs are the non-terminal jobs, by ID.
	LiveJobs() iter.Seq[*domain.Job]
	// EndedSince are the terminal jobs that ended after since.
	EndedSince(since time.Time) iter.Seq[*domain.Job]
	// TenantMinDriver is the oldest driver a tenant's jobs accept ("" for
	// no floor).
	TenantMinDriver(tenant string) string
}

// SnapshotOf builds the scheduler's view of src: its tenants, workspaces
// and node conditions, the non-terminal jobs, and the placed jobs that
// ended after since (fair-share history), each job copied by clone. The
// topology is shared, not copied: it is replaced whole, never changed in
// place, and the scheduler only reads it. A job's minimum driver is raised
// to its tenant's in the copy; the source keeps what its user asked.
func SnapshotOf(src Source, since time.Time, clone func(*domain.Job) *domain.Job) *Snapshot {
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
	for j := range src.LiveJobs() {
		cp := clone(j)
		if floor := src.TenantMinDriver(j.Tenant); floor != "" {
			if c, ok := domain.CompareVersions(floor, cp.MinDriver); cp.MinDriver == "" || (ok && c > 0) {
				cp.MinDriver = floor
			}
		}
		s.Jobs = append(s.Jobs, cp)
	}
	for j := range src.EndedSince(since) {
		if j.EndedAt != nil && j.PlacedAt != nil {
			s.History = append(s.History, clone(j))
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
