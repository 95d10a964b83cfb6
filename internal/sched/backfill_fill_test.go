package sched

import (
	"fmt"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestFillBackfillsWithoutEstimates is the Slurm bridge's fill
// (internal/slurm BenchmarkBridgeFill, mix): one workspace's jobs arrive
// in batches while earlier ones run, the mix of 70 % 1x8, 20 % 1-GPU and
// 10 % 4x8, more than the pool holds, none with a time limit or expected
// duration, and no history. The first job that did not fit could get no
// reservation (no running job has a known end), so it held back its whole
// workspace: on 2,048 x 8 GPUs that left 23 GPUs idle that Slurm's
// backfill gave to the 1-GPU jobs behind it. With nothing known, every
// running job is taken to end at the same unknown time: the blocked job is
// reserved on GPUs busy now, and the jobs behind it fill the GPUs it would
// not take.
func TestFillBackfillsWithoutEstimates(t *testing.T) {
	for _, tc := range []struct {
		servers, batch int
		borrow         bool
	}{{16, 7, false}, {16, 7, true}, {64, 13, false}, {64, 13, true}, {2048, 400, false}, {2048, 400, true}} {
		t.Run(fmt.Sprintf("servers=%d/borrow=%t", tc.servers, tc.borrow), func(t *testing.T) {
			if tc.servers > 64 && testing.Short() {
				t.Skip("the full-size fill in -short")
			}
			stripes := max(1, tc.servers/64)
			w := domaintest.NewWorld(t, domaintest.DGX(stripes, tc.servers/stripes)).
				Tenant(domaintest.MakeTenant("a").Isolation(domain.IsolationGPU)).
				Workspace(domaintest.MakeWorkspace("a", "gpu").Guaranteed(8 * tc.servers))
			if tc.borrow {
				// The same jobs borrowing: none is within a guarantee.
				w.Workspace(domaintest.MakeWorkspace("a", "gpu").Borrow(8 * tc.servers))
			}
			m := stepper(t, w)
			jobs := tc.servers * 5 / 4 // more than fit: about 90 GPUs per 10 jobs
			var p *Plan
			for i := 0; i < jobs; {
				for end := min(jobs, i+tc.batch); i < end; i++ {
					switch i % 10 {
					case 7, 8:
						w.Pending(domaintest.MakeJob("a/gpu", 1))
					case 9:
						w.Pending(domaintest.MakeJob("a/gpu", 32).PerNode(8))
					default:
						w.Pending(domaintest.MakeJob("a/gpu", 8).PerNode(8))
					}
				}
				m.s = snapshotOf(w)
				p = Schedule(m.s, m.now)
				m.commit(p)
				m.now = m.now.Add(tick)
			}
			busy := 0
			for _, j := range w.Jobs {
				if j.State == domain.JobRunning {
					busy += j.GPUs
				}
			}
			idle := 8*tc.servers - busy
			var first uint64
			for _, j := range w.Jobs {
				if j.State != domain.JobPending {
					continue
				}
				r := p.Pending.Of(j.ID)
				if first == 0 {
					first = j.ID
					// With a job behind it that fits the idle GPUs, the
					// blocked job says when and where it is expected to
					// start (the reservation that lets that job run).
					fits := false
					for _, k := range w.Jobs {
						fits = fits || (k.ID > j.ID && k.State == domain.JobPending && k.GPUs <= idle)
					}
					if fits && (r.Reservation == nil || len(r.Reservation.Placement) == 0) {
						t.Errorf("first blocked job %d (%d GPUs) has no reservation: %s: %s", j.ID, j.GPUs, r.Code, r.Message)
					}
				}
				if j.GPUs == 1 && idle > 0 {
					t.Fatalf("%d GPUs idle while job %d (1 GPU) waits: %s: %s", idle, j.ID, r.Code, r.Message)
				}
			}
		})
	}
}
