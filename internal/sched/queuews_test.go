package sched

import (
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestQueueWSAtAsLookedUp compares where order's workspaces read their
// usage, made from the table's kept look-ups (queueWSs.of), with the
// look-up step made on first use (usageIndex.at by the pair's names):
// a workspace as its ref names it, one kept under its old ref after a
// rename, one of a tenant the snapshot lacks, one the snapshot lacks,
// across two cycles' indices of one numbering and a new numbering. It
// fails when the tenant's place is taken from the workspace's, and when
// the table's answers are kept for another numbering (each tried).
func TestQueueWSAtAsLookedUp(t *testing.T) {
	s := &Snapshot{Tenants: map[string]*domain.Tenant{"a": {Name: "a"}, "b": {Name: "b"}, "c": {Name: "c"}},
		Workspaces: map[string]*domain.Workspace{}}
	for _, w := range []*domain.Workspace{{Tenant: "a", Name: "x"}, {Tenant: "b", Name: "y"}, {Tenant: "ghost", Name: "z"}} {
		s.Workspaces[w.Ref()] = w
	}
	// b/old is b/y renamed, still under its old key; c/w is unknown.
	s.Workspaces["b/old"] = &domain.Workspace{Tenant: "b", Name: "y2", Guaranteed: 2}
	tbl := &jobTable{pairID: map[[2]string]int32{}}
	pairs := [][2]string{{"c", "w"}, {"b", "old"}, {"a", "x"}, {"ghost", "z"}, {"b", "y"}}
	for _, p := range pairs {
		tbl.intern(p[0], p[1])
	}
	for round := range 3 {
		ix := newUsageIndex(s)
		if round == 1 {
			// A kept index: a new one with the same numbering.
			prev := tbl.ixFor
			ix.numbered = prev
		}
		u := &usage{ix: ix, used: make([]int, len(ix.ws)), decayed: make([]float64, len(ix.ws))}
		qw := newQueueWSs(tbl, s, u, tbl.pairIndex(ix), nil)
		for pi, p := range pairs {
			wk := qw.of(int32(pi))
			if wk.w == nil {
				continue
			}
			if !wk.atOK {
				t.Fatalf("round %d: pair %v: no usage place made with the workspace", round, p)
			}
			if want := ix.at(p[0], p[1], wk.w); wk.at != want {
				t.Fatalf("round %d: pair %v: usage at %+v, looked up %+v", round, p, wk.at, want)
			}
		}
		if round == 1 {
			// The next cycle's index numbers the workspaces otherwise.
			s.Workspaces["a/a0"] = &domain.Workspace{Tenant: "a", Name: "a0"}
		}
	}
}

// TestQueueWSFromKeptIndex compares each queued workspace's workspace and
// tenant, read by number from a Carry's kept usage index (asSnap), with
// the snapshot's maps by name, cycle after cycle: the same objects, new
// objects under the same names, a workspace filed under a ref not its
// own (beside its own ref's and alone), a tenant the snapshot lacks, and
// a workspace gone. It fails when a fresh index is taken as the
// snapshot's (asSnap set by newUsageIndex: a misfiled workspace read by
// its own ref), and when a kept index's entries are not the new
// snapshot's objects (each tried).
func TestQueueWSFromKeptIndex(t *testing.T) {
	names := [][2]string{{"a", "x"}, {"b", "y"}, {"ghost", "z"}, {"c", "w"}, {"b", "old"}, {"a", "gone"}}
	tbl := &jobTable{pairID: map[[2]string]int32{}}
	for _, p := range names {
		tbl.intern(p[0], p[1])
	}
	cr := &Carry{}
	kept := 0
	for round := range 16 {
		s := &Snapshot{Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
		for _, tn := range []string{"a", "b", "c"} {
			s.Tenants[tn] = &domain.Tenant{Name: tn}
		}
		for _, p := range names[:4] {
			s.Workspaces[p[0]+"/"+p[1]] = &domain.Workspace{Tenant: p[0], Name: p[1], Guaranteed: round, Weight: 1}
		}
		switch round / 3 {
		case 1:
			// Filed under a ref not its own.
			s.Workspaces["b/old"] = &domain.Workspace{Tenant: "b", Name: "y2", Weight: 1}
		case 2:
			// b/y filed under b/old alone: the index numbers it by
			// its own ref, b/y, which the map lacks.
			s.Workspaces["b/old"] = &domain.Workspace{Tenant: "b", Name: "y", Weight: 1}
			delete(s.Workspaces, "b/y")
		case 3:
			delete(s.Workspaces, "a/x")
			s.Workspaces["a/gone"] = &domain.Workspace{Tenant: "a", Name: "gone"}
		}
		ix := cr.usageIndex(s)
		if ix.asSnap {
			kept++
		}
		u := &usage{ix: ix, used: make([]int, len(ix.ws)), decayed: make([]float64, len(ix.ws))}
		qw := newQueueWSs(tbl, s, u, tbl.pairIndex(ix), nil)
		for pi, p := range names {
			wk := qw.of(int32(pi))
			if want := s.Workspaces[p[0]+"/"+p[1]]; wk.w != want {
				t.Fatalf("round %d: pair %v: workspace %p (%+v), the snapshot's %p (%+v)", round, p, wk.w, wk.w, want, want)
			}
			if want := s.Tenants[p[0]]; wk.t != want {
				t.Fatalf("round %d: pair %v: tenant %p, the snapshot's %p", round, p, wk.t, want)
			}
		}
	}
	if kept < 6 {
		t.Fatalf("the index was kept in %d rounds of 16: the rounds read by number are too few to test", kept)
	}
}
