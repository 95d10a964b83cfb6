package sched_test

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestScanCacheDecidesAlike drains a long mixed queue (whole GPUs, gangs,
// MIG, shares; many tenants, a fifth of them server-isolated) through a
// cluster that stays full, the shape the scan cache and the ranked servers
// are for, and compares every cycle's plan with the one decided by full
// scans. The property test (TestInvariantsUnderRandomLoad) compares them on
// every round as well.
func TestScanCacheDecidesAlike(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 4, ServersPerStripe: 16, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		s, refs := drainSnapshot(topo, 120, 100, func(i int) domain.Isolation {
			if i%5 == 0 {
				return domain.IsolationServer
			}
			return domain.IsolationGPU
		}, func(i int, w *domain.Workspace) {
			w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight = 3, 64, 1, 1+i%3
		})
		for id := 1; id <= 3000; id++ {
			w := s.Workspaces[refs[rng.IntN(len(refs))]]
			spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: rng.IntN(2) == 0}
			switch r := rng.IntN(100); {
			case r < 5:
				spec.MIGProfile, spec.MIGCount = []string{"1g.10gb", "3g.40gb"}[rng.IntN(2)], 1+rng.IntN(2)
			case r < 10:
				spec.Share = 0.25
			case r < 70:
				spec.GPUs = []int{1, 2, 4, 8}[rng.IntN(4)]
			default:
				spec.GPUs, spec.GPUsPerNode = []int{16, 32, 64}[rng.IntN(3)], 8
			}
			s.Jobs = append(s.Jobs, &domain.Job{ID: uint64(id), JobSpec: spec, State: domain.JobPending, SubmittedAt: domaintest.Now})
		}
		now := domaintest.Now
		placements, failures := 0, 0
		for cycle := 0; cycle < 25; cycle++ {
			plan := sched.Schedule(s, now)
			if ex := sched.ScheduleExhaustive(s, now); !reflect.DeepEqual(plan, ex) {
				t.Fatalf("seed %d cycle %d: the plan with the scan cache differs from the one without", seed, cycle)
			}
			placements += len(plan.Placements)
			failures += plan.Pending.Len()
			commitPlan(s, plan, now, func() bool { return rng.IntN(8) == 0 })
			now = now.Add(10 * time.Second)
		}
		// The drain must place work and refuse much more (the cache's case).
		if placements < 200 || failures < 10*placements {
			t.Fatalf("seed %d: %d placements and %d pending decisions: not the full cluster this test is for", seed, placements, failures)
		}
	}
}
