package sched

import (
	"testing"
	"time"

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
		// dev 48x8: a guaranteed job waiting for GPUs left over from
		// another job's reclaim (reason reclaim_pending, no victims of
		// its own) was ranked after a job that began to wait later; that
		// job booked the leftovers, and the first had to book later
		// victims, cycle after cycle: 34 s. It keeps its place: here job
		// 5 (guaranteed, waiting) keeps the 4 GPUs left over on s1-gpu001
		// and job 4 (guaranteed, older id, new) reclaims on s1-gpu002.
		"leftovers taken by a job that began to wait later": {
			world: func(t *testing.T) *domaintest.World {
				by := domaintest.Now.Add(10 * time.Second)
				w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).
					Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
					Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
					Tenant(domaintest.MakeTenant("c").Isolation(domain.IsolationGPU)).
					Tenant(domaintest.MakeTenant("d").Isolation(domain.IsolationGPU)).
					Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(4).Lend(4)).
					Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(4).Lend(4)).
					Workspace(domaintest.MakeWorkspace("d", "w").Guaranteed(4).Lend(4)).
					Workspace(domaintest.MakeWorkspace("c", "w").Borrow(16))
				w.Running(domaintest.MakeJob("c/w", 0), domaintest.On("s1-gpu001", domaintest.Seq(0, 8)...)) // 1: stopping for job 3
				w.Running(domaintest.MakeJob("c/w", 0), domaintest.On("s1-gpu002", domaintest.Seq(0, 8)...)) // 2: borrows
				w.PlacedAgo(1, time.Hour).PlacedAgo(2, time.Hour)
				w.With(1, func(j *domain.Job) { j.State, j.PreemptedFor, j.StopDeadline = domain.JobPreempting, 3, &by })
				w.Pending(domaintest.MakeJob("b/w", 4)) // 3: its victim stops by the deadline
				w.Pending(domaintest.MakeJob("d/w", 4)) // 4: new
				w.Pending(domaintest.MakeJob("a/w", 4)) // 5: waits for the leftovers since the last cycle
				w.With(5, func(j *domain.Job) {
					j.Reason = &domain.Reason{Code: ReasonReclaim, Message: "waiting for GPUs being freed by other jobs' preemption"}
				})
				return w
			},
			job: 4,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := tc.world(t)
			p := scheduleChecked(t, w)
			if tc.placed {
				if !placedIn(p, tc.job) {
					t.Fatalf("job %d not placed: %+v", tc.job, p.Pending.Of(tc.job))
				}
				return
			}
			found := false
			for _, pr := range p.Preemptions {
				if pr.ForJob == tc.job {
					found = true
				} else if pr.ForJob != 0 {
					t.Errorf("job %d preempted for job %d, not for job %d: %+v", pr.JobID, pr.ForJob, tc.job, p.Pending.Of(pr.ForJob))
				}
			}
			if !found {
				t.Fatalf("no victims told to stop for job %d: %+v", tc.job, p.Pending.Of(tc.job))
			}
		})
	}
}
