package sched_test

import (
	"fmt"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// drainSnapshot is an empty snapshot of topo with n workspaces spread over
// tenants (workspace i belongs to tenant i%tenants); iso gives a tenant's
// isolation, ws fills in a workspace's quota. It returns the workspaces'
// refs in order.
func drainSnapshot(topo *domain.Topology, n, tenants int, iso func(i int) domain.Isolation, ws func(i int, w *domain.Workspace)) (*sched.Snapshot, []string) {
	s := &sched.Snapshot{Topology: topo, Static: sched.NewStatic(topo), Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	var refs []string
	for i := range n {
		tn := fmt.Sprintf("t%03d", i%tenants)
		if _, ok := s.Tenants[tn]; !ok {
			s.Tenants[tn] = &domain.Tenant{Name: tn, Isolation: iso(i)}
		}
		w := &domain.Workspace{Tenant: tn, Name: fmt.Sprintf("w%03d", i)}
		ws(i, w)
		s.Workspaces[w.Ref()] = w
		refs = append(refs, w.Ref())
	}
	return s, refs
}

// commitPlan applies plan to s's jobs as the state machine would, in
// place: released jobs leave, placed jobs run from now, and a running job
// ends where ended says so.
func commitPlan(s *sched.Snapshot, plan *sched.Plan, now time.Time, ended func() bool) {
	placed, released, _ := plan.ByJob()
	var live []*domain.Job
	for _, j := range s.Jobs {
		if released[j.ID] {
			continue // time limit reached
		}
		if pl, ok := placed[j.ID]; ok {
			at := now
			j.State, j.Placement, j.PlacedAt = domain.JobRunning, pl, &at
		} else if j.State == domain.JobRunning && ended() {
			continue
		}
		live = append(live, j)
	}
	s.Jobs = live
}
