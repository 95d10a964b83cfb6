package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func small(t *testing.T, min, max uint32, q time.Duration) *State {
	t.Helper()
	s, err := New(Spec{Name: "p", Min: min, Max: max, Quarantine: q})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAlloc(t *testing.T, s *State, owner string, now time.Time) uint32 {
	t.Helper()
	id, err := s.Allocate("p", owner, now)
	if err != nil {
		t.Fatalf("allocate %s: %v", owner, err)
	}
	return id
}

// step is one operation of a scenario; want is the id an allocation must
// return (0: must fail with wantCode).
type step struct {
	op       string // alloc, release, deploy, reserve
	owner    string
	at       time.Duration
	ids      []uint32 // deploy: the deployed set; reserve: the id
	want     uint32
	wantCode domain.Code
}

func TestPoolScenarios(t *testing.T) {
	const q = 10 * time.Minute
	tests := map[string]struct {
		min, max uint32
		steps    []step
	}{
		"next-fit hands out ids in order and an owner keeps its id": {1, 5, []step{
			{op: "alloc", owner: "a", want: 1},
			{op: "alloc", owner: "b", want: 2},
			{op: "alloc", owner: "a", want: 1},
			{op: "release", owner: "a"},
			{op: "alloc", owner: "c", want: 3},
		}},
		"a released id waits out its quarantine": {1, 2, []step{
			{op: "alloc", owner: "a", want: 1},
			{op: "alloc", owner: "b", want: 2},
			{op: "release", owner: "a"},
			{op: "alloc", owner: "c", at: q - time.Second, wantCode: domain.CodeFailedPrecondition},
			{op: "alloc", owner: "c", at: q, want: 1},
		}},
		"a deployed id is never reused, whatever the quarantine": {1, 2, []step{
			{op: "alloc", owner: "a", want: 1},
			{op: "alloc", owner: "b", want: 2},
			{op: "deploy", ids: []uint32{1, 2}},
			{op: "release", owner: "a"},
			{op: "alloc", owner: "c", at: 100 * q, wantCode: domain.CodeFailedPrecondition},
			{op: "deploy", at: 100 * q, ids: []uint32{2}},
			{op: "alloc", owner: "c", at: 100 * q, want: 1},
		}},
		"undeployed before the quarantine ends still waits for it": {1, 1, []step{
			{op: "alloc", owner: "a", want: 1},
			{op: "deploy", ids: []uint32{1}},
			{op: "release", owner: "a"},
			{op: "deploy", at: time.Minute, ids: nil},
			{op: "alloc", owner: "b", at: 2 * time.Minute, wantCode: domain.CodeFailedPrecondition},
			{op: "alloc", owner: "b", at: q, want: 1},
		}},
		"an id deployed but unknown to the pool is blocked": {1, 3, []step{
			{op: "deploy", ids: []uint32{1, 2}},
			{op: "alloc", owner: "a", want: 3},
			{op: "alloc", owner: "b", wantCode: domain.CodeFailedPrecondition},
		}},
		"reserve takes a chosen id and refuses a held or quarantined one": {1, 9, []step{
			{op: "reserve", owner: "a", ids: []uint32{7}},
			{op: "reserve", owner: "b", ids: []uint32{7}, wantCode: domain.CodeAlreadyExists},
			{op: "release", owner: "a"},
			{op: "reserve", owner: "b", ids: []uint32{7}, wantCode: domain.CodeAlreadyExists},
			{op: "reserve", owner: "b", at: q, ids: []uint32{7}},
			{op: "reserve", owner: "c", ids: []uint32{10}, wantCode: domain.CodeInvalidArgument},
		}},
		"next-fit wraps around the end of the range": {1, 3, []step{
			{op: "alloc", owner: "a", want: 1},
			{op: "alloc", owner: "b", want: 2},
			{op: "alloc", owner: "c", want: 3},
			{op: "release", owner: "a", at: q},
			{op: "alloc", owner: "d", at: 2 * q, want: 1},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := small(t, tc.min, tc.max, q)
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				var err error
				var got uint32
				switch st.op {
				case "alloc":
					got, err = s.Allocate("p", st.owner, now)
				case "release":
					_, _, err = s.Release("p", st.owner, now)
				case "deploy":
					err = s.SetDeployed("p", st.ids, now)
				case "reserve":
					err = s.Reserve("p", st.owner, st.ids[0], now)
					got = st.ids[0]
				}
				if st.wantCode != "" {
					if domain.CodeOf(err) != st.wantCode {
						t.Fatalf("step %d (%s %s): err %v, want code %s", i, st.op, st.owner, err, st.wantCode)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d (%s %s): %v", i, st.op, st.owner, err)
				}
				if st.op == "alloc" && got != st.want {
					t.Fatalf("step %d: allocate %s = %d, want %d", i, st.owner, got, st.want)
				}
			}
		})
	}
}

func TestExhaustionNamesPoolAndRange(t *testing.T) {
	s := small(t, 4000, 4001, time.Hour)
	mustAlloc(t, s, "a", t0)
	mustAlloc(t, s, "b", t0)
	if _, _, err := s.Release("p", "a", t0); err != nil {
		t.Fatal(err)
	}
	_, err := s.Allocate("p", "c", t0)
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeFailedPrecondition {
		t.Fatalf("err %v, want a failed_precondition *domain.Error", err)
	}
	for _, want := range []string{`pool "p"`, "4000-4001", "1 held", "1 in quarantine", "2026-03-01T13:00:00Z"} {
		if !strings.Contains(de.Message, want) {
			t.Errorf("message %q lacks %q", de.Message, want)
		}
	}
	if de.Field != "pools.p" {
		t.Errorf("field %q, want pools.p", de.Field)
	}
}

func TestErrors(t *testing.T) {
	s := small(t, 1, 5, 0)
	tests := map[string]struct {
		run  func() error
		want domain.Code
	}{
		"unknown pool":        {func() error { _, err := s.Allocate("nope", "a", t0); return err }, domain.CodeNotFound},
		"no owner":            {func() error { _, err := s.Allocate("p", "", t0); return err }, domain.CodeInvalidArgument},
		"empty range":         {func() error { _, err := New(Spec{Name: "x", Min: 5, Max: 4}); return err }, domain.CodeInvalidArgument},
		"zero is never an id": {func() error { _, err := New(Spec{Name: "x", Min: 0, Max: 4}); return err }, domain.CodeInvalidArgument},
		"unknown pool deploy": {func() error { return s.SetDeployed("nope", nil, t0) }, domain.CodeNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := domain.CodeOf(tc.run()); got != tc.want {
				t.Errorf("code %s, want %s", got, tc.want)
			}
		})
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	s := small(t, 1, 5, time.Minute)
	id := mustAlloc(t, s, "a", t0)
	got, ok, err := s.Release("p", "a", t0)
	if err != nil || !ok || got != id {
		t.Fatalf("release = %d %v %v", got, ok, err)
	}
	if _, ok, err := s.Release("p", "a", t0); err != nil || ok {
		t.Fatalf("second release = %v %v, want nothing released", ok, err)
	}
}

func TestStateSurvivesJSONAndClone(t *testing.T) {
	s, err := New(DefaultSpecs(DefaultQuarantine)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ensure(LinkVLANSpec("s1-leaf0", DefaultQuarantine)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Allocate(VNI, fmt.Sprintf("tenant/t%d", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Release(VNI, "tenant/t1", t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDeployed(VNI, []uint32{10000, 10001}, t0); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, &back) {
		t.Fatalf("JSON round trip changed the state:\n%s", b)
	}
	c := s.Clone()
	if _, err := c.Allocate(VNI, "tenant/x", t0); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(VNI, "tenant/x"); ok {
		t.Fatal("allocating in a clone changed the original")
	}
	// Same commands, same state: the replicated state machine relies on it.
	b2, _ := json.Marshal(&back)
	if string(b) != string(b2) {
		t.Fatal("marshalling is not deterministic")
	}
}

// TestRandomOperationsKeepInvariants drives a small pool with random
// commands and checks, after each, the promises the fabric relies on: no id
// has two owners, and no allocation returns an id that is deployed or still
// in quarantine.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	const q = 5 * time.Minute
	r := rand.New(rand.NewPCG(1, 2))
	s := small(t, 100, 115, q)
	now := t0
	releasedAt := map[uint32]time.Time{}
	deployed := map[uint32]bool{}
	holder := map[string]uint32{}
	for i := range 5000 {
		now = now.Add(time.Duration(r.IntN(90)) * time.Second)
		owner := fmt.Sprintf("o%d", r.IntN(24))
		switch r.IntN(4) {
		case 0, 1:
			id, err := s.Allocate("p", owner, now)
			if err != nil {
				if domain.CodeOf(err) != domain.CodeFailedPrecondition {
					t.Fatalf("op %d: %v", i, err)
				}
				continue
			}
			if prev, ok := holder[owner]; ok {
				if prev != id {
					t.Fatalf("op %d: %s held %d, got %d", i, owner, prev, id)
				}
				continue
			}
			for o, h := range holder {
				if h == id {
					t.Fatalf("op %d: id %d given to %s while %s holds it", i, id, owner, o)
				}
			}
			if deployed[id] {
				t.Fatalf("op %d: id %d reused while deployed", i, id)
			}
			if at, ok := releasedAt[id]; ok && now.Before(at.Add(q)) {
				t.Fatalf("op %d: id %d reused %s after release, quarantine %s", i, id, now.Sub(at), q)
			}
			holder[owner] = id
		case 2:
			if id, ok, _ := s.Release("p", owner, now); ok {
				releasedAt[id] = now
				delete(holder, owner)
			}
		case 3:
			// Deploy what is held now, plus a few released ids still on
			// devices whose deploy failed.
			var ids []uint32
			clear(deployed)
			for _, id := range holder {
				ids = append(ids, id)
				deployed[id] = true
			}
			for id := range releasedAt {
				if r.IntN(3) == 0 {
					ids = append(ids, id)
					deployed[id] = true
				}
			}
			if err := s.SetDeployed("p", ids, now); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestGroupPoolSparesTheSwitchGroup: 65535 is fabric.SwitchGroup, the
// leaves' own packets; the pool never hands it to a job.
func TestGroupPoolSparesTheSwitchGroup(t *testing.T) {
	for _, s := range DefaultSpecs(DefaultQuarantine) {
		if s.Name == Group && (s.Min != 1 || s.Max != 1<<16-2) {
			t.Fatalf("group pool %d..%d, want 1..65534", s.Min, s.Max)
		}
	}
	// A pool from before the reservation (or resized past it) skips it.
	now := time.Unix(1000, 0)
	st, err := New(Spec{Name: Group, Min: 65533, Max: 65535})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for i := range 2 {
		id, err := st.Allocate(Group, fmt.Sprint("job/", i), now)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if _, err := st.Allocate(Group, "job/3", now); err == nil || !slices.Equal(got, []uint32{65533, 65534}) {
		t.Fatalf("allocated %v then %v, want 65533, 65534 and then an exhausted pool", got, err)
	}
}

// TestLeafL3VLANPool: each leaf's L3 VLANs have a pool of their own, clear
// of the leaf's link VLANs.
func TestLeafL3VLANPool(t *testing.T) {
	sp := LeafL3VLANSpec("s1-leaf0", DefaultQuarantine)
	lv := LinkVLANSpec("s1-leaf0", DefaultQuarantine)
	if sp.Name != "l3vlan/s1-leaf0" || sp.Min != 3000 || sp.Max != 4094 || lv.Max >= sp.Min {
		t.Fatalf("L3 VLAN pool %+v, link VLAN pool %+v", sp, lv)
	}
}

// TestIndexChangesNothing: the same random operations on a pool with the
// owner index (Index) and on one without give the same answers and the
// same state, reserves and resizes included.
func TestIndexChangesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	plain := small(t, 100, 115, time.Minute)
	indexed := plain.Clone()
	indexed.Index()
	now := t0
	for i := range 5000 {
		now = now.Add(time.Duration(r.IntN(30)) * time.Second)
		owner := fmt.Sprintf("o%d", r.IntN(24))
		op := r.IntN(6)
		id := uint32(100 + r.IntN(16))
		var a, b string
		for _, s := range []*State{plain, indexed} {
			var out string
			switch op {
			case 0, 1:
				got, err := s.Allocate("p", owner, now)
				out = fmt.Sprint(got, err)
			case 2:
				got, ok, err := s.Release("p", owner, now)
				out = fmt.Sprint(got, ok, err)
			case 3:
				out = fmt.Sprint(s.Reserve("p", owner, id, now))
			case 4:
				out = fmt.Sprint(s.SetDeployed("p", []uint32{id, id + 1}, now))
			case 5:
				got, ok := s.Lookup("p", owner)
				out = fmt.Sprint(got, ok)
			}
			if s == plain {
				a = out
			} else {
				b = out
			}
		}
		if a != b {
			t.Fatalf("op %d (%d, %s): without the index %s, with it %s", i, op, owner, a, b)
		}
		if i%500 == 0 {
			ja, _ := json.Marshal(plain)
			jb, _ := json.Marshal(indexed)
			if string(ja) != string(jb) {
				t.Fatalf("op %d: the states differ:\n%s\n%s", i, ja, jb)
			}
		}
	}
	if c := indexed.Clone(); c.Pools["p"].owners != nil {
		t.Fatal("a clone shares the owner index")
	}
}
