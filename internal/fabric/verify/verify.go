package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/fabric"
)

// Verify proves the isolation properties of intent it against the input
// in it was compiled from (see the package comment for the checks) and
// returns a report listing every violation, in a fixed order. A nil intent
// is verified as an empty one.
func Verify(in fabric.Input, it *fabric.Intent) *Report {
	return verifyWith(in, it, (*verifier).jobIsolation)
}

// verifyWith is Verify with the job-isolation check given (the tests run
// the reference implementation through it).
func verifyWith(in fabric.Input, it *fabric.Intent, jobIsolation func(*verifier) Check) *Report {
	if it == nil {
		it = &fabric.Intent{}
	}
	v := &verifier{in: in, m: buildModel(it), x: deriveExpected(in)}
	v.tenantOf = make([]string, len(v.m.insts))
	for i := range v.m.insts {
		v.tenantOf[i] = v.m.insts[i].vrf.Tenant
	}
	v.owners = make([]*owner, len(v.m.eps))
	for e := range v.m.eps {
		v.owners[e] = v.x.links[v.m.eps[e].ref]
	}
	r := &Report{Checks: []Check{v.links(), v.tenantIDs(), v.jobEndpoints(), v.bindings(), v.tenantIsolation(), jobIsolation(v),
		v.serverPorts(), v.underlayIsolation(), v.switchTraffic(), v.overlay()}}
	r.Stats = Stats{Devices: len(it.Devices), VRFs: len(v.m.insts), Endpoints: len(v.m.eps), Jobs: len(v.x.jobs)}
	for _, e := range v.m.eps {
		if len(e.inst) > 0 {
			r.Stats.Bound++
		}
		if e.quarantined() {
			r.Stats.Quarantined++
		}
		if e.guarded() {
			r.Stats.Guarded++
		}
	}
	return r
}

type verifier struct {
	in       fabric.Input
	m        *model
	x        *expected
	tenantOf []string // instance -> its VRF's tenant
	// owners is owner's answer by endpoint, looked up once: the isolation
	// checks ask it for every pair of endpoints that reach each other.
	owners []*owner
}

// owner is the tenant the input says holds endpoint e ("" for none).
func (v *verifier) owner(e int32) *owner { return v.owners[e] }

func (v *verifier) ownerName(e int32) string {
	if o := v.owner(e); o != nil {
		return o.tenant
	}
	return ""
}

func describeOwner(t string) string {
	if t == "" {
		return "no tenant"
	}
	return "tenant " + t
}

// --- links ------------------------------------------------------------------

func (v *verifier) links() Check {
	cb := newCheck(CheckLinks, "every server link is in at most one VRF, one its device has, of the tenant its port names")
	m := v.m
	for ei := range m.eps {
		e := &m.eps[ei]
		var buf [2]string
		vrfs := buf[:0]
		for _, p := range e.ports {
			if p.VRF == "" {
				if p.Tenant != "" {
					cb.fail(RuleLinkTenant, e.ref.Leaf, e.ref.Port, "names tenant %q but is in no VRF", p.Tenant)
				}
				continue
			}
			if !slices.Contains(vrfs, p.VRF) {
				vrfs = append(vrfs, p.VRF)
			}
			insts := m.lookup(e.dev, p.VRF)
			if len(insts) == 0 {
				cb.fail(RuleLinkNoSuchVRF, e.ref.Leaf, e.ref.Port, "is in VRF %s, which %s does not have", p.VRF, e.dev.Name)
				continue
			}
			for _, ii := range insts {
				if t := v.tenantOf[ii]; t != p.Tenant {
					cb.fail(RuleLinkTenant, e.ref.Leaf, e.ref.Port, "names tenant %q but is in VRF %s of tenant %q", p.Tenant, p.VRF, t)
				}
			}
		}
		slices.Sort(vrfs)
		if len(vrfs) > 1 {
			cb.fail(RuleLinkTwoVRFs, e.ref.Leaf, e.ref.Port, "is in %d VRFs: %s", len(vrfs), strings.Join(vrfs, ", "))
		}
	}
	return cb.done()
}

// --- ids --------------------------------------------------------------------

func (v *verifier) tenantIDs() Check {
	cb := newCheck(CheckTenantIDs, "no two tenants share a VRF, VNI, RD, route target or group ID; no VRF imports another tenant's target")
	m := v.m
	// use is who used an id first: a tenant, and where (an instance, or
	// an endpoint when inst < 0), spelled out only for a failure.
	type use struct {
		tenant string
		inst   int32
		ep     int32
	}
	where := func(u use) string {
		if u.inst >= 0 {
			return m.insts[u.inst].dev.Name + " vrf " + m.insts[u.inst].vrf.Name
		}
		return "port " + m.name(u.ep)
	}
	vrfTenant := map[string]use{} // VRF name -> first tenant
	vniUse := map[uint32]use{}    // VNI -> first tenant
	l3vni := map[uint32]bool{}    // VNIs used as an L3VNI
	rds := &rdSet{}
	rtOwner := map[fabric.RouteTarget]use{}
	groupUse := map[uint16]use{}
	reported := map[string]bool{}
	once := func(key string) bool {
		if reported[key] {
			return false
		}
		reported[key] = true
		return true
	}
	// claimVNI's object is obj, or "vrf "+obj when isVRF (built only for
	// a failure).
	claimVNI := func(vni uint32, tenant string, at use, dev, obj string, isVRF bool, what string) {
		if vni == 0 {
			return
		}
		if u, ok := vniUse[vni]; !ok {
			at.tenant = tenant
			vniUse[vni] = at
		} else if u.tenant != tenant && once(fmt.Sprintf("vni %d %s", vni, tenant)) {
			if isVRF {
				obj = "vrf " + obj
			}
			cb.fail(RuleVNIShared, dev, obj, "%s %d of tenant %q is also used by tenant %q (%s)", what, vni, tenant, u.tenant, where(u))
		}
	}
	// First pass: names, VNIs, RDs, exported targets and group IDs.
	for ii := range m.insts {
		in := &m.insts[ii]
		d, vr := in.dev, in.vrf
		here := use{tenant: vr.Tenant, inst: int32(ii)}
		if _, ok := v.x.tenants[vr.Tenant]; !ok && once("tenant "+vr.Tenant) {
			cb.fail(RuleVRFTenant, d.Name, "vrf "+vr.Name, "belongs to tenant %q, which the input does not have", vr.Tenant)
		}
		if u, ok := vrfTenant[vr.Name]; !ok {
			vrfTenant[vr.Name] = here
		} else if u.tenant != vr.Tenant && once("vrf "+vr.Name+" "+vr.Tenant) {
			cb.fail(RuleVRFShared, d.Name, "vrf "+vr.Name, "VRF %s is tenant %q's here and tenant %q's on %s", vr.Name, vr.Tenant, u.tenant, m.insts[u.inst].dev.Name)
		}
		claimVNI(vr.L3VNI, vr.Tenant, here, d.Name, vr.Name, true, "L3VNI")
		l3vni[vr.L3VNI] = true
		if rds.add(vr.RD) {
			cb.fail(RuleRDShared, d.Name, "vrf "+vr.Name, "route distinguisher %s is also %s's", vr.RD, v.firstRD(vr.RD))
		}
		if vr.MAC != nil && rds.add(vr.MAC.RD) {
			cb.fail(RuleRDShared, d.Name, "vrf "+vr.Name+" (MAC-VRF)", "route distinguisher %s is also %s's", vr.MAC.RD, v.firstRD(vr.MAC.RD))
		}
		for _, rt := range in.exports() {
			if u, ok := rtOwner[rt]; !ok {
				rtOwner[rt] = here
			} else if u.tenant != vr.Tenant && once(fmt.Sprintf("rt %s %s", rt, vr.Tenant)) {
				cb.fail(RuleRTShared, d.Name, "vrf "+vr.Name, "route target %s of tenant %q is also exported by tenant %q (%s)", rt, vr.Tenant, u.tenant, where(u))
			}
		}
		if vr.Policy == nil {
			continue
		}
		claimGroup := func(id uint16) {
			if id == 0 {
				return
			}
			if u, ok := groupUse[id]; !ok {
				groupUse[id] = here
			} else if u.tenant != vr.Tenant && once(fmt.Sprintf("group %d %s", id, vr.Tenant)) {
				cb.fail(RuleGroupShared, d.Name, "vrf "+vr.Name, "group %d of tenant %q is also tenant %q's (%s)", id, vr.Tenant, u.tenant, where(u))
			}
		}
		claimGroup(vr.Policy.Unclassified)
		for _, g := range vr.Policy.Groups {
			claimGroup(g.ID)
		}
	}
	// One name, one VRF per device.
	for _, d := range m.devs {
		idx := m.byName[d]
		for i := 1; i < len(idx); i++ {
			if n := m.insts[idx[i]].vrf.Name; n == m.insts[idx[i-1]].vrf.Name && (i == 1 || m.insts[idx[i-2]].vrf.Name != n) {
				cb.fail(RuleVRFShared, d.Name, "vrf "+n, "the device has %d VRFs named %s", len(m.lookup(d, n)), n)
			}
		}
	}
	// VLANs of a device: an L3 VLAN (NX-OS, SONiC: per leaf) carries
	// one VRF's L3VNI; shared with another VRF or a link, the SVI joins
	// two tenants' routing or bridges a link into a VRF's transit.
	type devVLAN struct {
		dev  *fabric.Device
		vlan uint16
	}
	vlanUse := map[devVLAN]int32{} // the instance whose L3 VLAN it is
	l3VLANOf := func(ii int32) string { return "the L3 VLAN of vrf " + m.insts[ii].vrf.Name }
	for ii := range m.insts {
		in := &m.insts[ii]
		if in.vrf.L3VLAN == 0 {
			continue
		}
		k := devVLAN{in.dev, in.vrf.L3VLAN}
		if other, ok := vlanUse[k]; ok {
			cb.fail(RuleVLANShared, in.dev.Name, "vrf "+in.vrf.Name, "L3 VLAN %d is also %s", in.vrf.L3VLAN, l3VLANOf(other))
		} else {
			vlanUse[k] = int32(ii)
		}
	}
	if len(vlanUse) > 0 {
		for ei := range m.eps {
			e := &m.eps[ei]
			for _, p := range e.ports {
				if other, ok := vlanUse[devVLAN{e.dev, p.VLAN}]; ok && p.VLAN != 0 {
					cb.fail(RuleVLANShared, e.ref.Leaf, e.ref.Port, "link VLAN %d is also %s", p.VLAN, l3VLANOf(other))
				}
			}
		}
	}
	// L2VNIs: one link each, never an L3VNI, never another tenant's.
	l2 := map[uint32]string{}
	for ei := range m.eps {
		e := &m.eps[ei]
		for _, p := range e.ports {
			if p.L2VNI == 0 {
				continue
			}
			claimVNI(p.L2VNI, p.Tenant, use{inst: -1, ep: int32(ei)}, e.ref.Leaf, e.ref.Port, false, "L2VNI")
			name := m.name(int32(ei))
			if other, ok := l2[p.L2VNI]; ok && other != name {
				cb.fail(RuleVNIReused, e.ref.Leaf, e.ref.Port, "L2VNI %d is also link %s's: two links in one bridge domain", p.L2VNI, other)
			} else {
				l2[p.L2VNI] = name
			}
			if l3vni[p.L2VNI] {
				cb.fail(RuleVNIReused, e.ref.Leaf, e.ref.Port, "L2VNI %d is also an L3VNI", p.L2VNI)
			}
		}
	}
	// Imports: only the tenant's own targets.
	for ii := range m.insts {
		in := &m.insts[ii]
		for rt := range in.imports() {
			u, ok := rtOwner[rt]
			switch {
			case !ok:
				cb.fail(RuleRTImport, in.dev.Name, "vrf "+in.vrf.Name, "imports route target %s, which tenant %q does not export (no tenant does)", rt, in.vrf.Tenant)
			case u.tenant != in.vrf.Tenant:
				cb.fail(RuleRTImport, in.dev.Name, "vrf "+in.vrf.Name, "tenant %q imports route target %s of tenant %q (%s)", in.vrf.Tenant, rt, u.tenant, where(u))
			}
		}
	}
	return cb.done()
}

// rdSet records route distinguishers: a bitset of numbers per address
// (one or two addresses per device), far cheaper than a map of 256,000
// RDs.
type rdSet struct {
	last netip.Addr
	bits *[1 << 10]uint64
	all  map[netip.Addr]*[1 << 10]uint64
}

// add records rd and reports whether it was recorded before.
func (s *rdSet) add(rd fabric.RD) bool {
	if s.bits == nil || rd.Addr != s.last {
		if s.all == nil {
			s.all = map[netip.Addr]*[1 << 10]uint64{}
		}
		s.last, s.bits = rd.Addr, s.all[rd.Addr]
		if s.bits == nil {
			s.bits = new([1 << 10]uint64)
			s.all[rd.Addr] = s.bits
		}
	}
	w, b := rd.Num/64, uint64(1)<<(rd.Num%64)
	seen := s.bits[w]&b != 0
	s.bits[w] |= b
	return seen
}

// firstRD names the first VRF carrying rd (for a failure's detail).
func (v *verifier) firstRD(rd fabric.RD) string {
	for i := range v.m.insts {
		in := &v.m.insts[i]
		if in.vrf.RD == rd {
			return in.dev.Name + " vrf " + in.vrf.Name
		}
		if in.vrf.MAC != nil && in.vrf.MAC.RD == rd {
			return in.dev.Name + " vrf " + in.vrf.Name + " (MAC-VRF)"
		}
	}
	return "?"
}

// --- job endpoints ------------------------------------------------------------

func (v *verifier) jobEndpoints() Check {
	cb := newCheck(CheckJobEndpoints, "every running job's links are in its tenant's VRF and, when segmented, in the job's group")
	m := v.m
	for _, j := range v.x.jobs {
		seg := v.x.segmented(j.tenant)
		g := v.x.groups[jobRef{j.tenant, j.id}]
		if seg && g == nil {
			cb.fail(RuleJobGroup, "", "job "+j.id, "job %s of segmented tenant %q has no group in the input, so its links reach nothing", j.id, j.tenant)
		}
		for _, ref := range j.links {
			ei, ok := m.epIdx[ref]
			if !ok {
				cb.fail(RuleJobLink, ref.Leaf, ref.Port, "is a link of job %s of tenant %q, but the intent has no such port", j.id, j.tenant)
				continue
			}
			e := &m.eps[ei]
			var inBuf, otherBuf [2]string
			in, other := inBuf[:0], otherBuf[:0]
			for _, ii := range e.inst {
				if v.tenantOf[ii] == j.tenant {
					in = append(in, m.insts[ii].vrf.Name)
				} else {
					other = append(other, fmt.Sprintf("%s of tenant %q", m.insts[ii].vrf.Name, v.tenantOf[ii]))
				}
			}
			switch {
			case len(in) == 0 && len(other) == 0:
				cb.fail(RuleJobVRF, ref.Leaf, ref.Port, "is a link of job %s of tenant %q but in no VRF", j.id, j.tenant)
			case len(in) == 0:
				cb.fail(RuleJobVRF, ref.Leaf, ref.Port, "is a link of job %s of tenant %q but in VRF %s", j.id, j.tenant, strings.Join(other, ", "))
			case len(other) > 0:
				cb.fail(RuleJobVRF, ref.Leaf, ref.Port, "is a link of job %s of tenant %q, in its VRF %s but also in VRF %s", j.id, j.tenant, in[0], strings.Join(other, ", "))
			}
			if seg && g != nil && !slices.Contains(e.groups, g.ID) {
				cb.fail(RuleJobGroup, ref.Leaf, ref.Port, "is a link of job %s of tenant %q but not in its group %d (%s); classified as %s",
					j.id, j.tenant, g.ID, g.Name, groupList(e.groups))
			}
		}
	}
	// Classification must be unambiguous and the same for every NOS: the
	// port's Group and the member lists of its VRF's policy agree.
	for ei := range m.eps {
		e := &m.eps[ei]
		if len(e.groups) > 1 {
			cb.fail(RuleGroupPort, e.ref.Leaf, e.ref.Port, "is classified into %d groups: %s", len(e.groups), groupList(e.groups))
			continue
		}
		for _, p := range e.ports {
			for _, ii := range m.lookup(e.dev, p.VRF) {
				pol := m.insts[ii].vrf.Policy
				if pol == nil {
					continue
				}
				listed := uint16(0)
				for _, g := range pol.Groups {
					if slices.Contains(g.Ports, p.Name) {
						listed = g.ID
					}
				}
				if listed != p.Group {
					cb.fail(RuleGroupPort, e.ref.Leaf, e.ref.Port, "has group %d but VRF %s's policy lists it in %s", p.Group, m.insts[ii].vrf.Name, groupList(nonzero(listed)))
				}
			}
		}
	}
	return cb.done()
}

func nonzero(id uint16) []uint16 {
	if id == 0 {
		return nil
	}
	return []uint16{id}
}

func groupList(ids []uint16) string {
	if len(ids) == 0 {
		return "no group"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "group " + strings.Join(s, ", ")
}

// --- bindings ---------------------------------------------------------------

func (v *verifier) bindings() Check {
	cb := newCheck(CheckBindings, "allocations and port bindings agree: each allocated link is in its tenant's VRF and no other link is in any")
	for _, f := range v.x.problems {
		cb.fail(f.Rule, f.Device, f.Object, "%s", f.Detail)
	}
	m := v.m
	for ei := range m.eps {
		e := &m.eps[ei]
		o := v.owner(int32(ei))
		if !v.x.cables[e.ref] && v.in.Topology != nil {
			cb.fail(RuleBindingPort, e.ref.Leaf, e.ref.Port, "is not a cable of the topology")
		}
		var buf [2]string
		tenants := buf[:0]
		for _, ii := range e.inst {
			if !slices.Contains(tenants, v.tenantOf[ii]) {
				tenants = append(tenants, v.tenantOf[ii])
			}
		}
		slices.Sort(tenants)
		switch {
		case o == nil && len(tenants) > 0:
			cb.fail(RuleBindingOrphan, e.ref.Leaf, e.ref.Port, "is in the VRF of tenant %s, but no allocation holds it", strings.Join(tenants, ", "))
		case o != nil && len(tenants) == 0:
			cb.fail(RuleBindingUnbound, e.ref.Leaf, e.ref.Port, "is held by tenant %q but in no VRF", o.tenant)
		case o != nil && (len(tenants) > 1 || tenants[0] != o.tenant):
			cb.fail(RuleBindingTenant, e.ref.Leaf, e.ref.Port, "is held by tenant %q but in the VRF of tenant %s", o.tenant, strings.Join(tenants, ", "))
		}
		if o == nil {
			continue
		}
		for _, p := range e.ports {
			if p.VRF != "" && !slices.Equal(p.Jobs, o.jobs) {
				cb.fail(RuleBindingJobs, e.ref.Leaf, e.ref.Port, "names jobs [%s], the allocations [%s]", strings.Join(p.Jobs, " "), strings.Join(o.jobs, " "))
			}
		}
	}
	var missing []fabric.LinkRef
	for ref := range v.x.links {
		if _, ok := m.epIdx[ref]; !ok {
			missing = append(missing, ref)
		}
	}
	slices.SortFunc(missing, compareRefs)
	for _, ref := range missing {
		cb.fail(RuleBindingPort, ref.Leaf, ref.Port, "is held by tenant %q, but the intent has no such port", v.x.links[ref].tenant)
	}
	return cb.done()
}

// --- isolation ----------------------------------------------------------------

// tenantIsolation walks the routing graph instance by instance: every
// instance with endpoints against every instance whose routes it holds, and
// flags each pair of endpoints with different owners. Policy is not
// applied: tenant isolation must hold on routing alone.
func (v *verifier) tenantIsolation() Check {
	cb := newCheck(CheckTenantIsolation, "no endpoint of one tenant reaches an endpoint of another (routing and bridging, before any group policy or ACL)")
	m := v.m
	// An instance's owners: "" for none yet, a tenant, or mixed.
	const mixed = "\x00mixed"
	own := make([]string, len(m.insts))
	for ii := range m.insts {
		for k, e := range m.insts[ii].eps {
			o := v.ownerName(e)
			if k == 0 {
				own[ii] = o
			} else if own[ii] != o {
				own[ii] = mixed
			}
		}
	}
	stamp := make([]int32, len(m.insts))
	var routes []int32
	for vi := range m.insts {
		if len(m.insts[vi].eps) == 0 {
			continue
		}
		routes = m.routesFrom(int32(vi), routes, stamp, int32(vi+1))
		for _, u := range routes {
			if own[vi] != mixed && own[vi] == own[u] {
				continue
			}
			for _, s := range m.insts[vi].eps {
				so := v.ownerName(s)
				for _, t := range m.insts[u].eps {
					if s == t || so == v.ownerName(t) {
						continue
					}
					if cb.full() {
						cb.n++
						cb.c.Omitted++
						continue
					}
					how := "in the same VRF"
					if u != int32(vi) {
						how = fmt.Sprintf("%s imports %s, exported by %s", m.instName(int32(vi)), m.viaRT(int32(vi), u), m.instName(u))
					}
					cb.fail(RuleReachTenant, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(%s) reaches %s (%s): %s",
						describeOwner(so), m.name(t), describeOwner(v.ownerName(t)), how)
				}
			}
		}
	}
	for vni, eps := range m.l2 {
		if len(eps) < 2 {
			continue
		}
		for _, s := range eps {
			for _, t := range eps {
				if s != t && v.ownerName(s) != v.ownerName(t) && m.bridged(s, t) {
					cb.fail(RuleReachTenant, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(%s) reaches %s (%s): bridged over L2VNI %d",
						describeOwner(v.ownerName(s)), m.name(t), describeOwner(v.ownerName(t)), vni)
				}
			}
		}
	}
	return cb.done()
}

// jobIsolation checks, for every endpoint of a segmented tenant, that it
// reaches no endpoint of the same tenant used by another job, unless the
// input's contracts join the two jobs' groups; under group policy and
// under the ACL fallback separately, since which one a leaf runs depends on
// its NOS.
//
// At 100,000 GPUs this is millions of endpoint pairs, so what does not
// depend on the pair is worked out once: the owners' jobs, groups and
// contracts as integers (jobKeys), the routes of each instance (they
// depend on the instance, not on the endpoint), and the policy's view of
// each source (source). The failures are the reference's, in its order
// (TestJobIsolationMatchesReference).
func (v *verifier) jobIsolation() Check {
	cb := newCheck(CheckJobIsolation, "in a segmented tenant no job reaches another job (default deny, allow within a group and per contract), under group policy and ACLs alike")
	m := v.m
	forms := [2]struct {
		rule string
		pol  *policy
		src  source
	}{{rule: RuleReachJobGBP, pol: newPolicy(m, EnforceGroupPolicy)}, {rule: RuleReachJobACL, pol: newPolicy(m, EnforceACL)}}
	keys := v.jobKeys()
	routes := newRouteCache(m)
	for s := range m.eps {
		so := v.owner(int32(s))
		if so == nil || !v.x.segmented(so.tenant) {
			continue
		}
		if len(so.jobs) > 1 {
			cb.fail(RuleSharedLink, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "serves jobs %s of segmented tenant %q: the network cannot separate jobs that share a link",
				strings.Join(so.jobs, ", "), so.tenant)
		}
		ks := keys.of(int32(s))
		for f := range forms {
			forms[f].src = forms[f].pol.from(int32(s))
		}
		for _, vi := range m.eps[s].inst {
			for _, u := range routes.from(vi) {
				for _, t := range m.insts[u].eps {
					to := v.owner(t)
					if t == int32(s) || to == nil || to.tenant != so.tenant || keys.intended(ks, keys.of(t)) {
						continue
					}
					for f := range forms {
						if forms[f].src.allows(t, u) {
							cb.fail(forms[f].rule, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(job %s) reaches %s (job %s) of tenant %q in %s",
								jobList(so.jobs), m.name(t), jobList(to.jobs), so.tenant, m.instName(u))
						}
					}
				}
			}
		}
		if l2 := m.eps[s].l2vni; l2 != 0 {
			for _, t := range m.l2[l2] {
				to := v.owner(t)
				if t == int32(s) || to == nil || to.tenant != so.tenant || keys.intended(ks, keys.of(t)) || !m.bridged(int32(s), t) {
					continue
				}
				for f := range forms {
					cb.fail(forms[f].rule, m.eps[s].ref.Leaf, m.eps[s].ref.Port, "(job %s) reaches %s (job %s) of tenant %q: bridged over L2VNI %d, no policy applies",
						jobList(so.jobs), m.name(t), jobList(to.jobs), so.tenant, l2)
				}
			}
		}
	}
	return cb.done()
}

// routeCache memoizes routesFrom per instance: job isolation asks for the
// routes of an instance once per endpoint bound to it.
type routeCache struct {
	m     *model
	start []int32 // per instance: offset in flat + 1; 0 = not yet computed
	end   []int32
	flat  []int32
	stamp []int32
	mark  int32
	buf   []int32
}

func newRouteCache(m *model) *routeCache {
	return &routeCache{m: m, start: make([]int32, len(m.insts)), end: make([]int32, len(m.insts)), stamp: make([]int32, len(m.insts))}
}

// from is m.routesFrom(v); the slice is valid until the next call.
func (c *routeCache) from(v int32) []int32 {
	if c.start[v] == 0 {
		c.mark++
		c.buf = c.m.routesFrom(v, c.buf, c.stamp, c.mark)
		c.start[v] = int32(len(c.flat)) + 1
		c.flat = append(c.flat, c.buf...)
		c.end[v] = int32(len(c.flat))
	}
	return c.flat[c.start[v]-1 : c.end[v]]
}

func jobList(jobs []string) string {
	if len(jobs) == 0 {
		return "none"
	}
	return strings.Join(jobs, ",")
}
