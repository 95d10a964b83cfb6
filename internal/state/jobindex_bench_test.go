package state

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// retainedState builds a 2,048-GPU cluster holding ended jobs (submitted
// and cancelled, their ends 20 s apart, the oldest weeks back) and then
// 1,000 one-GPU jobs placed, 100 more pending: the state the leader reads
// every cycle once ended jobs are many. It returns the harness and a plan
// placing the 100.
func retainedState(b *testing.B, ended int) (*harness, JobsPlace) {
	h := newHarness(b).cluster(8, 32, 1024)
	h.at = h.at.Add(-time.Duration(ended) * 20 * time.Second)
	apply := func(ct CommandType, payload any) {
		h.at = h.at.Add(10 * time.Second)
		e, err := Encode(ct, h.at, "admin:bench", payload)
		if err != nil {
			b.Fatal(err)
		}
		if r := h.f.ApplyCommand(e); r.Err != nil {
			b.Fatalf("%s: %v", ct, r.Err)
		}
	}
	for range ended {
		apply(CmdJobSubmit, MakeJob("research", 1).Obj())
		apply(CmdJobCancel, JobCancel{ID: h.f.d.NextJobID - 1})
	}
	for range 1100 {
		apply(CmdJobSubmit, MakeJob("research", 1).Obj())
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
	apply(CmdJobsPlace, place(sched.Schedule(snap, h.at)))
	plan := sched.Schedule(snapshotOf(h.f, h.at), h.at)
	if len(plan.Placements) != 100 {
		b.Fatalf("%d placements planned", len(plan.Placements))
	}
	h.at = h.at.Add(time.Second)
	return h, place(plan)
}

// BenchmarkRetainedPlanApply: the plan applier (100 placements onto 1,000
// jobs holding GPUs) as ended jobs accumulate.
func BenchmarkRetainedPlanApply(b *testing.B) {
	for _, ended := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("ended=%d", ended), func(b *testing.B) {
			h, cmd := retainedState(b, ended)
			entry, err := Encode(CmdJobsPlace, h.at, "scheduler", cmd)
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
		})
	}
}

// BenchmarkRetainedSchedSnapshot: the scheduler's view (1,100 live jobs,
// the jobs ended within the history horizon) as ended jobs accumulate.
func BenchmarkRetainedSchedSnapshot(b *testing.B) {
	for _, ended := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("ended=%d", ended), func(b *testing.B) {
			h, _ := retainedState(b, ended)
			since := h.at.Add(-sched.DefaultPolicy.HistoryHorizon())
			b.ResetTimer()
			for range b.N {
				if s := snapshotOf(h.f, since); len(s.Jobs) != 1100 {
					b.Fatalf("%d live jobs", len(s.Jobs))
				}
			}
		})
	}
}

// BenchmarkEndAmongLive: cancelling 1,000 pending jobs of a state holding
// 100,000 live ones, through apply: each end took its job out of the
// ID-sorted live list, moving half the list under the write lock; a
// tombstone now marks it until half the list is tombstones.
func BenchmarkEndAmongLive(b *testing.B) {
	h, _ := liveState(b, 100_000)
	var pending []uint64
	for j := range h.f.jobs.liveJobs() {
		if j.State == domain.JobPending {
			pending = append(pending, j.ID)
		}
	}
	next := 0
	b.ResetTimer()
	for range b.N {
		for range 1000 {
			if next == len(pending) {
				b.Fatal("out of pending jobs: lower -benchtime")
			}
			h.at = h.at.Add(time.Millisecond)
			e, err := Encode(CmdJobCancel, h.at, "admin:bench", JobCancel{ID: pending[next]})
			if err != nil {
				b.Fatal(err)
			}
			if r := h.f.ApplyCommand(e); r.Err != nil {
				b.Fatal(r.Err)
			}
			next++
		}
	}
}
