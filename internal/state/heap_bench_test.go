package state

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// BenchmarkHeapPerJob: what a leader holding 100,000 pending jobs keeps on
// its heap, which the garbage collector marks every cycle while submits
// allocate (issue 18), and the garbage a submit and a scheduling cycle
// make. The state is bench submit's: 32 GPUs, one workspace, jobs of 8
// GPUs from a few tokens, nearly all pending. Metrics, after
// runtime.GC():
//
//   - state-objs/job, state-B/job: the state after the submits;
//   - leader-objs/job, leader-B/job: the state plus what the scheduling
//     loop keeps between cycles (its snapshot, sched.Carry's sums) after
//     four cycles committed their pending reasons;
//   - allocs/submit, B/submit: allocated by a submit's apply;
//   - allocs/cycle1-job, B/cycle1-job: allocated by the first cycle
//     (snapshot, schedule, commit: it places 4 jobs and gives every other
//     a reason), per job;
//   - allocs/cycle-job, B/cycle-job: allocated by the fourth cycle, on a
//     state no cycle changed since the first: it places nothing and finds
//     every reason unchanged (a leader's cycle while only submits come).
//
// Run with -benchtime 1x: one iteration is 100,000 submits.
func BenchmarkHeapPerJob(b *testing.B) {
	const n = 100_000
	for range b.N {
		h := newHarness(b).cluster(1, 4, 16)
		snaps := sched.Snapshotter{Clone: leaderClone}
		var carry sched.Carry // the loop's sums from cycle to cycle, as the server keeps them
		var ms runtime.MemStats
		read := func() runtime.MemStats {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			return ms
		}
		at := h.at
		// The commands are encoded outside the measured window: the
		// leader receives them encoded.
		cmds := make([][]byte, n)
		for i := range cmds {
			at = at.Add(time.Millisecond)
			e, err := Encode(CmdJobSubmit, at, fmt.Sprintf("member:tok%d", i%4), JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, GPUsPerNode: 8}})
			if err != nil {
				b.Fatal(err)
			}
			cmds[i] = e
		}
		m0 := read()
		for _, e := range cmds {
			if r := h.f.ApplyCommand(e); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		m1 := read()
		cycle := func() {
			at = at.Add(time.Second)
			var snap *sched.Snapshot
			h.f.Read(func(v View) { snap = snaps.Of(v, at.Add(-time.Hour)) })
			plan := carry.Schedule(snap, at)
			cmd := PlanApply{Placements: plan.Placements, Reasons: map[uint64]domain.Reason{}}
			for _, j := range snap.Jobs {
				if r, ok := plan.Pending[j.ID]; ok && !j.Reason.Equal(r) {
					cmd.Reasons[j.ID] = r
				}
			}
			e, err := Encode(CmdPlanApply, at, "admin:leader", cmd)
			if err != nil {
				b.Fatal(err)
			}
			if r := h.f.ApplyCommand(e); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		cycle()
		m2 := read()
		cycle()
		cycle() // the loop has caught up with the first cycle's changes
		m3 := read()
		cycle()
		m4 := read()
		runtime.KeepAlive(cmds)
		runtime.KeepAlive(h.f)
		runtime.KeepAlive(&snaps)
		runtime.KeepAlive(&carry)
		per := func(a, b uint64) float64 { return float64(int64(b)-int64(a)) / n }
		b.ReportMetric(per(m0.HeapObjects, m1.HeapObjects), "state-objs/job")
		b.ReportMetric(per(m0.HeapAlloc, m1.HeapAlloc), "state-B/job")
		b.ReportMetric(per(m0.HeapObjects, m4.HeapObjects), "leader-objs/job")
		b.ReportMetric(per(m0.HeapAlloc, m4.HeapAlloc), "leader-B/job")
		b.ReportMetric(per(m0.Mallocs, m1.Mallocs), "allocs/submit")
		b.ReportMetric(per(m0.TotalAlloc, m1.TotalAlloc), "B/submit")
		b.ReportMetric(per(m1.Mallocs, m2.Mallocs), "allocs/cycle1-job")
		b.ReportMetric(per(m1.TotalAlloc, m2.TotalAlloc), "B/cycle1-job")
		b.ReportMetric(per(m3.Mallocs, m4.Mallocs), "allocs/cycle-job")
		b.ReportMetric(per(m3.TotalAlloc, m4.TotalAlloc), "B/cycle-job")
	}
}

// leaderClone is how the server's scheduling loop copies a job into its
// snapshot (server.go: s.snaps.Clone).
var leaderClone = ShareJob
