package chaos

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Kind is an operation of the job API.
type Kind int

const (
	// Submit is POST /v1/jobs with an Idempotency-Key.
	Submit Kind = iota
	// Get is GET /v1/jobs/{id}.
	Get
	// Cancel is POST /v1/jobs/{id}/cancel.
	Cancel
	// List is GET /v1/jobs (every job: the test's token sees them all).
	List
)

func (k Kind) String() string {
	return [...]string{"submit", "get", "cancel", "list"}[k]
}

// Input is what a client asked.
type Input struct {
	Kind Kind
	Key  string // Submit: the Idempotency-Key
	ID   uint64 // Get, Cancel
}

// Output is what the client was told.
type Output struct {
	// Unknown: the client cannot know whether the operation took effect
	// (timeout, connection lost, an ambiguous 5xx); the checker may place
	// the operation anywhere after its call, or at the very end.
	Unknown bool
	// Unsent: the request never left the client (the member was down);
	// such an attempt is not part of the history.
	Unsent bool
	// Code is the API error code, "" for success.
	Code  domain.Code
	ID    uint64          // Submit, Get, Cancel: the job answered
	State domain.JobState // Submit, Get, Cancel: its state
	Jobs  []JobView       // List, by ID
}

// JobView is one job of a list answer.
type JobView struct {
	ID    uint64
	State domain.JobState
}

// state is the model's view of the API: the next job ID, the job each
// idempotency key made, and the furthest state each job was seen in. It is
// immutable: steps return a new one.
type state struct {
	next uint64
	keys map[string]uint64
	// jobs[id-1] is job id's state code (see code); IDs are dense.
	jobs string
}

var stateCodes = func() map[domain.JobState]byte {
	m := map[domain.JobState]byte{}
	for i, s := range domain.JobStates {
		m[s] = byte(i + 1)
	}
	return m
}()

func code(s domain.JobState) byte { return stateCodes[s] }

func decodeState(b byte) domain.JobState {
	if b == 0 || int(b) > len(domain.JobStates) {
		return ""
	}
	return domain.JobStates[b-1]
}

func (s state) has(id uint64) bool { return id >= 1 && id < s.next }

func (s state) job(id uint64) domain.JobState { return decodeState(s.jobs[id-1]) }

func (s state) with(id uint64, js domain.JobState) state {
	b := []byte(s.jobs)
	b[id-1] = code(js)
	s.jobs = string(b)
	return s
}

// progress orders the states a job passes through without anyone asking:
// the scheduler places it, the network makes it ready, its runtime runs it.
var progress = map[domain.JobState]int{
	domain.JobPending: 0, domain.JobPlaced: 1, domain.JobReady: 2, domain.JobRunning: 3, domain.JobPreempting: 4,
}

// advance reports whether a job the model holds in from may be observed
// in to, with no client operation in between: forward through the
// non-terminal states, or to an end the system reaches by itself (a
// preemption, a runtime's report). Cancelled is reached only by a cancel,
// and an ended job never changes again.
func advance(from, to domain.JobState) bool {
	if !to.Valid() {
		return false
	}
	if from.Terminal() {
		return to == from
	}
	if to.Terminal() {
		return to != domain.JobCancelled
	}
	return progress[to] >= progress[from]
}

// Model is the porcupine model of the job API.
var Model = porcupine.Model{
	Init: func() any { return state{next: 1, keys: map[string]uint64{}} },
	Step: func(st, in, out any) (bool, any) {
		return step(st.(state), in.(Input), out.(Output))
	},
	Equal: func(a, b any) bool {
		x, y := a.(state), b.(state)
		return x.next == y.next && x.jobs == y.jobs && maps.Equal(x.keys, y.keys)
	},
	Hash: func(st any) uint64 {
		s := st.(state)
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/", s.next, len(s.keys))
		h.Write([]byte(s.jobs))
		return h.Sum64()
	},
	DescribeOperation: describeOperation,
	DescribeState: func(st any) string {
		s := st.(state)
		var b strings.Builder
		fmt.Fprintf(&b, "next job %d;", s.next)
		for id := uint64(1); id < s.next; id++ {
			fmt.Fprintf(&b, " %d:%s", id, s.job(id))
		}
		return b.String()
	},
}

func step(s state, in Input, out Output) (bool, state) {
	switch in.Kind {
	case Submit:
		return stepSubmit(s, in, out)
	case Get:
		if out.Unknown {
			return true, s // a read that never answered constrains nothing
		}
		if out.Code == domain.CodeNotFound {
			return !s.has(in.ID), s
		}
		if out.Code != "" || out.ID != in.ID || !s.has(in.ID) || !advance(s.job(in.ID), out.State) {
			return false, s
		}
		return true, s.with(in.ID, out.State)
	case Cancel:
		return stepCancel(s, in, out)
	case List:
		if out.Unknown {
			return true, s
		}
		if out.Code != "" || uint64(len(out.Jobs)) != s.next-1 {
			return false, s
		}
		for i, j := range out.Jobs {
			if j.ID != uint64(i+1) || !advance(s.job(j.ID), j.State) {
				return false, s
			}
		}
		for _, j := range out.Jobs {
			s = s.with(j.ID, j.State)
		}
		return true, s
	}
	return false, s
}

// stepSubmit: a new key makes the next job, Pending; a known key answers
// the job it made, in whatever state it has reached.
func stepSubmit(s state, in Input, out Output) (bool, state) {
	if id, seen := s.keys[in.Key]; seen {
		if out.Unknown {
			return true, s
		}
		if out.Code != "" || out.ID != id || !advance(s.job(id), out.State) {
			return false, s
		}
		return true, s.with(id, out.State)
	}
	if !out.Unknown && (out.Code != "" || out.ID != s.next || out.State != domain.JobPending) {
		return false, s
	}
	id := s.next
	keys := maps.Clone(s.keys)
	keys[in.Key] = id
	s.keys, s.next, s.jobs = keys, id+1, s.jobs+string([]byte{code(domain.JobPending)})
	return true, s
}

// stepCancel: a live job becomes Cancelled; an ended job is a
// failed_precondition, a missing one not_found; "unavailable" applied
// nothing.
func stepCancel(s state, in Input, out Output) (bool, state) {
	live := s.has(in.ID) && !s.job(in.ID).Terminal()
	switch {
	case out.Unknown:
		if live {
			return true, s.with(in.ID, domain.JobCancelled)
		}
		return true, s
	case out.Code == domain.CodeUnavailable:
		return true, s
	case out.Code == domain.CodeNotFound:
		return !s.has(in.ID), s
	case out.Code == domain.CodeFailedPrecondition:
		return s.has(in.ID) && !live, s
	case out.Code == "" && live && out.ID == in.ID && out.State == domain.JobCancelled:
		return true, s.with(in.ID, domain.JobCancelled)
	}
	return false, s
}

func describeOperation(in, out any) string {
	i, o := in.(Input), out.(Output)
	var call string
	switch i.Kind {
	case Submit:
		call = fmt.Sprintf("submit(key %s)", shortKey(i.Key))
	case Get, Cancel:
		call = fmt.Sprintf("%s(%d)", i.Kind, i.ID)
	case List:
		call = "list()"
	}
	switch {
	case o.Unknown:
		return call + " -> ?"
	case o.Code != "":
		return call + " -> " + string(o.Code)
	case i.Kind == List:
		parts := make([]string, len(o.Jobs))
		for k, j := range o.Jobs {
			parts[k] = fmt.Sprintf("%d:%s", j.ID, j.State)
		}
		return call + " -> [" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("%s -> %d %s", call, o.ID, o.State)
}

func shortKey(k string) string {
	if len(k) > 8 {
		return k[:8]
	}
	return k
}

// SortJobs orders a list answer by ID, as the model reads it.
func SortJobs(js []JobView) {
	slices.SortFunc(js, func(a, b JobView) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}
