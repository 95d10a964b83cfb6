package sched_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestReservationEndingsKeptDecideAlike drains a queue of jobs with and
// without expected durations and time limits through a cluster kept full,
// so that every cycle places jobs between reservation searches, and
// compares every cycle's plan with the one decided without the cycle's
// kept endings (each search folding in every placement of the cycle
// again, as ScheduleExhaustive does): the reservations' start times and
// placements are in the pending reasons the plans carry.
func TestReservationEndingsKeptDecideAlike(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 16, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	reserved := 0
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		s, refs := drainSnapshot(topo, 40, 30, func(int) domain.Isolation { return domain.IsolationGPU }, func(i int, w *domain.Workspace) {
			w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight = 4, 128, 2, 1+i%3
		})
		now := domaintest.Now
		id := uint64(0)
		submit := func(n int) {
			for k := 0; k < n; k++ {
				id++
				w := s.Workspaces[refs[rng.IntN(len(refs))]]
				spec := domain.JobSpec{Tenant: w.Tenant, Workspace: w.Name, Preemptible: rng.IntN(2) == 0}
				switch r := rng.IntN(10); {
				case r < 6:
					spec.GPUs = []int{1, 2, 4, 8}[rng.IntN(4)]
				default:
					spec.GPUs, spec.GPUsPerNode = []int{16, 32, 64}[rng.IntN(3)], 8
				}
				// Ends known by expected duration, time limit, or not at all.
				switch rng.IntN(3) {
				case 0:
					spec.ExpectedDurationSeconds = int64(60 * (1 + rng.IntN(120)))
				case 1:
					spec.TimeLimitSeconds = int64(60 * (1 + rng.IntN(240)))
				}
				s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: spec, State: domain.JobPending, SubmittedAt: now})
			}
		}
		submit(600)
		for cycle := 0; cycle < 30; cycle++ {
			plan := sched.Schedule(s, now)
			if ex := sched.ScheduleExhaustive(s, now); !reflect.DeepEqual(plan, ex) {
				t.Fatalf("seed %d cycle %d: the plan with the kept endings differs from the one folding every placement in again", seed, cycle)
			}
			for _, r := range plan.Pending.All() {
				if strings.Contains(r.Message, "; reserved ") {
					reserved++
				}
			}
			commitPlan(s, plan, now, func() bool { return rng.IntN(6) == 0 })
			submit(10 + rng.IntN(30))
			now = now.Add(time.Duration(30+rng.IntN(300)) * time.Second)
		}
	}
	// The reservations must have been searched for (the case the kept
	// endings serve), not only the plain capacity reasons.
	if reserved < 100 {
		t.Fatalf("%d pending reasons name a reservation: not the case this test is for", reserved)
	}
}
