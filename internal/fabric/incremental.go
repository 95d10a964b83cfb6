package fabric

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Compiler is an incremental compile: built once from an Input, it applies
// changes of allocations, groups, contracts and link ids (what a job start
// or stop changes) and recompiles only the devices they touch. After every
// Apply, Intent() equals Compile(Input()) (the tests check it against full
// compiles over random job starts and stops).
//
// What a change touches: the servers of the added and removed allocations
// (their links' owners and jobs), the links whose group changes, the groups
// whose members, contracts or allow-lists change and so every port of those
// groups, and the leaves of all of them. Everything else (topology, tenants,
// tenant ids, options) is fixed: a change of those needs a new Compiler.
//
// A Compiler is not safe for concurrent use. Intents it returned stay
// valid and unchanged after later Applies (devices are copied on write).
type Compiler struct {
	c      *compiler
	intent *Intent
	devIdx map[string]int // device name -> index in intent.Devices

	linkByRef map[LinkRef]*link
	leafOf    map[*link]*switchState
	linkOrder map[*link]int // position in allLinks order
	srvOrder  map[*serverState]int

	allocs    map[*serverState][]allocEntry
	jobLinks  map[jobKey]map[*link]bool
	contracts map[*tenantState][]Contract
	linkIDs   map[LinkRef]LinkIDs
	vlans     map[*switchState]map[uint16]*link
	l2vnis    map[uint32]*link
	gateways  map[netip.Prefix]*link

	srvWarn   map[*serverState][]string
	linkWarn  map[*link][]string
	warnCount map[string]int

	undo []func()
}

type allocEntry struct {
	a    Allocation
	path string // where it came from, for error messages
}

// Change is what happens between two compiles: allocations come and go (a
// job starts or stops), groups and contracts of segmented tenants come and
// go, and vlan-aware links get or lose their ids.
type Change struct {
	// Remove are allocations to drop; each must equal a current one
	// (tenant, server, job, GPUs in order, whole). Removals apply before
	// additions, for groups and contracts too.
	Remove []Allocation
	// Add are new allocations.
	Add []Allocation
	// RemoveGroups and AddGroups change the groups; replacing a group is
	// removing and adding it.
	RemoveGroups []GroupRef
	AddGroups    []Group
	// RemoveContracts must each equal a current contract (either order of
	// A and B); AddContracts are new ones.
	RemoveContracts []Contract
	AddContracts    []Contract
	// DropLinks deletes the ids of links, then Links sets the ids of
	// vlan-aware links.
	DropLinks []LinkRef
	Links     map[LinkRef]LinkIDs
	// DropL3VLANs deletes per-leaf L3 VLANs (a VRF leaving a leaf), then
	// L3VLANs sets them (a VRF coming to a leaf); see IDs.L3VLANs.
	DropL3VLANs []LeafTenant
	L3VLANs     map[LeafTenant]uint16
}

// GroupRef names a group.
type GroupRef struct {
	Tenant string
	Name   string
}

// NewCompiler compiles in in full and keeps what an incremental compile
// needs. It fails exactly when Compile fails, with Compile's error.
func NewCompiler(in Input) (*Compiler, error) {
	// Compile runs only when something fails, for its error: compiling
	// in full first as well would cost a third more on every success.
	failed := func(err error) error {
		if _, cerr := Compile(in); cerr != nil {
			return cerr
		}
		return domain.Errorf(domain.CodeInternal, "incremental compile disagrees with the full compile, which accepted the input: %v", err)
	}
	c, err := compileSteps(in, (*compiler).indexTopology, (*compiler).registerTenants, (*compiler).tenantIDs, (*compiler).gatewayRoom)
	if err != nil {
		return nil, failed(err)
	}
	// The per-leaf L3 VLANs change with Apply: the compiler's own map,
	// filled by the first apply below.
	c.in.IDs.L3VLANs = map[LeafTenant]uint16{}
	k := &Compiler{
		c: c, linkByRef: map[LinkRef]*link{}, leafOf: map[*link]*switchState{}, linkOrder: map[*link]int{}, srvOrder: map[*serverState]int{},
		allocs: map[*serverState][]allocEntry{}, jobLinks: map[jobKey]map[*link]bool{}, contracts: map[*tenantState][]Contract{},
		linkIDs: map[LinkRef]LinkIDs{}, vlans: map[*switchState]map[uint16]*link{}, l2vnis: map[uint32]*link{}, gateways: map[netip.Prefix]*link{},
		srvWarn: map[*serverState][]string{}, linkWarn: map[*link][]string{}, warnCount: map[string]int{},
	}
	n := 0
	for _, leaf := range c.leaves {
		for _, l := range leaf.links {
			k.leafOf[l] = leaf
			k.linkOrder[l] = n
			n++
			if _, dup := k.linkByRef[l.ref]; !dup {
				k.linkByRef[l.ref] = l
			}
		}
	}
	for i, ss := range c.srvList {
		k.srvOrder[ss] = i
	}
	st := k.begin()
	if err := k.apply(st, Change{Add: in.Allocations, AddGroups: in.Groups, AddContracts: in.Contracts, Links: in.IDs.Links, L3VLANs: in.IDs.L3VLANs},
		changePaths{add: "allocations", addGroups: "groups", addContracts: "contracts", l3vlans: "ids.l3vlans"}); err != nil {
		return nil, failed(err)
	}
	k.undo = nil
	k.commitWarnings(st)
	k.intent = c.intent()
	k.intent.Warnings = k.warnings()
	k.devIdx = map[string]int{}
	for i, d := range k.intent.Devices {
		k.devIdx[d.Name] = i
	}
	return k, nil
}

// Intent is the current intent. Treat it as read-only.
func (k *Compiler) Intent() *Intent { return k.intent }

// Input is the input the current intent is the compile of: allocations
// server by server in topology order, groups and contracts tenant by
// tenant.
func (k *Compiler) Input() Input {
	c := k.c
	in := c.in
	in.Allocations, in.Groups, in.Contracts = nil, nil, nil
	for _, ss := range c.srvList {
		for _, e := range k.allocs[ss] {
			in.Allocations = append(in.Allocations, e.a)
		}
	}
	for _, ts := range c.tenantList {
		for _, name := range slices.Sorted(maps.Keys(ts.groups)) {
			in.Groups = append(in.Groups, *ts.groups[name].g)
		}
		in.Contracts = append(in.Contracts, k.contracts[ts]...)
	}
	in.IDs.Links = maps.Clone(k.linkIDs)
	if in.IDs.Links == nil {
		in.IDs.Links = map[LinkRef]LinkIDs{}
	}
	in.IDs.L3VLANs = maps.Clone(c.in.IDs.L3VLANs)
	return in
}

// Apply applies a change and returns the devices whose intent changed,
// sorted by name (pointers into the new Intent; read-only). A change the
// full compile would refuse is refused with the same kind of
// invalid_argument *domain.Error (its Field names the change: "change.add[0].server"),
// and leaves the Compiler as it was.
func (k *Compiler) Apply(ch Change) ([]*Device, error) {
	st := k.begin()
	if err := k.apply(st, ch, changePaths{add: "change.add", addGroups: "change.addGroups", addContracts: "change.addContracts", l3vlans: "change.l3vlans"}); err != nil {
		for i := len(k.undo) - 1; i >= 0; i-- {
			k.undo[i]()
		}
		k.undo = nil
		return nil, err
	}
	k.undo = nil
	warned := k.commitWarnings(st)
	// Re-render the touched leaves, copying the device list on write.
	leaves := slices.Collect(maps.Keys(st.leaves))
	slices.SortFunc(leaves, func(a, b *switchState) int { return strings.Compare(a.sw.Name, b.sw.Name) })
	var next *Intent
	var changed []int
	for _, sw := range leaves {
		i := k.devIdx[sw.sw.Name]
		d := k.c.renderDevice(sw, &k.intent.Devices[i], st.vrfs[sw])
		if deviceEqual(&k.intent.Devices[i], &d) {
			continue
		}
		if next == nil {
			next = &Intent{Devices: slices.Clone(k.intent.Devices), Warnings: k.intent.Warnings}
		}
		next.Devices[i] = d
		changed = append(changed, i)
	}
	if warned {
		if next == nil {
			next = &Intent{Devices: k.intent.Devices}
		}
		next.Warnings = k.warnings()
	}
	if next == nil {
		return nil, nil
	}
	k.intent = next
	out := make([]*Device, len(changed))
	for j, i := range changed {
		out[j] = &next.Devices[i]
	}
	return out, nil
}

// deviceEqual compares two renders of one leaf; only ports and VRFs can
// differ (the underlay never changes here).
func deviceEqual(a, b *Device) bool {
	if a.AnycastMAC != b.AnycastMAC || len(a.Ports) != len(b.Ports) || len(a.VRFs) != len(b.VRFs) {
		return false
	}
	for i := range a.Ports {
		if !reflect.DeepEqual(a.Ports[i], b.Ports[i]) {
			return false
		}
	}
	for i := range a.VRFs {
		va, vb := &a.VRFs[i], &b.VRFs[i]
		if va.Name != vb.Name || va.Tenant != vb.Tenant || va.L3VNI != vb.L3VNI || va.RD != vb.RD || va.RT != vb.RT || va.L3VLAN != vb.L3VLAN ||
			(va.MAC == nil) != (vb.MAC == nil) || (va.Policy == nil) != (vb.Policy == nil) {
			return false
		}
		if va.Policy != nil && !reflect.DeepEqual(va.Policy, vb.Policy) {
			return false
		}
	}
	return true
}

type changePaths struct{ add, addGroups, addContracts, l3vlans string }

// applyState is what one Apply found: what to re-render, and the warnings
// to commit once it succeeds.
type applyState struct {
	leaves map[*switchState]bool
	// vrfs names, per leaf, the tenants whose VRF there may change; the
	// other VRFs are taken from the leaf's previous render.
	vrfs      map[*switchState]map[string]bool
	servers   map[*serverState]bool
	srvWarn   map[*serverState][]string
	linkWarn  map[*link][]string
	links     map[*link]bool // owner or jobs changed
	reclass   map[*link]bool // links whose group must be decided again
	tenants   map[*tenantState]bool
	removed   []*groupState
	added     []*groupState
	oldPeers  map[*groupState][]*groupState
	oldGroups map[*tenantState]map[string]*groupState
}

func (k *Compiler) begin() *applyState {
	k.undo = k.undo[:0]
	return &applyState{leaves: map[*switchState]bool{}, vrfs: map[*switchState]map[string]bool{}, servers: map[*serverState]bool{}, srvWarn: map[*serverState][]string{},
		linkWarn: map[*link][]string{}, links: map[*link]bool{}, reclass: map[*link]bool{}, tenants: map[*tenantState]bool{},
		oldPeers: map[*groupState][]*groupState{}, oldGroups: map[*tenantState]map[string]*groupState{}}
}

func (k *Compiler) onUndo(f func()) { k.undo = append(k.undo, f) }

// touchVRF marks the VRF of tenant on the leaf of link l for rendering.
func (st *applyState) touchVRF(leaf *switchState, tenant string) {
	st.leaves[leaf] = true
	if tenant == "" {
		return
	}
	m := st.vrfs[leaf]
	if m == nil {
		m = map[string]bool{}
		st.vrfs[leaf] = m
	}
	m[tenant] = true
}

func (k *Compiler) apply(st *applyState, ch Change, paths changePaths) error {
	c := k.c
	// 1. Allocations: validate the new ones, then edit the server lists.
	for i, a := range ch.Add {
		if _, _, err := c.checkAllocation(&a, fmt.Sprintf("%s[%d]", paths.add, i)); err != nil {
			return err
		}
	}
	for i, a := range ch.Remove {
		path := fmt.Sprintf("change.remove[%d]", i)
		ss := c.servers[a.Server]
		if ss == nil {
			return domain.Invalid(path+".server", "allocation names server %q, which is not in the topology", a.Server)
		}
		j := slices.IndexFunc(k.allocs[ss], func(e allocEntry) bool { return sameAllocation(e.a, a) })
		if j < 0 {
			return domain.Invalid(path, "server %s has no allocation of tenant %q, job %q, GPUs %v to remove", a.Server, a.Tenant, a.JobID, a.GPUs)
		}
		k.touchServer(st, ss)
		k.allocs[ss] = slices.Delete(k.allocs[ss], j, j+1)
	}
	for i, a := range ch.Add {
		ss := c.servers[a.Server]
		k.touchServer(st, ss)
		a.GPUs = slices.Clone(a.GPUs)
		k.allocs[ss] = append(k.allocs[ss], allocEntry{a: a, path: fmt.Sprintf("%s[%d]", paths.add, i)})
	}
	servers := slices.Collect(maps.Keys(st.servers))
	slices.SortFunc(servers, func(a, b *serverState) int { return cmp.Compare(k.srvOrder[a], k.srvOrder[b]) })
	for _, ss := range servers {
		if err := k.assignServer(st, ss); err != nil {
			return err
		}
	}
	// 2. Groups and contracts.
	if err := k.applyGroups(st, ch, paths); err != nil {
		return err
	}
	// 3. Link ids of links that changed owner or ids, between dropping
	// and setting per-leaf L3 VLANs: each is checked against the other.
	k.dropL3VLANs(st, ch.DropL3VLANs)
	if err := k.applyLinkIDs(st, ch); err != nil {
		return err
	}
	if err := k.setL3VLANs(st, ch.L3VLANs, paths.l3vlans); err != nil {
		return err
	}
	// Nothing below fails: classify, recompute members and allow-lists,
	// and collect the leaves to render.
	k.classify(st)
	return nil
}

func sameAllocation(a, b Allocation) bool {
	return a.Tenant == b.Tenant && a.Server == b.Server && a.JobID == b.JobID && a.Whole == b.Whole && slices.Equal(a.GPUs, b.GPUs)
}

// touchServer copies a server's allocation list before its first edit.
func (k *Compiler) touchServer(st *applyState, ss *serverState) {
	if st.servers[ss] {
		return
	}
	st.servers[ss] = true
	old := k.allocs[ss]
	k.allocs[ss] = slices.Clone(old)
	k.onUndo(func() { k.allocs[ss] = old })
}

// assignServer decides again which tenant owns each link of a server and
// which jobs use it, from the server's allocations (the rules of
// compiler.assign, one server at a time).
func (k *Compiler) assignServer(st *applyState, ss *serverState) error {
	type saved struct {
		tenant, claimedBy string
		jobs              []string
	}
	var links []*link
	var old []saved
	for _, l := range ss.nics {
		if l != nil && !slices.Contains(links, l) {
			links = append(links, l)
			old = append(old, saved{l.tenant, l.claimedBy, l.jobs})
		}
	}
	oldWhole, oldHolders := ss.whole, ss.holders
	k.onUndo(func() {
		for i, l := range links {
			l.tenant, l.claimedBy, l.jobs = old[i].tenant, old[i].claimedBy, old[i].jobs
		}
		ss.whole, ss.holders = oldWhole, oldHolders
	})
	for _, l := range links {
		l.tenant, l.claimedBy, l.jobs = "", "", nil
	}
	ss.whole, ss.holders = "", map[string]string{}
	var warns []string
	for _, e := range k.allocs[ss] {
		a, path := &e.a, e.path
		ts := k.c.tenants[a.Tenant]
		if err := ss.claim(a, path, ts.t.Isolation, func(msg string) { warns = append(warns, msg) }); err != nil {
			return err
		}
	}
	if err := ss.checkWhole(); err != nil {
		return err
	}
	st.srvWarn[ss] = warns
	for i, l := range links {
		slices.Sort(l.jobs)
		if l.tenant == old[i].tenant && slices.Equal(l.jobs, old[i].jobs) {
			continue
		}
		st.links[l] = true
		st.reclass[l] = true
		st.touchVRF(k.leafOf[l], old[i].tenant)
		st.touchVRF(k.leafOf[l], l.tenant)
		k.indexJobs(l, old[i].tenant, old[i].jobs, false)
		k.indexJobs(l, l.tenant, l.jobs, true)
	}
	return nil
}

// indexJobs adds link l to (or removes it from) the index of its jobs'
// links.
func (k *Compiler) indexJobs(l *link, tenant string, jobs []string, add bool) {
	for _, j := range jobs {
		key := jobKey{tenant, j}
		set := k.jobLinks[key]
		if add {
			if set == nil {
				set = map[*link]bool{}
				k.jobLinks[key] = set
			}
			set[l] = true
			k.onUndo(func() { delete(set, l) })
		} else if set[l] {
			delete(set, l)
			k.onUndo(func() { set[l] = true })
		}
	}
}

// applyGroups removes and adds groups and contracts, checks them as
// compiler.indexGroups does, and rebuilds the contract peers of every
// tenant they touch.
func (k *Compiler) applyGroups(st *applyState, ch Change, paths changePaths) error {
	c := k.c
	touch := func(ts *tenantState) {
		if st.tenants[ts] {
			return
		}
		st.tenants[ts] = true
		oldContracts := k.contracts[ts]
		k.contracts[ts] = slices.Clone(oldContracts)
		oldGroups := maps.Clone(ts.groups)
		st.oldGroups[ts] = oldGroups
		for _, g := range oldGroups {
			st.oldPeers[g] = g.peers
		}
		oldPairs := ts.contracts
		k.onUndo(func() {
			k.contracts[ts] = oldContracts
			ts.groups = oldGroups
			ts.contracts = oldPairs
			for _, g := range oldGroups {
				g.peers = st.oldPeers[g]
			}
		})
		ts.groups = maps.Clone(oldGroups)
	}
	for i, ct := range ch.RemoveContracts {
		path := fmt.Sprintf("change.removeContracts[%d]", i)
		ts, err := c.contractTenant(ct, path)
		if err != nil {
			return err
		}
		j := slices.IndexFunc(k.contracts[ts], func(x Contract) bool { return x == ct || x == Contract{Tenant: ct.Tenant, A: ct.B, B: ct.A} })
		if j < 0 {
			return domain.Invalid(path, "tenant %q has no contract between %q and %q to remove", ct.Tenant, ct.A, ct.B)
		}
		touch(ts)
		k.contracts[ts] = slices.Delete(k.contracts[ts], j, j+1)
	}
	for i, ref := range ch.RemoveGroups {
		path := fmt.Sprintf("change.removeGroups[%d]", i)
		ts := c.tenants[ref.Tenant]
		if ts == nil {
			return domain.Invalid(path+".tenant", "group names tenant %q, which is not in the input", ref.Tenant)
		}
		g := ts.groups[ref.Name]
		if g == nil {
			return domain.Invalid(path+".name", "tenant %q has no group %q to remove", ref.Tenant, ref.Name)
		}
		touch(ts)
		delete(ts.groups, ref.Name)
		id := uint32(g.g.ID)
		who := c.groupIDs[id]
		delete(c.groupIDs, id)
		k.onUndo(func() { c.groupIDs[id] = who })
		if g.g.JobID != "" {
			key := jobKey{g.g.Tenant, g.g.JobID}
			if c.groupByJob[key] == g {
				delete(c.groupByJob, key)
				k.onUndo(func() { c.groupByJob[key] = g })
			}
			for l := range k.jobLinks[key] {
				st.reclass[l] = true
			}
		}
		for _, l := range g.links {
			st.reclass[l] = true
		}
		st.removed = append(st.removed, g)
	}
	for i := range ch.AddGroups {
		g := ch.AddGroups[i]
		g.Prefixes = slices.Clone(g.Prefixes)
		// Undo the claim of the ID even if newGroup fails after making it.
		id := uint32(g.ID)
		if _, taken := c.groupIDs[id]; !taken {
			k.onUndo(func() { delete(c.groupIDs, id) })
		}
		ts, gs, err := c.newGroup(&g, fmt.Sprintf("%s[%d]", paths.addGroups, i))
		if err != nil {
			return err
		}
		touch(ts)
		if g.JobID != "" {
			key := jobKey{g.Tenant, g.JobID}
			k.onUndo(func() { delete(c.groupByJob, key) })
			for l := range k.jobLinks[key] {
				st.reclass[l] = true
			}
		}
		ts.groups[g.Name] = gs
		st.added = append(st.added, gs)
	}
	for i, ct := range ch.AddContracts {
		ts, err := c.contractTenant(ct, fmt.Sprintf("%s[%d]", paths.addContracts, i))
		if err != nil {
			return err
		}
		touch(ts)
		k.contracts[ts] = append(k.contracts[ts], ct)
	}
	// Rebuild the peers of every touched tenant from its contracts, in
	// name order so the same change always reports the same conflict.
	tenants := slices.Collect(maps.Keys(st.tenants))
	slices.SortFunc(tenants, func(a, b *tenantState) int { return strings.Compare(a.t.Name, b.t.Name) })
	for _, ts := range tenants {
		for _, g := range ts.groups {
			g.peers = nil
		}
		ts.contracts = nil
		for i, ct := range k.contracts[ts] {
			if err := ts.contract(ct, fmt.Sprintf("contracts[%s][%d]", ts.t.Name, i)); err != nil {
				return err
			}
		}
		ts.sortContracts()
	}
	return nil
}

// applyLinkIDs sets the ids of vlan-aware links that changed owner or ids,
// checking them as compiler.linkIDs does.
func (k *Compiler) applyLinkIDs(st *applyState, ch Change) error {
	todo := map[*link]bool{}
	for l := range st.links {
		todo[l] = true
	}
	for _, ref := range ch.DropLinks {
		k.setLinkIDs(ref, LinkIDs{}, false)
		if l := k.linkByRef[ref]; l != nil {
			todo[l] = true
		}
	}
	for ref, ids := range ch.Links {
		k.setLinkIDs(ref, ids, true)
		if l := k.linkByRef[ref]; l != nil {
			todo[l] = true
		}
	}
	links := slices.Collect(maps.Keys(todo))
	slices.SortFunc(links, func(a, b *link) int { return cmp.Compare(k.linkOrder[a], k.linkOrder[b]) })
	// Release every old claim first, so ids can move between links.
	type saved struct {
		ids      LinkIDs
		gw4, gw6 netip.Prefix
	}
	before := make([]saved, len(links))
	for i, l := range links {
		before[i] = saved{l.ids, l.gw4, l.gw6}
		k.onUndo(func() { l.ids, l.gw4, l.gw6 = before[i].ids, before[i].gw4, before[i].gw6 })
		if l.ids.VLAN != 0 {
			leaf := k.leafOf[l]
			if m := k.vlans[leaf]; m[l.ids.VLAN] == l {
				v := l.ids.VLAN
				delete(m, v)
				k.onUndo(func() { m[v] = l })
			}
			if n := l.ids.L2VNI; k.l2vnis[n] == l {
				delete(k.l2vnis, n)
				k.onUndo(func() { k.l2vnis[n] = l })
			}
			for _, g := range []netip.Prefix{l.gw4.Masked(), l.gw6.Masked()} {
				if g.IsValid() && k.gateways[g] == l {
					delete(k.gateways, g)
					k.onUndo(func() { k.gateways[g] = l })
				}
			}
		}
		l.ids, l.gw4, l.gw6 = LinkIDs{}, netip.Prefix{}, netip.Prefix{}
	}
	for i, l := range links {
		if err := k.claimLinkIDs(l); err != nil {
			return err
		}
		if (saved{l.ids, l.gw4, l.gw6}) != before[i] {
			st.links[l] = true
		}
	}
	return nil
}

// dropL3VLANs deletes per-leaf L3 VLANs and marks their VRFs for rendering.
func (k *Compiler) dropL3VLANs(st *applyState, drop []LeafTenant) {
	c := k.c
	for _, lt := range drop {
		v, ok := c.in.IDs.L3VLANs[lt]
		if !ok {
			continue
		}
		k.releaseL3VLAN(lt, v)
		delete(c.in.IDs.L3VLANs, lt)
		k.onUndo(func() { c.in.IDs.L3VLANs[lt] = v })
		if sw := c.switches[lt.Leaf]; sw != nil {
			st.touchVRF(sw, lt.Tenant)
		}
	}
}

func (k *Compiler) releaseL3VLAN(lt LeafTenant, v uint16) {
	if m := k.c.leafL3[lt.Leaf]; m[v] == lt.Tenant {
		delete(m, v)
		k.onUndo(func() { m[v] = lt.Tenant })
	}
}

// setL3VLANs sets per-leaf L3 VLANs (under prefix in errors), checked as
// compiler.leafL3VLANs and against the leaf's link VLANs, and marks their
// VRFs for rendering.
func (k *Compiler) setL3VLANs(st *applyState, set map[LeafTenant]uint16, prefix string) error {
	c := k.c
	for _, lt := range slices.SortedFunc(maps.Keys(set), compareLeafTenant) {
		v := set[lt]
		old, had := c.in.IDs.L3VLANs[lt]
		if had {
			k.releaseL3VLAN(lt, old)
		}
		m := c.leafL3[lt.Leaf]
		_, existed := m[v]
		if err := c.claimLeafL3VLAN(lt, v, prefix); err != nil {
			return err
		}
		if !existed {
			m = c.leafL3[lt.Leaf]
			k.onUndo(func() { delete(m, v) })
		}
		sw := c.switches[lt.Leaf]
		if l := k.vlans[sw][v]; l != nil {
			return domain.Invalid(prefix+"["+lt.Leaf+"/"+lt.Tenant+"]", "L3 VLAN %d of tenant %s on leaf %s is the VLAN of link %s/%s", v, lt.Tenant, lt.Leaf, l.ref.Leaf, l.ref.Port)
		}
		c.in.IDs.L3VLANs[lt] = v
		k.onUndo(func() {
			if had {
				c.in.IDs.L3VLANs[lt] = old
			} else {
				delete(c.in.IDs.L3VLANs, lt)
			}
		})
		st.touchVRF(sw, lt.Tenant)
	}
	return nil
}

func (k *Compiler) setLinkIDs(ref LinkRef, ids LinkIDs, set bool) {
	old, had := k.linkIDs[ref]
	if set {
		k.linkIDs[ref] = ids
	} else {
		delete(k.linkIDs, ref)
	}
	k.onUndo(func() {
		if had {
			k.linkIDs[ref] = old
		} else {
			delete(k.linkIDs, ref)
		}
	})
}

func (k *Compiler) claimLinkIDs(l *link) error {
	c := k.c
	if !c.vlanAware(l) {
		return nil
	}
	ids, ok := k.linkIDs[l.ref]
	field, who, err := c.checkLinkIDs(l, ids, ok)
	if err != nil {
		return err
	}
	leaf := k.leafOf[l]
	vl := k.vlans[leaf]
	if vl == nil {
		vl = map[uint16]*link{}
		k.vlans[leaf] = vl
	}
	if other := vl[ids.VLAN]; other != nil && other != l {
		return domain.Invalid(field+".vlan", "VLAN %d of %s is already used by link %s/%s", ids.VLAN, who, other.ref.Leaf, other.ref.Port)
	}
	if other, ok := c.vnis[ids.L2VNI]; ok {
		return domain.Invalid(field+".l2vni", "VNI %d of %s (L2VNI) is already used by %s", ids.L2VNI, who, other)
	}
	if other := k.l2vnis[ids.L2VNI]; other != nil && other != l {
		return domain.Invalid(field+".l2vni", "VNI %d of %s (L2VNI) is already used by link %s/%s (L2VNI)", ids.L2VNI, who, other.ref.Leaf, other.ref.Port)
	}
	gw4, gw6, err := c.gatewaySubnets(l, field, who, k.gateways)
	if err != nil {
		return err
	}
	vlan, vni := ids.VLAN, ids.L2VNI
	vl[vlan] = l
	k.l2vnis[vni] = l
	k.onUndo(func() { delete(vl, vlan); delete(k.l2vnis, vni) })
	for _, g := range []netip.Prefix{gw4.Masked(), gw6.Masked()} {
		if g.IsValid() {
			k.gateways[g] = l
			k.onUndo(func() { delete(k.gateways, g) })
		}
	}
	l.ids, l.gw4, l.gw6 = ids, gw4, gw6
	return nil
}

// classify decides the group of every link that may have changed group
// (compiler.buildPorts, link by link), recomputes the members and
// allow-lists of the groups that changed, and marks the leaves to render.
// It cannot fail.
func (k *Compiler) classify(st *applyState) {
	c := k.c
	members := map[*groupState]bool{} // groups whose members must be recomputed
	for _, g := range st.added {
		members[g] = true
	}
	for l := range st.links {
		st.reclass[l] = true
		if l.group != nil {
			members[l.group] = true // the link's prefixes may have changed
		}
	}
	drop := map[*groupState]map[*link]bool{}
	for l := range st.reclass {
		st.touchVRF(k.leafOf[l], l.tenant)
		g, warns := c.linkGroup(l)
		st.linkWarn[l] = warns
		if g == l.group {
			continue
		}
		if old := l.group; old != nil {
			if drop[old] == nil {
				drop[old] = map[*link]bool{}
			}
			drop[old][l] = true
			members[old] = true
		}
		if g != nil {
			g.links = append(g.links, l)
			members[g] = true
		}
		l.group = g
	}
	for g, set := range drop {
		g.links = slices.DeleteFunc(slices.Clone(g.links), func(l *link) bool { return set[l] && l.group != g })
	}
	allowed := map[*groupState]bool{}
	for g := range members {
		m := c.groupMembers(g)
		if slices.Equal(m, g.members) && !slices.Contains(st.added, g) {
			continue
		}
		g.members = m
		allowed[g] = true
		for _, p := range g.peers {
			allowed[p] = true
		}
	}
	// Groups whose contracts changed: new allow-lists, and every leaf
	// where they or their peers (old and new) have members lists them.
	for ts, old := range st.oldGroups {
		for _, g := range ts.groups {
			if g.peers == nil && st.oldPeers[g] == nil {
				continue
			}
			if !samePeers(g.peers, st.oldPeers[g]) || old[g.g.Name] != g {
				allowed[g] = true
				for _, l := range g.links {
					st.touchVRF(k.leafOf[l], ts.t.Name)
				}
			}
		}
	}
	for g := range allowed {
		if !k.live(g) {
			continue
		}
		a := g.allowList()
		if slices.Equal(a, g.allowed) && g.allowed != nil {
			continue
		}
		g.allowed = a
		for _, l := range g.links {
			st.leaves[k.leafOf[l]] = true
		}
	}
}

// live reports whether a group is still one of its tenant's groups.
func (k *Compiler) live(g *groupState) bool {
	ts := k.c.tenants[g.g.Tenant]
	return ts != nil && ts.groups[g.g.Name] == g
}

func samePeers(a, b []*groupState) bool {
	if len(a) != len(b) {
		return false
	}
	for _, g := range a {
		if !slices.Contains(b, g) {
			return false
		}
	}
	return true
}

// commitWarnings replaces the warnings of the servers and links the change
// touched; it reports whether the set of warnings changed.
func (k *Compiler) commitWarnings(st *applyState) bool {
	changed := false
	replace := func(old, new []string) {
		for _, w := range old {
			if k.warnCount[w]--; k.warnCount[w] == 0 {
				delete(k.warnCount, w)
				changed = true
			}
		}
		for _, w := range new {
			if k.warnCount[w]++; k.warnCount[w] == 1 {
				changed = true
			}
		}
	}
	for ss, w := range st.srvWarn {
		replace(k.srvWarn[ss], w)
		if len(w) == 0 {
			delete(k.srvWarn, ss)
		} else {
			k.srvWarn[ss] = w
		}
	}
	for l, w := range st.linkWarn {
		replace(k.linkWarn[l], w)
		if len(w) == 0 {
			delete(k.linkWarn, l)
		} else {
			k.linkWarn[l] = w
		}
	}
	return changed
}

func (k *Compiler) warnings() []string {
	if len(k.warnCount) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(k.warnCount))
}
