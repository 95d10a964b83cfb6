package verify

import (
	"cmp"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// model is the intent seen as a graph: endpoints (server ports) bound to
// VRF instances (one VRF on one device), instances exporting and importing
// route targets. It reads the intent only, never the compiler's state.
type model struct {
	it    *fabric.Intent
	eps   []endpoint // sorted by device, then port
	epIdx map[fabric.LinkRef]int32
	insts []instance // device order, then VRF order
	// exporters lists, per route target, the instances with endpoints
	// that export it.
	exporters map[fabric.RouteTarget][]int32
	// l2 lists, per L2VNI, the vlan-aware endpoints carrying it.
	l2   map[uint32][]int32
	devs []*fabric.Device // sorted by name
	// byName lists each device's instances sorted by VRF name.
	byName map[*fabric.Device][]int32
}

type endpoint struct {
	ref   fabric.LinkRef
	dev   *fabric.Device
	ports []*fabric.Port // the device's entries for this port (one, unless the intent is broken)
	// inst are the instances the port is bound to (its VRF), sorted.
	inst []int32
	// prefixes identify the endpoint (link or gateway subnets).
	prefixes []netip.Prefix
	// groups are the groups the endpoint is classified into: the port's
	// Group (how FRR/nftables classify) and every policy group of its VRF
	// on the device listing the port or one of its prefixes (how NX-OS
	// classifies), sorted, each once.
	groups []uint16
	// acl is the union of the entries' allow-lists; hasACL says whether
	// any entry filters at all.
	acl    []netip.Prefix
	hasACL bool
	l2vni  uint32
}

type instance struct {
	dev *fabric.Device
	vrf *fabric.VRF
	eps []int32 // bound endpoints, sorted
	// exp[:nexp] are the targets its routes carry: RT, and the MAC-VRF's
	// target on a vlan-aware VRF (symmetric IRB host routes carry both).
	exp  [2]fabric.RouteTarget
	nexp int
	// contracts are the policy's allowed group pairs, both orders.
	contracts map[[2]uint16]bool
}

// quarantined reports whether every entry of the port is admin-down.
func (e *endpoint) quarantined() bool {
	for _, p := range e.ports {
		if !p.Quarantined {
			return false
		}
	}
	return len(e.ports) > 0
}

// guarded reports whether every entry of the port carries the guard.
func (e *endpoint) guarded() bool {
	for _, p := range e.ports {
		if !p.Guarded {
			return false
		}
	}
	return len(e.ports) > 0
}

// exports are the targets the instance's routes carry.
func (in *instance) exports() []fabric.RouteTarget { return in.exp[:in.nexp] }

// imports are the targets the IP-VRF imports: RT and Imports.
func (in *instance) imports() iter.Seq[fabric.RouteTarget] {
	return func(yield func(fabric.RouteTarget) bool) {
		if !yield(in.vrf.RT) {
			return
		}
		for _, rt := range in.vrf.Imports {
			if !yield(rt) {
				return
			}
		}
	}
}

// lookup lists the instances of VRF name on device d.
func (m *model) lookup(d *fabric.Device, name string) []int32 {
	idx := m.byName[d]
	i, _ := slices.BinarySearchFunc(idx, name, func(ii int32, n string) int { return strings.Compare(m.insts[ii].vrf.Name, n) })
	j := i
	for j < len(idx) && m.insts[idx[j]].vrf.Name == name {
		j++
	}
	return idx[i:j]
}

func (m *model) name(e int32) string {
	return m.eps[e].ref.Leaf + "/" + m.eps[e].ref.Port
}

func (m *model) instName(i int32) string {
	return m.insts[i].dev.Name + " VRF " + m.insts[i].vrf.Name
}

func buildModel(it *fabric.Intent) *model {
	devs := make([]*fabric.Device, len(it.Devices))
	nv, np := 0, 0
	for i := range it.Devices {
		devs[i] = &it.Devices[i]
		nv += len(devs[i].VRFs)
		np += len(devs[i].Ports)
	}
	// Sized up front: at 100,000 GPUs growing these maps is a good part
	// of the model's cost.
	m := &model{it: it, epIdx: make(map[fabric.LinkRef]int32, np), exporters: map[fabric.RouteTarget][]int32{},
		l2: map[uint32][]int32{}, byName: make(map[*fabric.Device][]int32, len(devs))}
	m.insts = make([]instance, 0, nv)
	m.eps = make([]endpoint, 0, np)
	// The compiler sorts devices; a hand-edited intent may not be.
	slices.SortStableFunc(devs, func(a, b *fabric.Device) int { return strings.Compare(a.Name, b.Name) })
	m.devs = devs
	// An endpoint's first port and first instance come from these slabs
	// (capacity 1 each, so a second one is appended elsewhere): one
	// allocation instead of one per endpoint.
	portSlab, instSlab := make([]*fabric.Port, 0, np), make([]int32, 0, np)
	for _, d := range devs {
		first := int32(len(m.insts))
		// VRFs by name (the compiler sorts them; an edited intent may not).
		vrfs := make([]*fabric.VRF, len(d.VRFs))
		for i := range d.VRFs {
			vrfs[i] = &d.VRFs[i]
		}
		slices.SortStableFunc(vrfs, func(a, b *fabric.VRF) int { return strings.Compare(a.Name, b.Name) })
		for _, v := range vrfs {
			in := instance{dev: d, vrf: v, nexp: 1}
			in.exp[0] = v.RT
			if v.MAC != nil {
				in.exp[1], in.nexp = v.MAC.RT, 2
			}
			if v.Policy != nil && len(v.Policy.Contracts) > 0 {
				in.contracts = map[[2]uint16]bool{}
				for _, c := range v.Policy.Contracts {
					in.contracts[[2]uint16{c.A, c.B}] = true
					in.contracts[[2]uint16{c.B, c.A}] = true
				}
			}
			m.insts = append(m.insts, in)
		}
		idx := make([]int32, len(d.VRFs))
		for i := range idx {
			idx[i] = first + int32(i)
		}
		m.byName[d] = idx
		// Ports in port order; a port listed twice is one endpoint.
		order := make([]int, len(d.Ports))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return fabric.ComparePorts(d.Ports[a].Name, d.Ports[b].Name) })
		for _, pi := range order {
			p := &d.Ports[pi]
			ref := fabric.LinkRef{Leaf: d.Name, Port: p.Name}
			ei, ok := m.epIdx[ref]
			if !ok {
				ei = int32(len(m.eps))
				m.epIdx[ref] = ei
				m.eps = append(m.eps, endpoint{ref: ref, dev: d})
			}
			e := &m.eps[ei]
			if e.ports == nil {
				portSlab = append(portSlab, p)
				e.ports = portSlab[len(portSlab)-1 : len(portSlab) : len(portSlab)]
			} else {
				e.ports = append(e.ports, p)
			}
			if e.prefixes == nil {
				e.prefixes = p.Prefixes() // a fresh slice: no copy needed
			} else {
				e.prefixes = append(e.prefixes, p.Prefixes()...)
			}
			if p.Group != 0 {
				e.groups = append(e.groups, p.Group)
			}
			if p.ACL != nil {
				e.hasACL = true
				e.acl = append(e.acl, p.ACL.Allow...)
			}
			if p.VLANAware() && p.L2VNI != 0 && e.l2vni == 0 {
				e.l2vni = p.L2VNI
			}
			if p.VRF == "" {
				continue
			}
			for _, ii := range m.lookup(d, p.VRF) {
				switch {
				case e.inst == nil:
					instSlab = append(instSlab, ii)
					e.inst = instSlab[len(instSlab)-1 : len(instSlab) : len(instSlab)]
				case !slices.Contains(e.inst, ii):
					e.inst = append(e.inst, ii)
				}
			}
		}
	}
	// Each instance's endpoints, in one slab sized by a first count.
	nbound := make([]int32, len(m.insts))
	total := 0
	for ei := range m.eps {
		for _, ii := range m.eps[ei].inst {
			nbound[ii]++
			total++
		}
	}
	epSlab := make([]int32, total)
	off := 0
	for ii := range m.insts {
		n := int(nbound[ii])
		if n > 0 {
			m.insts[ii].eps = epSlab[off : off : off+n]
		}
		off += n
	}
	for ei := range m.eps {
		e := &m.eps[ei]
		slices.Sort(e.inst)
		sortPrefixes(e.prefixes)
		e.prefixes = slices.Compact(e.prefixes)
		for _, ii := range e.inst {
			in := &m.insts[ii]
			in.eps = append(in.eps, int32(ei))
			if in.vrf.Policy == nil {
				continue
			}
			for _, g := range in.vrf.Policy.Groups {
				if slices.Contains(g.Ports, e.ref.Port) || overlaps(g.Prefixes, e.prefixes) {
					e.groups = append(e.groups, g.ID)
				}
			}
		}
		slices.Sort(e.groups)
		e.groups = slices.Compact(e.groups)
		if e.l2vni != 0 {
			m.l2[e.l2vni] = append(m.l2[e.l2vni], int32(ei))
		}
	}
	for ii := range m.insts {
		in := &m.insts[ii]
		if len(in.eps) == 0 {
			continue
		}
		for _, rt := range in.exports() {
			if s := m.exporters[rt]; len(s) == 0 || s[len(s)-1] != int32(ii) {
				m.exporters[rt] = append(s, int32(ii))
			}
		}
	}
	return m
}

func overlaps(a, b []netip.Prefix) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Overlaps(y) {
				return true
			}
		}
	}
	return false
}

func sortPrefixes(ps []netip.Prefix) { slices.SortFunc(ps, fabric.ComparePrefixes) }

// routesFrom lists the instances with endpoints whose routes instance v
// holds: itself, and every instance exporting a target v imports, on the
// same device (a local leak) or on another one over VXLAN (both need an
// L3VNI). stamp/mark are scratch space of len(insts) for deduplication.
func (m *model) routesFrom(v int32, out []int32, stamp []int32, mark int32) []int32 {
	out = out[:0]
	vi := &m.insts[v]
	if len(vi.eps) > 0 {
		stamp[v] = mark
		out = append(out, v)
	}
	for rt := range vi.imports() {
		for _, u := range m.exporters[rt] {
			if stamp[u] == mark {
				continue
			}
			ui := &m.insts[u]
			if ui.dev != vi.dev && (ui.vrf.L3VNI == 0 || vi.vrf.L3VNI == 0) {
				continue
			}
			stamp[u] = mark
			out = append(out, u)
		}
	}
	return out
}

// viaRT names a route target by which v imports u's routes (for failure
// details), or "" when u is v itself.
func (m *model) viaRT(v, u int32) string {
	if v == u {
		return ""
	}
	for rt := range m.insts[v].imports() {
		if slices.Contains(m.insts[u].exports(), rt) {
			return rt.String()
		}
	}
	return "?"
}

// bridged reports whether vlan-aware endpoint s reaches t at layer 2: the
// same L2VNI, on one device or with t's MAC-VRF target imported by s's.
func (m *model) bridged(s, t int32) bool {
	es, et := &m.eps[s], &m.eps[t]
	if es.l2vni == 0 || es.l2vni != et.l2vni {
		return false
	}
	if es.dev == et.dev {
		return true
	}
	for _, si := range es.inst {
		sm := m.insts[si].vrf.MAC
		if sm == nil {
			continue
		}
		for _, ti := range et.inst {
			if tm := m.insts[ti].vrf.MAC; tm != nil && tm.RT == sm.RT {
				return true
			}
		}
	}
	return false
}

// Enforcement says which form of job segmentation a reachability
// computation applies.
type Enforcement string

const (
	// EnforceByNOS applies what the renderers deploy: group policy at an
	// egress leaf running NX-OS or FRR, ACLs at an ingress port of a leaf
	// running Junos, EOS or SONiC. The default, for comparing with packet
	// tests.
	EnforceByNOS Enforcement = ""
	// EnforceNone is routing alone: what tenant isolation must hold on.
	EnforceNone Enforcement = "none"
	// EnforceGroupPolicy applies group policy on every leaf.
	EnforceGroupPolicy Enforcement = "group-policy"
	// EnforceACL applies the per-port ACLs on every leaf.
	EnforceACL Enforcement = "acl"
)

// groupPolicyNOS reports whether the renderers give a NOS VXLAN group
// policy (otherwise segmentation is rendered as ACLs).
func groupPolicyNOS(nos string) bool { return nos == "nxos" || nos == "frr" }

// policy decides whether traffic from s to t, routed into instance u on t's
// device, passes job segmentation under e.
type policy struct {
	m    *model
	e    Enforcement
	acls map[*netip.Prefix]*allowSet
}

func newPolicy(m *model, e Enforcement) *policy {
	return &policy{m: m, e: e, acls: map[*netip.Prefix]*allowSet{}}
}

func (p *policy) allows(s, t, u int32) bool {
	es, et := &p.m.eps[s], &p.m.eps[t]
	gbp, acl := p.e == EnforceGroupPolicy, p.e == EnforceACL
	if p.e == EnforceByNOS {
		gbp = groupPolicyNOS(et.dev.NOS)
		acl = !groupPolicyNOS(es.dev.NOS)
	}
	if acl && es.hasACL && !p.aclAllows(es, et) {
		return false
	}
	if gbp && !p.groupAllows(es, et, u) {
		return false
	}
	return true
}

// groupAllows: the egress VRF's policy lets the source's group reach the
// destination's (same group, or a contract); a VRF without policy lets
// everything through. A source in no group carries its VRF's unclassified
// tag.
func (p *policy) groupAllows(es, et *endpoint, u int32) bool {
	in := &p.m.insts[u]
	if in.vrf.Policy == nil {
		return true
	}
	src := es.groups
	if len(src) == 0 {
		for _, si := range es.inst {
			if pol := p.m.insts[si].vrf.Policy; pol != nil && pol.Unclassified != 0 {
				src = append(src, pol.Unclassified)
			}
		}
	}
	for _, gs := range src {
		// Egress lets the switches' group through to every port.
		if gs != 0 && gs == in.vrf.Policy.Switch {
			return true
		}
	}
	for _, gt := range et.groups {
		for _, gs := range src {
			if gs == gt || in.contracts[[2]uint16{gs, gt}] {
				return true
			}
		}
	}
	return false
}

// allowSet is an ACL's allow-list indexed for containment tests.
type allowSet struct {
	set        map[netip.Prefix]bool
	bits4      []int
	bits6      []int
	everything bool
}

func (p *policy) aclAllows(es, et *endpoint) bool {
	if len(es.acl) == 0 {
		return false
	}
	as := p.allowSet(es)
	for _, pf := range et.prefixes {
		if as.covers(pf) {
			return true
		}
	}
	return false
}

// allowSet is es's allow-list indexed (es.acl must not be empty).
func (p *policy) allowSet(es *endpoint) *allowSet {
	key := &es.acl[0]
	if len(es.ports) == 1 && es.ports[0].ACL != nil && len(es.ports[0].ACL.Allow) > 0 {
		// Compiled intents share one allow-list per group.
		key = &es.ports[0].ACL.Allow[0]
	}
	as := p.acls[key]
	if as == nil {
		as = newAllowSet(es.acl)
		p.acls[key] = as
	}
	return as
}

func newAllowSet(allow []netip.Prefix) *allowSet {
	as := &allowSet{set: make(map[netip.Prefix]bool, len(allow))}
	for _, a := range allow {
		a = a.Masked()
		if a.Bits() == 0 {
			as.everything = true
		}
		as.set[a] = true
		bits := &as.bits6
		if a.Addr().Is4() {
			bits = &as.bits4
		}
		if !slices.Contains(*bits, a.Bits()) {
			*bits = append(*bits, a.Bits())
		}
	}
	return as
}

func (as *allowSet) covers(p netip.Prefix) bool {
	if as.everything {
		return true
	}
	bits := as.bits6
	if p.Addr().Is4() {
		bits = as.bits4
	}
	for _, b := range bits {
		if b <= p.Bits() {
			if q, err := p.Addr().Prefix(b); err == nil && as.set[q] {
				return true
			}
		}
	}
	return false
}

// Endpoint is a server link as the fabric sees it: a leaf port.
type Endpoint struct {
	Leaf string `json:"leaf"`
	Port string `json:"port"`
}

func (e Endpoint) String() string { return e.Leaf + "/" + e.Port }

// MarshalText writes "leaf/port", so a Matrix marshals as a JSON object.
func (e Endpoint) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (e *Endpoint) UnmarshalText(b []byte) error {
	leaf, port, ok := strings.Cut(string(b), "/")
	if !ok {
		return &textError{string(b)}
	}
	e.Leaf, e.Port = leaf, port
	return nil
}

type textError struct{ s string }

func (e *textError) Error() string { return "endpoint " + e.s + " is not leaf/port" }

func compareEndpoints(a, b Endpoint) int {
	return cmp.Or(strings.Compare(a.Leaf, b.Leaf), fabric.ComparePorts(a.Port, b.Port))
}

// Matrix maps every server port of the intent to the ports it reaches
// (sorted, never itself): an endpoint sends, the destination receives.
// Reachability is directional; group policy and contracts are symmetric,
// ACLs need not be.
type Matrix map[Endpoint][]Endpoint

// Reaches reports whether from reaches to.
func (m Matrix) Reaches(from, to Endpoint) bool {
	_, ok := slices.BinarySearchFunc(m[from], to, compareEndpoints)
	return ok
}

// Pairs counts the reachable (from, to) pairs.
func (m Matrix) Pairs() int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// Reachability computes which server ports reach which, from the intent
// alone: routes over the route-target graph and VXLAN, bridging over shared
// L2VNIs, and job segmentation applied as e says (see the package comment).
// Every port of every device is a key, unassigned ports with nothing.
func Reachability(it *fabric.Intent, e Enforcement) Matrix {
	m := buildModel(it)
	pol := newPolicy(m, e)
	out := make(Matrix, len(m.eps))
	stamp := make([]int32, len(m.insts))
	seen := make([]int32, len(m.eps))
	var routes []int32
	mark, epMark := int32(0), int32(0)
	for s := range m.eps {
		es := &m.eps[s]
		var reach []Endpoint
		epMark++
		seen[s] = epMark
		for _, v := range es.inst {
			mark++
			routes = m.routesFrom(v, routes, stamp, mark)
			for _, u := range routes {
				for _, t := range m.insts[u].eps {
					if seen[t] == epMark || !pol.allows(int32(s), t, u) {
						continue
					}
					seen[t] = epMark
					reach = append(reach, Endpoint(m.eps[t].ref))
				}
			}
		}
		if es.l2vni != 0 {
			for _, t := range m.l2[es.l2vni] {
				if seen[t] != epMark && m.bridged(int32(s), t) {
					seen[t] = epMark
					reach = append(reach, Endpoint(m.eps[t].ref))
				}
			}
		}
		slices.SortFunc(reach, compareEndpoints)
		out[Endpoint(es.ref)] = reach
	}
	return out
}

// source is policy p seen from one source endpoint: what allows works out
// from the source alone (its groups or its VRFs' unclassified tags, its
// ACL's allow set) is worked out once for every destination it reaches.
// allows(t, u) answers what p.allows(s, t, u) does.
type source struct {
	p      *policy
	es     *endpoint
	src    []uint16 // the groups its packets carry
	as     *allowSet
	asDone bool
	// last is groupAllows' last answer: destinations in one instance and
	// group (the ports of one job) get the same one.
	lastU      int32
	lastGroups []uint16
	lastOK     bool
}

func (p *policy) from(s int32) source {
	es := &p.m.eps[s]
	sp := source{p: p, es: es, src: es.groups, lastU: -1}
	if len(sp.src) == 0 {
		sp.src = nil
		for _, si := range es.inst {
			if pol := p.m.insts[si].vrf.Policy; pol != nil && pol.Unclassified != 0 {
				sp.src = append(sp.src, pol.Unclassified)
			}
		}
	}
	return sp
}

func (sp *source) allows(t, u int32) bool {
	p := sp.p
	es, et := sp.es, &p.m.eps[t]
	gbp, acl := p.e == EnforceGroupPolicy, p.e == EnforceACL
	if p.e == EnforceByNOS {
		gbp = groupPolicyNOS(et.dev.NOS)
		acl = !groupPolicyNOS(es.dev.NOS)
	}
	if acl && es.hasACL && !sp.aclAllows(et) {
		return false
	}
	if gbp {
		if u != sp.lastU || !slices.Equal(et.groups, sp.lastGroups) {
			sp.lastU, sp.lastGroups, sp.lastOK = u, et.groups, sp.groupAllows(et, u)
		}
		if !sp.lastOK {
			return false
		}
	}
	return true
}

// groupAllows is policy.groupAllows with the source's groups at hand.
func (sp *source) groupAllows(et *endpoint, u int32) bool {
	in := &sp.p.m.insts[u]
	if in.vrf.Policy == nil {
		return true
	}
	for _, gs := range sp.src {
		if gs != 0 && gs == in.vrf.Policy.Switch {
			return true
		}
	}
	for _, gt := range et.groups {
		for _, gs := range sp.src {
			if gs == gt || in.contracts[[2]uint16{gs, gt}] {
				return true
			}
		}
	}
	return false
}

// aclAllows is policy.aclAllows with the source's allow set looked up
// once.
func (sp *source) aclAllows(et *endpoint) bool {
	if len(sp.es.acl) == 0 {
		return false
	}
	if !sp.asDone {
		sp.as, sp.asDone = sp.p.allowSet(sp.es), true
	}
	for _, pf := range et.prefixes {
		if sp.as.covers(pf) {
			return true
		}
	}
	return false
}
