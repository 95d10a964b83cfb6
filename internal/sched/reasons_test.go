package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// reasonFor is a reason whose bytes depend on i: codes, messages with
// characters JSON escapes (HTML, quotes, control, non-ASCII), and
// reservations.
func reasonFor(i int) domain.Reason {
	r := domain.Reason{Code: []string{ReasonWorkspaceQuota, ReasonReclaim, "capacity", ""}[i%4],
		Message: []string{"waits <behind> job & \"its\" workspace", "no fit\tin p\u00e9 \u2028", "", "x"}[i%4]}
	if i%3 == 0 {
		r.Reservation = &domain.Reservation{Start: time.Date(2026, 11, 22, 0, 0, i, 0, time.UTC)}
	}
	return r
}

// TestReasonsJSONAsMap: a plan's reasons marshal to the bytes their map
// did (the plan digests hash them), and read back alike, from either. It
// fails when the keys are written in numeric order (9 before 10), when a
// nil list writes {} instead of null, and when an empty one writes null.
func TestReasonsJSONAsMap(t *testing.T) {
	ids := []uint64{0, 1, 2, 9, 10, 11, 99, 100, 101, 1000, 1 << 40, 1<<64 - 1}
	for n := 0; n < 200; n += 1 + n/4 {
		m := map[uint64]domain.Reason{}
		for i := 0; i < n; i++ {
			id := uint64(rand.IntN(3 * (n + 1)))
			if i < len(ids) {
				id = ids[i]
			}
			m[id] = reasonFor(i)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ReasonsOf(m))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%d reasons:\n got %s\nwant %s", n, got, want)
		}
		// Inside a struct, through an encoder (as the digest hashes a plan).
		var wb, gb bytes.Buffer
		if err := json.NewEncoder(&wb).Encode(struct {
			Pending map[uint64]domain.Reason `json:"pending"`
		}{m}); err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(&gb).Encode(struct {
			Pending Reasons `json:"pending"`
		}{ReasonsOf(m)}); err != nil {
			t.Fatal(err)
		}
		if gb.String() != wb.String() {
			t.Fatalf("in a struct, %d reasons:\n got %s\nwant %s", n, gb.String(), wb.String())
		}
		var back Reasons
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if back.Len() != len(m) {
			t.Fatalf("read back %d reasons, want %d", back.Len(), len(m))
		}
		for id, r := range m {
			if g, ok := back.Get(id); !ok || !g.Equal(r) {
				t.Fatalf("job %d read back %+v (%v), want %+v", id, g, ok, r)
			}
		}
	}
	for _, tc := range []struct {
		rs   Reasons
		want string
	}{{Reasons{}, "null"}, {Reasons{list: []reasonAt{}}, "{}"}} {
		if got, _ := json.Marshal(tc.rs); string(got) != tc.want {
			t.Errorf("%#v marshals as %s, want %s", tc.rs, got, tc.want)
		}
	}
	var rs Reasons
	if err := json.Unmarshal([]byte(`{"x":{}}`), &rs); err == nil {
		t.Error("a key that is not an ID was read")
	}
}

// TestReasonsByID: the reasons given in any order are found by ID, listed
// by ID, each once with the last reason given for it (as the map's
// writes), by the dense path, the wide one and with IDs given twice.
func TestReasonsByID(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  func(n int) []uint64
	}{
		{"dense", func(n int) []uint64 {
			out := make([]uint64, n)
			for i, p := range rand.Perm(n) {
				out[i] = uint64(p) + 7
			}
			return out
		}},
		{"holes", func(n int) []uint64 {
			out := make([]uint64, 0, n)
			for _, p := range rand.Perm(2 * n) {
				if p%2 == 0 {
					out = append(out, uint64(p))
				}
			}
			return out
		}},
		{"wide", func(n int) []uint64 {
			out := make([]uint64, n)
			for i := range out {
				out[i] = rand.Uint64() >> 1
			}
			return out
		}},
		{"sorted", func(n int) []uint64 {
			out := make([]uint64, n)
			for i := range out {
				out[i] = uint64(3 * i)
			}
			return out
		}},
		{"twice", func(n int) []uint64 {
			out := make([]uint64, n)
			for i := range out {
				out[i] = uint64(rand.IntN(n/2 + 1))
			}
			return out
		}},
	} {
		// A Carry's rank buffer, left dirty by a wider list before.
		rank := make([]int32, 0, 64)
		for _, n := range []int{0, 1, 2, 3, 10, 1000, 7} {
			ids := tc.ids(n)
			want := map[uint64]domain.Reason{}
			var l reasonList
			for i, id := range ids {
				r := reasonFor(i)
				if i%3 == 2 {
					// As the jobs behind a blocked one: the reason
					// listed two jobs before.
					l.share(id, l.list[i-2].at)
					r = l.set[l.list[i-2].at]
				} else {
					l.add(id, r)
				}
				want[id] = r
			}
			for mode := range 3 {
				for k := range rank[:cap(rank)] {
					rank[:cap(rank)][k] = int32(k + 1)
				}
				lm := reasonList{list: slices.Clone(l.list), set: l.set}
				var got Reasons
				switch mode {
				case 0:
					got = lm.byID(nil)
				case 1:
					got = lm.byID(&rank)
				case 2:
					// A Carry's scratch list, written over by its
					// next cycle: the reasons handed out are their own.
					lm.scratch = true
					got = lm.byID(&rank)
					for k := range lm.list {
						lm.list[k] = reasonAt{ID: 1<<63 + uint64(k), at: -1}
					}
				}
				checkByID(t, fmt.Sprintf("%s, %d, mode %d", tc.name, n, mode), got, want)
			}
		}
	}
}

// checkByID wants got to hold want's reasons by ID, each once.
func checkByID(t *testing.T, name string, got Reasons, want map[uint64]domain.Reason) {
	t.Helper()
	if got.Len() != len(want) {
		t.Fatalf("%s: %d reasons, want %d", name, got.Len(), len(want))
	}
	for i := 1; i < len(got.list); i++ {
		if got.list[i-1].ID >= got.list[i].ID {
			t.Fatalf("%s: job %d listed before %d", name, got.list[i-1].ID, got.list[i].ID)
		}
	}
	for id, r := range want {
		if g, ok := got.Get(id); !ok || !g.Equal(r) {
			t.Fatalf("%s: job %d has %+v (%v), want %+v", name, id, g, ok, r)
		}
	}
	for _, id := range []uint64{1 << 63, 5000} {
		if _, ok := want[id]; !ok {
			if _, found := got.Get(id); found {
				t.Fatalf("%s: job %d found, not given", name, id)
			}
		}
	}
}

// TestReasonsChanged: the reasons a plan.apply commits are those that
// differ from the jobs', with the jobs by ID (the walk) or in any order
// (the search), against a look-up of each.
func TestReasonsChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 200 {
		var given reasonList
		var jobs []*domain.Job
		n := uint64(rng.IntN(40))
		for id := uint64(1); id <= n; id++ {
			r := domain.Reason{Code: "c" + string(rune('a'+rng.IntN(3)))}
			j := &domain.Job{ID: id, Reason: &r}
			switch rng.IntN(4) {
			case 0:
				j.Reason = &domain.Reason{Code: "other"}
			case 1:
				j.Reason = nil
			}
			if rng.IntN(4) > 0 {
				given.add(id, r)
			}
			if rng.IntN(5) > 0 {
				jobs = append(jobs, j)
			}
		}
		if round%2 == 1 {
			rng.Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
		}
		rs := given.byID(nil)
		want := map[uint64]domain.Reason{}
		for _, j := range jobs {
			if r, ok := rs.Get(j.ID); ok && !j.Reason.Equal(r) {
				want[j.ID] = r
			}
		}
		got := rs.Changed(jobs)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d changed, want %d", round, len(got), len(want))
		}
		for id, r := range want {
			if g, ok := got[id]; !ok || !g.Equal(r) {
				t.Fatalf("round %d: job %d: %v, want %v", round, id, g, r)
			}
		}
	}
}

// BenchmarkReasonsByID puts 67,000 reasons (the pending jobs after a fill
// at 100,000 GPUs) listed in random order in ID order: swapped in place
// (no Carry) and written at their ranks from a Carry's scratch list.
func BenchmarkReasonsByID(b *testing.B) {
	const n = 67000
	rng := rand.New(rand.NewPCG(1, 2))
	ids := rng.Perm(n)
	var l reasonList
	for i, id := range ids {
		if i%4 == 0 {
			l.add(uint64(id)+1000, domain.Reason{Code: ReasonCapacity})
		} else {
			l.share(uint64(id)+1000, 0)
		}
	}
	for _, scratch := range []bool{false, true} {
		b.Run(map[bool]string{false: "in-place", true: "scratch"}[scratch], func(b *testing.B) {
			var rank []int32
			buf := make([]reasonAt, n)
			for b.Loop() {
				copy(buf, l.list)
				lm := reasonList{list: buf, set: l.set, scratch: scratch}
				if rs := lm.byID(&rank); rs.Len() != n {
					b.Fatalf("%d reasons, want %d", rs.Len(), n)
				}
			}
		})
	}
}
