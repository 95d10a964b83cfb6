package state

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/sched"
)

// liveState builds a 2,048-GPU cluster holding n live one-GPU jobs, as many
// of them placed as fit (2,048 at most), the rest pending: the state the
// leader's scheduling loop snapshots every cycle. It returns the harness
// and the placed jobs' IDs.
func liveState(b testing.TB, n int) (*harness, []uint64) {
	h := newHarness(b).cluster(8, 32, 1024)
	apply := h.benchApply(b)
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

// benchApply applies a command 10ms after the last, failing b on a
// refusal: a benchmark's setup, without the harness's per-command checks.
func (h *harness) benchApply(b testing.TB) func(CommandType, any) {
	return func(ct CommandType, payload any) {
		h.at = h.at.Add(10 * time.Millisecond)
		e, err := Encode(ct, h.at, "admin:bench", payload)
		if err != nil {
			b.Fatal(err)
		}
		if r := h.f.ApplyCommand(e); r.Err != nil {
			b.Fatalf("%s: %v", ct, r.Err)
		}
	}
}

// reportRunning has 10 of the placed jobs report running (from *next on,
// round the list), untimed: the changes a benchmark's reader then sees.
func (h *harness) reportRunning(b *testing.B, placed []uint64, next *int, step int) {
	b.StopTimer()
	defer b.StartTimer()
	for range 10 {
		h.at = h.at.Add(time.Millisecond)
		e, err := Encode(CmdJobReport, h.at, "runtime:bench", JobReport{ID: placed[*next%len(placed)], State: ReportRunning, Message: fmt.Sprint("step ", step)})
		if err != nil {
			b.Fatal(err)
		}
		if r := h.f.ApplyCommand(e); r.Err != nil {
			b.Fatal(r.Err)
		}
		*next++
	}
}

// BenchmarkSnapshotBuild: the scheduling loop's snapshot, taken under the
// state's read lock (every apply waits for it), with 10 jobs changed
// since the previous cycle (their runtimes reported): a whole copy of
// every job (the loop before sched.Snapshotter) against the incremental
// one, which copies the 10 and shares the rest. The time is the read
// lock's hold.
func BenchmarkSnapshotBuild(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		h, placed := liveState(b, n)
		// locked: the part of incremental the read lock is held for
		// (Snapshotter.Begin); the merge after it is not timed.
		for _, mode := range []string{"whole", "incremental", "locked"} {
			b.Run(fmt.Sprintf("live=%d/%s", n, mode), func(b *testing.B) {
				snaps := sched.Snapshotter{Clone: CopyJob}
				build := func() (s *sched.Snapshot) {
					var finish func() *sched.Snapshot
					h.f.Read(func(v View) {
						if mode == "whole" {
							s = sched.SnapshotOf(v, h.at, CopyJob)
						} else {
							finish = snaps.Begin(v, h.at)
						}
					})
					if finish != nil {
						if mode == "locked" {
							b.StopTimer()
							defer b.StartTimer()
						}
						s = finish()
					}
					return s
				}
				build()
				next := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					h.reportRunning(b, placed, &next, i)
					if s := build(); len(s.Jobs) != n {
						b.Fatalf("%d live jobs in the snapshot, want %d", len(s.Jobs), n)
					}
				}
			})
		}
	}
}

// BenchmarkApplyDuringCycles: what the snapshot's read lock costs a
// submit. A scheduling loop takes a snapshot every 20 ms (the loop's burst
// window) of a state holding 10,000 live jobs while submits arrive open
// loop, 1,000/s (each followed by a cancel, so the live count holds):
// submits due while a snapshot holds the lock queue behind it. p50/p99
// are a submit's latency from its due time, lock wait and queue
// included, in microseconds: whole copy against incremental. Run it with
// -benchtime 5000x (5 s a mode: every iteration is one due time).
func BenchmarkApplyDuringCycles(b *testing.B) {
	h, _ := liveState(b, 10_000)
	for _, mode := range []string{"whole", "incremental"} {
		b.Run(fmt.Sprintf("live=10000/%s", mode), func(b *testing.B) {
			snaps := sched.Snapshotter{Clone: CopyJob}
			build := func() {
				h.f.Read(func(v View) {
					if mode == "whole" {
						sched.SnapshotOf(v, h.at, CopyJob)
					} else {
						snaps.Of(v, h.at)
					}
				})
			}
			build()
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(20 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						build()
					}
				}
			}()
			lat := make([]time.Duration, 0, b.N)
			apply := func(ct CommandType, payload any) {
				h.at = h.at.Add(time.Millisecond)
				e, err := Encode(ct, h.at, "admin:bench", payload)
				if err != nil {
					b.Fatal(err)
				}
				if r := h.f.ApplyCommand(e); r.Err != nil {
					b.Fatalf("%s: %v", ct, r.Err)
				}
			}
			wait := time.NewTimer(0)
			<-wait.C
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				// Open loop: submit i is due at start + i ms, whether or
				// not the one before has finished (no coordinated omission).
				due := start.Add(time.Duration(i) * time.Millisecond)
				if d := time.Until(due); d > 0 {
					wait.Reset(d)
					<-wait.C
				}
				apply(CmdJobSubmit, MakeJob("research", 1).Obj())
				lat = append(lat, time.Since(due))
				apply(CmdJobCancel, JobCancel{ID: h.f.d.NextJobID - 1})
			}
			b.StopTimer()
			close(stop)
			<-done
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.50), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
		})
	}
}
