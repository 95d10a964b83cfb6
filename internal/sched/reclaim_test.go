package sched

import (
	"sort"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// placedAgo marks job id as placed (and started) d before now.
func (w *world) placedAgo(id uint64, d time.Duration) *world {
	for _, j := range w.s.Jobs {
		if j.ID == id {
			t := now.Add(-d)
			j.PlacedAt, j.StartedAt = &t, &t
		}
	}
	return w
}

func (w *world) with(id uint64, f func(*domain.Job)) *world {
	for _, j := range w.s.Jobs {
		if j.ID == id {
			f(j)
		}
	}
	return w
}

func victims(p *Plan) []uint64 {
	var out []uint64
	for _, pr := range p.Preemptions {
		out = append(out, pr.JobID)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func TestReclaim(t *testing.T) {
	cases := map[string]struct {
		world       func(t *testing.T) *world
		job         uint64 // the pending job
		wantVictims []uint64
		wantCode    string
	}{
		"reclaims the cheapest borrowed jobs, only as many as needed": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 4)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 16, 0, 16, 1).ws("b/w", 0, 32, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).running("b/w", on("s1-gpu002", seq(0, 8)...)).
					running("b/w", on("s1-gpu003", seq(0, 8)...)).running("b/w", on("s1-gpu004", seq(0, 8)...)).
					placedAgo(1, 4*time.Hour).placedAgo(2, 10*time.Minute).placedAgo(3, 3*time.Hour).placedAgo(4, 20*time.Minute).
					job("a/w", 16, 8, 0)
			},
			job: 5, wantVictims: []uint64{2, 4}, wantCode: ReasonReclaim,
		},
		"frees one whole server rather than scattered GPUs": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 2)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 8, 0, 8, 1).ws("b/w", 0, 16, 0, 1)
				// Jobs alternate servers (odd ids on gpu001, even on gpu002),
				// older as the id grows: the cheapest victims are scattered.
				for id := 1; id <= 16; id++ {
					srv := map[int]string{1: "s1-gpu001", 0: "s1-gpu002"}[id%2]
					w.running("b/w", on(srv, (id-1)/2))
				}
				for id := uint64(1); id <= 16; id++ {
					w.placedAgo(id, time.Duration(id)*time.Minute)
				}
				return w.job("a/w", 8, 8, 0)
			},
			// 8 whole GPUs of one server, not the 8 cheapest jobs spread over two.
			job: 17, wantVictims: []uint64{1, 3, 5, 7, 9, 11, 13, 15}, wantCode: ReasonReclaim,
		},
		"several guaranteed jobs of a workspace are served in one cycle": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 16, 0, 16, 1).ws("b/w", 0, 16, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).running("b/w", on("s1-gpu002", seq(0, 8)...)).
					placedAgo(1, time.Hour).placedAgo(2, 2*time.Hour).
					job("a/w", 8, 0, 0).job("a/w", 8, 0, 0)
			},
			job: 4, wantVictims: []uint64{1, 2}, wantCode: ReasonReclaim,
		},
		"minimum runtime protects a young job": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 8, 0, 8, 1).ws("b/w", 0, 8, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).placedAgo(1, time.Minute).
					with(1, func(j *domain.Job) { j.MinRuntimeSeconds = 600 }).
					job("a/w", 8, 0, 0)
			},
			job: 2, wantCode: ReasonCapacity,
		},
		"victims that keep their workspace at its guarantee go first": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 2)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 8, 0, 0, 1).ws("b/w", 8, 8, 8, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).running("b/w", on("s1-gpu002", seq(0, 8)...)).
					placedAgo(1, time.Hour).placedAgo(2, time.Minute).
					job("a/w", 8, 0, 0)
			},
			job: 3, wantVictims: []uint64{2}, wantCode: ReasonReclaim,
		},
		"no reclaim for a job beyond its guarantee": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 0, 8, 0, 1).ws("b/w", 0, 8, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).placedAgo(1, time.Minute).
					job("a/w", 8, 0, 0)
			},
			job: 2, wantCode: ReasonCapacity,
		},
		"priority preemption inside the workspace": {
			world: func(t *testing.T) *world {
				return newWorld(t, dgx(1, 1)).tenant("a", domain.IsolationGPU).ws("a/w", 8, 0, 0, 1).
					running("a/w", on("s1-gpu001", seq(0, 8)...)).placedAgo(1, time.Hour).
					job("a/w", 8, 0, 10)
			},
			job: 2, wantVictims: []uint64{1}, wantCode: ReasonReclaim,
		},
		"already freeing: wait, preempt nothing more": {
			world: func(t *testing.T) *world {
				w := newWorld(t, dgx(1, 2)).tenant("a", domain.IsolationGPU).tenant("b", domain.IsolationGPU).
					ws("a/w", 8, 0, 8, 1).ws("b/w", 0, 16, 0, 1).
					running("b/w", on("s1-gpu001", seq(0, 8)...)).running("b/w", on("s1-gpu002", seq(0, 8)...)).
					placedAgo(1, time.Hour).placedAgo(2, time.Hour).
					job("a/w", 8, 0, 0)
				dl := now.Add(10 * time.Second)
				return w.with(1, func(j *domain.Job) { j.State, j.PreemptedFor, j.StopDeadline = domain.JobPreempting, 3, &dl })
			},
			job: 3, wantCode: ReasonReclaim,
		},
		"a reclaimed job may not borrow during its backoff": {
			world: func(t *testing.T) *world {
				b := now.Add(time.Minute)
				return newWorld(t, dgx(1, 1)).tenant("b", domain.IsolationGPU).ws("b/w", 0, 8, 0, 1).
					job("b/w", 8, 0, 0).with(1, func(j *domain.Job) { j.BorrowNotBefore = &b })
			},
			job: 1, wantCode: ReasonBackoff,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := tc.world(t)
			plan := Schedule(w.s, now)
			if got := victims(plan); !equal(got, tc.wantVictims) {
				t.Errorf("victims %v, want %v", got, tc.wantVictims)
			}
			if r := plan.Pending[tc.job]; r.Code != tc.wantCode {
				t.Errorf("job %d reason %+v, want code %s", tc.job, r, tc.wantCode)
			}
			for _, p := range plan.Preemptions {
				if !p.Deadline.Equal(now.Add(DefaultPolicy.Grace)) || p.ForJob == 0 || p.Reason.Message == "" {
					t.Errorf("preemption %+v: want deadline now+grace, for job %d, with a message", p, tc.job)
				}
			}
		})
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReleasesAndNext(t *testing.T) {
	w := newWorld(t, dgx(1, 3)).tenant("a", domain.IsolationGPU).ws("a/w", 24, 0, 0, 1).
		running("a/w", on("s1-gpu001", 0)).running("a/w", on("s1-gpu002", 0)).running("a/w", on("s1-gpu003", 0)).
		placedAgo(1, time.Hour).placedAgo(2, time.Hour).placedAgo(3, time.Minute)
	past, future := now.Add(-time.Second), now.Add(7*time.Second)
	w.with(1, func(j *domain.Job) { j.State, j.StopDeadline = domain.JobPreempting, &past })
	w.with(2, func(j *domain.Job) { j.TimeLimitSeconds = 1800 })
	w.with(3, func(j *domain.Job) { j.State, j.StopDeadline = domain.JobPreempting, &future })
	plan := Schedule(w.s, now)
	want := []Release{{JobID: 1, Cause: "deadline"}, {JobID: 2, Cause: "time_limit"}}
	if len(plan.Releases) != 2 || plan.Releases[0] != want[0] || plan.Releases[1] != want[1] {
		t.Fatalf("releases %+v, want %+v", plan.Releases, want)
	}
	if !plan.Next.Equal(future) {
		t.Fatalf("next %v, want %v", plan.Next, future)
	}
}

// TestReclaimBoundDeepQueue: many guaranteed jobs become pending at once on
// a cluster full of borrowed work. Every one of them must be served within
// the grace period and one cycle: all reclaims start in the first cycle
// (the per-cycle search cap is above this depth), and all are placed in the
// cycle at the grace deadline, even when no victim stops early.
func TestReclaimBoundDeepQueue(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 4, ServersPerStripe: 32, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	grace := 30 * time.Second
	s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{},
		Policy: Policy{Grace: grace, ReclaimBackoff: 5 * time.Minute, HalfLife: time.Hour}}
	s.Tenants["lender"] = &domain.Tenant{Name: "lender", Isolation: domain.IsolationGPU}
	s.Tenants["borrower"] = &domain.Tenant{Name: "borrower", Isolation: domain.IsolationServer}
	s.Workspaces["lender/w"] = &domain.Workspace{Tenant: "lender", Name: "w", Guaranteed: 1024, LendLimit: 1024, Weight: 1}
	s.Workspaces["borrower/w"] = &domain.Workspace{Tenant: "borrower", Name: "w", BorrowLimit: 1024, Weight: 1}
	m := &sim{t: t, s: s, now: now, next: 1, reclaim: map[uint64][]time.Time{}, waiting: map[uint64]time.Time{}}
	for i, srv := range topo.Servers() {
		at := now.Add(-time.Duration(i+1) * time.Minute)
		s.Jobs = append(s.Jobs, &domain.Job{ID: m.next, JobSpec: domain.JobSpec{Tenant: "borrower", Workspace: "w", GPUs: 8, Preemptible: true},
			State: domain.JobRunning, PlacedAt: &at, Placement: []domain.Placement{on(srv.Name, seq(0, 8)...)}})
		m.next++
	}
	const depth = 120 // well over the old cap of 32 searches per cycle
	first := m.next
	for i := 0; i < depth; i++ {
		g := []int{1, 4, 8, 16}[i%4]
		per := 0
		if g > 8 {
			per = 8
		}
		s.Jobs = append(s.Jobs, &domain.Job{ID: m.next, JobSpec: domain.JobSpec{Tenant: "lender", Workspace: "w", GPUs: g, GPUsPerNode: per}, State: domain.JobPending})
		m.next++
	}
	p := Schedule(s, m.now)
	m.commit(p)
	for id := first; id < first+depth; id++ {
		if r := p.Pending[id]; r.Code != ReasonReclaim {
			t.Fatalf("job %d after the first cycle: reason %+v, want %s (its reclaim must start now)", id, r, ReasonReclaim)
		}
	}
	// Victims never stop by themselves: the GPUs come back at the deadline.
	deadline := m.now.Add(grace)
	for m.now.Before(deadline.Add(tick)) {
		m.now = m.now.Add(tick)
		m.commit(Schedule(s, m.now))
	}
	for id := first; id < first+depth; id++ {
		if j := m.job(id); j.State != domain.JobRunning {
			t.Errorf("job %d is %s at grace + one cycle (reason %+v), want placed", id, j.State, j.Reason)
		}
	}
	// Reclaim took what was needed, not the whole cluster.
	need := 0
	for i := 0; i < depth; i++ {
		need += []int{1, 4, 8, 16}[i%4]
	}
	freed := 0
	for _, j := range s.Jobs {
		if j.Tenant == "borrower" && j.State != domain.JobRunning {
			freed += 8
		}
	}
	// The borrower is server-isolated: whole servers come back, so up to
	// 7 GPUs per 8 may stay idle; never more than the next server up.
	if freed > (need+7)/8*8 {
		t.Errorf("reclaim freed %d GPUs for %d guaranteed ones", freed, need)
	}
	t.Logf("%d guaranteed jobs (%d GPUs) served by freeing %d GPUs", depth, need, freed)
}
