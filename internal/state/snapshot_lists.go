package state

import (
	"bufio"
	"maps"
	"slices"
	"strconv"
	"unsafe"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// A snapshot's long lists are written as json.Marshal makes them, but
// not made anew each time. Encoding them whole was most of Persist with
// 130,000 jobs (issue 18): the events ~150 ms (time.Time's MarshalJSON
// through reflection, per event), the idempotency keys ~80 ms (100,000
// sorted and encoded one by one). Neither is changed in place:
//
//   - events are appended with a Seq one above the last; retention removes
//     some (by age, or past a tenant's count: from anywhere in the list,
//     not only the front). So an event's JSON is kept by its Seq (encList)
//     and only the events appended since the last snapshot are encoded. A
//     Seq names one event only until a Restore (which brings another
//     state's events): the kept JSON is of one epoch of snapshotJobs, and
//     Restore starts the next.
//   - usage records are kept the same way by end time and job, and told
//     apart by their runs (usageMark): they are inserted where their end
//     time falls, and retention cuts the archive's front.
//   - keys are remembered in the order they came (SubmitKeyOrder, cut from
//     the front; from rules 7 a key remembered again leaves its earlier
//     place, anywhere). The sorted keys of the last snapshot (sortedKeys)
//     merge with those remembered since, sorted alone: removals keep the
//     order's order, so those are within its last keysAdded-since places
//     (which may hold older keys too: merged once, as keys of both).
//
// What a Persist keeps is what it encoded, not what reached the sink: it
// keeps it once it has written the whole snapshot to its writer (an
// encoding error keeps nothing; a sink's error leaves the JSON right),
// for the epoch it was taken in, unless a later snapshot's Persist kept
// its own (snapshotLists).

// listChunk is how many elements an encChunk holds: the unit reused whole.
const listChunk = 1024

// snapshotLists is what a Persist keeps for the next: the events' and
// usage records' JSON and the idempotency keys sorted, as of snapshot gen
// of epoch.
type snapshotLists struct {
	epoch, gen uint64
	events     *encList[struct{}]
	usage      *encList[usageMark]
	keys       *sortedKeys
}

// encChunk is the JSON of elements of a list, in order, joined by commas,
// each with its key (strictly increasing) and mark: an element's JSON is
// reused for an element of the same key and mark. Never changed once
// made: snapshots in flight share them.
type encChunk[M comparable] struct {
	keys  []uint64
	marks []M
	ends  []int // element i is buf[ends[i-1]+1 : ends[i]] (from 0 for the first)
	buf   []byte
}

func (c *encChunk[M]) last() uint64 { return c.keys[len(c.keys)-1] }

func (c *encChunk[M]) elem(i int) []byte {
	start := 0
	if i > 0 {
		start = c.ends[i-1] + 1
	}
	return c.buf[start:c.ends[i]]
}

// encList is a list's JSON as one Persist wrote it, by chunks.
type encList[M comparable] struct{ chunks []*encChunk[M] }

// listWriter writes a list's elements to w, whole chunks kept from an
// earlier snapshot or new ones filled an element at a time, and collects
// the chunks for the next snapshot. New chunks are cut from one arena, so
// they take the bytes they hold, not twice that as buffers grown by
// doubling would.
type listWriter[M comparable] struct {
	w      *bufio.Writer
	chunks []*encChunk[M]
	open   *encChunk[M] // its JSON is arena[start:]
	arena  []byte
	start  int
}

// arenaSize is the least an arena holds: 1,024 events are ~200 kB.
const arenaSize = 1 << 20

func (lw *listWriter[M]) put(c *encChunk[M]) {
	if len(lw.chunks) > 0 {
		lw.w.WriteByte(',')
	}
	lw.w.Write(c.buf)
	lw.chunks = append(lw.chunks, c)
}

func (lw *listWriter[M]) add(key uint64, mark M, b []byte) {
	c := lw.open
	if c == nil {
		c = &encChunk[M]{keys: make([]uint64, 0, listChunk), marks: make([]M, 0, listChunk), ends: make([]int, 0, listChunk)}
		lw.open = c
		lw.start = len(lw.arena)
	}
	if len(lw.arena)+1+len(b) > cap(lw.arena) {
		// The open chunk moves to a new arena: chunks already cut keep
		// the old one.
		open := lw.arena[lw.start:]
		lw.arena = append(make([]byte, 0, max(arenaSize, 2*(len(open)+len(b)))), open...)
		lw.start = 0
	}
	if len(c.keys) > 0 {
		lw.arena = append(lw.arena, ',')
	}
	lw.arena = append(lw.arena, b...)
	c.keys = append(c.keys, key)
	c.marks = append(c.marks, mark)
	c.ends = append(c.ends, len(lw.arena)-lw.start)
	if len(c.keys) == listChunk {
		lw.flush()
	}
}

func (lw *listWriter[M]) flush() {
	if lw.open != nil {
		end := len(lw.arena)
		lw.open.buf = lw.arena[lw.start:end:end] // what follows is the next chunk's
		lw.put(lw.open)
		lw.open = nil
	}
}

// writeCachedList writes a list of n elements (nil: null) as json.Marshal
// does, element i's key key(i), its mark mark(i) and its JSON enc(i),
// reusing the JSON in old of the elements whose keys and marks it holds.
// It returns the list's JSON by key for the next snapshot, or nil when
// the keys do not strictly increase (then nothing is reused either: a
// key would not find one element).
func writeCachedList[M comparable](w *bufio.Writer, old *encList[M], isNil bool, n int, key func(i int) uint64, mark func(i int) M, enc func(i int) ([]byte, error)) (*encList[M], error) {
	if isNil {
		_, err := w.WriteString("null")
		return &encList[M]{}, err
	}
	keyed := true
	for i := 1; i < n; i++ {
		if key(i) <= key(i-1) {
			keyed = false
			break
		}
	}
	var kept []*encChunk[M]
	if old != nil && keyed {
		kept = old.chunks
	}
	w.WriteByte('[')
	lw := listWriter[M]{w: w}
	ci, ei := 0, 0 // in kept: the first element whose key may be ahead
	for k := 0; k < n; {
		kk := key(k)
		for ci < len(kept) && kept[ci].last() < kk {
			ci, ei = ci+1, 0
		}
		if ci < len(kept) {
			c := kept[ci]
			at, found := slices.BinarySearch(c.keys[ei:], kk)
			ei += at
			// A chunk whose first and last keys are those of as many
			// elements here is those elements: what retention removed was
			// removed from both, and what was appended since has greater
			// keys. Small ones are copied, to merge them.
			if m := len(c.keys); found && ei == 0 && m >= listChunk/4 && k+m <= n && key(k+m-1) == c.last() && sameMarks(c, k, mark) {
				lw.flush()
				lw.put(c)
				k += m
				ci, ei = ci+1, 0
				continue
			}
			if mk := mark(k); found && c.marks[ei] == mk {
				lw.add(kk, mk, c.elem(ei))
				k, ei = k+1, ei+1
				continue
			}
		}
		b, err := enc(k)
		if err != nil {
			return nil, err
		}
		lw.add(kk, mark(k), b)
		k++
	}
	lw.flush()
	if err := w.WriteByte(']'); err != nil {
		return nil, err
	}
	if !keyed {
		return nil, nil
	}
	return &encList[M]{chunks: lw.chunks}, nil
}

// sameMarks says whether the elements from k on have c's marks.
func sameMarks[M comparable](c *encChunk[M], k int, mark func(i int) M) bool {
	for i, m := range c.marks {
		if mark(k+i) != m {
			return false
		}
	}
	return true
}

// usageMark tells usage records apart where their key (end time, job)
// may not: the runs they hold. A record's runs are an array of its own,
// made with it (usageRecord) and never changed, and the mark holds it, so
// no other record's can be made at its address while the JSON is kept.
type usageMark struct {
	job  uint64
	runs *domain.Run
	n    int
}

// usageKey orders records as the archive is (byRecordEnd): end time to
// the second (as usageRecord makes them), then job. A key shared or out
// of order only costs the reuse (the keys must increase).
func usageKey(u *domain.UsageRecord) uint64 {
	return uint64(u.EndedAt.Unix())<<32 | u.Job&(1<<32-1)
}

func usageMarkOf(u *domain.UsageRecord) usageMark {
	return usageMark{job: u.Job, runs: unsafe.SliceData(u.Runs), n: len(u.Runs)}
}

// sortedKeys is the idempotency keys of one snapshot, sorted, and how many
// keys had been remembered (keysAdded) then.
type sortedKeys struct {
	at   uint64
	keys []string
	ids  []uint64 // ids[i] = m[keys[i]], looked up once
}

// sortKeys is m's keys sorted by their bytes, merging those of old with
// the keys remembered since (the tail of order, whose end is the added-th
// key remembered) when order reaches back to old: every key in m is in
// old or was remembered since.
func sortKeys(old *sortedKeys, m map[string]uint64, order []string, added uint64) *sortedKeys {
	if old == nil || old.at > added || added-old.at > uint64(len(order)) {
		return allKeys(m, added)
	}
	tail := slices.Clone(order[len(order)-int(added-old.at):])
	slices.Sort(tail)
	keys, ids := make([]string, 0, len(m)), make([]uint64, 0, len(m))
	add := func(k string) {
		if id, ok := m[k]; ok && (len(keys) == 0 || keys[len(keys)-1] != k) {
			keys, ids = append(keys, k), append(ids, id)
		}
	}
	a, b := old.keys, tail
	for len(a) > 0 && len(b) > 0 {
		if a[0] <= b[0] {
			add(a[0])
			a = a[1:]
		} else {
			add(b[0])
			b = b[1:]
		}
	}
	for _, k := range a {
		add(k)
	}
	for _, k := range b {
		add(k)
	}
	if len(keys) != len(m) {
		// A key in m neither kept nor remembered since: not as
		// rememberSubmitKey keeps them. The whole sort is right anyway.
		return allKeys(m, added)
	}
	return &sortedKeys{at: added, keys: keys, ids: ids}
}

// allKeys is m's keys sorted, every one.
func allKeys(m map[string]uint64, added uint64) *sortedKeys {
	keys := slices.Sorted(maps.Keys(m))
	ids := make([]uint64, len(keys))
	for i, k := range keys {
		ids[i] = m[k]
	}
	return &sortedKeys{at: added, keys: keys, ids: ids}
}

// writeKeys writes m as json.Marshal does (keys sorted by their bytes,
// null for nil): sorted is its keys and their values, in order.
func writeKeys(w *bufio.Writer, m map[string]uint64, sorted *sortedKeys) error {
	if m == nil {
		_, err := w.WriteString("null")
		return err
	}
	w.WriteByte('{')
	for i, k := range sorted.keys {
		if i > 0 {
			w.WriteByte(',')
		}
		b := appendJSONString(w.AvailableBuffer(), k)
		b = append(b, ':')
		w.Write(strconv.AppendUint(b, sorted.ids[i], 10))
	}
	return w.WriteByte('}')
}

// writeStrings writes xs as json.Marshal does (null for nil).
func writeStrings(w *bufio.Writer, xs []string) error {
	if xs == nil {
		_, err := w.WriteString("null")
		return err
	}
	w.WriteByte('[')
	for i := range xs {
		if i > 0 {
			w.WriteByte(',')
		}
		w.Write(appendJSONString(w.AvailableBuffer(), xs[i]))
	}
	return w.WriteByte(']')
}

// appendEvent appends e's JSON as json.Marshal makes it, without
// reflection (time.Time's MarshalJSON through it was most of encoding an
// event); ok is false, and b to be dropped, when the time is one RFC 3339
// cannot hold: encoding/json fails on it, and says why.
// TestAppendEventAsMarshal fills every field.
func appendEvent(b []byte, e *domain.Event) (_ []byte, ok bool) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"at":`...)
	b, ok = appendJSONTime(b, e.At, true)
	str := func(name, v string) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		b = appendJSONString(b, v)
	}
	str("actor", e.Actor)
	str("action", e.Action)
	str("object", e.Object)
	if e.Tenant != "" {
		str("tenant", e.Tenant)
	}
	if e.Workspace != "" {
		str("workspace", e.Workspace)
	}
	if e.Message != "" {
		str("message", e.Message)
	}
	return append(b, '}'), ok
}

// strictRFC3339 says whether t, a time as AppendFormat writes it in RFC
// 3339, is one time.Time's MarshalJSON writes, not refuses: a year of
// four digits, a zone's hours under 24.
func strictRFC3339(t []byte) bool {
	if len(t) < len("2006-01-02T15:04:05Z") || t[4] != '-' {
		return false
	}
	if t[len(t)-1] == 'Z' {
		return true
	}
	c := t[len(t)-len("Z07:00")]
	h := t[len(t)-len("07:00"):]
	return (c == '+' || c == '-') && 10*(h[0]-'0')+(h[1]-'0') < 24
}
