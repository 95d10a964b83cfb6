package sched

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// TestKeptBuffersGrowAhead: a queue a few jobs longer every cycle (a
// stream of submits) gets its kept buffers anew once in many cycles, not
// every cycle (as it did when they were made to the exact length), and
// each is what its contract says: reuse empty and zeroed all zero.
func TestKeptBuffersGrowAhead(t *testing.T) {
	for _, c := range []struct {
		name string
		use  func(buf []*int, n int) []*int
	}{
		{"reuse", func(buf []*int, n int) []*int {
			buf = reuse(buf, n)
			if len(buf) != 0 {
				t.Fatalf("reuse(_, %d) has %d entries, want none", n, len(buf))
			}
			for range n {
				buf = append(buf, new(int))
			}
			return buf
		}},
		{"zeroed", func(buf []*int, n int) []*int {
			buf = zeroed(buf, n)
			if len(buf) != n {
				t.Fatalf("zeroed(_, %d) has %d entries", n, len(buf))
			}
			for i, p := range buf {
				if p != nil {
					t.Fatalf("zeroed(_, %d)[%d] is not zero", n, i)
				}
				buf[i] = new(int)
			}
			return buf
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf []*int
			made := 0
			for n := 10000; n < 10500; n += 5 { // 100 cycles, 5 submits each
				before := cap(buf)
				buf = c.use(buf, n)
				if cap(buf) != before {
					made++
				}
			}
			if made > 2 {
				t.Errorf("the buffer was made %d times over 100 cycles growing by 5 from 10,000, want at most 2", made)
			}
		})
	}
}

// TestCarryPatchBuffersGrowAhead: a Carry whose queue grows by a few
// submits every cycle (a leader at 1,000 submits/s holding 100,000
// pending jobs) makes its patch's buffers (changes and runs, the table's
// rows and jobs) anew once in many cycles. Made to the exact size, or
// grown to it, they were made every cycle: about 30 MB in 10 s on that
// leader (changes 17 MB, rows 12 MB). Fails on the exact sizes.
func TestCarryPatchBuffersGrowAhead(t *testing.T) {
	w := domaintest.NewWorld(t, domaintest.DGX(1, 1)).
		Tenant(domaintest.MakeTenant("a")).
		Workspace(domaintest.MakeWorkspace("a", "w").Guaranteed(8))
	s := snapshotOf(w)
	var id uint64
	submit := func(n int) {
		for range n {
			id++
			s.Jobs = append(s.Jobs, &domain.Job{ID: id, JobSpec: domain.JobSpec{Tenant: "a", Workspace: "w", GPUs: 16}, State: domain.JobPending})
		}
	}
	submit(10000) // none fits a server of 8 GPUs: every job stays pending
	cr := &Carry{}
	cr.Schedule(s, domaintest.Now)
	caps := func() [4]int {
		return [4]int{cap(cr.changes), cap(cr.runs), cap(cr.tbl.rows), cap(cr.tbl.jobs)}
	}
	made := [4]int{}
	for range 100 { // 100 cycles, 5 submits each
		before := caps()
		jobs := s.Jobs
		s.Jobs = make([]*domain.Job, len(jobs), len(jobs)+5) // a new snapshot's list
		copy(s.Jobs, jobs)
		submit(5)
		cr.Schedule(s, domaintest.Now)
		after := caps()
		for i := range made {
			if after[i] != before[i] {
				made[i]++
			}
		}
	}
	if p, _, _ := CarryStats(cr); p < 100 {
		t.Fatalf("%d of 101 cycles patched the sums, want every one after the first", p)
	}
	for i, name := range []string{"changes", "runs", "table rows", "table jobs"} {
		if made[i] > 2 {
			t.Errorf("the patch's %s were made %d times over 100 cycles growing by 5 from 10,000, want at most 2", name, made[i])
		}
	}
}
