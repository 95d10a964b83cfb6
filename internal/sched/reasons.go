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
//
// The list holds no reason itself: each entry is an ID and the place of
// its reason in set, which the jobs queued behind one blocked job share
// (most of a full cluster's queue). A list of reasons was 48 bytes a job
// with pointers, 3.2 MB a cycle at 100,000 GPUs that the collector then
// scanned; this one is 16 bytes a job with none.
type Reasons struct {
	list []reasonAt      // by ID, each ID once; nil marshals as null, as a nil map did
	set  []domain.Reason // the reasons list's entries point into
}

// reasonAt is one pending job's ID and its reason's place in the set.
type reasonAt struct {
	ID uint64
	at int32
}

// ReasonsOf makes Reasons from a map (tests, callers building a plan).
func ReasonsOf(m map[uint64]domain.Reason) Reasons {
	if m == nil {
		return Reasons{}
	}
	var l reasonList
	l.list = make([]reasonAt, 0, len(m))
	for id, r := range m {
		l.add(id, r)
	}
	slices.SortFunc(l.list, func(a, b reasonAt) int { return cmp.Compare(a.ID, b.ID) })
	return Reasons{list: l.list, set: l.set}
}

// reasonList gathers a cycle's reasons in the queue's order: add a job's
// own, share one already added (the jobs behind a blocked job).
type reasonList struct {
	list []reasonAt
	set  []domain.Reason
	// scratch: list is a Carry's, reused next cycle, so byID puts the
	// entries in a list of their own.
	scratch bool
}

// add lists job id with reason r, and is where r was put in the set.
func (l *reasonList) add(id uint64, r domain.Reason) int32 {
	at := int32(len(l.set))
	l.set = append(l.set, r)
	l.list = append(l.list, reasonAt{ID: id, at: at})
	return at
}

// share lists job id with the reason add put at at.
func (l *reasonList) share(id uint64, at int32) {
	l.list = append(l.list, reasonAt{ID: id, at: at})
}

// Get is job id's reason; false when the plan has none for it (placed, or
// not pending).
func (rs Reasons) Get(id uint64) (domain.Reason, bool) {
	k, ok := slices.BinarySearchFunc(rs.list, id, func(e reasonAt, id uint64) int { return cmp.Compare(e.ID, id) })
	if !ok {
		return domain.Reason{}, false
	}
	return rs.set[rs.list[k].at], true
}

// Changed is the reasons that differ from those jobs hold now: what a
// plan.apply commits. A snapshot's jobs come by ID, and then the list is
// walked once beside them; from the first job out of that order on,
// each is searched for (the walk's place means nothing any more).
func (rs Reasons) Changed(jobs []*domain.Job) map[uint64]domain.Reason {
	out := map[uint64]domain.Reason{}
	k, walk := 0, true
	for i, j := range jobs {
		yieldAt(i)
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
				r = rs.set[rs.list[k].at]
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
			if !yield(e.ID, rs.set[e.at]) {
				return
			}
		}
	}
}

// String prints the reasons as fmt printed their map.
func (rs Reasons) String() string {
	m := make(map[uint64]domain.Reason, len(rs.list))
	for _, e := range rs.list {
		m[e.ID] = rs.set[e.at]
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
		v, err := json.Marshal(rs.set[rs.list[i].at])
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

// byID makes the cycle's reasons, listed in the queue's order, a Reasons
// in ID order. Pending IDs are dense (the state numbers jobs in turn), so
// each entry's rank comes from an array over their span (in rank, kept by
// a Carry; nil makes one) and the entries are swapped into place, O(n); a
// sort of 67,000 entries was 13 ms, three times the map's writes. A wide
// span, or an ID given twice (a snapshot may hold one job twice; the map
// kept the last reason written), falls back to a stable sort. A scratch
// list's entries are put in ID order in a list of their own, each
// written at its rank in one pass: swapped in place, each swap waited for
// the one before (67,000 entries, 1 MB, in random order: 2 ms a cycle at
// 100,000 GPUs).
func (l reasonList) byID(rank *[]int32) Reasons {
	es := l.list
	if len(l.set) == 0 {
		l.set = nil // as a cycle without a Carry's sizing has it
	}
	if len(es) < 2 {
		return Reasons{list: l.own(es), set: l.set}
	}
	lo, hi := es[0].ID, es[0].ID
	sorted := true
	for i := 1; i < len(es); i++ {
		id := es[i].ID
		sorted = sorted && id > es[i-1].ID
		lo, hi = min(lo, id), max(hi, id)
	}
	if sorted {
		return Reasons{list: l.own(es), set: l.set}
	}
	if span := hi - lo; span < 4*uint64(len(es)) {
		var rk []int32 // 1 + the ID's rank, 0 for IDs not given
		if rank != nil {
			rk = zeroed(*rank, int(span+1))
			*rank = rk
		} else {
			rk = make([]int32, span+1)
		}
		for _, e := range es {
			rk[e.ID-lo] = 1
		}
		n := int32(0)
		for k, r := range rk {
			if r != 0 {
				n++
				rk[k] = n
			}
		}
		if int(n) == len(es) {
			if l.scratch {
				out := make([]reasonAt, len(es))
				for _, e := range es {
					out[rk[e.ID-lo]-1] = e
				}
				return Reasons{list: out, set: l.set}
			}
			for i := range es {
				// Each swap puts one entry in its place.
				for d := int(rk[es[i].ID-lo] - 1); d != i; d = int(rk[es[i].ID-lo] - 1) {
					es[i], es[d] = es[d], es[i]
				}
			}
			return Reasons{list: es, set: l.set}
		}
	}
	slices.SortStableFunc(es, func(a, b reasonAt) int { return cmp.Compare(a.ID, b.ID) })
	// The last of an ID's entries, as the map's last write.
	out := es[:0]
	if l.scratch {
		out = make([]reasonAt, 0, len(es))
	}
	for i, e := range es {
		if i+1 < len(es) && es[i+1].ID == e.ID {
			continue
		}
		out = append(out, e)
	}
	return Reasons{list: out, set: l.set}
}

// own is es as byID hands it out: a copy when es is a scratch list.
func (l reasonList) own(es []reasonAt) []reasonAt {
	if !l.scratch {
		return es
	}
	return append(make([]reasonAt, 0, len(es)), es...)
}
