package sched

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Reasons are a plan's pending jobs' reasons by job ID. A list sorted by
// ID, not a map: at 100,000 GPUs a cycle leaves 67,000 jobs pending, and
// their map was 7 MB of allocation and about 4 ms of writes every cycle
// (issue 18); the list is half that and is made by one pass over the
// queue. Its JSON is the map's (an object keyed by the IDs in decimal, in
// the order of those strings), so plans, their digests and their readers
// see the same bytes.
type Reasons struct {
	list []JobReason // by ID, each ID once; nil marshals as null, as a nil map did
}

// JobReason is one pending job's reason.
type JobReason struct {
	ID     uint64
	Reason domain.Reason
}

// ReasonsOf makes Reasons from a map (tests, callers building a plan).
func ReasonsOf(m map[uint64]domain.Reason) Reasons {
	if m == nil {
		return Reasons{}
	}
	list := make([]JobReason, 0, len(m))
	for id, r := range m {
		list = append(list, JobReason{ID: id, Reason: r})
	}
	slices.SortFunc(list, func(a, b JobReason) int { return cmp.Compare(a.ID, b.ID) })
	return Reasons{list: list}
}

// Get is job id's reason; false when the plan has none for it (placed, or
// not pending).
func (rs Reasons) Get(id uint64) (domain.Reason, bool) {
	k, ok := slices.BinarySearchFunc(rs.list, id, func(e JobReason, id uint64) int { return cmp.Compare(e.ID, id) })
	if !ok {
		return domain.Reason{}, false
	}
	return rs.list[k].Reason, true
}

// Changed is the reasons that differ from those jobs hold now: what a
// plan.apply commits. A snapshot's jobs come by ID, and then the list is
// walked once beside them; from the first job out of that order on,
// each is searched for (the walk's place means nothing any more).
func (rs Reasons) Changed(jobs []*domain.Job) map[uint64]domain.Reason {
	out := map[uint64]domain.Reason{}
	k, walk := 0, true
	for i, j := range jobs {
		var r domain.Reason
		var ok bool
		walk = walk && (i == 0 || j.ID > jobs[i-1].ID)
		if !walk {
			r, ok = rs.Get(j.ID)
		} else {
			for k < len(rs.list) && rs.list[k].ID < j.ID {
				k++
			}
			if ok = k < len(rs.list) && rs.list[k].ID == j.ID; ok {
				r = rs.list[k].Reason
			}
		}
		if ok && !j.Reason.Equal(r) {
			out[j.ID] = r
		}
	}
	return out
}

// Of is job id's reason, the zero Reason when it has none.
func (rs Reasons) Of(id uint64) domain.Reason {
	r, _ := rs.Get(id)
	return r
}

// Len is the number of jobs with a reason.
func (rs Reasons) Len() int { return len(rs.list) }

// All yields each job's ID and reason, by ID.
func (rs Reasons) All() iter.Seq2[uint64, domain.Reason] {
	return func(yield func(uint64, domain.Reason) bool) {
		for _, e := range rs.list {
			if !yield(e.ID, e.Reason) {
				return
			}
		}
	}
}

// String prints the reasons as fmt printed their map.
func (rs Reasons) String() string {
	m := make(map[uint64]domain.Reason, len(rs.list))
	for _, e := range rs.list {
		m[e.ID] = e.Reason
	}
	return fmt.Sprint(m)
}

// MarshalJSON writes the object encoding/json wrote for the map: keys in
// the order of their decimal strings ("10" before "9").
func (rs Reasons) MarshalJSON() ([]byte, error) {
	if rs.list == nil {
		return []byte("null"), nil
	}
	keys := make([]string, len(rs.list))
	at := make([]int, len(rs.list))
	for i, e := range rs.list {
		keys[i], at[i] = strconv.FormatUint(e.ID, 10), i
	}
	slices.SortFunc(at, func(a, b int) int { return cmp.Compare(keys[a], keys[b]) })
	var b bytes.Buffer
	b.WriteByte('{')
	for n, i := range at {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(keys[i])
		b.WriteString(`":`)
		v, err := json.Marshal(rs.list[i].Reason)
		if err != nil {
			return nil, fmt.Errorf("reason of job %d: %w", rs.list[i].ID, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON (or the map) wrote.
func (rs *Reasons) UnmarshalJSON(b []byte) error {
	var m map[uint64]domain.Reason
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("pending reasons: %w", err)
	}
	*rs = ReasonsOf(m)
	return nil
}

// byID makes the cycle's reasons, given in the queue's order, a Reasons in
// ID order. Pending IDs are dense (the state numbers jobs in turn), so
// each entry's rank comes from an array over their span and the entries
// are swapped into place, O(n); a sort of 67,000 entries was 13 ms, three
// times the map's writes. A wide span, or an ID given twice (a snapshot
// may hold one job twice; the map kept the last reason written), falls
// back to a stable sort.
func byID(es []JobReason) Reasons {
	if len(es) < 2 {
		return Reasons{list: es}
	}
	lo, hi := es[0].ID, es[0].ID
	sorted := true
	for i := 1; i < len(es); i++ {
		id := es[i].ID
		sorted = sorted && id > es[i-1].ID
		lo, hi = min(lo, id), max(hi, id)
	}
	if sorted {
		return Reasons{list: es}
	}
	if span := hi - lo; span < 4*uint64(len(es)) {
		rank := make([]int32, span+1) // 1 + the ID's rank, 0 for IDs not given
		for _, e := range es {
			rank[e.ID-lo] = 1
		}
		n := int32(0)
		for k, r := range rank {
			if r != 0 {
				n++
				rank[k] = n
			}
		}
		if int(n) == len(es) {
			for i := range es {
				// Each swap puts one entry in its place.
				for d := int(rank[es[i].ID-lo] - 1); d != i; d = int(rank[es[i].ID-lo] - 1) {
					es[i], es[d] = es[d], es[i]
				}
			}
			return Reasons{list: es}
		}
	}
	slices.SortStableFunc(es, func(a, b JobReason) int { return cmp.Compare(a.ID, b.ID) })
	// The last of an ID's entries, as the map's last write.
	out := es[:0]
	for i, e := range es {
		if i+1 < len(es) && es[i+1].ID == e.ID {
			continue
		}
		out = append(out, e)
	}
	return Reasons{list: out}
}
