package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// BenchmarkRaftSnapshotSteady is the raft snapshot a leader takes at 1,000
// submits a second (issue 18): 100,000 live jobs submitted with
// idempotency keys, then, between two snapshots, 30,000 more (30 s, the
// store's snapshot interval), each given its pending reason by a plan as a
// cycle does. What is timed is FSM.Snapshot: raft calls it on the
// goroutine that applies the log, so no submit commits while it runs.
func BenchmarkRaftSnapshotSteady(b *testing.B) {
	h := newHarness(b).cluster(8, 32, 1024)
	apply := h.benchApply(b)
	key := 0
	submit := func(n int) {
		reasons := map[uint64]domain.Reason{}
		for range n {
			key++
			apply(CmdJobSubmit, JobSubmit{Spec: MakeJob("research", 1).Obj().Spec, IdempotencyKey: fmt.Sprintf("bench-%d", key)})
			reasons[h.f.d.NextJobID-1] = domain.Reason{Code: "capacity", Message: "waiting for 1 GPU"}
			if len(reasons) == 500 {
				apply(CmdPlanApply, PlanApply{Reasons: reasons})
				reasons = map[uint64]domain.Reason{}
			}
		}
		if len(reasons) > 0 {
			apply(CmdPlanApply, PlanApply{Reasons: reasons})
		}
	}
	submit(100_000)
	must(h.f.Snapshot())
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		submit(30_000)
		b.StartTimer()
		t := time.Now()
		must(h.f.Snapshot())
		b.ReportMetric(float64(time.Since(t).Microseconds())/1000, "stall-ms")
	}
}
