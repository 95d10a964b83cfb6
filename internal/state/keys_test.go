package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// keyHarness is a harness whose entries are proposed under rules, applied
// by a binary of maxRules (0: RulesLatest), with an idempotency window of
// window keys.
func keyHarness(t *testing.T, maxRules, rules, window int) *harness {
	t.Helper()
	h := newHarness(t)
	h.f = New(WithMaxRules(maxRules))
	h.f.keyWindow = window
	h.rules = rules
	return h.cluster(1, 2, 16)
}

// submitKey submits one GPU's job of acme/research with key.
func (h *harness) submitKey(key string) *domain.Job {
	h.t.Helper()
	return h.must(CmdJobSubmit, JobSubmit{Spec: MakeJob("research", 1).Obj().Spec, IdempotencyKey: key}).(*domain.Job)
}

// removeJob cancels job id and has retention remove it.
func (h *harness) removeJob(id uint64) {
	h.t.Helper()
	h.must(CmdJobCancel, JobCancel{ID: id})
	if r := h.must(CmdRetain, Retain{JobsEndedBefore: h.at.Add(time.Second)}).(Retained); r.Jobs != 1 {
		h.t.Fatalf("retention removed %d jobs, want job %d", r.Jobs, id)
	}
}

// keysOnce fails unless every key of the state's order is there once and
// in the map, and the map holds no other: what rules 7 keep.
func (h *harness) keysOnce(what string) {
	h.t.Helper()
	order := h.f.d.SubmitKeyOrder
	sorted := slices.Sorted(slices.Values(order))
	if len(slices.Compact(sorted)) != len(order) || len(order) != len(h.f.d.SubmitKeys) {
		h.t.Fatalf("%s: the order %q is not the map's %d keys once each", what, order, len(h.f.d.SubmitKeys))
	}
	for _, k := range order {
		if _, ok := h.f.d.SubmitKeys[k]; !ok {
			h.t.Fatalf("%s: key %q is in the order, not in the map", what, k)
		}
	}
}

// sameAsMarshal fails unless a snapshot persisted now is the state's
// json.Marshal (snapshot_lists.go keeps the sorted keys across Persists).
func (h *harness) sameAsMarshal(what string) {
	h.t.Helper()
	want := must(json.Marshal(&h.f.d))
	sameFields(h.t, what, snapshotBytes(h.t, must(h.f.Snapshot())), want)
}

// TestSubmitKeyRememberedAgain: a key whose job retention removed makes a
// new job, and is remembered again. From rules 7 a retry with it inside
// the window (fewer than window keys remembered since) returns that job,
// and the key is forgotten once window keys came after it. Under rules 6
// the key's first place, evicted, deleted the key while its second was
// inside the window, and the retry made a third job: kept for entries of
// rules 6, on this binary as on a binary of rules 6 (the same state, to
// the digest). On main (before rules 7) the rules 7 case fails: "retry
// of K inside the window made job 3, want 2".
func TestSubmitKeyRememberedAgain(t *testing.T) {
	const window = 4
	for _, tc := range []struct {
		name            string
		maxRules, rules int
		// retryMakesJob: the retry inside the window makes a new job (the
		// rules 6 result), not the second job.
		retryMakesJob bool
	}{
		{name: "rules 7", rules: RulesSubmitKeyOnce},
		{name: "rules 6 on this binary", rules: RulesJobPool, retryMakesJob: true},
		{name: "rules 6 on a binary of rules 6", maxRules: RulesJobPool, rules: RulesJobPool, retryMakesJob: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := keyHarness(t, tc.maxRules, tc.rules, window)
			h.submitKey("before")
			first := h.submitKey("K")
			h.submitKey("after")
			h.removeJob(first.ID)
			// A snapshot taken before K is remembered again, persisted
			// after: the order it holds is not changed under it.
			taken, then := must(h.f.Snapshot()), must(json.Marshal(&h.f.d))
			second := h.submitKey("K")
			if second.ID == first.ID {
				t.Fatalf("K, its job %d removed, returned it again", first.ID)
			}
			sameFields(t, "a snapshot taken before K was remembered again", snapshotBytes(t, taken), then)
			h.sameAsMarshal("K remembered again")
			for i := range window - 1 {
				h.submitKey(fmt.Sprintf("other-%d", i))
			}
			h.sameAsMarshal("K's first place evicted")
			retry := h.submitKey("K")
			switch {
			case tc.retryMakesJob && retry.ID == second.ID:
				t.Fatalf("under rules %d the retry returned job %d: the rules 6 result is a new job", tc.rules, second.ID)
			case !tc.retryMakesJob && retry.ID != second.ID:
				t.Fatalf("the retry of K inside the window made job %d, want job %d", retry.ID, second.ID)
			}
			if !tc.retryMakesJob {
				h.keysOnce("after the retry")
				// The window is exactly window keys: one more and K is
				// forgotten (its job still there: a new job, as before).
				h.submitKey("last")
				if _, ok := h.f.d.SubmitKeys[actorKey("K")]; ok {
					t.Fatalf("K remembered with %d keys after it, the window is %d: %q", window, window, h.f.d.SubmitKeyOrder)
				}
				if again := h.submitKey("K"); again.ID == second.ID {
					t.Fatalf("K, evicted, still returned job %d", second.ID)
				}
				h.keysOnce("K evicted and remembered")
			}
			h.sameAsMarshal("the end")

			// A replica replaying the log, on this binary and on one of
			// the entries' rules, reaches the same state.
			_, want, err := h.f.Digest()
			if err != nil {
				t.Fatal(err)
			}
			for _, max := range []int{0, tc.rules} {
				replica := New(WithMaxRules(max))
				replica.keyWindow = window
				for i, b := range h.log {
					replica.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
				}
				if _, got, err := replica.Digest(); err != nil || got != want {
					t.Fatalf("a replica of max rules %d replaying the log: digest %s (%v), want %s", max, got, err, want)
				}
			}
		})
	}
}

// actorKey is key as apply scopes it to the harness's actor.
func actorKey(key string) string { return "admin:test " + key }

// TestSubmitKeysOfEarlierRules: a state built under rules 6 (restored from
// its snapshot, as a member upgraded to this binary does) may hold a key
// twice in the order, or a place whose key an eviction already deleted.
// The first entry of rules 7 that remembers a key makes the order unique
// (each key at its last place, those places dropped): the first place's
// eviction does not forget a key whose later place remains, and a dropped
// place does not evict at once the key remembered again for a new job.
// Without the drop "forgotten under rules 6" fails, without keyOnce's
// first step both of the first two do.
func TestSubmitKeysOfEarlierRules(t *testing.T) {
	const window = 4
	for _, tc := range []struct {
		name string
		// old: what entries of rules 6 do, leaving order
		old   func(h *harness)
		order []string
		// forgotten: K is no longer in the map; the first retry makes a
		// job (else it returns K's job)
		forgotten bool
	}{
		{
			name: "twice, both in the window",
			old: func(h *harness) {
				h.removeJob(h.submitKey("K").ID)
				h.submitKey("K")
			},
			order: []string{"K", "K"},
		},
		{
			name: "forgotten under rules 6",
			old: func(h *harness) {
				h.removeJob(h.submitKey("K").ID)
				h.submitKey("K")
				for i := range window - 1 {
					h.submitKey(fmt.Sprintf("old-%d", i))
				}
			},
			order:     []string{"K", "old-0", "old-1", "old-2"},
			forgotten: true,
		},
		{
			name: "no key twice",
			old: func(h *harness) {
				h.submitKey("other")
				h.submitKey("K")
			},
			order: []string{"other", "K"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := keyHarness(t, 0, RulesJobPool, window)
			tc.old(h)
			var order []string
			for _, k := range h.f.d.SubmitKeyOrder {
				order = append(order, k[len(actorKey("")):])
			}
			if !slices.Equal(order, tc.order) {
				t.Fatalf("rules 6 left the order %q, want %q", order, tc.order)
			}
			id, remembered := h.f.d.SubmitKeys[actorKey("K")]
			if remembered == tc.forgotten {
				t.Fatalf("after rules 6, K remembered %t (job %d), want %t", remembered, id, !tc.forgotten)
			}
			// The member restarts on this binary, from its snapshot; the
			// cluster then proposes at rules 7.
			if err := h.f.Restore(nopCloser{bytes.NewReader(h.snapshot())}); err != nil {
				t.Fatal(err)
			}
			h.rules = RulesSubmitKeyOnce
			next := h.f.d.NextJobID
			retry := h.submitKey("K")
			switch {
			case tc.forgotten && retry.ID != next:
				t.Fatalf("K, forgotten under rules 6, returned job %d, want a new job %d", retry.ID, next)
			case !tc.forgotten && retry.ID != id:
				t.Fatalf("the first retry under rules 7 returned job %d, want K's job %d", retry.ID, id)
			}
			// Keys up to the window after K's last place: K stays.
			for i := range window - 1 {
				h.submitKey(fmt.Sprintf("new-%d", i))
				h.keysOnce(fmt.Sprintf("key %d under rules 7", i))
			}
			if again := h.submitKey("K"); again.ID != retry.ID {
				t.Fatalf("a retry of K with %d keys after it made job %d, want job %d: the order %q", window-1, again.ID, retry.ID, h.f.d.SubmitKeyOrder)
			}
			h.sameAsMarshal("the end")
		})
	}
}

// BenchmarkSubmitKeyRemembered: remembering a key with the window full
// (100,000 keys of 50 callers): a new key under rules 6 and 7 (rules 7
// adds a length check and a map lookup), and under rules 7 a key
// remembered again from the window's middle (its place found and the
// order copied without it: a raft snapshot may hold the order), and the
// order of rules 6 made unique.
func BenchmarkSubmitKeyRemembered(b *testing.B) {
	full := func(rules int) *FSM {
		f := New()
		for i := range maxSubmitKeys {
			f.rememberSubmitKey(fmt.Sprintf("admin:token-%d key-%08d", i%50, i), uint64(i), rules)
		}
		return f
	}
	for _, rules := range []int{RulesSubmitKeyOnce - 1, RulesSubmitKeyOnce} {
		b.Run(fmt.Sprintf("new key, rules %d", rules), func(b *testing.B) {
			f := full(rules)
			keys := make([]string, maxSubmitKeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("admin:token-x key-n%08d", i)
			}
			i := 0
			for b.Loop() {
				f.rememberSubmitKey(keys[i%len(keys)], 1, rules)
				i++
			}
		})
	}
	b.Run(fmt.Sprintf("again, rules %d", RulesSubmitKeyOnce), func(b *testing.B) {
		f := full(RulesSubmitKeyOnce)
		for b.Loop() {
			f.rememberSubmitKey(f.d.SubmitKeyOrder[maxSubmitKeys/2], 1, RulesSubmitKeyOnce)
		}
	})
	// A state of rules 6 with a key twice, made unique by the first key
	// remembered under rules 7.
	b.Run("unique once", func(b *testing.B) {
		f := full(RulesSubmitKeyOnce - 1)
		order := f.d.SubmitKeyOrder
		for b.Loop() {
			b.StopTimer()
			f.d.SubmitKeyOrder = append(slices.Clip(order), order[maxSubmitKeys/2])
			b.StartTimer()
			f.keyOnce("admin:token-x key-none")
		}
		if len(f.d.SubmitKeyOrder) != maxSubmitKeys {
			b.Fatalf("%d keys in the order, want %d", len(f.d.SubmitKeyOrder), maxSubmitKeys)
		}
	})
}
