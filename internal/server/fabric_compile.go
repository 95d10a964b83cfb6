package server

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
	"github.com/jobfabric/jobfabric/internal/state"
)

// fabricCompiler compiles the fabric loop's inputs with the incremental
// compiler (fabric.Compiler): most inputs differ from the previous one by
// a few jobs' allocations, groups, contracts and link ids, and only the
// leaves those touch are compiled again. Anything else that changed (the
// topology, a tenant, tenant ids, options), or a change the incremental
// compiler refuses, is compiled in full, and the next input starts from
// that. Either way the intent is the one fabric.Compile returns for the
// input (TestFabricLoopCompilesIncrementally checks it on the server's
// path; internal/fabric proves Apply against full compiles).
//
// Not safe for concurrent use: the fabric loop calls it under fabricMu.
type fabricCompiler struct {
	k *fabric.Compiler
	// last is the input k's intent is the compile of (the caller's; the
	// state machine builds a fresh one for every compile, so nothing else
	// writes to it).
	last fabric.Input
	// check, set by tests, compiles every input in full as well and fails
	// when the two intents differ.
	check bool
	// full and incremental count the compiles of each kind, for tests and
	// the debug log.
	full, incremental int
	// files are the rendered files of every device of the last intent
	// rendered (render), changed the devices the compiles since then
	// changed, and all says a full compile replaced the intent: render
	// again only what changed, rendering every device of a 1,500-leaf
	// fabric takes seconds.
	files   map[string]render.DeviceFiles
	changed map[string]bool
	all     bool
	// sums are the stored files and hash of each device's files (sum),
	// kept until the device is rendered again: hashing every device of a
	// 1,568-leaf fabric took 0.2 s of each revision.
	sums map[string]deviceSum
}

// deviceSum is a device's rendered files as the state stores them, and
// their hash.
type deviceSum struct {
	files []state.File
	hash  string
}

// sum is df's stored files and hash; df must be one of the files render
// returned last. With check, a kept sum is compared with df's own.
func (fc *fabricCompiler) sum(df render.DeviceFiles) (deviceSum, error) {
	compute := func() deviceSum {
		files := storedFiles(df.Files)
		return deviceSum{files: files, hash: state.ConfigHash(df.NOS, files)}
	}
	if s, ok := fc.sums[df.Device]; ok {
		if fc.check {
			if want := compute(); want.hash != s.hash {
				return deviceSum{}, fmt.Errorf("fabric render: the kept hash of %s is %s, its files' is %s", df.Device, s.hash, want.hash)
			}
		}
		return s, nil
	}
	s := compute()
	if fc.sums == nil {
		fc.sums = map[string]deviceSum{}
	}
	fc.sums[df.Device] = s
	return s, nil
}

// render renders it, the intent compile returned last: only the devices
// the compiles since the previous render changed, the others' files are
// the previous render's. Devices render independently of each other.
func (fc *fabricCompiler) render(it *fabric.Intent) ([]render.DeviceFiles, error) {
	if fc.files == nil || fc.all {
		fc.sums = nil
		files, err := render.RenderIntent(it)
		if err != nil {
			fc.files = nil
			return nil, err
		}
		fc.files = make(map[string]render.DeviceFiles, len(files))
		for _, f := range files {
			fc.files[f.Device] = f
		}
		fc.all, fc.changed = false, nil
		return files, nil
	}
	for name := range fc.changed {
		d := it.Device(name)
		if d == nil {
			fc.files = nil // cannot happen: a compile that changes the devices is full
			return fc.render(it)
		}
		files, err := render.Options{}.Render(d, "")
		if err != nil {
			fc.files = nil
			return nil, err
		}
		fc.files[name] = render.DeviceFiles{Device: d.Name, NOS: d.NOS, Files: files}
		delete(fc.sums, name)
	}
	fc.changed = nil
	out := make([]render.DeviceFiles, len(it.Devices))
	for i := range it.Devices {
		out[i] = fc.files[it.Devices[i].Name]
	}
	return out, nil
}

// compile returns the intent of in; incremental says whether it came from
// applying a change to the previous intent.
func (fc *fabricCompiler) compile(in fabric.Input) (it *fabric.Intent, incremental bool, err error) {
	it, incremental, err = fc.compileOnce(in)
	if err != nil || !fc.check {
		return it, incremental, err
	}
	want, werr := fabric.Compile(in)
	if werr != nil || !reflect.DeepEqual(it, want) {
		return nil, incremental, fmt.Errorf("fabric compile: the incremental intent differs from the full compile of the same input (incremental %v, full compile error %v)", incremental, werr)
	}
	return it, incremental, nil
}

func (fc *fabricCompiler) compileOnce(in fabric.Input) (*fabric.Intent, bool, error) {
	if fc.k != nil {
		if ch, ok := inputChange(fc.last, in); ok {
			if devs, err := fc.k.Apply(ch); err == nil {
				fc.last = in
				fc.incremental++
				if fc.changed == nil {
					fc.changed = map[string]bool{}
				}
				for _, d := range devs {
					fc.changed[d.Name] = true
				}
				return fc.k.Intent(), true, nil
			}
			// Refused (the full compile names the error, if there is one).
		}
	}
	fc.k = nil
	k, err := fabric.NewCompiler(in)
	if err != nil {
		return nil, false, err
	}
	fc.k, fc.last = k, in
	fc.full++
	fc.all = true
	return k.Intent(), false, nil
}

// inputChange is the change from prev to next, or false when they differ
// in what a fabric.Change cannot carry. The topology is compared by
// pointer: the state machine replaces it whole on every apply and never
// edits it in place.
func inputChange(prev, next fabric.Input) (fabric.Change, bool) {
	var ch fabric.Change
	if prev.Topology != next.Topology || prev.Options != next.Options ||
		!reflect.DeepEqual(prev.Tenants, next.Tenants) || !reflect.DeepEqual(prev.IDs.Tenants, next.IDs.Tenants) {
		return ch, false
	}
	// Allocations and contracts are multisets: remove what only prev has,
	// add what only next has.
	ch.Remove, ch.Add = multisetDiff(prev.Allocations, next.Allocations, allocationKey)
	ch.RemoveContracts, ch.AddContracts = multisetDiff(prev.Contracts, next.Contracts, func(c fabric.Contract) string {
		a, b := c.A, c.B
		if b < a {
			a, b = b, a
		}
		return c.Tenant + "\x00" + a + "\x00" + b
	})
	// Groups by name: a group that changed is removed and added again.
	old := map[fabric.GroupRef]*fabric.Group{}
	for i := range prev.Groups {
		g := &prev.Groups[i]
		old[fabric.GroupRef{Tenant: g.Tenant, Name: g.Name}] = g
	}
	seen := map[fabric.GroupRef]bool{}
	for _, g := range next.Groups {
		ref := fabric.GroupRef{Tenant: g.Tenant, Name: g.Name}
		seen[ref] = true
		if o, ok := old[ref]; ok && reflect.DeepEqual(*o, g) {
			continue
		} else if ok {
			ch.RemoveGroups = append(ch.RemoveGroups, ref)
		}
		ch.AddGroups = append(ch.AddGroups, g)
	}
	for _, g := range prev.Groups {
		if ref := (fabric.GroupRef{Tenant: g.Tenant, Name: g.Name}); !seen[ref] {
			ch.RemoveGroups = append(ch.RemoveGroups, ref)
		}
	}
	// Link ids: drop the links next has none for, set the new and changed.
	for _, ref := range slices.SortedFunc(maps.Keys(prev.IDs.Links), compareLinkRefs) {
		if _, ok := next.IDs.Links[ref]; !ok {
			ch.DropLinks = append(ch.DropLinks, ref)
		}
	}
	for ref, ids := range next.IDs.Links {
		if o, ok := prev.IDs.Links[ref]; !ok || o != ids {
			if ch.Links == nil {
				ch.Links = map[fabric.LinkRef]fabric.LinkIDs{}
			}
			ch.Links[ref] = ids
		}
	}
	// Per-leaf L3 VLANs: drop those next has none for, set the new and
	// changed.
	for _, lt := range slices.SortedFunc(maps.Keys(prev.IDs.L3VLANs), compareLeafTenants) {
		if _, ok := next.IDs.L3VLANs[lt]; !ok {
			ch.DropL3VLANs = append(ch.DropL3VLANs, lt)
		}
	}
	for lt, v := range next.IDs.L3VLANs {
		if o, ok := prev.IDs.L3VLANs[lt]; !ok || o != v {
			if ch.L3VLANs == nil {
				ch.L3VLANs = map[fabric.LeafTenant]uint16{}
			}
			ch.L3VLANs[lt] = v
		}
	}
	return ch, true
}

func compareLeafTenants(a, b fabric.LeafTenant) int {
	if c := strings.Compare(a.Leaf, b.Leaf); c != 0 {
		return c
	}
	return strings.Compare(a.Tenant, b.Tenant)
}

func allocationKey(a fabric.Allocation) string {
	var b strings.Builder
	b.WriteString(a.Tenant + "\x00" + a.Server + "\x00" + a.JobID + "\x00" + strconv.FormatBool(a.Whole))
	for _, g := range a.GPUs {
		b.WriteString("\x00" + strconv.Itoa(g))
	}
	return b.String()
}

func compareLinkRefs(a, b fabric.LinkRef) int {
	if c := strings.Compare(a.Leaf, b.Leaf); c != 0 {
		return c
	}
	return strings.Compare(a.Port, b.Port)
}

// multisetDiff returns the elements of prev not in next and those of next
// not in prev, counting duplicates, each in its list's order.
func multisetDiff[T any](prev, next []T, key func(T) string) (removed, added []T) {
	count := map[string]int{}
	for _, x := range next {
		count[key(x)]++
	}
	for _, x := range prev {
		k := key(x)
		if count[k] > 0 {
			count[k]--
			continue
		}
		removed = append(removed, x)
	}
	// What is left in count is in next only.
	for _, x := range next {
		k := key(x)
		if count[k] > 0 {
			count[k]--
			added = append(added, x)
		}
	}
	return removed, added
}
