package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestUsageIndexOfAsRef compares the memoized look-up of a job's workspace
// and tenant (usageIndex.of) with the look-up by ref it stands in for,
// asked again and again in random order: known and unknown tenants and
// workspaces, and names whose pairs differ but whose refs are the same
// ("a" + "b/c" and "a/b" + "c" both name "a/b/c"), so a memo keyed by pair
// must still answer what the ref names.
func TestUsageIndexOfAsRef(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 18))
	s := &Snapshot{Tenants: map[string]*domain.Tenant{}, Workspaces: map[string]*domain.Workspace{}}
	names := []string{"a", "a/b", "b", "b/c", "c", "t1", "t2"}
	for _, tn := range names[:4] {
		s.Tenants[tn] = &domain.Tenant{Name: tn}
	}
	for i := 0; i < 12; i++ {
		w := &domain.Workspace{Tenant: names[rng.IntN(len(names))], Name: names[rng.IntN(len(names))]}
		s.Workspaces[w.Ref()] = w
	}
	s.Workspaces["a/b/c"] = &domain.Workspace{Tenant: "a", Name: "b/c"}
	ix := newUsageIndex(s)
	for k := 0; k < 5000; k++ {
		tn, wn := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		if rng.IntN(10) == 0 {
			wn = fmt.Sprintf("w%d", rng.IntN(3)) // never a workspace
		}
		wantW, wantT := -1, -1
		if i, ok := ix.byRef[tn+"/"+wn]; ok {
			wantW = i
		}
		if i, ok := ix.byTenant[tn]; ok {
			wantT = i
		}
		if gotW, gotT := ix.of(tn, wn); gotW != wantW || gotT != wantT {
			t.Fatalf("of(%q, %q) = %d, %d; by ref %d, %d", tn, wn, gotW, gotT, wantW, wantT)
		}
	}
	if wi, _ := ix.of("a/b", "c"); wi < 0 || ix.ws[wi].Ref() != "a/b/c" {
		t.Fatalf("of(a/b, c) = %d: not the workspace its ref names", wi)
	}
}
