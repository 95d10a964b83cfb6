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
