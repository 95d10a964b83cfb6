package state

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A raft snapshot of the state is the JSON of data: Restore decodes it
// whole, and snapshots written before this file existed load the same.
//
// Raft calls FSM.Snapshot from the goroutine that applies the log, so no
// entry is applied (no submit answered) until it returns; Persist runs
// alongside later applies. Encoding the whole state in Snapshot held
// applies for half a second with 100,000 jobs (52 MB of JSON), every
// snapshot. So Snapshot copies only the jobs changed since the previous
// snapshot (the change log, jobversion.go) and encodes the rest of the
// state, which is small; Persist encodes the copied jobs and writes every
// job's JSON, kept from earlier snapshots for the jobs that did not
// change.

// Copying the changed jobs in Snapshot still held the apply goroutine
// for every job changed since the last snapshot: at 1,000 submits a
// second, 30,000 to 60,000 jobs every 30 to 60 s, 150 to 400 ms each time
// with 100,000 jobs in the state, and the idempotency keys (100,000 of
// them) were encoded there too, sorted. So apply copies the jobs it
// changes as it goes (follow, after every command), and Snapshot only
// clones the map of copies and the keys: about a millisecond.

// Persist, too, costs what changed: the events' JSON and the idempotency
// keys sorted are kept from one Persist to the next (snapshot_lists.go),
// and only the events appended and keys remembered since are encoded and
// sorted. What it keeps is of one epoch (restart: a Restore begins the
// next), and only a Persist that wrote the whole snapshot keeps anything.

// snapshotJobs is every job as of the last command applied (or, lazy, as
// of the last snapshot): a copy not yet encoded, or its JSON. Guarded by
// mu: Snapshot and Persist run on different goroutines, and tests call
// Snapshot directly. Lock order: the FSM's lock, then mu.
type snapshotJobs struct {
	mu   sync.Mutex
	at   changeCursor // byID holds every job as of it
	byID map[uint64]*snapJob
	// lazy: copy the jobs changed when a snapshot is taken, not as
	// apply changes them (WithLazySnapshots: a state never snapshotted).
	lazy bool
	// copied counts the jobs copied, by the snapshot (inSnapshot) and
	// in all: what a test checks the apply goroutine was spared.
	copied, inSnapshot uint64
	// epoch counts restores (reset): an event's Seq names one event only
	// within one. gen counts snapshots taken.
	epoch, gen uint64
	// lists is what the newest Persist of this epoch kept of the long
	// lists (snapshot_lists.go), or nil.
	lists *snapshotLists
	// keysAdded counts the idempotency keys remembered (appended to
	// data.SubmitKeyOrder) since the last reset, a reset's own included.
	// Under the FSM's lock, not mu: apply changes it, Snapshot reads it.
	keysAdded uint64
}

// restart forgets what was kept of the state before a reset (a restore)
// and starts the next epoch. Under the FSM's write lock.
func (s *snapshotJobs) restart(d *data) {
	s.mu.Lock()
	s.epoch++
	s.lists = nil
	s.keysAdded = uint64(len(d.SubmitKeyOrder))
	s.mu.Unlock()
}

// kept is what the newest Persist of epoch kept, or nil.
func (s *snapshotJobs) kept(epoch uint64) *snapshotLists {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lists == nil || s.lists.epoch != epoch {
		return nil
	}
	return s.lists
}

// keepLists keeps l for the next Persist unless a restore came between,
// or a Persist of a later snapshot kept its own.
func (s *snapshotJobs) keepLists(l *snapshotLists) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.epoch == s.epoch && (s.lists == nil || s.lists.gen < l.gen) {
		s.lists = l
	}
}

// WithLazySnapshots makes the FSM copy the jobs a raft snapshot needs when
// it is taken, as it did before apply kept them up to date: for a state
// that is never snapshotted (the simulator), where copying every change
// costs apply for nothing. A snapshot then holds the apply goroutine for
// every job changed since the last one.
func WithLazySnapshots() Option {
	return func(f *FSM) { f.snapJobs.lazy = true }
}

// follow brings the copies up to the state: apply calls it after every
// command (refile), under the write lock.
func (s *snapshotJobs) follow(f *FSM) {
	if s.lazy {
		return
	}
	s.mu.Lock()
	s.update(f)
	s.mu.Unlock()
}

// CopyOf is a copy of job j, for a reader holding the read lock that
// never changes it: the copy apply made of j for the next raft snapshot,
// shared (Persist only encodes it), or a new one (CopyJob) when that is
// no longer kept (encoded since) or the FSM is lazy. The scheduling loop
// copies the jobs changed since its last cycle under the read lock, 500 to
// 2,000 of them a cycle at 1,000 submits/s: with these it copies none.
func (f *FSM) CopyOf(j *domain.Job) *domain.Job {
	s := &f.snapJobs
	if !s.lazy {
		s.mu.Lock()
		e := s.byID[j.ID]
		s.mu.Unlock()
		if e != nil && e.job != nil {
			return e.job
		}
	}
	return CopyJob(j)
}

// update copies the jobs changed since the cursor, or every job when the
// change log no longer reaches back (the first time, or after a restore).
// Under the FSM's lock (read or write) and mu.
func (s *snapshotJobs) update(f *FSM) int {
	changed, ok := s.at.next(&f.jobs.vers)
	if !ok {
		s.byID = make(map[uint64]*snapJob, len(f.d.Jobs))
		for id, j := range f.d.Jobs {
			s.byID[id] = &snapJob{job: CopyJob(j)}
		}
		s.copied += uint64(len(f.d.Jobs))
		return len(f.d.Jobs)
	}
	// One copy of each job's latest: a command changes a job more than
	// once now and then, and a lazy snapshot sees many commands.
	var done map[uint64]bool
	if len(changed) > 8 {
		done = make(map[uint64]bool, len(changed))
	}
	n := 0
	for i, id := range changed {
		if done != nil {
			if done[id] {
				continue
			}
			done[id] = true
		} else if slices.Contains(changed[i+1:], id) {
			continue // the later one copies it
		}
		if j, ok := f.d.Jobs[id]; ok {
			s.byID[id] = &snapJob{job: CopyJob(j)}
			n++
		} else {
			delete(s.byID, id) // removed by retention
		}
	}
	s.copied += uint64(n)
	return n
}

// snapJob is one job of a snapshot. Never changed once made (a newer
// copy, or the JSON of this one, replaces it in byID), so snapshots in
// flight share them.
type snapJob struct {
	job *domain.Job // a copy (CopyJob) until encoded
	enc []byte      // its JSON once encoded
}

// snapshotHead is data without its large parts: each outer field shadows
// the embedded one of its JSON name, and nil is omitted. Persist writes
// those parts after it, from what Snapshot captured: the jobs' copies, and
// the topology, events and usage archive as they were, which apply never
// changes in place (a topology is replaced whole; events and usage records
// are appended, or the slice replaced by retention), so holding the slice
// or pointer is holding them as of the snapshot.
type snapshotHead struct {
	*data
	Topology *struct{} `json:"topology,omitempty"`
	Jobs     *struct{} `json:"jobs,omitempty"`
	Events   *struct{} `json:"events,omitempty"`
	Usage    *struct{} `json:"usageArchive,omitempty"`
	Keys     *struct{} `json:"submitKeys,omitempty"`
	KeyOrder *struct{} `json:"submitKeyOrder,omitempty"`
}

func (s *snapshotJobs) snapshot(f *FSM) (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inSnapshot += uint64(s.update(f)) // none unless lazy: apply copied them
	head, err := json.Marshal(snapshotHead{data: &f.d})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	// The keys' order is only appended to, cut from the front or replaced
	// by a copy (keyOnce), so the slice holds it as of now; the map is
	// cloned, not encoded (sorting 100,000 keys is Persist's to do).
	s.gen++
	return &snapshot{head: head, topology: f.d.Topology, events: f.d.Events, usage: f.d.Usage,
		submitKeys: maps.Clone(f.d.SubmitKeys), submitKeyOrder: f.d.SubmitKeyOrder, keysAdded: s.keysAdded,
		jobs: maps.Clone(s.byID), owner: s, epoch: s.epoch, gen: s.gen}, nil
}

// snapshot is one raft snapshot: the state's JSON but for its jobs, and
// the jobs as of then.
type snapshot struct {
	head           []byte // snapshotHead, a JSON object
	topology       *domain.Topology
	events         []domain.Event
	usage          []domain.UsageRecord
	submitKeys     map[string]uint64
	submitKeyOrder []string
	keysAdded      uint64 // snapshotJobs.keysAdded then
	jobs           map[uint64]*snapJob
	owner          *snapshotJobs
	epoch, gen     uint64 // the owner's then
}

// Persist writes the snapshot as the JSON of data (jobs by ID), encoding
// the jobs copied since the last snapshot and keeping their JSON for the
// next one.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	err := s.write(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write snapshot: %w", err), sink.Cancel())
	}
	return sink.Close()
}

func (s *snapshot) write(w *bufio.Writer) error {
	jobs := jobsByID(s.jobs)
	w.Write(s.head[:len(s.head)-1]) // without its closing brace
	if len(s.head) > 2 {
		w.WriteByte(',')
	}
	// As data's fields encode: topology and usageArchive are omitted
	// when empty, events never. The long lists go an element at a time.
	var enc elemEncoder
	field := func(name string, write func() error) error {
		w.WriteString(`"` + name + `":`)
		if err := write(); err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		w.WriteByte(',')
		return nil
	}
	if s.topology != nil {
		if err := field("topology", func() error { return enc.write(w, s.topology) }); err != nil {
			return err
		}
	}
	var prev snapshotLists
	if p := s.owner.kept(s.epoch); p != nil {
		prev = *p
	}
	kept := &snapshotLists{epoch: s.epoch, gen: s.gen}
	var buf []byte // an event's JSON, until the next
	if err := field("events", func() (err error) {
		kept.events, err = writeCachedList(w, prev.events, s.events == nil, len(s.events),
			func(i int) uint64 { return s.events[i].Seq },
			func(int) struct{} { return struct{}{} }, // a Seq is one event
			func(i int) ([]byte, error) {
				if b, ok := appendEvent(buf[:0], &s.events[i]); ok {
					buf = b
					return b, nil
				}
				return enc.encode(&s.events[i])
			})
		return err
	}); err != nil {
		return err
	}
	if len(s.usage) > 0 {
		if err := field("usageArchive", func() (err error) {
			kept.usage, err = writeCachedList(w, prev.usage, false, len(s.usage),
				func(i int) uint64 { return usageKey(&s.usage[i]) },
				func(i int) usageMark { return usageMarkOf(&s.usage[i]) },
				func(i int) ([]byte, error) { return enc.encode(&s.usage[i]) })
			return err
		}); err != nil {
			return err
		}
	}
	if s.submitKeys != nil {
		kept.keys = sortKeys(prev.keys, s.submitKeys, s.submitKeyOrder, s.keysAdded)
	}
	if err := field("submitKeys", func() error { return writeKeys(w, s.submitKeys, kept.keys) }); err != nil {
		return err
	}
	if err := field("submitKeyOrder", func() error { return writeStrings(w, s.submitKeyOrder) }); err != nil {
		return err
	}
	w.WriteString(`"jobs":{`)
	var num, jb []byte // jb: a job's JSON, until the next
	for i := range jobs {
		id, e := jobs[i].id, jobs[i].was
		if e.enc == nil {
			var ok bool
			var b []byte
			if jb, ok = appendJobJSON(jb[:0], e.job); ok {
				b = slices.Clone(jb) // kept past this snapshot: of its own size
			} else {
				// A value json.Marshal refuses, and it says which (what
				// appendJobJSON refuses, TestJobJSONAsMarshal).
				var err error
				if b, err = json.Marshal(e.job); err != nil {
					return fmt.Errorf("encode job %d: %w", id, err)
				}
			}
			e = &snapJob{enc: b}
			// Marked in place: a list of the jobs encoded, grown as
			// they came, was 3.7 MB of garbage a Persist of 30,000.
			jobs[i].now = e
		}
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('"')
		num = strconv.AppendUint(num[:0], id, 10)
		w.Write(num)
		w.WriteString(`":`)
		if _, err := w.Write(e.enc); err != nil {
			return err
		}
	}
	w.WriteString("}}")
	s.keep(jobs)
	s.owner.keepLists(kept)
	return nil
}

// elemEncoder writes the JSON of one value as json.Marshal makes it,
// through a buffer it reuses. json.Marshal of a whole list (the events,
// 100,000 and more) grew one buffer by doubling and copied it out: about
// 70 MB of garbage a snapshot, on every member, every 30 to 60 s at
// 1,000 submits a second (issue 18), that brought a collection with it.
type elemEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// write writes v's JSON to w: v a pointer where the value's methods
// would see an addressable one (an element of a slice).
func (e *elemEncoder) write(w *bufio.Writer, v any) error {
	b, err := e.encode(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// encode is v's JSON, valid until the next call.
func (e *elemEncoder) encode(v any) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf) // escapes HTML, as json.Marshal
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	return b[:len(b)-1], nil // Encode ends a value with a newline
}

// snapEntry is a job of a snapshot by ID: as Snapshot took it (was) and,
// once encoded by Persist, its JSON (now).
type snapEntry struct {
	id       uint64
	was, now *snapJob
}

// jobsByID is the jobs with their IDs, by ID. Sorting the IDs and looking
// each up again was a map access out of cache per job (130,000); and job
// IDs are handed out in order, so those of a state's jobs mostly fill
// their range: each is put in its place there, not sorted.
func jobsByID(jobs map[uint64]*snapJob) []snapEntry {
	if len(jobs) == 0 {
		return nil
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for id := range jobs {
		lo, hi = min(lo, id), max(hi, id)
	}
	out := make([]snapEntry, 0, len(jobs))
	if hi-lo >= 2*uint64(len(jobs)) {
		// Few jobs over a wide range (old jobs kept long): sorted.
		for id, e := range jobs {
			out = append(out, snapEntry{id: id, was: e})
		}
		slices.SortFunc(out, func(a, b snapEntry) int { return cmp.Compare(a.id, b.id) })
		return out
	}
	slots := make([]*snapJob, hi-lo+1)
	for id, e := range jobs {
		slots[id-lo] = e
	}
	for i, e := range slots {
		if e != nil {
			out = append(out, snapEntry{id: lo + uint64(i), was: e})
		}
	}
	return out
}

// keep hands the JSON of the jobs this Persist encoded (those of jobs
// with now set) to the owner, for the jobs not changed since (the owner
// still holds the copy encoded).
func (s *snapshot) keep(jobs []snapEntry) {
	if s.owner == nil {
		return
	}
	// A thousand at a time: apply takes mu after every command (follow),
	// under the state's write lock, and 60,000 at once held it for
	// milliseconds.
	n := 0
	s.owner.mu.Lock()
	for _, e := range jobs {
		if e.now == nil {
			continue
		}
		if cur, ok := s.owner.byID[e.id]; ok && cur == e.was {
			s.owner.byID[e.id] = e.now
		}
		if n++; n%1000 == 0 {
			s.owner.mu.Unlock()
			s.owner.mu.Lock()
		}
	}
	s.owner.mu.Unlock()
}

func (s *snapshot) Release() {}
