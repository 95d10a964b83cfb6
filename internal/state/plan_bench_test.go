package state

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/sched"
)

// BenchmarkPlanApply: the plan applier's cost, 100 placements committed
// onto a 2,048-GPU cluster where 1,000 jobs already hold GPUs.
func BenchmarkPlanApply(b *testing.B) {
	h := newHarness(b).cluster(8, 32, 1024)
	for range 1100 {
		h.must(CmdJobSubmit, MakeJob("research", 1).Obj())
	}
	place := func(plan *sched.Plan) JobsPlace {
		var cmd JobsPlace
		for _, p := range plan.Placements {
			cmd.Jobs = append(cmd.Jobs, JobPlacement{ID: p.JobID, Placements: p.Placement})
		}
		return cmd
	}
	snap := snapshotOf(h.f, h.at)
	snap.Jobs = snap.Jobs[:1000]
	h.must(CmdJobsPlace, place(sched.Schedule(snap, h.at)))
	plan := sched.Schedule(snapshotOf(h.f, h.at), h.at)
	if len(plan.Placements) != 100 {
		b.Fatalf("%d placements planned", len(plan.Placements))
	}
	entry, err := Encode(CmdJobsPlace, h.at.Add(time.Second), "scheduler", place(plan))
	if err != nil {
		b.Fatal(err)
	}
	state := h.snapshot()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		f := New()
		if err := f.Restore(nopCloser{bytes.NewReader(state)}); err != nil {
			b.Fatal(err)
		}
		runtime.GC() // the restore's garbage is not the applier's
		b.StartTimer()
		if r := f.ApplyCommand(entry); r.Err != nil || len(r.Value.(*PlanResult).Placed) != 100 {
			b.Fatalf("apply: %v %+v", r.Err, r.Value)
		}
	}
}
