package mig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Instance is one GPU instance on a GPU: its profile name and the memory slot
// it starts at.
type Instance struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// Layout is the set of GPU instances of one GPU of a given model.
type Layout struct {
	Model     string     `json:"model"`
	Instances []Instance `json:"instances"`
}

// state is a resolved layout: occupied memory slots as a bit mask, instances
// per catalog profile and compute slices in use.
type state struct {
	profiles []Profile
	occ      uint
	counts   []int
	compute  int
}

func newState(profiles []Profile) *state {
	return &state{profiles: profiles, counts: make([]int, len(profiles))}
}

func slotMask(start, size int) uint { return ((1 << size) - 1) << start }

func (s *state) add(i, start int) {
	p := s.profiles[i]
	s.occ |= slotMask(start, p.MemorySlices)
	s.counts[i]++
	s.compute += p.ComputeSlices
}

func (s *state) remove(i, start int) {
	p := s.profiles[i]
	s.occ &^= slotMask(start, p.MemorySlices)
	s.counts[i]--
	s.compute -= p.ComputeSlices
}

func indexOf(profiles []Profile, name string) int {
	for i, p := range profiles {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// Validate checks that the GPU can really hold the layout: each instance starts
// at an allowed slot of its profile, memory slots [start, start+size) do not
// overlap, no profile exceeds its instance limit (so at most one +me profile),
// and compute slices total at most 7. All problems are reported, the first in
// the message and every one in Details.
func Validate(l Layout) error {
	profiles, ok := catalog[l.Model]
	if !ok {
		return modelError(l.Model)
	}
	var problems []domain.Detail
	bad := func(field, rule, format string, args ...any) {
		problems = append(problems, domain.Detail{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	owner := [MemorySlots]int{}
	for s := range owner {
		owner[s] = -1
	}
	counts := make([]int, len(profiles))
	compute := 0
	for i, in := range l.Instances {
		pi := indexOf(profiles, normalizeName(in.Profile))
		if pi < 0 {
			e := unknownProfile(l.Model, in.Profile, fmt.Sprintf("instances[%d].profile", i))
			bad(e.Field, "known-profile", "%s", e.Message)
			continue
		}
		p := profiles[pi]
		counts[pi]++
		compute += p.ComputeSlices
		if !p.allowsStart(in.Start) {
			bad(fmt.Sprintf("instances[%d].start", i), "allowed-start", "%s cannot start at memory slot %d on %s; allowed starts are %s",
				p.Name, in.Start, l.Model, joinInts(p.Starts))
			continue
		}
		for s := in.Start; s < in.Start+p.MemorySlices; s++ {
			if o := owner[s]; o >= 0 {
				bad(fmt.Sprintf("instances[%d]", i), "no-overlap", "%s at %d covers memory slot %d, already covered by instances[%d] (%s at %d)",
					p.Name, in.Start, s, o, l.Instances[o].Profile, l.Instances[o].Start)
				break
			}
		}
		for s := in.Start; s < in.Start+p.MemorySlices; s++ {
			if owner[s] < 0 {
				owner[s] = i
			}
		}
	}
	for pi, n := range counts {
		if p := profiles[pi]; n > p.MaxInstances {
			bad("instances", "max-instances", "%d instances of %s; %s allows at most %d per GPU", n, p.Name, l.Model, p.MaxInstances)
		}
	}
	if compute > ComputeSlots {
		bad("instances", "compute-slices", "instances use %d compute slices; a GPU has %d", compute, ComputeSlots)
	}
	if len(problems) == 0 {
		return nil
	}
	msg := problems[0].Message
	switch n := len(problems) - 1; {
	case n == 1:
		msg += " (and 1 more problem)"
	case n > 1:
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	return &domain.Error{Code: domain.CodeInvalidArgument, Field: problems[0].Field, Message: msg, Details: problems}
}

// Free returns the memory slots no instance covers, ascending. It does not
// validate: instances of unknown profiles are ignored, and a model without a
// catalog has no slots (nil).
func Free(l Layout) []int {
	profiles, ok := catalog[l.Model]
	if !ok {
		return nil
	}
	var occ uint
	for _, in := range l.Instances {
		if pi := indexOf(profiles, normalizeName(in.Profile)); pi >= 0 && in.Start >= 0 {
			occ |= slotMask(in.Start, profiles[pi].MemorySlices)
		}
	}
	free := []int{}
	for s := 0; s < MemorySlots; s++ {
		if occ&(1<<s) == 0 {
			free = append(free, s)
		}
	}
	return free
}

// resolve validates l and returns its state.
func resolve(l Layout) (*state, error) {
	if err := Validate(l); err != nil {
		return nil, err
	}
	st := newState(catalog[l.Model])
	for _, in := range l.Instances {
		st.add(indexOf(st.profiles, normalizeName(in.Profile)), in.Start)
	}
	return st, nil
}

// Place chooses the start slot for one more instance of profile on the GPU of
// layout l (which must be valid). Among the free allowed starts it prefers, in
// order: the one that leaves the most compute slices still creatable, then the
// one that leaves the largest contiguous block of free memory slots, then the
// lowest start (for determinism). Capacity comes first because the largest
// block alone can strand a slice: with a 1g.10gb at slot 2, a 1g.20gb at 0
// leaves the biggest block (3-7) but only 4 more slices creatable (the GPU
// tops out at 6 of 7), while at 6 it leaves 5 (7 of 7).
// The error names the profile and the reason: max instances reached, compute
// slices exhausted, or no allowed start free.
func Place(l Layout, profile string) (int, error) {
	st, err := resolve(l)
	if err != nil {
		return -1, err
	}
	pi := indexOf(st.profiles, normalizeName(profile))
	if pi < 0 {
		return -1, unknownProfile(l.Model, profile, "profile")
	}
	p := st.profiles[pi]
	if st.counts[pi] >= p.MaxInstances {
		return -1, unfit("profile", "%s: max instances reached (%d of %d per GPU)", p.Name, st.counts[pi], p.MaxInstances)
	}
	if st.compute+p.ComputeSlices > ComputeSlots {
		return -1, unfit("profile", "%s: compute slices exhausted (%d of %d in use, it needs %d)",
			p.Name, st.compute, ComputeSlots, p.ComputeSlices)
	}
	starts := st.ranked(pi)
	if len(starts) == 0 {
		return -1, unfit("profile", "%s: no allowed start free (it needs %d memory slots starting at %s; free slots are %s)",
			p.Name, p.MemorySlices, joinInts(p.Starts), joinInts(st.free()))
	}
	return starts[0], nil
}

func (s *state) free() []int {
	var out []int
	for i := 0; i < MemorySlots; i++ {
		if s.occ&(1<<i) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// ranked returns the free allowed starts of profile pi, best first. It
// ignores instance and compute limits; callers check them first.
func (s *state) ranked(pi int) []int {
	p := s.profiles[pi]
	type cand struct{ start, block, reach int }
	var cs []cand
	for _, start := range p.Starts {
		m := slotMask(start, p.MemorySlices)
		if start+p.MemorySlices > MemorySlots || s.occ&m != 0 {
			continue
		}
		s.add(pi, start)
		cs = append(cs, cand{start, largestFreeBlock(s.occ), s.reach(0, ComputeSlots-s.compute)})
		s.remove(pi, start)
	}
	sort.Slice(cs, func(a, b int) bool {
		if cs[a].reach != cs[b].reach {
			return cs[a].reach > cs[b].reach
		}
		if cs[a].block != cs[b].block {
			return cs[a].block > cs[b].block
		}
		return cs[a].start < cs[b].start
	})
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.start
	}
	return out
}

// reach is the most compute slices (at most left) that further instances can
// still take in the free slots from slot on. It decides slot by slot whether
// an instance starts there; the search is tiny (8 slots, 7 profiles).
func (s *state) reach(slot, left int) int {
	for slot < MemorySlots && s.occ&(1<<slot) != 0 {
		slot++
	}
	if slot >= MemorySlots || left == 0 {
		return 0
	}
	saved := s.occ
	s.occ |= 1 << slot // nothing starts here
	best := s.reach(slot+1, left)
	s.occ = saved
	for pi, p := range s.profiles {
		if best == left {
			break
		}
		if s.counts[pi] >= p.MaxInstances || p.ComputeSlices > left || !p.allowsStart(slot) ||
			slot+p.MemorySlices > MemorySlots || s.occ&slotMask(slot, p.MemorySlices) != 0 {
			continue
		}
		s.add(pi, slot)
		best = max(best, p.ComputeSlices+s.reach(slot+p.MemorySlices, left-p.ComputeSlices))
		s.remove(pi, slot)
	}
	return best
}

func largestFreeBlock(occ uint) int {
	best, run := 0, 0
	for i := 0; i < MemorySlots; i++ {
		if occ&(1<<i) == 0 {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// PlaceAll packs a whole request into one empty GPU of model and returns the
// layout, instances ordered by start. It places larger profiles first (so
// 4g+3g both fit) with Place's preference, and backtracks when that greedy
// choice strands a later instance, so it fails only when no arrangement
// exists. On the catalogued A100/H100 table an empty GPU holds a request
// exactly when instance limits, 7 compute slices and 8 memory slots allow it
// (3g+3g+1g is 7 slices but 9 slots); the tests check this exhaustively.
// Geometry bites on partly used GPUs, which is Place's job.
func PlaceAll(model string, profiles []string) (Layout, error) {
	cat, ok := catalog[model]
	if !ok {
		return Layout{}, modelError(model)
	}
	st := newState(cat)
	req := make([]int, len(profiles))
	need := make([]int, len(cat))
	compute, memory := 0, 0
	for i, name := range profiles {
		pi := indexOf(cat, normalizeName(name))
		if pi < 0 {
			return Layout{}, unknownProfile(model, name, fmt.Sprintf("profiles[%d]", i))
		}
		req[i] = pi
		need[pi]++
		compute += cat[pi].ComputeSlices
		memory += cat[pi].MemorySlices
	}
	for pi, n := range need {
		if p := cat[pi]; n > p.MaxInstances {
			return Layout{}, unfit("profiles", "%s: max instances reached (%d requested, %s allows %d per GPU)",
				p.Name, n, model, p.MaxInstances)
		}
	}
	if compute > ComputeSlots {
		return Layout{}, unfit("profiles", "compute slices exhausted: the request needs %d, a GPU has %d", compute, ComputeSlots)
	}
	if memory > MemorySlots {
		return Layout{}, unfit("profiles", "memory slots exhausted: the request needs %d, a GPU has %d", memory, MemorySlots)
	}
	sort.SliceStable(req, func(a, b int) bool {
		pa, pb := cat[req[a]], cat[req[b]]
		if pa.MemorySlices != pb.MemorySlices {
			return pa.MemorySlices > pb.MemorySlices
		}
		if pa.ComputeSlices != pb.ComputeSlices {
			return pa.ComputeSlices > pb.ComputeSlices
		}
		return pa.Name < pb.Name
	})
	starts := make([]int, len(req))
	var pack func(k int) bool
	pack = func(k int) bool {
		if k == len(req) {
			return true
		}
		for _, start := range st.ranked(req[k]) {
			st.add(req[k], start)
			starts[k] = start
			if pack(k + 1) {
				return true
			}
			st.remove(req[k], start)
		}
		return false
	}
	if !pack(0) {
		names := make([]string, len(req))
		for i, pi := range req {
			names[i] = cat[pi].Name
		}
		return Layout{}, unfit("profiles", "no allowed start free: %s cannot be arranged on one %s without overlapping memory slots (allowed starts per profile are fixed)",
			strings.Join(names, " + "), model)
	}
	l := Layout{Model: model, Instances: make([]Instance, len(req))}
	for k, pi := range req {
		l.Instances[k] = Instance{Profile: cat[pi].Name, Start: starts[k]}
	}
	sort.Slice(l.Instances, func(a, b int) bool { return l.Instances[a].Start < l.Instances[b].Start })
	return l, nil
}

// unfit is the error of a request that is well formed but does not fit.
func unfit(field, format string, args ...any) *domain.Error {
	e := domain.Errorf(domain.CodeFailedPrecondition, format, args...)
	e.Field = field
	return e
}

func joinInts(xs []int) string {
	if len(xs) == 0 {
		return "none"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
