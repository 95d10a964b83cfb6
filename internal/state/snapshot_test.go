package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// snapshotBytes is what Persist would write for s.
func snapshotBytes(t testing.TB, s raft.FSMSnapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := s.(*snapshot).write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// normalJSON decodes a state's JSON and encodes it again: the same state
// gives the same bytes whatever order the jobs were written in.
func normalJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	d := newData()
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSnapshotKeepsUnchangedJobs: snapshots taken now and then while jobs
// are submitted, placed, reported, cancelled and removed by retention,
// some persisted and some dropped (raft may release a snapshot it never
// persists), and one after a restore, each decode to exactly the state
// they were taken of, as encoding the whole state then gives. A snapshot
// that kept a job's old JSON, or missed a new or removed job, fails.
func TestSnapshotKeepsUnchangedJobs(t *testing.T) {
	h := retainHarness(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []uint64
	check := func(step int, persist bool) {
		t.Helper()
		want, err := json.Marshal(&h.f.d)
		if err != nil {
			t.Fatal(err)
		}
		s, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if !persist {
			s.Release()
			return
		}
		got := snapshotBytes(t, s)
		if !bytes.Equal(normalJSON(t, got), normalJSON(t, want)) {
			t.Fatalf("step %d: the snapshot decodes to another state than the one it was taken of", step)
		}
		// The same bytes but for the jobs' order (by ID, not by the ID's
		// string): a field written twice would decode alike but not
		// weigh alike.
		if len(got) != len(want) {
			t.Fatalf("step %d: the snapshot is %d bytes, the state's encoding %d", step, len(got), len(want))
		}
	}
	for step := range 400 {
		h.at = h.at.Add(time.Minute)
		switch r := rng.IntN(10); {
		case r < 3:
			ref := "acme/research"
			if rng.IntN(2) == 0 {
				ref = "beta/lab"
			}
			h.endJob(ref, rng.IntN(2) == 0, time.Duration(1+rng.IntN(60))*time.Minute)
		case r < 6:
			live = append(live, h.must(CmdJobSubmit, MakeJob("research", 1+rng.IntN(8)).Obj()).(*domain.Job).ID)
		case r < 8 && len(live) > 0:
			i := rng.IntN(len(live))
			h.apply(CmdJobCancel, JobCancel{ID: live[i]})
			live = append(live[:i], live[i+1:]...)
		case r < 9:
			h.must(CmdRetain, Retain{JobsPerTenant: 1 + rng.IntN(5)})
		default:
			if rng.IntN(4) == 0 {
				// A restore renumbers every job: the next snapshot copies all.
				b := snapshotBytes(t, must(h.f.Snapshot()))
				if err := h.f.Restore(nopCloser{bytes.NewReader(b)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rng.IntN(3) == 0 {
			check(step, rng.IntN(4) != 0)
		}
	}
	check(-1, true)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestChangeLog: the log names every job changed after a generation, in
// order, while it reaches back that far; once it has dropped its older
// half, or after a restart, a reader behind it is told to read everything.
func TestChangeLog(t *testing.T) {
	var v jobVersions
	v.touch(7)
	v.touch(9)
	g := v.gen
	v.touch(7)
	v.forget(9)
	if got, ok := v.since(g); !ok || len(got) != 2 || got[0] != 7 || got[1] != 9 {
		t.Fatalf("since(%d) = %v, %t; want [7 9], true", g, got, ok)
	}
	if got, ok := v.since(v.gen); !ok || len(got) != 0 {
		t.Fatalf("since(now) = %v, %t; want [], true", got, ok)
	}
	if _, ok := v.since(v.gen + 1); ok {
		t.Fatal("since a generation not handed out yet: want false")
	}
	// Fill the log past its bound: the oldest half goes.
	for i := range changeLogMax {
		v.touch(uint64(100 + i))
	}
	if _, ok := v.since(g); ok {
		t.Fatalf("since(%d) after %d more changes: want false (dropped)", g, changeLogMax)
	}
	recent := v.gen - changeLogMax/4
	if got, ok := v.since(recent); !ok || len(got) != changeLogMax/4 || got[len(got)-1] != uint64(100+changeLogMax-1) {
		t.Fatalf("since(recent): %d ids, %t; want %d, true", len(got), ok, changeLogMax/4)
	}
	r := v.restart()
	if _, ok := r.since(recent); ok {
		t.Fatal("since a generation before a restart: want false")
	}
	r.touch(5)
	if got, ok := r.since(r.base); !ok || len(got) != 1 || got[0] != 5 {
		t.Fatalf("since(base) after a restart = %v, %t; want [5], true", got, ok)
	}
}

// BenchmarkRaftSnapshot: what a raft snapshot of a state holding 100,000
// live jobs costs the goroutine that applies the log (FSM.Snapshot: no
// entry is applied until it returns), with 1,000 jobs submitted since the
// previous snapshot: encoding the whole state there (before snapshot.go)
// against copying the changed jobs and leaving the encoding to Persist.
// persist is the rest, which runs alongside applies.
func BenchmarkRaftSnapshot(b *testing.B) {
	h, _ := liveState(b, 100_000)
	submit := func() {
		b.StopTimer()
		for range 1000 {
			h.at = h.at.Add(time.Millisecond)
			e, err := Encode(CmdJobSubmit, h.at, "admin:bench", MakeJob("research", 1).Obj())
			if err != nil {
				b.Fatal(err)
			}
			if r := h.f.ApplyCommand(e); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.StartTimer()
	}
	b.Run("live=100000/whole", func(b *testing.B) {
		for range b.N {
			submit()
			h.f.mu.RLock()
			_, err := json.Marshal(&h.f.d)
			h.f.mu.RUnlock()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	must(h.f.Snapshot()) // the first copies every job
	b.Run("live=100000/incremental", func(b *testing.B) {
		for range b.N {
			submit()
			if _, err := h.f.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("live=100000/persist", func(b *testing.B) {
		for range b.N {
			submit()
			b.StopTimer()
			s := must(h.f.Snapshot())
			b.StartTimer()
			if err := s.(*snapshot).write(bufio.NewWriter(io.Discard)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSnapshotCopiesAsApplyChanges: apply copies the jobs it changes for
// the next raft snapshot, so Snapshot, which raft calls on the goroutine
// that applies the log, copies none (lazy, as before: every job changed
// since the last one), and what it returns is still the state as of then
// when Persist runs after later submits, reasons, cancels and evicted
// idempotency keys, as raft persists alongside later applies.
func TestSnapshotCopiesAsApplyChanges(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(map[bool]string{false: "eager", true: "lazy"}[lazy], func(t *testing.T) {
			h := newHarness(t)
			if lazy {
				h.f = New(WithLazySnapshots())
			}
			h.cluster(2, 2, 16)
			key := 0
			var ids []uint64
			// Applied directly: the harness takes snapshots around every command.
			apply := func(ct CommandType, payload any) {
				h.at = h.at.Add(time.Second)
				if r := h.f.ApplyCommand(must(Encode(ct, h.at, "admin:test", payload))); r.Err != nil {
					t.Fatalf("%s: %v", ct, r.Err)
				}
			}
			submit := func(n int) {
				reasons := map[uint64]domain.Reason{}
				for range n {
					key++
					apply(CmdJobSubmit, JobSubmit{Spec: MakeJob("research", 1+key%8).Obj().Spec, IdempotencyKey: fmt.Sprintf("k%d", key)})
					id := h.f.d.NextJobID - 1
					ids = append(ids, id)
					reasons[id] = domain.Reason{Code: "capacity", Message: fmt.Sprintf("waiting, pass %d", key)}
				}
				apply(CmdPlanApply, PlanApply{Reasons: reasons})
			}
			submit(40)
			must(h.f.Snapshot())
			submit(50)
			apply(CmdJobCancel, JobCancel{ID: ids[3]})
			want := must(json.Marshal(&h.f.d))
			before := h.f.snapJobs.inSnapshot
			s := must(h.f.Snapshot())
			copied := h.f.snapJobs.inSnapshot - before
			switch {
			case !lazy && copied != 0:
				t.Errorf("Snapshot copied %d jobs; apply should have copied them as it changed them", copied)
			case lazy && copied != 51:
				t.Errorf("a lazy Snapshot copied %d jobs, want the 51 changed since the last", copied)
			}
			// Later applies, some evicting keys, before Persist runs.
			submit(30)
			apply(CmdJobCancel, JobCancel{ID: ids[60]})
			for i := range maxSubmitKeys - key + 5 {
				h.f.rememberSubmitKey(fmt.Sprintf("filler-%d", i), 1, RulesLatest)
			}
			if got := snapshotBytes(t, s); !bytes.Equal(normalJSON(t, got), normalJSON(t, want)) || len(got) != len(want) {
				t.Fatalf("the snapshot persisted after later applies is not the state it was taken of (%d bytes, want %d)", len(got), len(want))
			}
			now := must(json.Marshal(&h.f.d))
			if got := snapshotBytes(t, must(h.f.Snapshot())); !bytes.Equal(normalJSON(t, got), normalJSON(t, now)) {
				t.Fatal("the next snapshot is not the state")
			}
		})
	}
}

// TestCopyOfSharesApplysCopy: CopyOf hands the scheduling loop the copy
// apply made for the raft snapshot (a lazy FSM makes a new one), equal to
// the job and not the job itself; the snapshotter folds a tenant's driver
// floor into a copy of its own, never into that shared one, which the
// next raft snapshot writes.
func TestCopyOfSharesApplysCopy(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		h := newHarness(t)
		if lazy {
			h.f = New(WithLazySnapshots())
		}
		h.cluster(1, 2, 8)
		pol := domain.DefaultHostPolicy()
		pol.TenantMinDriver = map[string]string{"acme": "550.54.15"}
		h.must(CmdHostPolicy, HostPolicySet{Policy: pol})
		// Applied directly: the harness persists snapshots around every command.
		if r := h.f.ApplyCommand(must(Encode(CmdJobSubmit, h.at, "admin:test", MakeJob("research", 2).Obj()))); r.Err != nil {
			t.Fatal(r.Err)
		}
		id := h.f.d.NextJobID - 1
		j := h.f.d.Jobs[id]
		cp := h.f.CopyOf(j)
		if cp == j || !reflect.DeepEqual(cp, j) {
			t.Fatalf("lazy %v: CopyOf is the job itself or differs from it", lazy)
		}
		if shared := h.f.snapJobs.byID[id]; !lazy && (shared == nil || cp != shared.job) {
			t.Fatal("CopyOf made a copy of its own; apply had made one for the raft snapshot")
		}
		snaps := sched.Snapshotter{Clone: h.f.CopyOf}
		var s *sched.Snapshot
		h.f.Read(func(v View) { s = snaps.Of(v, h.at) })
		if len(s.Jobs) != 1 || s.Jobs[0].MinDriver != "550.54.15" {
			t.Fatalf("lazy %v: the tenant's floor is not folded into the scheduler's copy", lazy)
		}
		if cp.MinDriver != "" || j.MinDriver != "" {
			t.Fatalf("lazy %v: the fold changed the shared copy (%q) or the job (%q)", lazy, cp.MinDriver, j.MinDriver)
		}
	}
}

// TestSnapshotListsAsMarshal: the snapshot's long lists, written an
// element at a time (writeCachedList, writeKeys), are the bytes json.Marshal
// makes of them whole (what Persist wrote before, and what Restore reads):
// HTML characters escaped, strings not UTF-8, nil and empty lists and
// maps, keys sorted by their bytes.
func TestSnapshotListsAsMarshal(t *testing.T) {
	at := time.Date(2026, 11, 28, 0, 0, 0, 123, time.FixedZone("x", 3600))
	events := []domain.Event{
		{Seq: 1, At: at, Actor: "admin:<t>", Action: "job.submit", Object: "job/1", Tenant: "a&b", Message: "caf\\u00e9 \"q\" \u2028 \xff"},
		{Seq: 2},
	}
	usage := []domain.UsageRecord{{Job: 7, Tenant: "t", Workspace: "w", EndedAt: at, Runs: []domain.Run{{Start: at, GPUs: 8}}}, {}}
	keys := map[string]uint64{"b": 2, "a<": 1, "é": 3, "A": 4, "\xfe": 5, "": 6}
	order := []string{"b", "a<", "é", "\xfe", ""}
	enc := func(write func(w *bufio.Writer) error) string {
		t.Helper()
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := write(w); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		return buf.String()
	}
	marshal := func(v any) string {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var e elemEncoder
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"events", enc(func(w *bufio.Writer) error { return writeEvents(w, &e, events) }), marshal(events)},
		{"no events", enc(func(w *bufio.Writer) error { return writeEvents(w, &e, []domain.Event(nil)) }), marshal([]domain.Event(nil))},
		{"empty events", enc(func(w *bufio.Writer) error { return writeEvents(w, &e, []domain.Event{}) }), marshal([]domain.Event{})},
		{"usage", enc(func(w *bufio.Writer) error { return writeUsage(w, &e, usage) }), marshal(usage)},
		{"empty usage", enc(func(w *bufio.Writer) error { return writeUsage(w, &e, []domain.UsageRecord{}) }), marshal([]domain.UsageRecord{})},
		{"key order", enc(func(w *bufio.Writer) error { return writeStrings(w, order) }), marshal(order)},
		{"no key order", enc(func(w *bufio.Writer) error { return writeStrings(w, nil) }), marshal([]string(nil))},
		{"keys", enc(func(w *bufio.Writer) error { return writeKeys(w, keys, sortKeys(nil, keys, nil, 0)) }), marshal(keys)},
		{"no keys", enc(func(w *bufio.Writer) error { return writeKeys(w, nil, nil) }), marshal(map[string]uint64(nil))},
		{"empty keys", enc(func(w *bufio.Writer) error {
			return writeKeys(w, map[string]uint64{}, sortKeys(nil, map[string]uint64{}, nil, 0))
		}), marshal(map[string]uint64{})},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
}

// writeEvents and writeUsage write a list as a snapshot does, from what
// writing it once before kept.
func writeEvents(w *bufio.Writer, e *elemEncoder, evs []domain.Event) error {
	write := func(w *bufio.Writer, old *encList[struct{}]) (*encList[struct{}], error) {
		return writeCachedList(w, old, evs == nil, len(evs), func(i int) uint64 { return evs[i].Seq },
			func(int) struct{} { return struct{}{} }, func(i int) ([]byte, error) { return e.encode(&evs[i]) })
	}
	kept, err := write(bufio.NewWriter(io.Discard), nil)
	if err != nil {
		return err
	}
	_, err = write(w, kept)
	return err
}

func writeUsage(w *bufio.Writer, e *elemEncoder, us []domain.UsageRecord) error {
	write := func(w *bufio.Writer, old *encList[usageMark]) (*encList[usageMark], error) {
		return writeCachedList(w, old, us == nil, len(us), func(i int) uint64 { return usageKey(&us[i]) },
			func(i int) usageMark { return usageMarkOf(&us[i]) }, func(i int) ([]byte, error) { return e.encode(&us[i]) })
	}
	kept, err := write(bufio.NewWriter(io.Discard), nil)
	if err != nil {
		return err
	}
	_, err = write(w, kept)
	return err
}
