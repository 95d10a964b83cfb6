package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
)

// failingSink is a raft.SnapshotSink that fails after n bytes.
type failingSink struct {
	bytes.Buffer
	n         int
	cancelled bool
}

func (s *failingSink) Write(p []byte) (int, error) {
	if s.Len()+len(p) > s.n {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *failingSink) ID() string    { return "failing" }
func (s *failingSink) Cancel() error { s.cancelled = true; return nil }
func (s *failingSink) Close() error  { return nil }

// sameFields fails unless got, a snapshot, has every field of want, the
// state's json.Marshal, byte for byte (the jobs in another order: by ID).
func sameFields(t testing.TB, what string, got, want []byte) {
	t.Helper()
	var g, w map[string]json.RawMessage
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: decode the snapshot: %v", what, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	for k := range w {
		if k == "jobs" {
			continue
		}
		if !bytes.Equal(g[k], w[k]) {
			t.Fatalf("%s: field %s:\n got %.300s\nwant %.300s", what, k, g[k], w[k])
		}
	}
	if len(g) != len(w) || !bytes.Equal(normalJSON(t, got), normalJSON(t, want)) || len(got) != len(want) {
		t.Fatalf("%s: the snapshot (%d bytes) is not the state (%d bytes)", what, len(got), len(want))
	}
}

// TestSnapshotListsKept: the events and idempotency keys a Persist keeps
// for the next (snapshot_lists.go) never show in a later snapshot as
// other than json.Marshal makes of the state then: through submits with
// keys that need escaping and keys remembered again for removed jobs,
// retention cutting events from anywhere in the list (by age, per tenant)
// and usage records, a restore of the state as it is and of an older
// snapshot (other events under the same Seqs), snapshots persisted out of
// order or dropped, and a Persist whose sink failed. A cache kept across
// a restore, or claiming a Seq it does not hold, fails.
func TestSnapshotListsKept(t *testing.T) {
	h := retainHarness(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var olds [][]byte // snapshots persisted, to restore later
	var pending []struct {
		s    raft.FSMSnapshot
		want []byte
		step int
	}
	persist := func(s raft.FSMSnapshot, want []byte, step int) {
		t.Helper()
		got := snapshotBytes(t, s)
		sameFields(t, fmt.Sprintf("step %d", step), got, want)
		olds = append(olds, got)
	}
	keys := []string{"k", "a<b&c>", "é", "\"q\"", "x\u2028", "\xff"}
	for step := range 600 {
		h.at = h.at.Add(time.Minute)
		switch r := rng.IntN(20); {
		case r < 5:
			// Some keys come back after their job is gone: remembered again.
			key := fmt.Sprintf("%s-%d", keys[rng.IntN(len(keys))], rng.IntN(40))
			ref := []string{"acme/research", "beta/lab"}[rng.IntN(2)]
			h.must(CmdJobSubmit, domaintest.MakeJobOf(ref, 8, func(s domain.JobSpec) JobSubmit { return JobSubmit{Spec: s, IdempotencyKey: key} }).Obj())
		case r < 9:
			h.endJob([]string{"acme/research", "beta/lab"}[rng.IntN(2)], rng.IntN(2) == 0, time.Duration(1+rng.IntN(60))*time.Minute)
		case r < 10:
			// Events enough to fill chunks, so whole ones are reused.
			for range 100 + rng.IntN(300) {
				h.f.event(&Command{At: h.at, Actor: "admin:test"}, "test", "x", []string{"acme", "beta", ""}[rng.IntN(3)], "", "m<&>")
			}
		case r < 11:
			h.must(CmdRetain, Retain{JobsPerTenant: 1 + rng.IntN(3), EventsPerTenant: 200 + rng.IntN(600)})
		case r < 12:
			h.must(CmdRetain, Retain{EventsBefore: h.at.Add(-time.Duration(rng.IntN(300)) * time.Minute),
				UsageBefore: h.at.Add(-time.Duration(rng.IntN(300)) * time.Minute)})
		case r < 13 && len(olds) > 0:
			// An older state: its events' Seqs are given again to others.
			b := olds[rng.IntN(len(olds))]
			if rng.IntN(2) == 0 {
				b = snapshotBytes(t, must(h.f.Snapshot()))
			}
			if err := h.f.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
				t.Fatal(err)
			}
		case r < 14:
			// A Persist that fails part way keeps nothing it did not make.
			s := must(h.f.Snapshot())
			sink := &failingSink{n: rng.IntN(4096)}
			if err := s.Persist(sink); err == nil || !sink.cancelled {
				t.Fatalf("step %d: Persist to a failing sink: %v, cancelled %t", step, err, sink.cancelled)
			}
		}
		switch rng.IntN(6) {
		case 0, 1:
			want := must(json.Marshal(&h.f.d))
			pending = append(pending, struct {
				s    raft.FSMSnapshot
				want []byte
				step int
			}{must(h.f.Snapshot()), want, step})
		case 2:
			// Persisted in any order, some not at all (released).
			rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
			for _, p := range pending {
				if rng.IntN(5) == 0 {
					p.s.Release()
					continue
				}
				persist(p.s, p.want, p.step)
			}
			pending = pending[:0]
		}
	}
	for _, p := range pending {
		persist(p.s, p.want, p.step)
	}
	persist(must(h.f.Snapshot()), must(json.Marshal(&h.f.d)), -1)
}

// TestSnapshotKeysEvicted: the sorted keys kept across snapshots lose the
// keys evicted past maxSubmitKeys, keep a key remembered again (under
// rules 6 twice in the order, once in the map; from rules 7 taken out of
// the order's middle) and take those remembered since, however many
// snapshots apart; a snapshot whose order no longer reaches back to what
// was kept sorts them all again.
func TestSnapshotKeysEvicted(t *testing.T) {
	for _, rules := range []int{RulesSubmitKeyOnce - 1, RulesSubmitKeyOnce} {
		t.Run(fmt.Sprintf("rules %d", rules), func(t *testing.T) {
			h := newHarness(t)
			check := func(what string) {
				t.Helper()
				want := must(json.Marshal(&h.f.d))
				sameFields(t, what, snapshotBytes(t, must(h.f.Snapshot())), want)
			}
			n := 0
			key := func(n int) string { return fmt.Sprintf("k%07d", (n*7919)%1_000_003) }
			remember := func(k int) {
				for range k {
					n++
					h.f.rememberSubmitKey(key(n), uint64(n), rules)
				}
			}
			check("empty")
			remember(1000)
			check("1,000 keys")
			remember(10)
			// Again: the first key, one from the middle, one remembered
			// since the last snapshot.
			for _, k := range []int{1, 500, 1005} {
				h.f.rememberSubmitKey(key(k), 99, rules)
			}
			check("remembered again")
			if got, want := len(h.f.d.SubmitKeyOrder), 1010+3*min(1, RulesSubmitKeyOnce-rules); got != want {
				t.Fatalf("%d keys in the order, want %d", got, want)
			}
			remember(maxSubmitKeys - 500)
			check("evicting")
			remember(maxSubmitKeys / 3)
			check("a third evicted")
			remember(maxSubmitKeys + 10)
			check("all evicted since")
			if got := len(h.f.snapJobs.lists.keys.keys); got != len(h.f.d.SubmitKeys) {
				t.Fatalf("kept %d sorted keys, the state has %d", got, len(h.f.d.SubmitKeys))
			}
			if !slices.IsSorted(h.f.snapJobs.lists.keys.keys) {
				t.Fatal("the kept keys are not sorted")
			}
		})
	}
}

// TestSnapshotEventsReused: a steady Persist encodes only the events
// appended since the last (and copies those of chunks retention cut), not
// the whole list: what the cache is for.
func TestSnapshotEventsReused(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	for range 5000 {
		h.f.event(&Command{At: h.at, Actor: "admin:test"}, "test", "x", "acme", "", "m")
	}
	snapshotBytes(t, must(h.f.Snapshot()))
	first := h.f.snapJobs.lists.events.chunks
	for range 10 {
		h.f.event(&Command{At: h.at, Actor: "admin:test"}, "test", "x", "acme", "", "m")
	}
	sameFields(t, "10 more", snapshotBytes(t, must(h.f.Snapshot())), must(json.Marshal(&h.f.d)))
	now := h.f.snapJobs.lists.events.chunks
	for _, c := range first {
		// Chunks under a quarter full are copied, to merge them.
		if len(c.keys) >= listChunk/4 && !slices.Contains(now, c) {
			t.Fatalf("the chunk of events %d to %d was made again, not reused", c.keys[0], c.last())
		}
	}
	if len(first) < 4 {
		t.Fatalf("%d chunks; want the 5,000 events in at least 4", len(first))
	}
	// Retention cuts from the middle of chunks: beta's older events go,
	// acme's around them stay.
	for i := range 3000 {
		h.f.event(&Command{At: h.at, Actor: "admin:test"}, "test", "x", []string{"acme", "beta"}[i%2], "", "m")
	}
	sameFields(t, "3,000 more", snapshotBytes(t, must(h.f.Snapshot())), must(json.Marshal(&h.f.d)))
	h.f.removeEvents(&Retain{EventsPerTenant: 1000})
	sameFields(t, "beta's cut", snapshotBytes(t, must(h.f.Snapshot())), must(json.Marshal(&h.f.d)))
}

// TestSnapshotUsageReused: the usage archive's JSON is kept across
// snapshots like the events', by end time and job, and a record is told
// apart from another of the same key by its runs: records inserted in the
// middle (a job that ended earlier removed later), a prefix cut by
// retention, and one record in place of another of the same end and job
// (cut, then archived again: usage retention may change) each show in
// the next snapshot as json.Marshal makes them; the chunks not touched
// are reused.
func TestSnapshotUsageReused(t *testing.T) {
	h := newHarness(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := func(job uint64, end time.Time, tenant string) domain.UsageRecord {
		e := end
		return domain.UsageRecord{Job: job, Name: domain.DefaultJobName(job), Tenant: tenant, Workspace: "w", EndedAt: end,
			Runs: []domain.Run{{Start: end.Add(-time.Hour), End: &e, GPUs: 8, Units: 8}}}
	}
	var recs []domain.UsageRecord
	for i := range 3000 {
		recs = append(recs, rec(uint64(i+1), t0.Add(time.Duration(i)*time.Minute), "acme"))
	}
	h.f.d.Usage = mergeUsage(nil, recs)
	check := func(what string) []*encChunk[usageMark] {
		t.Helper()
		sameFields(t, what, snapshotBytes(t, must(h.f.Snapshot())), must(json.Marshal(&h.f.d)))
		if l := h.f.snapJobs.lists.usage; l != nil {
			return l.chunks
		}
		return nil
	}
	first := check("3,000 records")
	h.f.d.Usage = mergeUsage(h.f.d.Usage, []domain.UsageRecord{rec(5000, t0.Add(1500*time.Minute+time.Second), "beta")})
	check("one inserted in the middle")
	h.f.d.Usage = slices.Clone(h.f.d.Usage[100:])
	h.f.d.Usage = append(h.f.d.Usage, rec(5001, t0.Add(4000*time.Minute), "beta"))
	now := check("a prefix cut, one appended")
	if !slices.Contains(now, first[len(first)-1]) {
		t.Error("the last chunk, not touched, was made again")
	}
	// The first record of a chunk whole in the cache, again but of
	// another tenant: same key, other runs.
	u := slices.Clone(h.f.d.Usage)
	i := slices.IndexFunc(u, func(r domain.UsageRecord) bool { return r.Job == 2049 })
	u[i] = rec(u[i].Job, u[i].EndedAt, "other")
	h.f.d.Usage = u
	check("a record in place of another")
	// Two records of one key: not told apart by key, nothing reused.
	h.f.d.Usage = mergeUsage(h.f.d.Usage, []domain.UsageRecord{rec(3000, t0.Add(2999*time.Minute), "beta")})
	check("two of one key")
	if h.f.snapJobs.lists.usage != nil {
		t.Error("kept the JSON of records whose keys do not increase")
	}
	check("after")
}

// TestSnapshotPersistAlongsideApply: snapshots persisted two at a time
// while submits are applied (raft persists alongside applies and retains
// two), each what a state restored from it writes again, byte for byte.
// Under -race, what Persist keeps for the next is shared safely.
func TestSnapshotPersistAlongsideApply(t *testing.T) {
	h := newHarness(t).cluster(1, 2, 8)
	steadySubmits(t, h)(500)
	// Applied here, not through the harness: Fatal belongs to the test's
	// goroutine.
	applied := make(chan error, 1)
	go func() {
		for i := range 2000 {
			e, err := Encode(CmdJobSubmit, h.at.Add(time.Duration(i)*time.Millisecond), "admin:test",
				JobSubmit{Spec: MakeJob("research", 1).Obj().Spec, IdempotencyKey: fmt.Sprintf("race-%d", i)})
			if err == nil {
				if r := h.f.ApplyCommand(e); r.Err != nil {
					err = r.Err
				}
			}
			if err != nil {
				applied <- err
				return
			}
		}
		applied <- nil
	}()
	persist := func(s raft.FSMSnapshot) ([]byte, error) {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		err := s.(*snapshot).write(w)
		if err == nil {
			err = w.Flush()
		}
		return buf.Bytes(), err
	}
	var snaps [][]byte
	for running := true; running; {
		select {
		case err := <-applied:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		a, b := must(h.f.Snapshot()), must(h.f.Snapshot())
		other := make(chan []byte, 1)
		go func() {
			got, err := persist(a)
			if err != nil {
				got = nil
			}
			other <- got
		}()
		got, err := persist(b)
		if err != nil {
			t.Fatal(err)
		}
		got2 := <-other
		if got2 == nil {
			t.Fatal("a snapshot persisted alongside another failed")
		}
		snaps = append(snaps, got, got2)
	}
	for i, b := range snaps {
		g := New()
		if err := g.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
		if again := snapshotBytes(t, must(g.Snapshot())); !bytes.Equal(again, b) {
			t.Fatalf("snapshot %d: restored and written again, %d bytes; it was %d", i, len(again), len(b))
		}
	}
}

// TestSnapshotJobsByID: a snapshot writes its jobs by ID, whether their
// IDs fill their range (put in place) or not (sorted), and every job once.
func TestSnapshotJobsByID(t *testing.T) {
	for _, c := range []struct {
		name string
		ids  []uint64
	}{
		{"none", nil},
		{"one", []uint64{7}},
		{"dense", []uint64{5, 3, 4, 9, 8, 6, 10, 12}},
		{"sparse", []uint64{1 << 40, 3, 1<<63 + 5, 17, 2}},
		{"extremes", []uint64{0, math.MaxUint64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs := map[uint64]*snapJob{}
			for _, id := range c.ids {
				jobs[id] = &snapJob{enc: []byte(strconv.FormatUint(id, 10))}
			}
			got := jobsByID(jobs)
			want := slices.Sorted(slices.Values(c.ids))
			if len(got) != len(want) {
				t.Fatalf("%d jobs, want %d", len(got), len(want))
			}
			for i, e := range got {
				if e.id != want[i] || e.was != jobs[want[i]] {
					t.Fatalf("job %d is %d, want %d (or not its entry)", i, e.id, want[i])
				}
			}
		})
	}
}

// TestAppendEventAsMarshal: appendEvent writes an event as json.Marshal
// does, and declines (ok false) exactly the events it refuses, leaving
// them to encoding/json to say why: every field
// set (a field added to domain.Event and not to appendEvent fails here),
// every string field empty, and random events with strings that need
// escaping and times of any year and zone, HTML characters and strings
// not UTF-8 among them.
func TestAppendEventAsMarshal(t *testing.T) {
	check := func(what string, e domain.Event) bool {
		t.Helper()
		got, ok := appendEvent([]byte("x"), &e)
		want, err := json.Marshal(e)
		if !ok {
			if err == nil {
				t.Fatalf("%s: appendEvent declines an event json.Marshal writes: %s", what, want)
			}
			return false
		}
		if err != nil {
			t.Fatalf("%s: appendEvent wrote %s; json.Marshal fails: %v", what, got, err)
		}
		if string(got[1:]) != string(want) || got[0] != 'x' {
			t.Fatalf("%s:\n got %s\nwant x%s", what, got, want)
		}
		return true
	}
	// Every field set, through reflection: one appendEvent does not know
	// shows in json.Marshal's bytes only.
	var full domain.Event
	v := reflect.ValueOf(&full).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v" + v.Type().Field(i).Name)
		case reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Date(2026, 11, 28, 1, 2, 3, 4, time.FixedZone("x", -(5*3600+30*60)))))
		default:
			t.Fatalf("domain.Event.%s is a %s: give it a value here and to appendEvent", v.Type().Field(i).Name, f.Kind())
		}
	}
	if !check("every field", full) {
		t.Fatal("appendEvent declines an event of plain strings")
	}
	if !check("no strings", domain.Event{Seq: 3, At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}) {
		t.Fatal("appendEvent declines an event without strings")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// The first five need no escaping: most events are of those alone.
	pieces := []string{"", "job/12", "a", " ", "admin:t", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x7f", "é", "\u2028", "\xff"}
	var messy bool
	str := func() string {
		s := ""
		for range rng.IntN(4) {
			if messy && rng.IntN(3) == 0 {
				s += pieces[rng.IntN(len(pieces))]
			} else {
				s += pieces[rng.IntN(5)]
			}
		}
		return s
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("a", 3600), time.FixedZone("b", -23*3600-59*60),
		time.FixedZone("c", 24*3600), time.FixedZone("d", -25*3600), time.FixedZone("e", 3661), time.FixedZone("f", 0)}
	written := 0
	for i := range 20000 {
		var at time.Time
		switch rng.IntN(4) {
		case 0: // any year, -292 billion to 292 billion
			at = time.Unix(rng.Int64N(1<<62)-1<<61, rng.Int64N(1e9))
		case 1: // around the edges of years 0 and 9999
			at = time.Date([]int{-1, 0, 1, 9998, 9999, 10000}[rng.IntN(6)], time.Month(1+rng.IntN(12)), 1+rng.IntN(31), rng.IntN(24), 0, 0, rng.IntN(2)*rng.IntN(1e9), time.UTC)
		case 2:
		default:
			at = time.Unix(1_700_000_000+rng.Int64N(1e8), rng.Int64N(1e9)*int64(rng.IntN(2)))
		}
		messy = rng.IntN(2) == 0
		e := domain.Event{Seq: rng.Uint64(), At: at.In(zones[rng.IntN(len(zones))]), Actor: str(), Action: str(), Object: str(),
			Tenant: str(), Workspace: str(), Message: str()}
		if check(fmt.Sprintf("event %d", i), e) {
			written++
		}
	}
	if written < 1000 {
		t.Fatalf("appendEvent wrote %d of 20,000 random events: it declines too many to be tried", written)
	}
}
