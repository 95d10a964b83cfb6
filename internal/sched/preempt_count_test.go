package sched

import (
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestPreemptionCauses: preemptions the issue 14 sweep of the ITP traces
// counted beyond what the reclaim needed (development set, 48x8), one row
// per cause, each a world in which a guaranteed job reclaims in the first
// cycle. Each row gives the victims it must stop and how many GPUs each
// workspace must keep; each fails on the code before its fix.
func TestPreemptionCauses(t *testing.T) {
	// borrowers fills servers with borrowed work of workspace ref: on
	// each server in small, eight 1-GPU jobs placed a minute ago; on each
	// in big, one 8-GPU job placed two hours ago.
	borrowers := func(w *domaintest.World, ref string, small, big []string) {
		for _, s := range small {
			for g := range 8 {
				w.Running(domaintest.MakeJob(ref, 1), domaintest.On(s, g))
				w.PlacedAgo(uint64(len(w.Jobs)), time.Minute)
			}
		}
		for _, s := range big {
			w.Running(domaintest.MakeJob(ref, 8), domaintest.On(s, domaintest.Seq(0, 8)...))
			w.PlacedAgo(uint64(len(w.Jobs)), 2*time.Hour)
		}
	}
	world := func(t *testing.T, servers int) *domaintest.World {
		return domaintest.NewWorld(t, domaintest.DGX(1, servers)).
			Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
			Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
			Tenant(domaintest.MakeTenant("c").Isolation(domain.IsolationGPU))
	}
	for name, tc := range map[string]struct {
		world   func(t *testing.T) *domaintest.World
		job     uint64
		victims int
		keep    map[string]int // GPUs a workspace must still hold once its victims stop
	}{
		// dev 48x8: a guaranteed 8-GPU job took the cheapest victims,
		// eight 1-GPU borrowers started minutes ago, where one 8-GPU
		// borrower emptied a server; 8-GPU jobs stopped 2.7 jobs each,
		// gangs of 16-64 GPUs 4-16.
		"one server: one long job, not eight new ones": {
			world: func(t *testing.T) *domaintest.World {
				w := world(t, 2).
					Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8).Lend(8)).
					Workspace(domaintest.MakeWorkspace("b", "w").Borrow(16))
				borrowers(w, "b/w", []string{"s1-gpu001"}, []string{"s1-gpu002"})
				return w.Pending(domaintest.MakeJob("a/w", 8))
			},
			job: 10, victims: 1,
		},
		"a gang of two servers": {
			world: func(t *testing.T) *domaintest.World {
				w := world(t, 4).
					Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(16).Lend(16)).
					Workspace(domaintest.MakeWorkspace("b", "w").Borrow(32))
				borrowers(w, "b/w", []string{"s1-gpu001", "s1-gpu002"}, []string{"s1-gpu003", "s1-gpu004"})
				return w.Pending(domaintest.MakeJob("a/w", 16))
			},
			job: 19, victims: 2,
		},
		// The fewest victims, still from each workspace at most what it
		// borrowed: b borrowed 8 of its 16, so one of its 8-GPU jobs and
		// one server of c's 1-GPU jobs go (9), not both of b's (2) nor
		// all of c's cheap ones (16).
		"a gang of two servers, within what each borrowed": {
			world: func(t *testing.T) *domaintest.World {
				w := world(t, 4).
					Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(16).Lend(16)).
					Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(8).Lend(8).Borrow(32)).
					Workspace(domaintest.MakeWorkspace("c", "w").Borrow(32))
				borrowers(w, "c/w", []string{"s1-gpu001", "s1-gpu002"}, nil)
				borrowers(w, "b/w", nil, []string{"s1-gpu003", "s1-gpu004"})
				return w.Pending(domaintest.MakeJob("a/w", 16))
			},
			job: 19, victims: 9, keep: map[string]int{"b/w": 8},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := tc.world(t)
			p := scheduleChecked(t, w)
			byID := map[uint64]*domain.Job{}
			for _, j := range w.Jobs {
				byID[j.ID] = j
			}
			stopped := map[string]int{}
			for _, pr := range p.Preemptions {
				if pr.ForJob != tc.job {
					t.Errorf("job %d told to stop for job %d, not %d", pr.JobID, pr.ForJob, tc.job)
				}
				v := byID[pr.JobID]
				stopped[v.Tenant+"/"+v.Workspace] += v.GPUs
			}
			if len(p.Preemptions) != tc.victims {
				t.Errorf("%d victims for job %d, want %d: %+v", len(p.Preemptions), tc.job, tc.victims, p.Pending.Of(tc.job))
			}
			for ref, keep := range tc.keep {
				held := 0
				for _, j := range w.Jobs {
					if j.Tenant+"/"+j.Workspace == ref && j.State == domain.JobRunning {
						held += j.GPUs
					}
				}
				if held-stopped[ref] < keep {
					t.Errorf("%s keeps %d GPUs, below %d", ref, held-stopped[ref], keep)
				}
			}
		})
	}
}
