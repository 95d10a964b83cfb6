package sched

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestBoundCauses: guaranteed waits over the bound (grace + one cycle)
// found in the issue 14 sweep of the ITP traces (32x8..128x8), one row per
// cause, each a world in which the guaranteed job must be placed (or its
// victims told to stop) in the first cycle. Each fails on the code before
// its fix.
func TestBoundCauses(t *testing.T) {
	for name, tc := range map[string]struct {
		world func(t *testing.T) *domaintest.World
		job   uint64
		// placed: the job is placed in the first cycle; else its victims
		// are told to stop in it.
		placed bool
	}{
		// check 32x8: a 4-GPU job of cluster08, within its guarantee,
		// waited 156 s with 15 GPUs free: two servers had 4 free, in no
		// contiguous set, and a job on one server was placed only on a
		// contiguous one.
		"free GPUs in no contiguous set": {
			world: func(t *testing.T) *domaintest.World {
				w := domaintest.NewWorld(t, domaintest.DGX(1, 1)).
					Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
					Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
					Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(4)).
					Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(4))
				for _, g := range []int{1, 3, 5, 7} {
					w.Running(domaintest.MakeJob("b/w", 0), domaintest.On("s1-gpu001", g))
				}
				return w.Pending(domaintest.MakeJob("a/w", 4))
			},
			job: 5, placed: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := tc.world(t)
			p := scheduleChecked(t, w)
			if tc.placed {
				if !placedIn(p, tc.job) {
					t.Fatalf("job %d not placed: %+v", tc.job, p.Pending[tc.job])
				}
				return
			}
			for _, pr := range p.Preemptions {
				if pr.ForJob == tc.job {
					return
				}
			}
			t.Fatalf("no victims told to stop for job %d: %+v", tc.job, p.Pending[tc.job])
		})
	}
}
