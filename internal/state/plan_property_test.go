package state

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// TestPlansCommitThroughTheFSM drives the real state machine under random
// load the way the leader does: every cycle's plan, made from the state,
// commits through plan.apply onto that same state, and the applier (the
// scheduler's own fit rule) refuses none of it; runtimes start, finish and
// stop jobs through their reports.
func TestPlansCommitThroughTheFSM(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7+1))
			h := newHarness(t).cluster(2, 2+rng.IntN(3), 4)
			tenants := []string{"acme"}
			for i := range 2 {
				name := fmt.Sprintf("t%d", i)
				iso := domain.IsolationGPU
				if rng.IntN(3) == 0 {
					iso = domain.IsolationServer
				}
				h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant(name).Isolation(iso).Obj()})
				g := rng.IntN(8)
				h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace(name, "w").Guaranteed(g).Borrow(rng.IntN(24)).Lend(rng.IntN(g + 1)).Obj()})
				tenants = append(tenants, name)
			}
			placed, stops := 0, 0
			for round := range 60 {
				for range rng.IntN(4) {
					tn := tenants[rng.IntN(len(tenants))]
					ws := "w"
					if tn == "acme" {
						ws = "research"
					}
					s := domain.JobSpec{Tenant: tn, Workspace: ws, Preemptible: rng.IntN(2) == 0, Priority: rng.IntN(3)}
					switch rng.IntN(6) {
					case 0:
						s.MIGProfile, s.MIGCount = []string{"1g.10gb", "2g.20gb", "3g.40gb"}[rng.IntN(3)], 1+rng.IntN(2)
					case 1:
						s.Share = []float64{0.25, 0.5, 0.125}[rng.IntN(3)]
					default:
						s.GPUs = []int{1, 2, 4, 8, 16}[rng.IntN(5)]
						if s.GPUs > 4 && rng.IntN(2) == 0 {
							s.GPUsPerNode = 4
						}
					}
					if rng.IntN(4) == 0 {
						s.TimeLimitSeconds = 30
					}
					h.apply(CmdJobSubmit, JobSubmit{Spec: s}) // a submit above quota is refused: fine
				}
				snap := snapshotOf(h.f, h.at.Add(-time.Hour))
				plan := sched.Schedule(snap, h.at)
				res := h.commitPlan(snap, plan)
				if len(res.Rejected) > 0 {
					t.Fatalf("round %d: the applier refused %v of a plan made from the state it commits to", round, res.Rejected)
				}
				placed += len(res.Placed)
				stops += len(res.Released) + len(res.Preempted)
				for _, j := range h.f.Jobs(JobFilter{}) {
					switch {
					case j.State == domain.JobReady:
						h.must(CmdJobReport, JobReport{ID: j.ID, State: ReportRunning})
					case j.State == domain.JobRunning && rng.IntN(6) == 0:
						h.must(CmdJobReport, JobReport{ID: j.ID, State: ReportSucceeded})
					case j.State == domain.JobPreempting && rng.IntN(2) == 0:
						h.must(CmdJobReport, JobReport{ID: j.ID, State: ReportStopped})
					}
				}
				h.advance(5 * time.Second)
			}
			if placed == 0 {
				t.Fatal("nothing was placed: the load tests nothing")
			}
			t.Logf("%d placed, %d released or preempted", placed, stops)
			h.replays()
		})
	}
}
