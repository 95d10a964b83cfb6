package state

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// checkReadIndex compares the read index (readindex.go) with a walk of
// every job: each list's jobs by ID, every list's structure (sorted, no
// repeats, gone counting its entries that left) and every workspace's
// tally. The expectations are written out here, not taken from fileOf or
// member, so a mistake there shows.
func checkReadIndex(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	want := map[listKey][]uint64{}
	tally := map[string]*WorkspaceTally{}
	for _, id := range slices.Sorted(maps.Keys(f.d.Jobs)) {
		j := f.d.Jobs[id]
		ref := j.Tenant + "/" + j.Workspace
		add := func(kind listKind, name string) { want[listKey{kind, name}] = append(want[listKey{kind, name}], id) }
		add(listTenant, j.Tenant)
		add(listWorkspace, ref)
		add(listState, string(j.State))
		if j.State.Terminal() {
			continue
		}
		add(listTenantLive, j.Tenant)
		add(listWsLive, ref)
		if len(j.Placement) > 0 {
			add(listHolding, "")
		}
		if len(j.Runs) > 0 {
			add(listRan, "")
		}
		seen := map[string]bool{}
		for _, p := range j.Placement {
			if !seen[p.Server] {
				seen[p.Server] = true
				add(listServer, p.Server)
			}
		}
		w := tally[ref]
		if w == nil {
			w = &WorkspaceTally{Tenant: j.Tenant, Workspace: j.Workspace}
			tally[ref] = w
		}
		w.Live++
		if len(j.Placement) > 0 {
			w.Held += sched.Held(j.Placement)
		}
		if j.State == domain.JobPending {
			w.Pending++
			code := ""
			if j.Reason != nil {
				code = j.Reason.Code
			}
			if w.PendingBy == nil {
				w.PendingBy = map[string]int{}
			}
			w.PendingBy[code]++
		} else if len(j.Placement) > 0 {
			w.Placed++
		}
		if j.PathHealth != nil {
			if w.Paths == nil {
				w.Paths = map[domain.PathVerdict]int{}
			}
			w.Paths[j.PathHealth.Verdict]++
			if j.PathHealth.Verdict.Faulty() {
				if w.Faulty == nil {
					w.Faulty = map[uint64]domain.PathVerdict{}
				}
				w.Faulty[id] = j.PathHealth.Verdict
			}
		}
		if j.Pool != "" {
			if w.Pools == nil {
				w.Pools = map[string]int{}
			}
			w.Pools[j.Pool]++
		}
	}
	for k := range f.reads.lists {
		if _, ok := want[k]; !ok {
			want[k] = nil
		}
	}
	for k, ids := range want {
		got := slices.Collect(func(yield func(uint64) bool) {
			for j := range f.listed(k, 0) {
				if !yield(j.ID) {
					return
				}
			}
		})
		if !slices.Equal(got, ids) {
			t.Fatalf("list %c %q: index %v, walk %v", k.kind, k.name, got, ids)
		}
		if l := f.reads.lists[k]; l != nil {
			gone := 0
			for i, j := range l.jobs {
				if i > 0 && l.jobs[i-1].ID >= j.ID {
					t.Fatalf("list %c %q: entries out of ID order or repeated at %d: %v", k.kind, k.name, i, ids)
				}
				if !f.member(k, j) {
					gone++
				}
			}
			if gone != l.gone || gone > len(l.jobs)/2 {
				t.Fatalf("list %c %q: %d of %d entries left, counted %d (compacted past half)", k.kind, k.name, gone, len(l.jobs), l.gone)
			}
		}
	}
	got := map[string]WorkspaceTally{}
	for ref, w := range f.reads.tally {
		cp := *w
		for _, m := range []any{&cp.PendingBy, &cp.Paths, &cp.Faulty, &cp.Pools} {
			if v := reflect.ValueOf(m).Elem(); v.Len() == 0 {
				v.SetZero()
			}
		}
		got[ref] = cp
	}
	wantT := map[string]WorkspaceTally{}
	for ref, w := range tally {
		wantT[ref] = *w
	}
	if !reflect.DeepEqual(got, wantT) {
		t.Fatalf("tallies: index %+v\nwalk %+v", got, wantT)
	}
	if len(f.reads.filed) != len(f.d.Jobs) {
		t.Fatalf("%d jobs filed, %d in the state", len(f.reads.filed), len(f.d.Jobs))
	}
}

// checkScopedPages compares random pages of a tenant's and a
// workspace's jobs (the lists the read index picks) with a filter of
// every job by ID, as checkJobsPage does for unscoped ones.
func checkScopedPages(t *testing.T, f *FSM, rng *rand.Rand) {
	t.Helper()
	states := []domain.JobState{"", domain.JobPending, domain.JobRunning, domain.JobPlaced, domain.JobSucceeded, domain.JobCancelled}
	for _, scope := range [][2]string{{"acme", ""}, {"acme", "research"}, {"globex", ""}, {"globex", "lab"}, {"nobody", ""}, {"", "lab"}} {
		q := JobFilter{Tenant: scope[0], Workspace: scope[1], State: states[rng.IntN(len(states))], AfterID: uint64(rng.IntN(8)), Limit: rng.IntN(5)}
		if rng.IntN(3) == 0 {
			q.States = []domain.JobState{domain.JobReady, domain.JobRunning}
		}
		checkPageAsFilter(t, f, q)
	}
}

// checkEventsPage compares random pages of events (a tenant's from the
// read index's positions, or every tenant's) with a filter of every event
// in order, the newest Limit of them.
func checkEventsPage(t *testing.T, f *FSM, rng *rand.Rand) {
	t.Helper()
	f.mu.RLock()
	evs := slices.Clone(f.d.Events)
	f.mu.RUnlock()
	if len(evs) == 0 {
		return
	}
	seq := func() uint64 { return evs[rng.IntN(len(evs))].Seq }
	for _, tenant := range []string{"", "acme", "globex", "nobody"} {
		q := EventFilter{Tenant: tenant, Limit: rng.IntN(6), TenantsOnly: rng.IntN(3) == 0}
		if rng.IntN(2) == 0 {
			q.AfterSeq = seq()
		}
		if rng.IntN(3) == 0 {
			q.BeforeSeq = seq()
		}
		if rng.IntN(3) == 0 {
			q.Workspace = []string{"research", "lab"}[rng.IntN(2)]
		}
		if rng.IntN(3) == 0 {
			q.Since = evs[rng.IntN(len(evs))].At
		}
		var want []uint64
		for _, e := range evs {
			if e.Seq > q.AfterSeq && (q.BeforeSeq == 0 || e.Seq < q.BeforeSeq) && (q.Tenant == "" || e.Tenant == q.Tenant) &&
				(!q.TenantsOnly || e.Tenant != "") && (q.Workspace == "" || e.Workspace == q.Workspace) && !e.At.Before(q.Since) {
				want = append(want, e.Seq)
			}
		}
		wantMore := q.Limit > 0 && len(want) > q.Limit
		if wantMore {
			want = want[len(want)-q.Limit:]
		}
		got, more := f.EventsPage(q)
		var gotSeqs []uint64
		for _, e := range got {
			gotSeqs = append(gotSeqs, e.Seq)
		}
		if !slices.Equal(gotSeqs, want) || more != wantMore || got == nil {
			t.Fatalf("events %+v: %v more=%t, want %v more=%t", q, gotSeqs, more, want, wantMore)
		}
	}
}

// TestRefileReasonAllocatesNothing: refiling a pending job whose reason
// changed (what every scheduling cycle's plan does to the jobs submitted
// since the last, on every member) moves its share of the tally and
// nothing else. It allocated about 10 times per job before (the
// workspace's ref built again for every list key compared), a tenth of
// every allocation of a 3-server cluster submitting at 1,000/s with
// 100,000 jobs pending, which the collector then marked.
func TestRefileReasonAllocatesNothing(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	h.must(CmdJobSubmit, MakeJob("research", 1).Obj()) // its workspace's tally stays
	id := h.must(CmdJobSubmit, MakeJob("research", 1).Obj()).(*domain.Job).ID
	j := h.f.d.Jobs[id]
	reasons := []domain.Reason{{Code: "capacity", Message: "waiting"}, {Code: "quota", Message: "over quota"}}
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		i++
		j.Reason = &reasons[i%2]
		h.f.reads.file(id, j)
	})
	if allocs != 0 {
		t.Errorf("refiling a reason change allocates %.1f times, want 0", allocs)
	}
	h.f.refile()
	checkReadIndex(t, h.f)
}
