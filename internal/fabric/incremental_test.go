package fabric_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/fabrictest"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// mixedInput is a cluster of 3 stripes x 6 servers x 4 GPUs with tenants in
// every isolation mode and network model, segmented (each with a storage
// group) and not, and no allocations yet.
func mixedInput(t *testing.T) fabric.Input {
	t.Helper()
	top, err := topology.Generate(topology.GenerateOptions{Stripes: 3, ServersPerStripe: 6, GPUsPerServer: 4, Spines: 2})
	if err != nil {
		t.Fatal(err)
	}
	in := fabric.Input{Topology: top, IDs: fabric.IDs{Tenants: map[string]fabric.TenantIDs{}}}
	for i, spec := range []struct {
		iso domain.Isolation
		net domain.NetworkModel
		seg bool
	}{
		{domain.IsolationServer, domain.NetworkPureRT5, false},
		{domain.IsolationGPU, domain.NetworkPureRT5, false},
		{domain.IsolationGPU, domain.NetworkPureRT5, true},
		{domain.IsolationServer, domain.NetworkPureRT5, true},
		{domain.IsolationGPU, domain.NetworkVLANAware, false},
		{domain.IsolationGPU, domain.NetworkVLANAware, true},
	} {
		name := fmt.Sprintf("t%d", i)
		in.Tenants = append(in.Tenants, domain.Tenant{Name: name, Isolation: spec.iso, Network: spec.net, JobSegmentation: spec.seg})
		ids := fabric.TenantIDs{L3VNI: uint32(10000 + i), VRFID: uint16(1 + i), L3VLAN: uint16(3000 + i)}
		if spec.net == domain.NetworkVLANAware {
			ids.MACVRFID, ids.MACRT = uint16(100+i), uint32(20000+i)
		}
		if spec.seg {
			ids.UnclassifiedGroup = uint16(900 + i)
			in.Groups = append(in.Groups, fabric.Group{Tenant: name, Name: "storage", ID: uint16(800 + i), Prefixes: []string{fmt.Sprintf("10.99.%d.0/24", i)}})
		}
		in.IDs.Tenants[name] = ids
	}
	return in
}

// world drives random job starts and stops against a Compiler and checks
// every step against a full compile of the same input.
type world struct {
	t    *testing.T
	rng  *rand.Rand
	cur  fabric.Input
	full *fabric.Intent
	k    *fabric.Compiler
	next int
	// ok and refused count the steps, changed the devices recompiled.
	ok, refused, changed int
}

func clone(in fabric.Input) fabric.Input {
	in.Allocations = slices.Clone(in.Allocations)
	in.Groups = slices.Clone(in.Groups)
	in.Contracts = slices.Clone(in.Contracts)
	in.IDs.Links = maps.Clone(in.IDs.Links)
	in.IDs.L3VLANs = maps.Clone(in.IDs.L3VLANs)
	return in
}

func (w *world) tenant(name string) domain.Tenant {
	for _, t := range w.cur.Tenants {
		if t.Name == name {
			return t
		}
	}
	w.t.Fatalf("no tenant %s", name)
	return domain.Tenant{}
}

// startJob places a job of a random tenant on 1-2 random servers (random
// GPUs: they may collide with other tenants', which the compile must
// refuse), with a group (and sometimes a contract) when segmented and link
// ids when vlan-aware.
func (w *world) startJob(next *fabric.Input, ch *fabric.Change) {
	w.next++
	id := fmt.Sprint(w.next)
	t := w.cur.Tenants[w.rng.IntN(len(w.cur.Tenants))]
	servers := w.cur.Topology.Servers()
	free := w.rng.IntN(4) != 0 // mostly where it fits, sometimes a collision
	fits := func(s *domain.Server) bool {
		for _, b := range next.Allocations {
			if b.Server != s.Name || b.Tenant == t.Name {
				continue
			}
			if b.Whole || t.Isolation == domain.IsolationServer || w.tenant(b.Tenant).Isolation == domain.IsolationServer {
				return false
			}
		}
		return true
	}
	for range 1 + w.rng.IntN(2) {
		s := servers[w.rng.IntN(len(servers))]
		for try := 0; free && !fits(s) && try < 20; try++ {
			s = servers[w.rng.IntN(len(servers))]
		}
		a := fabric.Allocation{Tenant: t.Name, Server: s.Name, JobID: id, Whole: w.rng.IntN(12) == 0}
		used := map[int]bool{}
		for _, b := range next.Allocations {
			if b.Server == s.Name {
				for _, g := range b.GPUs {
					used[g] = true
				}
			}
		}
		for g := range s.GPUs {
			if w.rng.IntN(3) == 0 && (!free || !used[g]) {
				a.GPUs = append(a.GPUs, g)
			}
		}
		if len(a.GPUs) == 0 {
			g := w.rng.IntN(s.GPUs)
			for try := 0; free && used[g] && try < 10; try++ {
				g = w.rng.IntN(s.GPUs)
			}
			a.GPUs = []int{g}
		}
		if w.rng.IntN(10) == 0 {
			a.JobID = "" // a reservation, not a job
		}
		next.Allocations = append(next.Allocations, a)
		ch.Add = append(ch.Add, a)
	}
	if t.JobSegmentation && w.rng.IntN(10) != 0 {
		g := fabric.Group{Tenant: t.Name, Name: "job-" + id, ID: uint16(1 + w.rng.IntN(2000)), JobID: id}
		if !free {
			g.ID = uint16(1 + w.rng.IntN(20)) // likely taken
		}
		next.Groups = append(next.Groups, g)
		ch.AddGroups = append(ch.AddGroups, g)
		if w.rng.IntN(3) == 0 {
			c := fabric.Contract{Tenant: t.Name, A: g.Name, B: "storage"}
			next.Contracts = append(next.Contracts, c)
			ch.AddContracts = append(ch.AddContracts, c)
		}
	}
}

// stopJob removes every allocation of a running job, its group and the
// contracts naming it, and sometimes the ids of its links.
func (w *world) stopJob(next *fabric.Input, ch *fabric.Change) {
	if len(next.Allocations) == 0 {
		return
	}
	// Stop a job that ran before this change (removals apply first).
	var running []fabric.Allocation
	for _, a := range next.Allocations {
		if slices.ContainsFunc(w.cur.Allocations, func(b fabric.Allocation) bool { return reflect.DeepEqual(a, b) }) {
			running = append(running, a)
		}
	}
	if len(running) == 0 {
		return
	}
	victim := running[w.rng.IntN(len(running))]
	keep := next.Allocations[:0:0]
	once := false
	for _, a := range next.Allocations {
		if a.Tenant == victim.Tenant && a.JobID == victim.JobID && (a.JobID != "" || reflect.DeepEqual(a, victim) && !once) {
			once = true
			ch.Remove = append(ch.Remove, a)
			continue
		}
		keep = append(keep, a)
	}
	next.Allocations = keep
	if victim.JobID == "" {
		return
	}
	gi := slices.IndexFunc(next.Groups, func(g fabric.Group) bool { return g.Tenant == victim.Tenant && g.JobID == victim.JobID })
	if gi < 0 {
		return
	}
	g := next.Groups[gi]
	next.Groups = slices.Delete(next.Groups, gi, gi+1)
	ch.RemoveGroups = append(ch.RemoveGroups, fabric.GroupRef{Tenant: g.Tenant, Name: g.Name})
	next.Contracts = slices.DeleteFunc(next.Contracts, func(c fabric.Contract) bool {
		if c.Tenant == g.Tenant && (c.A == g.Name || c.B == g.Name) {
			if i := slices.Index(ch.AddContracts, c); i >= 0 {
				ch.AddContracts = slices.Delete(ch.AddContracts, i, i+1) // added in this change
			} else {
				ch.RemoveContracts = append(ch.RemoveContracts, c)
			}
			return true
		}
		return false
	})
	if w.rng.IntN(2) == 0 {
		for ref, ids := range next.IDs.Links {
			if ids.Tenant == victim.Tenant && w.rng.IntN(2) == 0 {
				delete(next.IDs.Links, ref)
				ch.DropLinks = append(ch.DropLinks, ref)
			}
		}
	}
}

// contract adds or removes a contract between two groups of a tenant.
func (w *world) contract(next *fabric.Input, ch *fabric.Change) {
	if len(next.Contracts) > 0 && w.rng.IntN(2) == 0 {
		i := w.rng.IntN(len(next.Contracts))
		if !slices.Contains(w.cur.Contracts, next.Contracts[i]) {
			return
		}
		ch.RemoveContracts = append(ch.RemoveContracts, next.Contracts[i])
		next.Contracts = slices.Delete(next.Contracts, i, i+1)
		return
	}
	if len(next.Groups) < 2 {
		return
	}
	a, b := next.Groups[w.rng.IntN(len(next.Groups))], next.Groups[w.rng.IntN(len(next.Groups))]
	if a.Tenant != b.Tenant || a.Name == b.Name {
		return
	}
	c := fabric.Contract{Tenant: a.Tenant, A: a.Name, B: b.Name}
	next.Contracts = append(next.Contracts, c)
	ch.AddContracts = append(ch.AddContracts, c)
}

func (w *world) step(i int) {
	t := w.t
	next := clone(w.cur)
	var ch fabric.Change
	for range 1 + w.rng.IntN(2) {
		r := w.rng.IntN(10)
		if i < 40 {
			r = 0 // fill the cluster first
		}
		switch {
		case r < 5:
			w.startJob(&next, &ch)
		case r < 9:
			w.stopJob(&next, &ch)
		default:
			w.contract(&next, &ch)
		}
	}
	// Link ids, as the state machine would allocate them from the pools.
	if err := fabrictest.AssignLinkIDs(&next, 100, 50000); err == nil {
		for ref, ids := range next.IDs.Links {
			if old, ok := w.cur.IDs.Links[ref]; !ok || old != ids || slices.Contains(ch.DropLinks, ref) {
				if ch.Links == nil {
					ch.Links = map[fabric.LinkRef]fabric.LinkIDs{}
				}
				ch.Links[ref] = ids
			}
		}
	}
	// Per-leaf L3 VLANs, when the input has them: a VRF coming to a
	// leaf gets one, a VRF leaving drops its own.
	if w.cur.IDs.L3VLANs != nil {
		if err := fabrictest.AssignL3VLANs(&next, 3000, 4094); err == nil {
			for lt, v := range next.IDs.L3VLANs {
				if old, ok := w.cur.IDs.L3VLANs[lt]; !ok || old != v {
					if ch.L3VLANs == nil {
						ch.L3VLANs = map[fabric.LeafTenant]uint16{}
					}
					ch.L3VLANs[lt] = v
				}
			}
			for lt := range w.cur.IDs.L3VLANs {
				if _, ok := next.IDs.L3VLANs[lt]; !ok {
					ch.DropL3VLANs = append(ch.DropL3VLANs, lt)
				}
			}
		}
	}
	want, wantErr := fabric.Compile(next)
	before := w.k.Intent()
	changed, err := w.k.Apply(ch)
	if wantErr != nil {
		if err == nil {
			t.Fatalf("step %d: the full compile refuses the change (%v), the incremental one accepted it", i, wantErr)
		}
		var de *domain.Error
		if !asDomain(err, &de) || de.Code != domain.CodeInvalidArgument {
			t.Fatalf("step %d: error %v is not an invalid_argument *domain.Error", i, err)
		}
		if w.k.Intent() != before {
			t.Fatalf("step %d: a refused change changed the intent", i)
		}
		if again, err := fabric.Compile(w.k.Input()); err != nil || !reflect.DeepEqual(again, w.full) {
			t.Fatalf("step %d: a refused change left another input behind (%v)", i, err)
		}
		w.refused++
		return
	}
	if err != nil {
		t.Fatalf("step %d: the full compile accepts the change, the incremental one refused it: %v", i, err)
	}
	got := w.k.Intent()
	if !reflect.DeepEqual(got, want) {
		for _, d := range want.Devices {
			if g := got.Device(d.Name); !reflect.DeepEqual(g, &d) {
				t.Errorf("step %d: device %s differs:\n got %+v\nwant %+v", i, d.Name, g, d)
			}
		}
		t.Fatalf("step %d: the incremental intent differs from the full compile (warnings %q vs %q)", i, got.Warnings, want.Warnings)
	}
	var gotNames, wantNames []string
	for _, d := range changed {
		gotNames = append(gotNames, d.Name)
	}
	for _, d := range want.Devices {
		if !reflect.DeepEqual(d, *w.full.Device(d.Name)) {
			wantNames = append(wantNames, d.Name)
		}
	}
	if !slices.Equal(gotNames, wantNames) {
		t.Fatalf("step %d: changed devices %v, want %v", i, gotNames, wantNames)
	}
	if again, err := fabric.Compile(w.k.Input()); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("step %d: Input() does not compile to the intent (%v)", i, err)
	}
	// The intent returned before the change is a snapshot: untouched.
	if !reflect.DeepEqual(before, w.full) {
		t.Fatalf("step %d: Apply changed an intent returned earlier", i)
	}
	w.cur, w.full = next, want
	w.ok++
	w.changed += len(changed)
}

func asDomain(err error, de **domain.Error) bool {
	e, ok := err.(*domain.Error)
	*de = e
	return ok
}

// TestCompilerMatchesFullCompile runs random sequences of job starts and
// stops (with groups, contracts, link ids, conflicts the compile must
// refuse) through a Compiler and checks after every step that its intent
// equals a full compile of the same input, that it names exactly the
// devices that changed, and that a refused change changes nothing.
func TestCompilerMatchesFullCompile(t *testing.T) {
	steps, seeds := 150, 3
	if testing.Short() {
		steps = 60
	}
	if n, err := strconv.Atoi(os.Getenv("JOBFABRIC_FUZZ_SEEDS")); err == nil && n > 0 {
		seeds, steps = n, 400 // a longer soak: JOBFABRIC_FUZZ_SEEDS=50 go test -run TestCompilerMatches
	}
	bases := map[string]func(t *testing.T) fabric.Input{
		"fixture segmented": func(t *testing.T) fabric.Input { return input(t, "frr", fabrictest.Segmented) },
		"fixture vlan-aware, VRFs where used": func(t *testing.T) fabric.Input {
			in := input(t, "nxos", fabrictest.VLANAware)
			in.Options.VRFPlacement = fabric.VRFsWhereUsed
			return in
		},
		"mixed tenants": mixedInput,
		"mixed tenants, per-leaf L3 VLANs, VRFs where used": func(t *testing.T) fabric.Input {
			in := mixedInput(t)
			in.Options.VRFPlacement = fabric.VRFsWhereUsed
			for n, ids := range in.IDs.Tenants {
				ids.L3VLAN = 0
				in.IDs.Tenants[n] = ids
			}
			if err := fabrictest.AssignL3VLANs(&in, 3000, 4094); err != nil {
				t.Fatal(err)
			}
			return in
		},
		"mixed tenants, VRFs where used": func(t *testing.T) fabric.Input {
			in := mixedInput(t)
			in.Options.VRFPlacement = fabric.VRFsWhereUsed
			return in
		},
	}
	for name, base := range bases {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("%s/seed %d", name, seed), func(t *testing.T) {
				in := base(t)
				full, err := fabric.Compile(in)
				if err != nil {
					t.Fatal(err)
				}
				k, err := fabric.NewCompiler(in)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(k.Intent(), full) {
					t.Fatal("NewCompiler's intent differs from Compile's")
				}
				w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 7)), cur: clone(in), full: full, k: k, next: 100}
				for i := range steps {
					w.step(i)
				}
				t.Logf("%d changes applied (%d devices recompiled, %d running allocations at the end), %d refused like the full compile",
					w.ok, w.changed, len(w.cur.Allocations), w.refused)
				if w.ok < steps/3 || w.refused == 0 {
					t.Errorf("the sequence exercised too little: %d applied, %d refused", w.ok, w.refused)
				}
			})
		}
	}
}

func TestNewCompilerFailsLikeCompile(t *testing.T) {
	for name, tc := range map[string]struct {
		model string
		edit  func(in *fabric.Input)
	}{
		"unknown tenant":         {fabrictest.PureRT5, func(in *fabric.Input) { in.Allocations[0].Tenant = "nobody" }},
		"gateway pool too small": {fabrictest.VLANAware, func(in *fabric.Input) { in.Options.IRBPool4 = "10.64.0.0/26" }},
		"L3 VLAN twice on a leaf": {fabrictest.PureRT5, func(in *fabric.Input) {
			in.IDs.L3VLANs = map[fabric.LeafTenant]uint16{{Leaf: "s1-leaf0", Tenant: "acme"}: 3002}
		}},
		"link id of another tenant": {fabrictest.VLANAware, func(in *fabric.Input) {
			for ref, ids := range in.IDs.Links {
				ids.Tenant = "acme"
				in.IDs.Links[ref] = ids
				break
			}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(t, "frr", tc.model)
			tc.edit(&in)
			_, want := fabric.Compile(in)
			if want == nil {
				t.Fatal("the full compile accepts the input")
			}
			if _, err := fabric.NewCompiler(in); err == nil || err.Error() != want.Error() {
				t.Fatalf("NewCompiler: %v, want %v", err, want)
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	tests := map[string]struct {
		change    fabric.Change
		wantField string
	}{
		"remove an allocation nobody has":  {fabric.Change{Remove: []fabric.Allocation{{Tenant: "acme", Server: "s1-gpu004", GPUs: []int{0}}}}, "change.remove[0]"},
		"unknown server":                   {fabric.Change{Add: []fabric.Allocation{{Tenant: "acme", Server: "nope", GPUs: []int{0}}}}, "change.add[0].server"},
		"a GPU the server lacks":           {fabric.Change{Add: []fabric.Allocation{{Tenant: "acme", Server: "s1-gpu004", GPUs: []int{7}}}}, "change.add[0].gpus[0]"},
		"a group ID in use":                {fabric.Change{AddGroups: []fabric.Group{{Tenant: "globex", Name: "x", ID: 101}}}, "change.addGroups[0].id"},
		"a group of an unsegmented tenant": {fabric.Change{AddGroups: []fabric.Group{{Tenant: "acme", Name: "x", ID: 150}}}, "change.addGroups[0].tenant"},
		"remove a group a contract names":  {fabric.Change{RemoveGroups: []fabric.GroupRef{{Tenant: "globex", Name: "storage"}}}, "contracts[globex][0].b"},
		"remove a contract nobody has":     {fabric.Change{RemoveContracts: []fabric.Contract{{Tenant: "globex", A: "job-21", B: "storage"}}}, "change.removeContracts[0]"},
		"a link of another tenant":         {fabric.Change{Add: []fabric.Allocation{{Tenant: "acme", Server: "s1-gpu002", GPUs: []int{0}}}}, "change.add[0]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k, err := fabric.NewCompiler(input(t, "frr", fabrictest.Segmented))
			if err != nil {
				t.Fatal(err)
			}
			before := k.Intent()
			_, err = k.Apply(tc.change)
			var de *domain.Error
			if !asDomain(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field != tc.wantField {
				t.Fatalf("error %v, want invalid_argument on %s", err, tc.wantField)
			}
			if k.Intent() != before {
				t.Fatal("a refused change changed the intent")
			}
		})
	}
}
