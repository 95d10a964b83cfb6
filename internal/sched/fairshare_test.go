package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestFairShareReclaim: a and b are guaranteed 4 of 16 GPUs each, weight
// 1. b holds 12 (borrows 8), a holds 4 and asks 4 more: beyond its
// guarantee, within its fair share (4 + half of the 8 no guarantee
// covers). With fair-share reclaim a takes 4 back from b, which keeps its
// own fair share of 8; without it, or beyond the churn budget, a waits.
func TestFairShareReclaim(t *testing.T) {
	world := func() *domaintest.World {
		w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
			Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
			Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(4).Borrow(12).Lend(4)).
			Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(4).Borrow(12).Lend(4))
		for g := 0; g < 16; g++ {
			ref := "b/w"
			if g < 4 {
				ref = "a/w"
			}
			w.Running(domaintest.MakeJob(ref, 1).Preemptible(), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+g/8), g%8))
			w.PlacedAgo(uint64(g+1), time.Hour)
		}
		w.Pending(domaintest.MakeJob("a/w", 4)) // 17
		return w
	}
	for _, tc := range []struct {
		name    string
		on      bool
		budget  int
		victims int
	}{
		{"off", false, 16, 0},
		{"on", true, 16, 4},
		{"budget used up", true, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(world())
			s.Policy = Policy{FairShareReclaim: tc.on, ChurnBudget: tc.budget}
			p := Schedule(s, now)
			if len(p.Preemptions) != tc.victims {
				t.Fatalf("%d victims (%+v), want %d; job 17: %+v", len(p.Preemptions), p.Preemptions, tc.victims, p.Pending.Of(17))
			}
			for _, pr := range p.Preemptions {
				if v := s.Jobs[pr.JobID-1]; v.Tenant != "b" || pr.BorrowBackoff == nil {
					t.Errorf("victim %d of %s (backoff %v): want b's borrowed jobs, with a borrow backoff", pr.JobID, v.Tenant, pr.BorrowBackoff)
				}
			}
			if tc.victims > 0 && p.Pending.Of(17).Code != ReasonReclaim {
				t.Errorf("job 17: %+v, want %s", p.Pending.Of(17), ReasonReclaim)
			}
		})
	}
}

// TestFairShareReclaimKeepsVictimsFairShare: b holds 8, its fair share
// (demand 8 + 4 pending = 12; a wants 8): a may not take b below it.
func TestFairShareReclaimKeepsVictimsFairShare(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 2)).Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
		Tenant(domaintest.MakeTenant("b").Isolation(domain.IsolationGPU)).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(4).Borrow(12).Lend(4)).
		Workspace(domaintest.MakeWorkspace("b", "w").Guaranteed(4).Borrow(12).Lend(4))
	for g := 0; g < 16; g++ {
		ref := "b/w"
		if g < 8 {
			ref = "a/w"
		}
		w.Running(domaintest.MakeJob(ref, 1).Preemptible(), domaintest.On(fmt.Sprintf("s1-gpu%03d", 1+g/8), g%8))
		w.PlacedAgo(uint64(g+1), time.Hour)
	}
	w.Pending(domaintest.MakeJob("a/w", 4)) // 17: a would go to 12, over its fair share of 8
	s := snapshotOf(w)
	s.Policy = Policy{FairShareReclaim: true, ChurnBudget: 64}
	if p := Schedule(s, now); len(p.Preemptions) != 0 {
		t.Fatalf("victims %+v: a is at its fair share, b at its own", p.Preemptions)
	}
}
