package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/sched"
)

// liveState builds a 2,048-GPU cluster holding n live one-GPU jobs, as many
// of them placed as fit (2,048 at most), the rest pending: the state the
// leader's scheduling loop snapshots every cycle. It returns the harness
// and the placed jobs' IDs.
func liveState(b *testing.B, n int) (*harness, []uint64) {
	h := newHarness(b).cluster(8, 32, 1024)
	apply := func(ct CommandType, payload any) {
		h.at = h.at.Add(10 * time.Millisecond)
		e, err := Encode(ct, h.at, "admin:bench", payload)
		if err != nil {
			b.Fatal(err)
		}
		if r := h.f.ApplyCommand(e); r.Err != nil {
			b.Fatalf("%s: %v", ct, r.Err)
		}
	}
	for range n {
		apply(CmdJobSubmit, MakeJob("research", 1).Obj())
	}
	plan := sched.Schedule(snapshotOf(h.f, h.at), h.at)
	var cmd JobsPlace
	var placed []uint64
	for _, p := range plan.Placements {
		cmd.Jobs = append(cmd.Jobs, JobPlacement{ID: p.JobID, Placements: p.Placement})
		placed = append(placed, p.JobID)
	}
	apply(CmdJobsPlace, cmd)
	if len(placed) == 0 {
		b.Fatal("nothing placed")
	}
	return h, placed
}

// BenchmarkSnapshotBuild: the scheduling loop's snapshot, taken under the
// state's read lock (every apply waits for it), with 10 jobs changed
// since the previous cycle (their runtimes reported): a whole copy of
// every job (the loop before sched.Snapshotter) against the incremental
// one, which copies the 10 and shares the rest. The time is the read
// lock's hold.
func BenchmarkSnapshotBuild(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		h, placed := liveState(b, n)
		for _, mode := range []string{"whole", "incremental"} {
			b.Run(fmt.Sprintf("live=%d/%s", n, mode), func(b *testing.B) {
				snaps := sched.Snapshotter{Clone: CopyJob}
				build := func() (s *sched.Snapshot) {
					h.f.Read(func(v View) {
						if mode == "whole" {
							s = sched.SnapshotOf(v, h.at, CopyJob)
						} else {
							s = snaps.Of(v, h.at)
						}
					})
					return s
				}
				build()
				next := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					for range 10 {
						h.at = h.at.Add(time.Millisecond)
						e, err := Encode(CmdJobReport, h.at, "runtime:bench", JobReport{ID: placed[next%len(placed)], State: ReportRunning, Message: fmt.Sprint("step ", i)})
						if err != nil {
							b.Fatal(err)
						}
						if r := h.f.ApplyCommand(e); r.Err != nil {
							b.Fatal(r.Err)
						}
						next++
					}
					b.StartTimer()
					if s := build(); len(s.Jobs) != n {
						b.Fatalf("%d live jobs in the snapshot, want %d", len(s.Jobs), n)
					}
				}
			})
		}
	}
}
