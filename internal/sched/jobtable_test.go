package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// TestJobRowsAsJobs checks each pass that reads the job table's rows
// against the same pass reading the jobs, as it did before the table
// (kept here as the reference): the equivalence tests compare whole plans,
// and most of their jobs leave some of these fields unset. Random jobs in
// every state, with and without placement, start, minimum runtime,
// expected duration, time limit, stop deadline and reasons; workspaces
// known and unknown; a history for the run-time estimate.
func TestJobRowsAsJobs(t *testing.T) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 8, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	servers := topo.Servers()
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	states := []domain.JobState{domain.JobPending, domain.JobPlaced, domain.JobReady, domain.JobRunning, domain.JobPreempting}
	at := func(rng *rand.Rand) *time.Time {
		if rng.IntN(4) == 0 {
			return nil
		}
		t := now.Add(time.Duration(rng.IntN(7200)-5400) * time.Second)
		return &t
	}
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		s := &Snapshot{Topology: topo, Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
		var refs [][2]string
		for _, tn := range []string{"a", "a-b", "b"} {
			s.Tenants[tn] = &domain.Tenant{Name: tn}
			for k := 0; k < 1+rng.IntN(3); k++ {
				w := &domain.Workspace{Tenant: tn, Name: fmt.Sprintf("w%d", k), Guaranteed: rng.IntN(6), BorrowLimit: 64, Weight: 1}
				s.Workspaces[w.Ref()] = w
				refs = append(refs, [2]string{tn, w.Name})
			}
		}
		refs = append(refs, [2]string{"a", "gone"}, [2]string{"c", "w0"}) // unknown workspace, unknown tenant
		for id := 1; id <= 300; id++ {
			r := refs[rng.IntN(len(refs))]
			j := &domain.Job{ID: uint64(id), JobSpec: domain.JobSpec{Tenant: r[0], Workspace: r[1], GPUs: 1 + rng.IntN(4), Priority: rng.IntN(3)},
				State: states[rng.IntN(len(states))]}
			if rng.IntN(6) == 0 {
				j.GPUs, j.Share = 0, 0.25
			}
			if rng.IntN(2) == 0 {
				j.ExpectedDurationSeconds = int64(rng.IntN(3) * 600)
			}
			if rng.IntN(2) == 0 {
				j.TimeLimitSeconds = int64(rng.IntN(3) * 900)
			}
			j.MinRuntimeSeconds = int64(rng.IntN(3) * 1200)
			if j.State != domain.JobPending {
				j.Placement = []domain.Placement{{Server: servers[rng.IntN(len(servers))].Name, GPUs: []int{0}}}
				j.PlacedAt, j.StartedAt = at(rng), at(rng)
			}
			if rng.IntN(10) == 0 {
				j.EndedAt = at(rng) // never on a live job the state hands out; the passes allow it
			}
			if j.State == domain.JobPreempting {
				j.StopDeadline, j.PreemptedFor = at(rng), uint64(1+rng.IntN(300))
			}
			if rng.IntN(5) == 0 {
				j.Reason = &domain.Reason{Code: []string{ReasonReclaim, ReasonCapacity}[rng.IntN(2)]}
			}
			s.Jobs = append(s.Jobs, j)
		}
		for id := 1001; id <= 1000+rng.IntN(20); id++ {
			r := refs[rng.IntN(len(refs))]
			from, end := now.Add(-time.Duration(1+rng.IntN(20))*time.Hour), now.Add(-time.Duration(rng.IntN(60))*time.Minute)
			s.History = append(s.History, &domain.Job{ID: uint64(id), JobSpec: domain.JobSpec{Tenant: r[0], Workspace: r[1], GPUs: 2},
				State: domain.JobSucceeded, PlacedAt: &from, EndedAt: &end})
		}
		c := buildCluster(s)
		st := &cycle{s: s, now: now, policy: DefaultPolicy, c: c, u: buildUsage(s, c), victim: map[uint64]bool{}, released: map[uint64]bool{}}
		st.tbl = newJobTable(s.Jobs)
		st.pairWS = st.tbl.pairIndex(st.u.ix)
		for _, j := range s.Jobs {
			switch rng.IntN(8) {
			case 0:
				st.victim[j.ID] = true
			case 1:
				st.released[j.ID] = true
			}
		}
		// Decayed usage: the same sums, in the same order.
		a, b := st.u.clone(), st.u.clone()
		a.decayed, b.decayed = make([]float64, len(st.u.decayed)), make([]float64, len(st.u.decayed)) // clone shares it
		a.addDecayRows(s, st.tbl, st.pairWS, now, time.Hour)
		b.addDecay(s, now, time.Hour)
		if !reflect.DeepEqual(a.decayed, b.decayed) {
			t.Fatalf("seed %d: decayed usage from the rows %v, from the jobs %v", seed, a.decayed, b.decayed)
		}
		// Reclaim's candidates.
		if got, want := st.stoppable(), stoppableBefore(st); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: stoppable from the rows differs from the jobs':\n%+v\n%+v", seed, got, want)
		}
		// Ends, job by job.
		for k, j := range s.Jobs {
			placedAt := now
			if j.PlacedAt != nil {
				placedAt = *j.PlacedAt
			}
			a1, b1, ok1 := st.runEndRow(k, placedAt)
			a2, b2, ok2 := st.runEnd(j, placedAt)
			if !a1.Equal(a2) || b1 != b2 || ok1 != ok2 {
				t.Fatalf("seed %d job %d: the end from its row is %v %s %v, from the job %v %s %v", seed, j.ID, a1, b1, ok1, a2, b2, ok2)
			}
		}
		// The earliest expected release.
		got, gok := st.expectedRelease()
		want, wok := expectedReleaseBefore(st)
		if !got.Equal(want) || gok != wok {
			t.Fatalf("seed %d: expected release from the rows %v %v, from the jobs %v %v", seed, got, gok, want, wok)
		}
		// The rows themselves: the fields the queue's order reads.
		for k, j := range s.Jobs {
			r := st.tbl.rows[k]
			if p := st.tbl.pairs[r.pair]; p != [2]string{j.Tenant, j.Workspace} || r.id != j.ID || r.prio != j.Priority || r.demand != demand(j) ||
				r.held != held(j) || r.reclaimWait != (j.Reason != nil && j.Reason.Code == ReasonReclaim) || r.preemptedFor != j.PreemptedFor ||
				(r.state == rowPending) != (j.State == domain.JobPending) || (r.state == rowPreempting) != (j.State == domain.JobPreempting) {
				t.Fatalf("seed %d: job %d's row %+v does not say what the job does", seed, j.ID, r)
			}
		}
	}
}

// stoppableBefore is stoppable as it read the jobs.
func stoppableBefore(st *cycle) []victim {
	var out []victim
	for _, v := range st.s.Jobs {
		if v.State.Stoppable() && !st.released[v.ID] {
			wi, _ := st.u.ix.of(v.Tenant, v.Workspace)
			out = append(out, victim{Job: v, wi: wi, held: held(v), young: st.young(v), cost: st.cost(v)})
		}
	}
	return out
}

// expectedReleaseBefore is expectedRelease as it read the jobs.
func expectedReleaseBefore(st *cycle) (time.Time, bool) {
	var best time.Time
	for _, j := range st.s.Jobs {
		if (j.State != domain.JobRunning && j.State != domain.JobReady) || j.PlacedAt == nil {
			continue
		}
		for _, secs := range []int64{j.ExpectedDurationSeconds, j.TimeLimitSeconds} {
			if secs <= 0 {
				continue
			}
			if end := j.PlacedAt.Add(time.Duration(secs) * time.Second); end.After(st.now) && (best.IsZero() || end.Before(best)) {
				best = end
			}
		}
	}
	return best, !best.IsZero()
}

// TestRowTimesAsJobs makes rows of jobs placed and started at times in
// UTC, the local zone, fixed and named zones, with nanoseconds, far from
// 1970, and with a monotonic reading, and reads each back from the table:
// every one must be the job's own time (==, the location and encoding
// included), as the passes read it before rows held times without their
// location. It fails when a location is taken for another (the numbering
// off by one), when the nanoseconds are dropped, and when a monotonic
// reading is not read from the job (each tried). A row must hold no
// pointer: that is what keeps the collector off the tables.
func TestRowTimesAsJobs(t *testing.T) {
	if hasPointers(reflect.TypeFor[jobRow]()) {
		t.Fatal("jobRow holds a pointer: the collector scans every row of every table")
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	base := time.Date(2026, 11, 22, 10, 30, 0, 123456789, time.UTC)
	times := []time.Time{
		base,
		base.Local(),
		base.In(time.FixedZone("X", 3*3600+1800)),
		base.In(ny),
		time.Date(1600, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(2500, 1, 2, 3, 4, 5, 999999999, time.FixedZone("Y", -7200)),
		time.Now(),
		time.Now().Add(time.Hour).In(ny),
		{},
	}
	var jobs []*domain.Job
	for i := range times {
		for k := range times {
			j := &domain.Job{ID: uint64(len(jobs) + 1), State: domain.JobRunning, PlacedAt: &times[i]}
			if k%2 == 1 {
				j.StartedAt = &times[k]
			}
			jobs = append(jobs, j)
		}
	}
	tbl := newJobTable(jobs)
	for k, j := range jobs {
		if got := tbl.placedAt(k); got != *j.PlacedAt || !got.Equal(*j.PlacedAt) || got.Location() != j.PlacedAt.Location() {
			t.Fatalf("job %d: placed at %v (%v), want %v (%v)", j.ID, got, got.Location(), *j.PlacedAt, j.PlacedAt.Location())
		}
		want := *j.PlacedAt
		if j.StartedAt != nil {
			want = *j.StartedAt
		}
		if got := tbl.since(k); got != want || got.Location() != want.Location() {
			t.Fatalf("job %d: since %v (%v), want %v (%v)", j.ID, got, got.Location(), want, want.Location())
		}
	}
}

// hasPointers reports whether a value of type t holds a pointer the
// collector would scan.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}
