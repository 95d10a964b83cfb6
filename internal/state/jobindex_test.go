package state

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// ids lists the jobs' IDs, for comparing orders.
func ids(jobs []*domain.Job) []uint64 {
	out := make([]uint64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// checkIndex compares the job index with a recomputation from data.Jobs:
// every non-terminal job by ID, every terminal one by (end time, ID), and
// the ended-since cut at times around the ends.
func checkIndex(t *testing.T, f *FSM, cuts ...time.Time) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	var live, ended []*domain.Job
	for _, j := range f.d.Jobs {
		if j.State.Terminal() {
			ended = append(ended, j)
		} else {
			live = append(live, j)
		}
	}
	slices.SortFunc(live, func(a, b *domain.Job) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(ended, func(a, b *domain.Job) int {
		if c := a.EndedAt.Compare(*b.EndedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if got, want := ids(slices.Collect(f.jobs.liveJobs())), ids(live); !slices.Equal(got, want) {
		t.Fatalf("live jobs: index %v, recomputed %v", got, want)
	}
	if got, want := ids(f.jobs.ended), ids(ended); !slices.Equal(got, want) {
		t.Fatalf("ended jobs: index %v, recomputed %v", got, want)
	}
	if got := f.jobs.liveCount(); got != len(live) {
		t.Fatalf("live count %d, recomputed %d", got, len(live))
	}
	byExt := map[string][]*domain.Job{}
	for _, j := range append(slices.Clone(live), ended...) {
		if j.ExternalID != "" {
			byExt[j.ExternalID] = append(byExt[j.ExternalID], j)
		}
	}
	if len(byExt) != len(f.jobs.byExt) {
		t.Fatalf("external ids: index has %d, recomputed %d", len(f.jobs.byExt), len(byExt))
	}
	for ext, js := range byExt {
		slices.SortFunc(js, func(a, b *domain.Job) int { return cmp.Compare(a.ID, b.ID) })
		if got, want := ids(f.jobs.withExt(ext)), ids(js); !slices.Equal(got, want) {
			t.Fatalf("jobs with external id %s: index %v, recomputed %v", ext, got, want)
		}
	}
	if len(f.jobs.dead) > len(f.jobs.live)/2 {
		t.Fatalf("%d ended jobs in a live list of %d: not compacted", len(f.jobs.dead), len(f.jobs.live))
	}
	for _, since := range cuts {
		var want []uint64
		for _, j := range ended {
			if j.EndedAt.After(since) {
				want = append(want, j.ID)
			}
		}
		if got := ids(slices.Collect(f.jobs.endedSince(since))); !slices.Equal(got, want) {
			t.Fatalf("ended since %s: index %v, recomputed %v", since, got, want)
		}
	}
}

// checkByExternalID compares JobsByExternalID and JobByExternalID with a
// scan of every job: every job with the id, by ID; of a tenant's, the
// newest live one, else the newest ended one.
func checkByExternalID(t *testing.T, f *FSM) {
	t.Helper()
	for i := range 7 {
		ext := fmt.Sprintf("slurm:%d", i)
		var all []uint64
		tenants := map[string]bool{"nobody": true}
		for _, j := range f.d.Jobs {
			if j.ExternalID == ext {
				all = append(all, j.ID)
				tenants[j.Tenant] = true
			}
		}
		slices.Sort(all)
		var got []uint64
		for _, j := range f.JobsByExternalID(ext) {
			got = append(got, j.ID)
		}
		if !slices.Equal(got, all) {
			t.Fatalf("JobsByExternalID(%s) = %v, want %v", ext, got, all)
		}
		for tenant := range tenants {
			var live, ended *domain.Job
			for _, j := range f.d.Jobs {
				if j.ExternalID != ext || j.Tenant != tenant {
					continue
				}
				if best := &live; j.State.Terminal() {
					if ended == nil || j.ID > ended.ID {
						ended = j
					}
				} else if *best == nil || j.ID > (*best).ID {
					*best = j
				}
			}
			want := cmp.Or(live, ended)
			got, ok := f.JobByExternalID(ext, tenant)
			switch {
			case want == nil && ok:
				t.Fatalf("JobByExternalID(%s, %s) = job %d, want none", ext, tenant, got.ID)
			case want != nil && (!ok || got.ID != want.ID):
				t.Fatalf("JobByExternalID(%s, %s) = %v (found %v), want job %d", ext, tenant, got, ok, want.ID)
			}
		}
	}
}

// TestJobIndexMatchesTheJobs drives random command sequences (submits,
// plans with time-limit releases and preemptions, reports, cancels, a
// leader clock that steps back, snapshot and restore) and checks after
// every command that the index equals a recomputation from the jobs.
func TestJobIndexMatchesTheJobs(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*13+5))
			h := newHarness(t).cluster(1, 2, 8)
			// A second tenant submits with the same runtime ids: each
			// tenant's ids are its own.
			h.must(CmdTenantCreate, TenantCreate{Tenant: MakeTenant("globex").Obj()})
			h.must(CmdWorkspaceCreate, WorkspaceCreate{Workspace: MakeWorkspace("globex", "lab").Guaranteed(4).Borrow(4).Obj()})
			h.must(CmdPoolSet, PoolSet{Name: "p1", Servers: []string{h.server(0), h.server(1)}})
			pooled, faulty := false, false
			cuts := func() []time.Time {
				return []time.Time{time.Time{}, h.at, h.at.Add(-time.Duration(rng.IntN(120)) * time.Second)}
			}
			ended := 0
			for step := range 300 {
				switch op := rng.IntN(10); {
				case op < 3:
					j := MakeJob("research", 1+rng.IntN(4))
					if rng.IntN(2) == 0 {
						j = j.Preemptible()
					}
					s := j.Obj()
					if rng.IntN(3) == 0 {
						s.Spec.Tenant, s.Spec.Workspace = "globex", "lab"
					}
					if rng.IntN(4) == 0 {
						s.Spec.Pool = "p1"
					}
					if rng.IntN(3) == 0 {
						s.Spec.TimeLimitSeconds = int64(5 + rng.IntN(20))
					}
					if rng.IntN(2) == 0 {
						// A runtime's id, often one a job had before (a
						// live job's is refused).
						s.Spec.ExternalID = fmt.Sprintf("slurm:%d", rng.IntN(6))
					}
					h.apply(CmdJobSubmit, s)
				case op < 5:
					snap := snapshotOf(h.f, h.at.Add(-time.Hour))
					h.commitPlan(snap, sched.Schedule(snap, h.at))
				case op < 8:
					jobs := h.f.Jobs(JobFilter{})
					if len(jobs) == 0 {
						continue
					}
					j := jobs[rng.IntN(len(jobs))]
					switch rng.IntN(5) {
					case 0:
						h.apply(CmdJobCancel, JobCancel{ID: j.ID}) // a terminal job's cancel is refused: fine
					default:
						st := []string{ReportRunning, ReportSucceeded, ReportFailed, ReportStopped}[rng.IntN(4)]
						h.apply(CmdJobReport, JobReport{ID: j.ID, State: st})
					}
				case op < 9 && rng.IntN(2) == 0:
					// Path verdicts on jobs holding GPUs (the read
					// index's tallies count them, by workspace).
					var up []JobPathHealth
					for _, j := range h.f.Jobs(JobFilter{}) {
						if j.State.HoldsGPUs() && rng.IntN(2) == 0 {
							v := domain.PathVerdicts[rng.IntN(len(domain.PathVerdicts))]
							up = append(up, JobPathHealth{ID: j.ID, Health: domain.PathHealth{Verdict: v, Since: h.at}})
						}
					}
					if len(up) > 0 {
						h.must(CmdJobsPathHealth, JobsPathHealth{Jobs: up})
					}
				case op < 9:
					// A new leader's clock may be behind the old one's.
					h.at = h.at.Add(-time.Duration(rng.IntN(30)) * time.Second)
				case rng.IntN(2) == 0:
					// Retention by count (so ended jobs remain to test),
					// sometimes dropping old usage records too.
					p := Retain{JobsPerTenant: 3 + rng.IntN(5)}
					if rng.IntN(2) == 0 {
						p.EventsPerTenant = 5 + rng.IntN(20) // a tenant's events thinned: positions move
					}
					if rng.IntN(2) == 0 {
						p.UsageBefore = h.at.Add(-time.Duration(rng.IntN(300)) * time.Second)
					}
					h.apply(CmdRetain, p)
					if !slices.IsSortedFunc(h.f.d.Usage, byRecordEnd) {
						t.Fatalf("the usage archive is out of end order: %+v", h.f.d.Usage)
					}
				default:
					f := New()
					if err := f.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
						t.Fatal(err)
					}
					h.f = f
				}
				h.advance(time.Duration(rng.IntN(10)) * time.Second)
				checkIndex(t, h.f, cuts()...)
				checkByExternalID(t, h.f)
				checkJobsPage(t, h.f, rng)
				checkReadIndex(t, h.f)
				checkScopedPages(t, h.f, rng)
				checkEventsPage(t, h.f, rng)
				for _, w := range h.f.reads.tally {
					pooled = pooled || len(w.Pools) > 0
					faulty = faulty || len(w.Faulty) > 0
				}
				if step == 299 {
					ended = len(h.f.jobs.ended)
				}
			}
			if !pooled || !faulty {
				t.Fatalf("pools named %t, faulty paths %t: the sequence tests too little", pooled, faulty)
			}
			if ended == 0 || h.f.jobs.liveCount() == 0 {
				t.Fatalf("%d ended, %d live: the sequence tests too little", ended, h.f.jobs.liveCount())
			}
		})
	}
}

// checkJobsPage compares a random page of the job list (by state, after
// an ID, limited) with a filter of every job sorted by ID.
func checkJobsPage(t *testing.T, f *FSM, rng *rand.Rand) {
	t.Helper()
	states := []domain.JobState{"", domain.JobPending, domain.JobRunning, domain.JobSucceeded, domain.JobCancelled}
	q := JobFilter{State: states[rng.IntN(len(states))], AfterID: uint64(rng.IntN(8)), Limit: rng.IntN(5)}
	if rng.IntN(3) == 0 {
		q.States = []domain.JobState{domain.JobReady, domain.JobPreempting}
	}
	checkPageAsFilter(t, f, q)
}

// checkPageAsFilter compares the page q of the job list with a filter of
// every job sorted by ID.
func checkPageAsFilter(t *testing.T, f *FSM, q JobFilter) {
	t.Helper()
	got, more := f.JobsPage(q)
	f.mu.RLock()
	var want []uint64
	for _, j := range f.d.Jobs {
		if q.keeps(j) {
			want = append(want, j.ID)
		}
	}
	f.mu.RUnlock()
	slices.Sort(want)
	wantMore := q.Limit > 0 && len(want) > q.Limit
	if wantMore {
		want = want[:q.Limit]
	}
	var gotIDs []uint64
	for _, j := range got {
		gotIDs = append(gotIDs, j.ID)
	}
	if !slices.Equal(gotIDs, want) || more != wantMore {
		t.Fatalf("jobs %+v: %v more=%t, want %v more=%t", q, gotIDs, more, want, wantMore)
	}
}
