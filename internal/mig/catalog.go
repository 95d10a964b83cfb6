package mig

import (
	"sort"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// UnitsPerGPU is the capacity of one whole GPU in scheduler units. 7000 is
// divisible by 7 (MIG compute slices) and by 2, 4, 8 and 1000 (time-shares and
// milli-GPU), so every share the scheduler hands out is a whole number of units.
const UnitsPerGPU = 7000

// ComputeSlots and MemorySlots are the MIG geometry of every model in the
// catalog: 7 compute slices and 8 memory slots.
const (
	ComputeSlots = 7
	MemorySlots  = 8
)

// unitsPerSlice is one compute slice, 1/7 of a GPU.
const unitsPerSlice = UnitsPerGPU / ComputeSlots

// Profile is one GPU instance profile of one GPU model.
type Profile struct {
	// Name is the short profile name, e.g. "3g.40gb" or "1g.10gb+me".
	Name string `json:"name"`
	// ID is the GPU instance profile ID nvidia-smi prints (-lgip "ID" column).
	ID int `json:"id"`
	// ComputeSlices is the number of the 7 compute slices the instance takes.
	ComputeSlices int `json:"computeSlices"`
	// MemorySlices is the placement size: how many of the 8 memory slots the
	// instance covers, starting at its start slot.
	MemorySlices int `json:"memorySlices"`
	// Starts are the memory slots an instance of this profile may start at.
	Starts []int `json:"starts"`
	// MaxInstances is how many instances of this profile one GPU can hold.
	MaxInstances int `json:"maxInstances"`
	// MemoryGiB is the instance memory as nvidia-smi mig -lgip reports it
	// where a transcript is known; drivers differ by a fraction of a GiB, so
	// compare reported values with a tolerance. See the package doc per model.
	MemoryGiB float64 `json:"memoryGiB"`
	// SMs is the streaming multiprocessor count, 0 when not known.
	SMs int `json:"sms,omitempty"`
	// MediaExtensions marks a "+me" profile (it owns the media engines; one per GPU).
	MediaExtensions bool `json:"mediaExtensions,omitempty"`
}

// GPUUnits is the capacity of one instance in scheduler units (1000 per
// compute slice; a whole GPU is UnitsPerGPU = 7000).
func (p Profile) GPUUnits() int { return p.ComputeSlices * unitsPerSlice }

// allowsStart reports whether start is one of the profile's placement starts.
func (p Profile) allowsStart(start int) bool {
	for _, s := range p.Starts {
		if s == start {
			return true
		}
	}
	return false
}

func (p Profile) clone() Profile {
	p.Starts = append([]int(nil), p.Starts...)
	return p
}

// shape is one row of the shared GA100/GH100 placement table; the per-model
// tables differ only in names, memory and SMs.
type shape struct {
	id, compute, size, max int
	starts                 []int
	me                     bool
}

// The placement table of A100 and H100 (nvidia-smi mig -lgipp), in -lgip order.
var (
	shape1g   = shape{id: 19, compute: 1, size: 1, max: 7, starts: []int{0, 1, 2, 3, 4, 5, 6}}
	shape1gME = shape{id: 20, compute: 1, size: 1, max: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, me: true}
	shape1g2  = shape{id: 15, compute: 1, size: 2, max: 4, starts: []int{0, 2, 4, 6}}
	shape2g   = shape{id: 14, compute: 2, size: 2, max: 3, starts: []int{0, 2, 4}}
	shape3g   = shape{id: 9, compute: 3, size: 4, max: 2, starts: []int{0, 4}}
	shape4g   = shape{id: 5, compute: 4, size: 4, max: 1, starts: []int{0}}
	shape7g   = shape{id: 0, compute: 7, size: 8, max: 1, starts: []int{0}}
)

func mk(s shape, name string, memGiB float64, sms int) Profile {
	return Profile{
		Name: name, ID: s.id, ComputeSlices: s.compute, MemorySlices: s.size,
		Starts: s.starts, MaxInstances: s.max, MemoryGiB: memGiB, SMs: sms, MediaExtensions: s.me,
	}
}

// catalog maps a domain GPU model name to its profiles, in -lgip order
// (smallest first). Sources per model are in the package doc.
var catalog = map[string][]Profile{
	// Exactly the fixture mig-placements_h100-80gb.csv (checked by a test).
	"H100-80GB": {
		mk(shape1g, "1g.10gb", 9.75, 16),
		mk(shape1gME, "1g.10gb+me", 9.75, 16),
		mk(shape1g2, "1g.20gb", 19.62, 26),
		mk(shape2g, "2g.20gb", 19.62, 32),
		mk(shape3g, "3g.40gb", 39.50, 60),
		mk(shape4g, "4g.40gb", 39.50, 64),
		mk(shape7g, "7g.80gb", 79.25, 132),
	},
	// Memory from a -lgip on A100 80GB PCIe, driver 515.86.01, which predates
	// 1g.20gb; that row takes the 2g.20gb memory (same 2 slots), as on H100.
	"A100-80GB": {
		mk(shape1g, "1g.10gb", 9.50, 14),
		mk(shape1gME, "1g.10gb+me", 9.50, 14),
		mk(shape1g2, "1g.20gb", 19.50, 14),
		mk(shape2g, "2g.20gb", 19.50, 28),
		mk(shape3g, "3g.40gb", 39.25, 42),
		mk(shape4g, "4g.40gb", 39.25, 56),
		mk(shape7g, "7g.80gb", 79.00, 98),
	},
	// Placements are the -lgipp example of the NVIDIA MIG user guide.
	"A100-40GB": {
		mk(shape1g, "1g.5gb", 4.75, 14),
		mk(shape1gME, "1g.5gb+me", 4.75, 14),
		mk(shape1g2, "1g.10gb", 9.62, 14),
		mk(shape2g, "2g.10gb", 9.62, 28),
		mk(shape3g, "3g.20gb", 19.50, 42),
		mk(shape4g, "4g.20gb", 19.50, 56),
		mk(shape7g, "7g.40gb", 39.25, 98),
	},
	// Inferred from H100 (same die, same published fractions and counts);
	// memory is nominal and SMs unknown until an H200 -lgip is recorded.
	"H200-141GB": {
		mk(shape1g, "1g.18gb", 18, 0),
		mk(shape1gME, "1g.18gb+me", 18, 0),
		mk(shape1g2, "1g.35gb", 35, 0),
		mk(shape2g, "2g.35gb", 35, 0),
		mk(shape3g, "3g.71gb", 71, 0),
		mk(shape4g, "4g.71gb", 71, 0),
		mk(shape7g, "7g.141gb", 141, 0),
	},
}

// Models lists the GPU models that have a MIG catalog, sorted.
func Models() []string {
	out := make([]string, 0, len(catalog))
	for m := range catalog {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Profiles returns the GPU instance profiles of a model, smallest first, and
// false when the model has no MIG catalog (unknown, not MIG-capable, or MIG
// geometry not yet recorded, as for B200 and GB200). The slice is a copy.
func Profiles(model string) ([]Profile, bool) {
	ps, ok := catalog[model]
	if !ok {
		return nil, false
	}
	out := make([]Profile, len(ps))
	for i, p := range ps {
		out[i] = p.clone()
	}
	return out, true
}

// Lookup returns the profile of a model by name. It accepts "3g.40gb" and the
// "MIG 3g.40gb" form nvidia-smi prints, in any letter case.
func Lookup(model, name string) (Profile, error) {
	p, err := lookup(model, name, "profile")
	if err != nil {
		return Profile{}, err
	}
	return p.clone(), nil
}

// Units is the capacity of profile name in GPU units (ComputeSlices of
// seven), looked up without allocating: the scheduler asks it for every
// held slice in every cycle. An empty model searches the MIG models in name
// order. ok is false for an unknown model or profile.
func Units(model, name string) (units int, ok bool) {
	if model == "" {
		for _, m := range sortedModels {
			if u, ok := Units(m, name); ok {
				return u, true
			}
		}
		return 0, false
	}
	for _, p := range catalog[model] {
		if p.Name == name {
			return p.GPUUnits(), true
		}
	}
	if n := normalizeName(name); n != name {
		return Units(model, n)
	}
	return 0, false
}

// sortedModels is Models() computed once; the catalog never changes.
var sortedModels = Models()

// lookup is Lookup without the copy, naming field in errors; the callers in
// this package never modify the result.
func lookup(model, name, field string) (Profile, error) {
	ps, ok := catalog[model]
	if !ok {
		return Profile{}, modelError(model)
	}
	want := normalizeName(name)
	for _, p := range ps {
		if p.Name == want {
			return p, nil
		}
	}
	return Profile{}, unknownProfile(model, name, field)
}

// unknownProfile is the error for a profile name the model does not offer.
func unknownProfile(model, name, field string) *domain.Error {
	ps := catalog[model]
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return domain.Invalid(field, "MIG profile %q is not a profile of %s; its profiles are %s",
		name, model, strings.Join(names, ", "))
}

func modelError(model string) *domain.Error {
	if m, known := domain.LookupGPUModel(model); known && m.MIGSlices > 0 {
		return domain.Invalid("model", "GPU model %q has no recorded MIG placement geometry (models with one: %s)",
			model, strings.Join(Models(), ", "))
	}
	return domain.Invalid("model", "GPU model %q has no MIG profiles; MIG models: %s",
		model, strings.Join(Models(), ", "))
}

// normalizeName turns "MIG 3g.40gb", " 3G.40GB " into "3g.40gb".
func normalizeName(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if rest, ok := strings.CutPrefix(n, "mig "); ok {
		n = strings.TrimSpace(rest)
	}
	return n
}
