package mig

import (
	"bytes"
	"encoding/csv"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// sharedFixtures is the project's fixture directory, relative to this package.
const sharedFixtures = "../../../shared/data/fixtures"

// fixtureSources returns the fixture from testdata (always) and from the shared
// fixture directory when it exists, and fails if the two copies differ.
func fixtureSources(t *testing.T, name string) map[string][]byte {
	t.Helper()
	local, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("testdata copy of %s: %v", name, err)
	}
	out := map[string][]byte{"testdata": local}
	shared, err := os.ReadFile(filepath.Join(sharedFixtures, name))
	switch {
	case errors.Is(err, os.ErrNotExist):
		t.Logf("shared fixture %s not found under %s: checking the testdata copy only", name, sharedFixtures)
	case err != nil:
		t.Fatalf("shared fixture %s: %v", name, err)
	default:
		if !bytes.Equal(local, shared) {
			t.Errorf("testdata/%s differs from %s/%s: refresh the copy", name, sharedFixtures, name)
		}
		out["shared"] = shared
	}
	return out
}

// TestSharedFixturesPresent reports (as a skip, not a failure) when the shared
// fixture directory is missing, so a reader sees why only testdata was checked.
func TestSharedFixturesPresent(t *testing.T) {
	if _, err := os.Stat(sharedFixtures); err != nil {
		t.Skipf("shared fixtures not present at %s (%v); the testdata copies are still checked", sharedFixtures, err)
	}
}

func parseInts(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("bad integer list %q: %v", s, err)
		}
		out = append(out, v)
	}
	return out
}

// computeFromName reads the compute slice count from a profile name ("3g.40gb" -> 3),
// a source independent of the catalog's ComputeSlices.
func computeFromName(t *testing.T, name string) int {
	t.Helper()
	g, _, ok := strings.Cut(name, "g.")
	v, err := strconv.Atoi(g)
	if !ok || err != nil {
		t.Fatalf("profile name %q has no <n>g. prefix", name)
	}
	return v
}

func TestCatalogMatchesH100PlacementFixture(t *testing.T) {
	for src, data := range fixtureSources(t, "mig-placements_h100-80gb.csv") {
		t.Run(src, func(t *testing.T) {
			recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			wantHeader := []string{"gpu", "profile_name", "gi_profile_id", "max_instances", "memory_gib", "sm_count", "placement_start_slots", "placement_size_slots"}
			if !reflect.DeepEqual(recs[0], wantHeader) {
				t.Fatalf("header = %v, want %v", recs[0], wantHeader)
			}
			want := map[string]Profile{}
			for _, r := range recs[1:] {
				if r[0] != "NVIDIA H100 80GB HBM3" {
					t.Fatalf("row for GPU %q, want NVIDIA H100 80GB HBM3", r[0])
				}
				name := strings.TrimPrefix(r[1], "MIG ")
				mem, err := strconv.ParseFloat(r[4], 64)
				if err != nil {
					t.Fatal(err)
				}
				ints := parseInts(t, r[2]+","+r[3]+","+r[5]+","+r[7])
				want[name] = Profile{
					Name: name, ID: ints[0], MaxInstances: ints[1], MemoryGiB: mem, SMs: ints[2],
					MemorySlices: ints[3], Starts: parseInts(t, r[6]),
					ComputeSlices: computeFromName(t, name), MediaExtensions: strings.HasSuffix(name, "+me"),
				}
				// The "MIG <name>" form of the fixture must resolve too.
				if _, err := Lookup("H100-80GB", r[1]); err != nil {
					t.Errorf("Lookup(H100-80GB, %q): %v", r[1], err)
				}
			}
			got, ok := Profiles("H100-80GB")
			if !ok {
				t.Fatal("H100-80GB has no catalog")
			}
			if len(got) != len(want) {
				t.Errorf("catalog has %d profiles, fixture %d", len(got), len(want))
			}
			for _, p := range got {
				w, ok := want[p.Name]
				if !ok {
					t.Errorf("catalog profile %s is not in the fixture", p.Name)
					continue
				}
				if !reflect.DeepEqual(p, w) {
					t.Errorf("%s:\n catalog %+v\n fixture %+v", p.Name, p, w)
				}
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	cases := map[string]struct {
		model     string
		wantOK    bool
		wantNames []string
	}{
		"H100-80GB": {model: "H100-80GB", wantOK: true,
			wantNames: []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
		"A100-80GB": {model: "A100-80GB", wantOK: true,
			wantNames: []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
		"A100-40GB": {model: "A100-40GB", wantOK: true,
			wantNames: []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
		"H200-141GB": {model: "H200-141GB", wantOK: true,
			wantNames: []string{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
		"B200 has no recorded placements":  {model: "B200-180GB"},
		"GB200 has no recorded placements": {model: "GB200"},
		"H100-94GB not catalogued":         {model: "H100-94GB"},
		"L40S has no MIG":                  {model: "L40S-48GB"},
		"unknown model":                    {model: "X1000"},
		"name is exact":                    {model: "h100-80gb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps, ok := Profiles(tc.model)
			if ok != tc.wantOK {
				t.Fatalf("Profiles(%q) ok = %v, want %v", tc.model, ok, tc.wantOK)
			}
			var names []string
			for _, p := range ps {
				names = append(names, p.Name)
			}
			if !reflect.DeepEqual(names, tc.wantNames) {
				t.Errorf("names = %v, want %v", names, tc.wantNames)
			}
		})
	}
}

func TestModelsAreDomainMIGModels(t *testing.T) {
	want := []string{"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}
	if got := Models(); !reflect.DeepEqual(got, want) {
		t.Errorf("Models() = %v, want %v", got, want)
	}
	for _, m := range Models() {
		dm, ok := domain.LookupGPUModel(m)
		if !ok || dm.MIGSlices != ComputeSlots {
			t.Errorf("%s: domain model %+v (known %v), want MIGSlices %d", m, dm, ok, ComputeSlots)
		}
	}
}

func TestProfilesReturnsACopy(t *testing.T) {
	ps, _ := Profiles("H100-80GB")
	ps[4].Starts[0] = 3
	ps[4].MaxInstances = 9
	p, err := Lookup("H100-80GB", "3g.40gb")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Starts, []int{0, 4}) || p.MaxInstances != 2 {
		t.Errorf("catalog changed through a returned slice: %+v", p)
	}
	p.Starts[1] = 5
	if q, _ := Lookup("A100-80GB", "3g.40gb"); !reflect.DeepEqual(q.Starts, []int{0, 4}) {
		t.Errorf("catalog changed through Lookup's result: %+v", q)
	}
}

// maxDisjoint is the most non-overlapping placements of one profile, derived
// from its starts and size alone (greedy by start is optimal for equal sizes).
func maxDisjoint(p Profile) int {
	n, next := 0, 0
	for _, s := range slices.Sorted(slices.Values(p.Starts)) {
		if s >= next {
			n++
			next = s + p.MemorySlices
		}
	}
	return n
}

func TestGeometryIsConsistent(t *testing.T) {
	for _, model := range Models() {
		ps, _ := Profiles(model)
		for _, p := range ps {
			if c := computeFromName(t, p.Name); p.ComputeSlices != c {
				t.Errorf("%s %s: ComputeSlices %d, name says %d", model, p.Name, p.ComputeSlices, c)
			}
			if p.ComputeSlices > p.MemorySlices {
				t.Errorf("%s %s: %d compute slices on %d memory slots", model, p.Name, p.ComputeSlices, p.MemorySlices)
			}
			for _, s := range p.Starts {
				if s < 0 || s+p.MemorySlices > MemorySlots {
					t.Errorf("%s %s: start %d + size %d leaves the %d slots", model, p.Name, s, p.MemorySlices, MemorySlots)
				}
			}
			// The instance limit is what the starts allow, except that the
			// media engines exist once per GPU (+me: 1).
			want := maxDisjoint(p)
			if p.MediaExtensions {
				want = 1
			}
			if p.MaxInstances != want {
				t.Errorf("%s %s: MaxInstances %d, geometry allows %d", model, p.Name, p.MaxInstances, want)
			}
			if p.MediaExtensions != strings.HasSuffix(p.Name, "+me") {
				t.Errorf("%s %s: MediaExtensions %v", model, p.Name, p.MediaExtensions)
			}
			if p.MemoryGiB <= 0 {
				t.Errorf("%s %s: MemoryGiB %v", model, p.Name, p.MemoryGiB)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	cases := map[string]struct {
		model, name string
		wantName    string
		wantUnits   int
		wantField   string // non-empty: an invalid_argument error on this field
		wantMsg     string
	}{
		"short name":             {model: "H100-80GB", name: "3g.40gb", wantName: "3g.40gb", wantUnits: 3000},
		"nvidia-smi form":        {model: "H100-80GB", name: "MIG 3g.40gb", wantName: "3g.40gb", wantUnits: 3000},
		"case and spaces":        {model: "H100-80GB", name: "  mig 4G.40GB ", wantName: "4g.40gb", wantUnits: 4000},
		"media extensions":       {model: "H100-80GB", name: "MIG 1g.10gb+me", wantName: "1g.10gb+me", wantUnits: 1000},
		"one slice is 1/7":       {model: "A100-40GB", name: "1g.5gb", wantName: "1g.5gb", wantUnits: 1000},
		"1g with two slots":      {model: "A100-40GB", name: "1g.10gb", wantName: "1g.10gb", wantUnits: 1000},
		"whole GPU":              {model: "H200-141GB", name: "7g.141gb", wantName: "7g.141gb", wantUnits: UnitsPerGPU},
		"other model's name":     {model: "H100-80GB", name: "3g.20gb", wantField: "profile", wantMsg: `"3g.20gb" is not a profile of H100-80GB`},
		"garbage":                {model: "A100-80GB", name: "MIG", wantField: "profile", wantMsg: "its profiles are 1g.10gb,"},
		"B200 geometry unknown":  {model: "B200-180GB", name: "1g.23gb", wantField: "model", wantMsg: "no recorded MIG placement geometry"},
		"not MIG-capable":        {model: "L40S-48GB", name: "1g.10gb", wantField: "model", wantMsg: "has no MIG profiles"},
		"unknown model":          {model: "Z9", name: "1g.10gb", wantField: "model", wantMsg: `"Z9"`},
		"MIG prefix needs space": {model: "H100-80GB", name: "MIG-3g.40gb", wantField: "profile", wantMsg: "MIG-3g.40gb"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Lookup(tc.model, tc.name)
			checkErr(t, err, domain.CodeInvalidArgument, tc.wantField, tc.wantMsg)
			if tc.wantField != "" {
				return
			}
			if p.Name != tc.wantName || p.GPUUnits() != tc.wantUnits {
				t.Errorf("got %s with %d units, want %s with %d", p.Name, p.GPUUnits(), tc.wantName, tc.wantUnits)
			}
		})
	}
}

// checkErr: wantField == "" means no error; otherwise a *domain.Error with
// that code and field whose message contains wantMsg.
func checkErr(t *testing.T, err error, code domain.Code, wantField, wantMsg string) {
	t.Helper()
	if wantField == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T), want *domain.Error", err, err)
	}
	if de.Code != code || de.Field != wantField || !strings.Contains(de.Message, wantMsg) {
		t.Errorf("error = {%s %s %q}, want {%s %s containing %q}", de.Code, de.Field, de.Message, code, wantField, wantMsg)
	}
}

func TestUnitsAreExact(t *testing.T) {
	// Shares the scheduler hands out, as num/den of a GPU, and their units.
	cases := map[string]struct {
		num, den  int
		wantUnits int
	}{
		"whole GPU":     {1, 1, 7000},
		"one MIG slice": {1, 7, 1000},
		"3g slice":      {3, 7, 3000},
		"quarter share": {1, 4, 1750},
		"half share":    {1, 2, 3500},
		"eighth share":  {1, 8, 875},
		"one milli-GPU": {1, 1000, 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if UnitsPerGPU*tc.num%tc.den != 0 {
				t.Fatalf("%d/%d of a GPU is not a whole number of units", tc.num, tc.den)
			}
			if got := UnitsPerGPU * tc.num / tc.den; got != tc.wantUnits {
				t.Errorf("units = %d, want %d", got, tc.wantUnits)
			}
		})
	}
}
