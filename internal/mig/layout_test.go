package mig

import (
	"reflect"
	"slices"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

func h100(ins ...Instance) Layout { return Layout{Model: "H100-80GB", Instances: ins} }

func in(profile string, start int) Instance { return Instance{Profile: profile, Start: start} }

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		l         Layout
		wantField string // "" = valid
		wantMsg   string
		wantRules []string // Rule of each Detail
	}{
		"empty GPU":           {l: h100()},
		"whole GPU":           {l: h100(in("7g.80gb", 0))},
		"4g+3g":               {l: h100(in("4g.40gb", 0), in("3g.40gb", 4))},
		"3g+3g":               {l: h100(in("3g.40gb", 0), in("3g.40gb", 4))},
		"seven 1g":            {l: h100(in("1g.10gb", 0), in("1g.10gb", 1), in("1g.10gb", 2), in("1g.10gb", 3), in("1g.10gb", 4), in("1g.10gb", 5), in("1g.10gb", 6))},
		"six 1g + 1g.20gb@6":  {l: h100(in("1g.10gb", 0), in("1g.10gb", 1), in("1g.10gb", 2), in("1g.10gb", 3), in("1g.10gb", 4), in("1g.10gb", 5), in("1g.20gb", 6))},
		"nvidia-smi names":    {l: h100(in("MIG 4g.40gb", 0), in("MIG 1g.10gb+me", 4))},
		"1g.10gb and its +me": {l: h100(in("1g.10gb+me", 0), in("1g.10gb", 1))},
		// The MIG user guide's -lgi output for "3-2-1-1" on A100-SXM4-40GB.
		"guide 3-2-1-1": {l: Layout{Model: "A100-40GB", Instances: []Instance{
			in("1g.5gb", 0), in("1g.5gb", 1), in("2g.10gb", 2), in("3g.20gb", 4)}}},
		// The guide's "2-1-1-1-1-1": one 1g at 6, the 2g at 4.
		"guide 2-1-1-1-1-1": {l: Layout{Model: "A100-40GB", Instances: []Instance{
			in("1g.5gb", 0), in("1g.5gb", 1), in("1g.5gb", 2), in("1g.5gb", 3), in("1g.5gb", 6), in("2g.10gb", 4)}}},
		"3g may not start at 2": {l: h100(in("3g.40gb", 2)), wantField: "instances[0].start",
			wantMsg: "3g.40gb cannot start at memory slot 2 on H100-80GB; allowed starts are 0,4", wantRules: []string{"allowed-start"}},
		"2g may not start at 6": {l: h100(in("2g.20gb", 6)), wantField: "instances[0].start", wantMsg: "allowed starts are 0,2,4", wantRules: []string{"allowed-start"}},
		"1g may not start at 7": {l: h100(in("1g.10gb", 7)), wantField: "instances[0].start", wantMsg: "slot 7", wantRules: []string{"allowed-start"}},
		"negative start":        {l: h100(in("1g.10gb", -1)), wantField: "instances[0].start", wantMsg: "slot -1", wantRules: []string{"allowed-start"}},
		"overlap": {l: h100(in("4g.40gb", 0), in("2g.20gb", 2)), wantField: "instances[1]",
			wantMsg: "2g.20gb at 2 covers memory slot 2, already covered by instances[0] (4g.40gb at 0)", wantRules: []string{"no-overlap"}},
		"same slot twice": {l: h100(in("1g.10gb", 3), in("1g.10gb", 3)), wantField: "instances[1]", wantMsg: "slot 3", wantRules: []string{"no-overlap"}},
		"two +me": {l: h100(in("1g.10gb+me", 0), in("1g.10gb+me", 1)), wantField: "instances",
			wantMsg: "2 instances of 1g.10gb+me; H100-80GB allows at most 1 per GPU", wantRules: []string{"max-instances"}},
		"two 4g: start, limit and slices": {l: h100(in("4g.40gb", 0), in("4g.40gb", 4)), wantField: "instances[1].start",
			wantMsg: "(and 2 more problems)", wantRules: []string{"allowed-start", "max-instances", "compute-slices"}},
		"7g plus a 1g: overlap and 8 slices": {l: h100(in("7g.80gb", 0), in("1g.10gb", 0)), wantField: "instances[1]",
			wantMsg: "(and 1 more problem)", wantRules: []string{"no-overlap", "compute-slices"}},
		"unknown profile": {l: h100(in("5g.50gb", 0)), wantField: "instances[0].profile", wantMsg: `"5g.50gb" is not a profile of H100-80GB`, wantRules: []string{"known-profile"}},
		"unknown model":   {l: Layout{Model: "B200-180GB"}, wantField: "model", wantMsg: "no recorded MIG placement geometry"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.l)
			checkErr(t, err, domain.CodeInvalidArgument, tc.wantField, tc.wantMsg)
			de, _ := err.(*domain.Error)
			if de == nil {
				return
			}
			var rules []string
			for _, d := range de.Details {
				rules = append(rules, d.Rule)
			}
			if !reflect.DeepEqual(rules, tc.wantRules) {
				t.Errorf("rules of %+v = %v, want %v", de.Details, rules, tc.wantRules)
			}
		})
	}
}

func TestFree(t *testing.T) {
	cases := map[string]struct {
		l    Layout
		want []int
	}{
		"empty":             {l: h100(), want: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		"3g at 4 takes 4-7": {l: h100(in("3g.40gb", 4)), want: []int{0, 1, 2, 3}},
		"3g at 0 takes 0-3": {l: h100(in("3g.40gb", 0)), want: []int{4, 5, 6, 7}},
		"seven 1g leave 7": {l: h100(in("1g.10gb", 0), in("1g.10gb", 1), in("1g.10gb", 2), in("1g.10gb", 3),
			in("1g.10gb", 4), in("1g.10gb", 5), in("1g.10gb", 6)), want: []int{7}},
		"full":                    {l: h100(in("7g.80gb", 0)), want: []int{}},
		"1g.20gb at 6":            {l: h100(in("MIG 1g.20gb", 6)), want: []int{0, 1, 2, 3, 4, 5}},
		"unknown profile ignored": {l: h100(in("9g.99gb", 0), in("1g.10gb", 2)), want: []int{0, 1, 3, 4, 5, 6, 7}},
		"model without catalog":   {l: Layout{Model: "GB200"}, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Free(tc.l); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Free = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	// Expected starts are worked out from the placement table by hand: the
	// start that leaves the most compute slices creatable, then the largest
	// free block, then the lowest start.
	cases := map[string]struct {
		l         Layout
		profile   string
		wantStart int
		wantCode  domain.Code // "" = success
		wantField string
		wantMsg   string
	}{
		"7g on empty": {l: h100(), profile: "7g.80gb", wantStart: 0},
		"4g on empty": {l: h100(), profile: "4g.40gb", wantStart: 0},
		// At 4 the 3g leaves 0-3 for a 4g (4 slices); at 0 it leaves 4-7, where at most 3 fit.
		"3g on empty goes to 4": {l: h100(), profile: "3g.40gb", wantStart: 4},
		// At 6 it leaves 4g@0 + 2g@4 (6 slices); at 0, 2 or 4 at most 5.
		"1g.20gb on empty goes to 6": {l: h100(), profile: "1g.20gb", wantStart: 6},
		// Every start leaves 6 slices; at 0 the free block 1-7 is the largest.
		"1g on empty goes to 0": {l: h100(), profile: "1g.10gb", wantStart: 0},
		// At 0 the block 3-7 is larger but only 4 slices stay creatable (GPU max 6);
		// at 6 five stay (1g@0, 1g@1, 1g@3, 2g@4: GPU max 7).
		"1g.20gb next to a 1g at 2": {l: h100(in("1g.10gb", 2)), profile: "1g.20gb", wantStart: 6},
		"3g beside a 4g":            {l: h100(in("4g.40gb", 0)), profile: "3g.40gb", wantStart: 4},
		"second 3g":                 {l: h100(in("3g.40gb", 4)), profile: "MIG 3g.40gb", wantStart: 0},
		// 0..3 all leave 3 slices; 0 and 3 leave a block of 3; lowest wins.
		"1g beside a 3g at 4":  {l: h100(in("3g.40gb", 4)), profile: "1g.10gb", wantStart: 0},
		"third 2g":             {l: h100(in("2g.20gb", 0), in("2g.20gb", 2)), profile: "2g.20gb", wantStart: 4},
		"3g after two 2g":      {l: h100(in("2g.20gb", 0), in("2g.20gb", 2)), profile: "3g.40gb", wantStart: 4},
		"+me in the last slot": {l: h100(in("4g.40gb", 0), in("1g.10gb", 4), in("1g.10gb", 5)), profile: "1g.10gb+me", wantStart: 6},
		"3g+3g leave no 1g start": {l: h100(in("3g.40gb", 0), in("3g.40gb", 4)), profile: "1g.10gb",
			wantCode: domain.CodeFailedPrecondition, wantField: "profile",
			wantMsg: "1g.10gb: no allowed start free (it needs 1 memory slots starting at 0,1,2,3,4,5,6; free slots are none)"},
		// Slot 7 is free but only 1g.20gb@6, 3g@4 and 7g@0 can cover it.
		"slot 7 alone takes no 1g": {l: h100(in("3g.40gb", 0), in("2g.20gb", 4), in("1g.10gb", 6)), profile: "1g.10gb",
			wantCode: domain.CodeFailedPrecondition, wantField: "profile", wantMsg: "free slots are 7"},
		"4g+3g use all compute": {l: h100(in("4g.40gb", 0), in("3g.40gb", 4)), profile: "1g.10gb",
			wantCode: domain.CodeFailedPrecondition, wantField: "profile", wantMsg: "1g.10gb: compute slices exhausted (7 of 7 in use, it needs 1)"},
		"one +me per GPU": {l: h100(in("1g.10gb+me", 0)), profile: "1g.10gb+me",
			wantCode: domain.CodeFailedPrecondition, wantField: "profile", wantMsg: "1g.10gb+me: max instances reached (1 of 1 per GPU)"},
		"one 4g per GPU": {l: h100(in("4g.40gb", 0)), profile: "4g.40gb",
			wantCode: domain.CodeFailedPrecondition, wantField: "profile", wantMsg: "max instances reached"},
		"unknown profile": {l: h100(), profile: "2g.10gb",
			wantCode: domain.CodeInvalidArgument, wantField: "profile", wantMsg: `"2g.10gb" is not a profile of H100-80GB`},
		"invalid layout": {l: h100(in("3g.40gb", 1)), profile: "1g.10gb",
			wantCode: domain.CodeInvalidArgument, wantField: "instances[0].start", wantMsg: "cannot start at memory slot 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start, err := Place(tc.l, tc.profile)
			checkErr(t, err, tc.wantCode, tc.wantField, tc.wantMsg)
			if tc.wantField != "" {
				return
			}
			if start != tc.wantStart {
				t.Errorf("start = %d, want %d", start, tc.wantStart)
			}
			after := tc.l
			after.Instances = append(slices.Clone(tc.l.Instances), in(tc.profile, start))
			if err := Validate(after); err != nil {
				t.Errorf("placed layout is invalid: %v", err)
			}
		})
	}
}

func TestPlaceAll(t *testing.T) {
	cases := map[string]struct {
		model     string
		profiles  []string
		want      []Instance // by start
		wantField string     // "" = fits
		wantCode  domain.Code
		wantMsg   string
	}{
		"4g+3g": {model: "H100-80GB", profiles: []string{"3g.40gb", "4g.40gb"},
			want: []Instance{in("4g.40gb", 0), in("3g.40gb", 4)}},
		"3g+3g at 0 and 4": {model: "H100-80GB", profiles: []string{"3g.40gb", "3g.40gb"},
			want: []Instance{in("3g.40gb", 0), in("3g.40gb", 4)}},
		"seven 1g": {model: "H100-80GB", profiles: slices.Repeat([]string{"1g.10gb"}, 7),
			want: []Instance{in("1g.10gb", 0), in("1g.10gb", 1), in("1g.10gb", 2), in("1g.10gb", 3), in("1g.10gb", 4), in("1g.10gb", 5), in("1g.10gb", 6)}},
		// The 3g must take 4-7: at 0 it would leave 4-7, where a 2g and one 1g
		// fit but slot 7 takes no second 1g.
		"3g+2g+1g+1g": {model: "H100-80GB", profiles: []string{"1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb"},
			want: []Instance{in("2g.20gb", 0), in("1g.10gb", 2), in("1g.10gb", 3), in("3g.40gb", 4)}},
		"4g+2g+1g": {model: "H100-80GB", profiles: []string{"1g.10gb", "2g.20gb", "4g.40gb"},
			want: []Instance{in("4g.40gb", 0), in("2g.20gb", 4), in("1g.10gb", 6)}},
		// The slurmd -G fixture: each MIG GPU holds one 4g.40gb and three 1g.10gb.
		"4g+1g+1g+1g (slurmd fixture)": {model: "H100-80GB", profiles: []string{"4g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"},
			want: []Instance{in("4g.40gb", 0), in("1g.10gb", 4), in("1g.10gb", 5), in("1g.10gb", 6)}},
		"3g+four 1g": {model: "H100-80GB", profiles: []string{"3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"},
			want: []Instance{in("1g.10gb", 0), in("1g.10gb", 1), in("1g.10gb", 2), in("1g.10gb", 3), in("3g.40gb", 4)}},
		"three 2g + 1g.20gb": {model: "H100-80GB", profiles: []string{"1g.20gb", "2g.20gb", "2g.20gb", "2g.20gb"},
			want: []Instance{in("2g.20gb", 0), in("2g.20gb", 2), in("2g.20gb", 4), in("1g.20gb", 6)}},
		"guide 3-2-1-1 on A100-40GB": {model: "A100-40GB", profiles: []string{"MIG 3g.20gb", "1g.5gb", "2g.10gb", "1g.5gb"},
			want: []Instance{in("2g.10gb", 0), in("1g.5gb", 2), in("1g.5gb", 3), in("3g.20gb", 4)}},
		"empty request": {model: "H200-141GB", profiles: nil, want: []Instance{}},
		"4g+4g": {model: "H100-80GB", profiles: []string{"4g.40gb", "4g.40gb"}, wantField: "profiles",
			wantCode: domain.CodeFailedPrecondition, wantMsg: "4g.40gb: max instances reached (2 requested, H100-80GB allows 1 per GPU)"},
		// 7 slices, but the two 3g cover all 8 memory slots.
		"3g+3g+1g": {model: "H100-80GB", profiles: []string{"3g.40gb", "3g.40gb", "1g.10gb"}, wantField: "profiles",
			wantCode: domain.CodeFailedPrecondition, wantMsg: "memory slots exhausted: the request needs 9, a GPU has 8"},
		"3g+1g.20gb+three 1g: 6 slices on 9 slots": {model: "H100-80GB", profiles: []string{"3g.40gb", "1g.20gb", "1g.10gb", "1g.10gb", "1g.10gb"},
			wantField: "profiles", wantCode: domain.CodeFailedPrecondition, wantMsg: "memory slots exhausted: the request needs 9"},
		"4g+3g+1g": {model: "H100-80GB", profiles: []string{"4g.40gb", "3g.40gb", "1g.10gb"}, wantField: "profiles",
			wantCode: domain.CodeFailedPrecondition, wantMsg: "compute slices exhausted: the request needs 8, a GPU has 7"},
		"two +me": {model: "H100-80GB", profiles: []string{"1g.10gb+me", "1g.10gb+me"}, wantField: "profiles",
			wantCode: domain.CodeFailedPrecondition, wantMsg: "1g.10gb+me: max instances reached"},
		"7g+1g": {model: "H100-80GB", profiles: []string{"7g.80gb", "1g.10gb"}, wantField: "profiles",
			wantCode: domain.CodeFailedPrecondition, wantMsg: "compute slices exhausted"},
		"unknown profile": {model: "H100-80GB", profiles: []string{"1g.10gb", "1g.5gb"}, wantField: "profiles[1]",
			wantCode: domain.CodeInvalidArgument, wantMsg: `"1g.5gb" is not a profile of H100-80GB`},
		"B200": {model: "B200-180GB", profiles: []string{"1g.23gb"}, wantField: "model",
			wantCode: domain.CodeInvalidArgument, wantMsg: "no recorded MIG placement geometry"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := PlaceAll(tc.model, tc.profiles)
			checkErr(t, err, tc.wantCode, tc.wantField, tc.wantMsg)
			if tc.wantField != "" {
				return
			}
			if l.Model != tc.model || !reflect.DeepEqual(l.Instances, tc.want) {
				t.Errorf("layout = %+v, want %s %+v", l, tc.model, tc.want)
			}
			if err := Validate(l); err != nil {
				t.Errorf("PlaceAll returned an invalid layout: %v", err)
			}
		})
	}
}

// oracle is an independent brute force over the placement table, sharing
// only the catalog data with the code under test.
type oracle struct {
	model    string
	profiles []Profile
}

func newOracle(model string) oracle {
	ps, _ := Profiles(model)
	return oracle{model: model, profiles: ps}
}

func (o oracle) profile(name string) Profile {
	for _, p := range o.profiles {
		if p.Name == name {
			return p
		}
	}
	panic("oracle: unknown profile " + name)
}

// valid checks the rules directly and returns the compute slices in use.
func (o oracle) valid(ins []Instance) (int, bool) {
	var used [MemorySlots]bool
	counts := map[string]int{}
	compute := 0
	for _, x := range ins {
		p := o.profile(x.Profile)
		if !slices.Contains(p.Starts, x.Start) {
			return 0, false
		}
		for i := x.Start; i < x.Start+p.MemorySlices; i++ {
			if used[i] {
				return 0, false
			}
			used[i] = true
		}
		counts[p.Name]++
		compute += p.ComputeSlices
		if counts[p.Name] > p.MaxInstances || compute > ComputeSlots {
			return 0, false
		}
	}
	return compute, true
}

// fits tries every start of every requested instance, after the necessary
// conditions that keep the search short (limits, 7 slices, 8 disjoint slots).
func (o oracle) fits(names []string) bool {
	counts := map[string]int{}
	compute, memory := 0, 0
	for _, n := range names {
		p := o.profile(n)
		counts[n]++
		compute += p.ComputeSlices
		memory += p.MemorySlices
		if counts[n] > p.MaxInstances {
			return false
		}
	}
	if compute > ComputeSlots || memory > MemorySlots {
		return false
	}
	var try func(cur []Instance) bool
	try = func(cur []Instance) bool {
		if len(cur) == len(names) {
			return true
		}
		for _, s := range o.profile(names[len(cur)]).Starts {
			next := append(slices.Clone(cur), in(names[len(cur)], s))
			if _, ok := o.valid(next); ok && try(next) {
				return true
			}
		}
		return false
	}
	return try(nil)
}

// maxCompute is the most compute slices any valid layout containing base can
// hold, found by adding instances in every way.
func (o oracle) maxCompute(base []Instance) int {
	var cands []Instance
	for _, p := range o.profiles {
		for _, s := range p.Starts {
			cands = append(cands, in(p.Name, s))
		}
	}
	best := 0
	var grow func(cur []Instance, from int)
	grow = func(cur []Instance, from int) {
		c, ok := o.valid(cur)
		if !ok {
			return
		}
		best = max(best, c)
		for k := from; k < len(cands); k++ {
			grow(append(slices.Clone(cur), cands[k]), k+1)
		}
	}
	grow(base, 0)
	return best
}

// Every request of up to 7 instances: PlaceAll fits exactly when the brute
// force finds an arrangement, and what it returns is valid and is the request.
func TestPlaceAllAgreesWithBruteForce(t *testing.T) {
	for _, model := range Models() {
		o := newOracle(model)
		cat := o.profiles
		fitting, total := 0, 0
		var req []Profile
		var gen func(from int)
		gen = func(from int) {
			total++
			names := make([]string, len(req))
			for i, p := range req {
				names[i] = p.Name
			}
			want := o.fits(names)
			l, err := PlaceAll(model, names)
			if (err == nil) != want {
				t.Errorf("%s %v: PlaceAll err = %v, brute force fits = %v", model, names, err, want)
			}
			if err == nil {
				fitting++
				if verr := Validate(l); verr != nil {
					t.Errorf("%s %v: invalid layout %+v: %v", model, names, l, verr)
				}
				var got []string
				for _, x := range l.Instances {
					got = append(got, x.Profile)
				}
				if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
					t.Errorf("%s %v: layout holds %v", model, names, got)
				}
			}
			if len(req) == 7 {
				return
			}
			for i := from; i < len(cat); i++ {
				req = append(req, cat[i])
				gen(i)
				req = req[:len(req)-1]
			}
		}
		gen(0)
		// 3432 multisets of at most 7 of the 7 profiles; 128 of them fit (the
		// empty one included). The count changes only if the geometry does.
		if total != 3432 || fitting != 128 {
			t.Errorf("%s: %d of %d requests fit, want 128 of 3432", model, fitting, total)
		}
	}
}

// From every valid layout (departures leave any of them, not only those Place
// builds), Place's choice keeps as much compute creatable as the best allowed
// start would (judged by brute force, not by Place's own scoring), and Place
// fails exactly when no allowed start is usable.
func TestPlaceNeverStrandsCapacity(t *testing.T) {
	const model = "H100-80GB"
	o := newOracle(model)
	var cands []Instance
	for _, p := range o.profiles {
		for _, s := range p.Starts {
			cands = append(cands, in(p.Name, s))
		}
	}
	layouts := 0
	var visit func(cur []Instance, from int)
	visit = func(cur []Instance, from int) {
		if _, ok := o.valid(cur); !ok {
			return
		}
		layouts++
		l := Layout{Model: model, Instances: cur}
		for _, p := range o.profiles {
			var usable []int
			best := 0
			for _, s := range p.Starts {
				if _, ok := o.valid(append(slices.Clone(cur), in(p.Name, s))); ok {
					usable = append(usable, s)
					best = max(best, o.maxCompute(append(slices.Clone(cur), in(p.Name, s))))
				}
			}
			start, err := Place(l, p.Name)
			if (err == nil) != (len(usable) > 0) {
				t.Fatalf("%v + %s: Place err = %v, usable starts %v", cur, p.Name, err, usable)
			}
			if err != nil {
				continue
			}
			if got := o.maxCompute(append(slices.Clone(cur), in(p.Name, start))); got != best {
				t.Errorf("%v + %s at %d: at most %d slices stay creatable, another start keeps %d", cur, p.Name, start, got, best)
			}
		}
		for k := from; k < len(cands); k++ {
			visit(append(slices.Clone(cur), cands[k]), k+1)
		}
	}
	visit(nil, 0)
	if layouts < 100 {
		t.Errorf("visited only %d layouts", layouts)
	}
	t.Logf("checked Place on %d valid layouts", layouts)
}

// No catalogued request needs PlaceAll's backtracking (largest-first with
// Place's preference always succeeds there), so this made-up geometry checks
// it: the 2g's preferred start (0, which leaves the 4g start open) blocks the
// only starts of the requested 1g's.
func TestPlaceAllBacktracks(t *testing.T) {
	const model = "TEST-BACKTRACK"
	catalog[model] = []Profile{
		{Name: "1g.t", ComputeSlices: 1, MemorySlices: 1, Starts: []int{0, 1}, MaxInstances: 2, MemoryGiB: 1},
		{Name: "2g.t", ComputeSlices: 2, MemorySlices: 2, Starts: []int{0, 4}, MaxInstances: 1, MemoryGiB: 2},
		{Name: "4g.t", ComputeSlices: 4, MemorySlices: 4, Starts: []int{4}, MaxInstances: 1, MemoryGiB: 4},
	}
	t.Cleanup(func() { delete(catalog, model) })

	if start, err := Place(Layout{Model: model}, "2g.t"); err != nil || start != 0 {
		t.Fatalf("Place(2g.t) = %d, %v; the test needs the greedy choice 0", start, err)
	}
	l, err := PlaceAll(model, []string{"1g.t", "2g.t", "1g.t"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Instance{in("1g.t", 0), in("1g.t", 1), in("2g.t", 4)}
	if !reflect.DeepEqual(l.Instances, want) {
		t.Errorf("layout %+v, want %+v", l.Instances, want)
	}
	// Within every limit (7 slices, 7 slots), but the 2g and the 1g both need slot 0.
	_, err = PlaceAll(model, []string{"1g.t", "4g.t", "2g.t"})
	checkErr(t, err, domain.CodeFailedPrecondition, "profiles", "no allowed start free: 4g.t + 2g.t + 1g.t cannot be arranged on one TEST-BACKTRACK")
}
