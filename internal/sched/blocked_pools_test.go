package sched_test

import (
	"fmt"
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

// TestPoolJobsAroundReservationsDecideAlike drains a queue of jobs of 4
// pools (and some of none), with and without known ends, through a
// cluster kept full, and compares every cycle's plan with the one
// decided exhaustively: there a pool job placed around reservations hides
// every reserved GPU and a job waiting for its own victims hides every
// free GPU of the future view, where the cycle hides only those of
// servers the job may use (placeAround, futureOnly). Reservations'
// placements and the reasons they give are in the plans. Hiding only the
// GPUs of servers the job may not use, in either (a deliberate break),
// fails it.
func TestPoolJobsAroundReservationsDecideAlike(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 16, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]*domain.ServerPool{}
	for i, v := range topo.Servers() {
		name := fmt.Sprintf("p%d", i/8)
		if pools[name] == nil {
			pools[name] = &domain.ServerPool{Name: name}
		}
		pools[name].Servers = append(pools[name].Servers, v.Name)
	}
	reserved, around, waits, stops := 0, 0, 0, 0
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1818))
		s, refs := drainSnapshot(topo, 40, 30, func(i int) domain.Isolation {
			if i%5 == 0 {
				return domain.IsolationServer
			}
			return domain.IsolationGPU
		}, func(i int, w *domain.Workspace) {
			w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight = 4, 128, 2, 1+i%3
		})
		s.Pools = pools
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
					spec.GPUs, spec.GPUsPerNode = []int{16, 32}[rng.IntN(2)], 8
				}
				if p := rng.IntN(5); p < 4 {
					spec.Pool = fmt.Sprintf("p%d", p)
				}
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
				for id, r := range plan.Pending.All() {
					if ex.Pending.Of(id).Message != r.Message {
						t.Errorf("job %d: %q, exhaustively %q", id, r.Message, ex.Pending.Of(id).Message)
						break
					}
				}
				t.Fatalf("seed %d cycle %d: the plan differs from the one decided exhaustively", seed, cycle)
			}
			for _, r := range plan.Pending.All() {
				if strings.Contains(r.Message, "; reserved ") {
					reserved++
				}
				if strings.Contains(r.Message, "reserved for a job that has waited longer") {
					around++
				}
			}
			waits += strings.Count(fmt.Sprint(plan.Pending), "being freed for it")
			commitStops(s, plan, now, func() bool { return rng.IntN(6) == 0 })
			submit(10 + rng.IntN(30))
			step := time.Duration(30+rng.IntN(300)) * time.Second
			if cycle%2 == 0 {
				step = 10 * time.Second // within the grace period: victims still stopping
			}
			now = now.Add(step)
			stops += len(plan.Preemptions)
		}
	}
	// Reservations hid free GPUs from later jobs (the case this test is
	// for), not only plain capacity reasons.
	if reserved < 100 || around < 20 || waits < 20 {
		t.Fatalf("%d reasons name a reservation, %d a reservation held back, %d wait for their victims (%d preemptions): not the case this test is for", reserved, around, waits, stops)
	}
	t.Logf("%d reasons name a reservation, %d were held back by one, %d wait for their victims (%d preemptions)", reserved, around, waits, stops)
}

// commitStops is commitPlan with the plan's preemptions too: a victim
// stops at its deadline (the cycle then releases it), and the job it
// stops for waits for its GPUs (futureOnly).
func commitStops(s *sched.Snapshot, plan *sched.Plan, now time.Time, ended func() bool) {
	placed, released, stopping := plan.ByJob()
	var live []*domain.Job
	for _, j := range s.Jobs {
		if released[j.ID] {
			j.State, j.Placement, j.PlacedAt, j.StopDeadline, j.PreemptedFor = domain.JobPending, nil, nil, nil, 0
		}
		if p, ok := stopping[j.ID]; ok {
			d := p.Deadline
			j.State, j.StopDeadline, j.PreemptedFor, j.BorrowNotBefore = domain.JobPreempting, &d, p.ForJob, p.BorrowBackoff
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
