package state

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// steadySubmits submits n jobs with idempotency keys, each given its
// pending reason by a plan as a cycle does (500 to a plan).
func steadySubmits(b testing.TB, h *harness) func(n int) {
	apply := h.benchApply(b)
	key := 0
	return func(n int) {
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
}

// BenchmarkRaftSnapshotSteady is the raft snapshot a leader takes at 1,000
// submits a second (issue 18): 100,000 live jobs submitted with
// idempotency keys, then, between two snapshots, 30,000 more (30 s, the
// store's snapshot interval), each given its pending reason by a plan as a
// cycle does. What is timed is FSM.Snapshot: raft calls it on the
// goroutine that applies the log, so no submit commits while it runs.
func BenchmarkRaftSnapshotSteady(b *testing.B) {
	h := newHarness(b).cluster(8, 32, 1024)
	submit := steadySubmits(b, h)
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

// BenchmarkRaftSnapshotPersist is what Persist writes (and allocates)
// for that snapshot: 130,000 jobs, the 30,000 changed since the last one
// encoded, and the events, idempotency keys and their order, which every
// member writes every 30 to 60 s at 1,000 submits a second (issue 18:
// a snapshot's garbage brought a collection with it).
func BenchmarkRaftSnapshotPersist(b *testing.B) {
	h := newHarness(b).cluster(8, 32, 1024)
	submit := steadySubmits(b, h)
	persist := func() {
		s := must(h.f.Snapshot())
		w := bufio.NewWriterSize(io.Discard, 1<<20)
		if err := s.(*snapshot).write(w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	submit(100_000)
	persist() // every job encoded once, as a running member's first
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		submit(30_000)
		b.StartTimer()
		c := cpuTime()
		persist()
		cpu += cpuTime() - c
	}
	// The process's CPU, the collector's workers on the other core too.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCycleSnapshotLocked is the scheduling loop's read-lock hold
// (Snapshotter.Begin) at 1,000 submits a second with 100,000 jobs live:
// 1,000 jobs submitted and given their reasons since the last cycle. The
// loop's own copies (CopyJob) against the raft snapshot's (CopyOf); the
// merge after the lock is not timed.
func BenchmarkCycleSnapshotLocked(b *testing.B) {
	for _, clone := range []string{"CopyJob", "CopyOf"} {
		b.Run(clone, func(b *testing.B) {
			h := newHarness(b).cluster(8, 32, 1024)
			apply := h.benchApply(b)
			submit := func(n int) {
				reasons := map[uint64]domain.Reason{}
				for range n {
					apply(CmdJobSubmit, MakeJob("research", 1).Obj())
					reasons[h.f.d.NextJobID-1] = domain.Reason{Code: "capacity", Message: "waiting for 1 GPU"}
				}
				apply(CmdPlanApply, PlanApply{Reasons: reasons})
			}
			submit(100_000)
			snaps := sched.Snapshotter{Clone: CopyJob}
			if clone == "CopyOf" {
				snaps.Clone = h.f.CopyOf
			}
			h.f.Read(func(v View) { snaps.Of(v, h.at) })
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				submit(1000)
				b.StartTimer()
				var finish func() *sched.Snapshot
				h.f.Read(func(v View) { finish = snaps.Begin(v, h.at) })
				b.StopTimer()
				finish()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSnapshotJobsByID is Persist's order of 130,000 jobs: put in
// place in their IDs' range (jobsByID), against sorting them with their
// entries, and against sorting their IDs and looking each up again (what
// Persist did before).
func BenchmarkSnapshotJobsByID(b *testing.B) {
	jobs := map[uint64]*snapJob{}
	for i := range 130_000 {
		jobs[uint64(1000+i)] = &snapJob{}
	}
	b.Run("place", func(b *testing.B) {
		for range b.N {
			jobsByID(jobs)
		}
	})
	b.Run("sort", func(b *testing.B) {
		for range b.N {
			out := make([]snapEntry, 0, len(jobs))
			for id, e := range jobs {
				out = append(out, snapEntry{id: id, was: e})
			}
			slices.SortFunc(out, func(a, b snapEntry) int { return cmp.Compare(a.id, b.id) })
		}
	})
	b.Run("sort-ids-lookup", func(b *testing.B) {
		for range b.N {
			n := 0
			for _, id := range slices.Sorted(maps.Keys(jobs)) {
				if jobs[id] != nil {
					n++
				}
			}
		}
	})
}
