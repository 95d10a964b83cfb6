package fabric

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Compile turns inventory, tenants, allocations and pool ids into the
// desired state of every leaf and spine. It is a pure function of its Input:
// no clock, no randomness, no map-order dependence; the same Input gives the
// same Intent. A bad input (an allocation naming an unknown server, two
// tenants claiming one link, an id used twice) returns an invalid_argument
// *domain.Error whose Field is the JSON-ish path of the offending input.
func Compile(in Input) (*Intent, error) {
	c, err := compileSteps(in, (*compiler).indexTopology, (*compiler).registerTenants, (*compiler).tenantIDs, (*compiler).leafL3VLANs,
		(*compiler).assign, (*compiler).linkIDs, (*compiler).indexGroups, (*compiler).buildPorts)
	if err != nil {
		return nil, err
	}
	return c.intent(), nil
}

// compileSteps makes a compiler of in and runs the steps on it in order,
// stopping at the first that fails: Compile runs them all, Owners and
// NewCompiler the first few.
func compileSteps(in Input, steps ...func(*compiler) error) (*compiler, error) {
	c, err := newCompiler(in)
	if err != nil {
		return nil, err
	}
	for _, step := range steps {
		if err := step(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

type options struct {
	placement  VRFPlacement
	overlay    OverlaySessions
	rtASN      uint32
	irb4, irb6 netip.Prefix
	mac        string
	nos        string
}

type compiler struct {
	in   Input
	opts options

	fabrics  []*fabricState
	switches map[string]*switchState
	servers  map[string]*serverState
	leaves   []*switchState // file order
	spines   []*switchState
	supers   []*switchState
	srvList  []*serverState

	tenants    map[string]*tenantState
	tenantList []*tenantState // sorted by name
	groupByJob map[jobKey]*groupState

	// seen ids, for uniqueness: value -> who uses it
	vnis, vrfIDs, rts, l3vlans, groupIDs map[uint32]string
	// leafL3 holds the per-leaf L3 VLANs: leaf -> VLAN -> tenant.
	leafL3 map[string]map[uint16]string

	warnings []string
	// underlay is every loopback and uplink prefix, summarised: what no
	// server port may reach (Device.Underlay, shared by every leaf).
	underlay []netip.Prefix
}

type fabricState struct {
	site, name   string
	pool4, pool6 netip.Prefix
}

type switchState struct {
	sw       *domain.Switch
	role     Role
	fab      *fabricState
	loopback netip.Addr
	links    []*link // leaves: server links, sorted by port
	uplinks  []Uplink
	sessions []Session
}

type serverState struct {
	srv   *domain.Server
	fab   *fabricState
	nics  []*link // NIC order; nil for an uncabled NIC
	whole string  // tenant holding the whole server
	// holders are the tenants with an allocation here, with the path of
	// the first one, for error messages.
	holders map[string]string
}

type link struct {
	ref        LinkRef
	srv        *serverState
	nic        *domain.NIC
	ipv4, ipv6 netip.Prefix
	tenant     string
	claimedBy  string
	jobs       []string
	ids        LinkIDs
	gw4, gw6   netip.Prefix
	group      *groupState
}

type jobKey struct{ tenant, job string }

type tenantState struct {
	t      *domain.Tenant
	ids    TenantIDs
	vrf    string
	rt     RouteTarget
	macRT  RouteTarget
	sites  map[string]bool // nil: any site
	groups map[string]*groupState
	// contracts lists each contracted pair once, by group.
	contracts [][2]*groupState
}

type groupState struct {
	g        *Group
	external []netip.Prefix
	peers    []*groupState
	links    []*link
	members  []netip.Prefix // every member prefix, fabric-wide
	allowed  []netip.Prefix // members of the group and of its contracted groups
}

func newCompiler(in Input) (*compiler, error) {
	if in.Topology == nil {
		return nil, domain.Invalid("topology", "no topology given")
	}
	o := options{placement: in.Options.VRFPlacement, overlay: in.Options.Overlay, rtASN: in.Options.RTASN, nos: in.Options.DefaultNOS}
	switch o.placement {
	case "":
		o.placement = VRFsOnAllLeaves
	case VRFsOnAllLeaves, VRFsWhereUsed:
	default:
		return nil, domain.Invalid("options.vrfPlacement", "VRF placement %q is not one of %s, %s", o.placement, VRFsOnAllLeaves, VRFsWhereUsed)
	}
	switch o.overlay {
	case "":
		o.overlay = OverlayOnLinks
	case OverlayOnLinks, OverlayOnLoopbacks:
	default:
		return nil, domain.Invalid("options.overlay", "overlay %q is not one of %s, %s", o.overlay, OverlayOnLinks, OverlayOnLoopbacks)
	}
	if o.rtASN == 0 {
		o.rtASN = DefaultRTASN
	}
	if o.nos == "" {
		o.nos = DefaultNOS
	}
	var err error
	if o.irb4, err = parsePool(in.Options.IRBPool4, DefaultIRBPool4, true, irbBits4); err != nil {
		return nil, domain.Invalid("options.irbPool4", "%v", err)
	}
	if o.irb6, err = parsePool(in.Options.IRBPool6, DefaultIRBPool6, false, irbBits6); err != nil {
		return nil, domain.Invalid("options.irbPool6", "%v", err)
	}
	mac := in.Options.AnycastMAC
	if mac == "" {
		mac = DefaultAnycastMAC
	}
	if o.mac, err = parseMAC(mac); err != nil {
		return nil, domain.Invalid("options.anycastMac", "%v", err)
	}
	return &compiler{
		in: in, opts: o,
		switches: map[string]*switchState{}, servers: map[string]*serverState{},
		tenants: map[string]*tenantState{}, groupByJob: map[jobKey]*groupState{},
		vnis: map[uint32]string{}, vrfIDs: map[uint32]string{}, rts: map[uint32]string{},
		l3vlans: map[uint32]string{}, groupIDs: map[uint32]string{uint32(SwitchGroup): switchGroupOwner},
		leafL3: map[string]map[uint16]string{},
	}, nil
}

func parsePool(s, def string, v4 bool, bits int) (netip.Prefix, error) {
	if s == "" {
		s = def
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Addr().Is4() != v4 || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("gateway pool %q is not an %s prefix such as %s", s, map[bool]string{true: "IPv4", false: "IPv6"}[v4], def)
	}
	if p.Bits() > bits {
		return netip.Prefix{}, fmt.Errorf("gateway pool %s is smaller than one /%d", p, bits)
	}
	return p.Masked(), nil
}

// --- topology -------------------------------------------------------------

func (c *compiler) indexTopology() error {
	t := c.in.Topology
	for si := range t.Sites {
		site := &t.Sites[si]
		for fi := range site.Fabrics {
			f := &site.Fabrics[fi]
			path := fmt.Sprintf("topology.sites[%d].fabrics[%d]", si, fi)
			fs := &fabricState{site: site.Name, name: f.Name}
			if f.LinkPools.IPv4 != "" {
				p, err := netip.ParsePrefix(f.LinkPools.IPv4)
				if err != nil {
					return domain.Invalid(path+".linkPools.ipv4", "link pool %q: %v", f.LinkPools.IPv4, err)
				}
				fs.pool4 = p.Masked()
			}
			if f.LinkPools.IPv6 != "" {
				p, err := netip.ParsePrefix(f.LinkPools.IPv6)
				if err != nil {
					return domain.Invalid(path+".linkPools.ipv6", "link pool %q: %v", f.LinkPools.IPv6, err)
				}
				fs.pool6 = p.Masked()
			}
			c.fabrics = append(c.fabrics, fs)
			for _, group := range []struct {
				sws  []domain.Switch
				role Role
				name string
			}{{f.SuperSpines, RoleSuperSpine, "superSpines"}, {f.Spines, RoleSpine, "spines"}, {f.Leaves, RoleLeaf, "leaves"}} {
				for i := range group.sws {
					sw := &group.sws[i]
					lo, err := netip.ParseAddr(sw.Loopback)
					if err != nil || !lo.Is4() {
						return domain.Invalid(fmt.Sprintf("%s.%s[%d].loopback", path, group.name, i), "%s %s has loopback %q; it needs an IPv4 address (router ID and VTEP)", group.role, sw.Name, sw.Loopback)
					}
					if _, dup := c.switches[sw.Name]; dup {
						return domain.Invalid(fmt.Sprintf("%s.%s[%d].name", path, group.name, i), "switch name %q is used twice", sw.Name)
					}
					st := &switchState{sw: sw, role: group.role, fab: fs, loopback: lo}
					c.switches[sw.Name] = st
					switch group.role {
					case RoleLeaf:
						c.leaves = append(c.leaves, st)
					case RoleSpine:
						c.spines = append(c.spines, st)
					default:
						c.supers = append(c.supers, st)
					}
				}
			}
			for i := range f.Servers {
				s := &f.Servers[i]
				if _, dup := c.servers[s.Name]; dup {
					return domain.Invalid(fmt.Sprintf("%s.servers[%d].name", path, i), "server name %q is used twice", s.Name)
				}
				ss := &serverState{srv: s, fab: fs, nics: make([]*link, len(s.NICs)), holders: map[string]string{}}
				c.servers[s.Name] = ss
				c.srvList = append(c.srvList, ss)
			}
			for i := range f.Cables {
				if err := c.cable(fs, fmt.Sprintf("%s.cables[%d]", path, i), &f.Cables[i]); err != nil {
					return err
				}
			}
			for i := range f.Uplinks {
				u := &f.Uplinks[i]
				if err := c.fabricLink(fmt.Sprintf("%s.uplinks[%d]", path, i), "leaf", "spine", u.Leaf, u.LeafPort, u.Spine, u.SpinePort, u.IPv4); err != nil {
					return err
				}
			}
			for i := range f.SpineUplinks {
				u := &f.SpineUplinks[i]
				if err := c.fabricLink(fmt.Sprintf("%s.spineUplinks[%d]", path, i), "spine", "superSpine", u.Spine, u.SpinePort, u.SuperSpine, u.SuperSpinePort, u.IPv4); err != nil {
					return err
				}
			}
		}
	}
	for _, l := range c.leaves {
		slices.SortFunc(l.links, func(a, b *link) int { return ComparePorts(a.ref.Port, b.ref.Port) })
	}
	var under []netip.Prefix
	for _, sws := range [][]*switchState{c.supers, c.spines, c.leaves} {
		for _, sw := range sws {
			under = append(under, netip.PrefixFrom(sw.loopback, sw.loopback.BitLen()))
			for _, u := range sw.uplinks {
				if u.Address.IsValid() {
					under = append(under, u.Address.Masked())
				}
			}
		}
	}
	c.underlay = Summarize(under)
	return nil
}

func (c *compiler) cable(fs *fabricState, path string, cb *domain.Cable) error {
	leaf := c.switches[cb.Leaf]
	if leaf == nil || leaf.role != RoleLeaf {
		return domain.Invalid(path+".leaf", "cable %s/%s names leaf %q, which is not a leaf of the topology", cb.Server, cb.NIC, cb.Leaf)
	}
	srv := c.servers[cb.Server]
	if srv == nil {
		return domain.Invalid(path+".server", "cable names server %q, which is not in the topology", cb.Server)
	}
	ni := slices.IndexFunc(srv.srv.NICs, func(n domain.NIC) bool { return n.Name == cb.NIC })
	if ni < 0 {
		return domain.Invalid(path+".nic", "server %s has no NIC %q", cb.Server, cb.NIC)
	}
	l := &link{ref: LinkRef{Leaf: cb.Leaf, Port: cb.Port}, srv: srv, nic: &srv.srv.NICs[ni]}
	var err error
	if l.ipv4, err = parseLinkPrefix(cb.IPv4); err != nil {
		return domain.Invalid(path+".ipv4", "%v", err)
	}
	if l.ipv6, err = parseLinkPrefix(cb.IPv6); err != nil {
		return domain.Invalid(path+".ipv6", "%v", err)
	}
	if srv.nics[ni] == nil {
		srv.nics[ni] = l
	}
	leaf.links = append(leaf.links, l)
	return nil
}

func parseLinkPrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("link address %q: %w", s, err)
	}
	return p, nil
}

// fabricLink joins a lower-tier switch (a leaf, or a spine of a
// three-tier fabric: lowerField) to the tier above (a spine, or a
// super-spine: upperField) with a link at path, one eBGP session each way.
func (c *compiler) fabricLink(path, lowerField, upperField, lowerName, lowerPort, upperName, upperPort, ipv4 string) error {
	obj, lowerRole, upperRole := "uplink", RoleLeaf, RoleSpine
	if lowerField == "spine" {
		obj, lowerRole, upperRole = "spine uplink", RoleSpine, RoleSuperSpine
	}
	lower, upper := c.switches[lowerName], c.switches[upperName]
	if lower == nil || lower.role != lowerRole {
		return domain.Invalid(path+"."+lowerField, "%s names %s %q, which is not a %s of the topology", obj, lowerRole, lowerName, lowerRole)
	}
	if upper == nil || upper.role != upperRole {
		return domain.Invalid(path+"."+upperField, "%s names %s %q, which is not a %s of the topology", obj, upperRole, upperName, upperRole)
	}
	lu := Uplink{Port: lowerPort, Peer: upperName, PeerPort: upperPort}
	su := Uplink{Port: upperPort, Peer: lowerName, PeerPort: lowerPort}
	var lowerAddr, upperAddr netip.Addr
	if ipv4 != "" {
		p, err := netip.ParsePrefix(ipv4)
		if err != nil || !p.Addr().Is4() || p.Bits() != 31 {
			return domain.Invalid(path+".ipv4", "%s address %q is not an IPv4 /31", obj, ipv4)
		}
		// The upper tier takes the first address, the lower the second
		// (as in the reference lab).
		upperAddr = p.Masked().Addr()
		lowerAddr = upperAddr.Next()
		lu.Address = netip.PrefixFrom(lowerAddr, 31)
		su.Address = netip.PrefixFrom(upperAddr, 31)
	}
	lower.uplinks = append(lower.uplinks, lu)
	upper.uplinks = append(upper.uplinks, su)
	lower.sessions = append(lower.sessions, c.linkSession(upper, lowerPort, upperAddr, lower.role.Transit()))
	upper.sessions = append(upper.sessions, c.linkSession(lower, upperPort, lowerAddr, true))
	if c.opts.overlay == OverlayOnLoopbacks {
		addOverlay(lower, upper, lower.role.Transit())
		addOverlay(upper, lower, true)
	}
	return nil
}

func (c *compiler) linkSession(peer *switchState, port string, peerAddr netip.Addr, transit bool) Session {
	s := Session{Peer: peer.sw.Name, PeerASN: peer.sw.ASN, Interface: port, Address: peerAddr, Unicast: true}
	if c.opts.overlay == OverlayOnLinks {
		s.EVPN = true
		s.NextHopUnchanged = transit
	}
	return s
}

// addOverlay adds one multihop EVPN session from sw to peer, once however
// many links join them.
func addOverlay(sw, peer *switchState, spine bool) {
	for _, s := range sw.sessions {
		if s.Multihop && s.Peer == peer.sw.Name {
			return
		}
	}
	sw.sessions = append(sw.sessions, Session{Peer: peer.sw.Name, PeerASN: peer.sw.ASN, Address: peer.loopback, Multihop: true, EVPN: true, NextHopUnchanged: spine})
}

// --- tenants --------------------------------------------------------------

// reservedVRFName reports whether some NOS keeps a VRF name for itself.
func reservedVRFName(n string) bool {
	switch n {
	case "default", "global", "main", "management", "master", "mgmt":
		return true
	}
	return false
}

// maxVRFName is the longest VRF name every NOS accepts: a Linux interface
// name (FRR, SONiC) holds 15 characters.
const maxVRFName = 15

func (c *compiler) registerTenants() error {
	for i := range c.in.Tenants {
		t := &c.in.Tenants[i]
		path := fmt.Sprintf("tenants[%d]", i)
		if e := domain.ValidateTenant(t); e != nil {
			e.Field = path + "." + e.Field
			return e
		}
		if _, dup := c.tenants[t.Name]; dup {
			return domain.Invalid(path+".name", "tenant %q is given twice", t.Name)
		}
		ts := &tenantState{t: t, groups: map[string]*groupState{}}
		if len(t.Sites) > 0 {
			ts.sites = map[string]bool{}
			for _, s := range t.Sites {
				ts.sites[s] = true
			}
		}
		c.tenants[t.Name] = ts
		c.tenantList = append(c.tenantList, ts)
	}
	slices.SortFunc(c.tenantList, func(a, b *tenantState) int { return strings.Compare(a.t.Name, b.t.Name) })
	return nil
}

// tenantIDs checks every tenant's ids, in name order so the same input
// always reports the same conflict.
func (c *compiler) tenantIDs() error {
	for _, ts := range c.tenantList {
		t := ts.t
		ids, ok := c.in.IDs.Tenants[t.Name]
		idp := "ids.tenants[" + t.Name + "]"
		if !ok {
			return domain.Invalid(idp, "tenant %q has no ids: allocate its L3VNI and VRF id before compiling", t.Name)
		}
		ts.ids = ids
		who := "tenant " + t.Name
		if ids.L3VNI == 0 || ids.L3VNI >= 1<<24 {
			return domain.Invalid(idp+".l3vni", "%s has L3VNI %d; a VNI is 1..16777215", who, ids.L3VNI)
		}
		if err := claim(c.vnis, ids.L3VNI, "VNI", who+" (L3VNI)", idp+".l3vni"); err != nil {
			return err
		}
		if ids.VRFID == 0 {
			return domain.Invalid(idp+".vrfId", "%s has no VRF id (the RD number)", who)
		}
		if err := claim(c.vrfIDs, uint32(ids.VRFID), "VRF id", who, idp+".vrfId"); err != nil {
			return err
		}
		rt := ids.RT
		if rt == 0 {
			rt = ids.L3VNI
		}
		var err error
		if ts.rt, err = c.routeTarget(rt, who, idp+".rt"); err != nil {
			return err
		}
		if ids.L3VLAN != 0 {
			if ids.L3VLAN < 2 || ids.L3VLAN > 4094 {
				return domain.Invalid(idp+".l3vlan", "%s has L3 VLAN %d; a VLAN is 2..4094", who, ids.L3VLAN)
			}
			if err := claim(c.l3vlans, uint32(ids.L3VLAN), "L3 VLAN", who, idp+".l3vlan"); err != nil {
				return err
			}
		}
		if t.Network == domain.NetworkVLANAware {
			if ids.MACVRFID == 0 || ids.MACRT == 0 {
				return domain.Invalid(idp+".macVrfId", "vlan-aware %s needs a MAC-VRF id and route-target value", who)
			}
			if err := claim(c.vrfIDs, uint32(ids.MACVRFID), "VRF id", who+" (MAC-VRF)", idp+".macVrfId"); err != nil {
				return err
			}
			if ts.macRT, err = c.routeTarget(ids.MACRT, who+" (MAC-VRF)", idp+".macRt"); err != nil {
				return err
			}
		}
		if t.JobSegmentation && ids.UnclassifiedGroup != 0 {
			if err := claim(c.groupIDs, uint32(ids.UnclassifiedGroup), "group ID", who+" (unclassified)", idp+".unclassifiedGroup"); err != nil {
				return err
			}
		}
		ts.vrf = t.Name
		if len(t.Name) > maxVRFName || reservedVRFName(t.Name) {
			ts.vrf = "T" + strconv.Itoa(int(ids.VRFID))
		}
	}
	return nil
}

// leafL3VLANs checks and records the per-leaf L3 VLANs, in leaf and
// tenant order so the same input always reports the same conflict.
func (c *compiler) leafL3VLANs() error {
	keys := slices.SortedFunc(maps.Keys(c.in.IDs.L3VLANs), compareLeafTenant)
	for _, lt := range keys {
		if err := c.claimLeafL3VLAN(lt, c.in.IDs.L3VLANs[lt], "ids.l3vlans"); err != nil {
			return err
		}
	}
	return nil
}

func compareLeafTenant(a, b LeafTenant) int {
	return cmp.Or(strings.Compare(a.Leaf, b.Leaf), strings.Compare(a.Tenant, b.Tenant))
}

// claimLeafL3VLAN checks L3 VLAN v of a tenant on a leaf (listed under
// prefix) and records it: a VLAN is 2..4094, unique on its leaf, and no
// other tenant's fabric-wide L3 VLAN. Link VLANs are checked against it
// when they are claimed.
func (c *compiler) claimLeafL3VLAN(lt LeafTenant, v uint16, prefix string) error {
	field := prefix + "[" + lt.Leaf + "/" + lt.Tenant + "]"
	if sw := c.switches[lt.Leaf]; sw == nil || sw.role != RoleLeaf {
		return domain.Invalid(field, "L3 VLAN %d names leaf %q, which is not a leaf of the topology", v, lt.Leaf)
	}
	if c.tenants[lt.Tenant] == nil {
		return domain.Invalid(field, "L3 VLAN %d names tenant %q, which is not in the input", v, lt.Tenant)
	}
	if v < 2 || v > 4094 {
		return domain.Invalid(field, "tenant %s has L3 VLAN %d on leaf %s; a VLAN is 2..4094", lt.Tenant, v, lt.Leaf)
	}
	if other, ok := c.l3vlans[uint32(v)]; ok && other != "tenant "+lt.Tenant {
		return domain.Invalid(field, "L3 VLAN %d of tenant %s on leaf %s is the fabric-wide L3 VLAN of %s", v, lt.Tenant, lt.Leaf, other)
	}
	m := c.leafL3[lt.Leaf]
	if m == nil {
		m = map[uint16]string{}
		c.leafL3[lt.Leaf] = m
	}
	if other, ok := m[v]; ok && other != lt.Tenant {
		return domain.Invalid(field, "L3 VLAN %d of tenant %s on leaf %s is already tenant %s's there", v, lt.Tenant, lt.Leaf, other)
	}
	m[v] = lt.Tenant
	return nil
}

// l3vlanOn is the L3 VLAN of tenant ts on leaf sw: its own on the leaf, or
// the tenant's fabric-wide one (0: none).
func (c *compiler) l3vlanOn(sw *switchState, ts *tenantState) uint16 {
	if v, ok := c.in.IDs.L3VLANs[LeafTenant{sw.sw.Name, ts.t.Name}]; ok {
		return v
	}
	return ts.ids.L3VLAN
}

func (c *compiler) routeTarget(v uint32, who, field string) (RouteTarget, error) {
	if c.opts.rtASN > 0xffff && v > 0xffff {
		return RouteTarget{}, domain.Invalid(field, "%s has route-target value %d, but with a 4-byte RT ASN (%d) the value holds 16 bits: use a 2-byte options.rtAsn", who, v, c.opts.rtASN)
	}
	if err := claim(c.rts, v, "route-target value", who, field); err != nil {
		return RouteTarget{}, err
	}
	return RouteTarget{ASN: c.opts.rtASN, Value: v}, nil
}

// claim records that who uses id v of a kind, refusing a second user: two
// tenants sharing a VNI, RD number, RT or group would share routes or
// policy.
func claim(seen map[uint32]string, v uint32, kind, who, field string) error {
	if other, ok := seen[v]; ok && other != who {
		return domain.Invalid(field, "%s %d of %s is already used by %s", kind, v, who, other)
	}
	seen[v] = who
	return nil
}

// --- ownership ------------------------------------------------------------

func (c *compiler) assign() error {
	for i := range c.in.Allocations {
		a := &c.in.Allocations[i]
		path := fmt.Sprintf("allocations[%d]", i)
		ts, ss, err := c.checkAllocation(a, path)
		if err != nil {
			return err
		}
		if err := ss.claim(a, path, ts.t.Isolation, func(msg string) { c.warn("%s", msg) }); err != nil {
			return err
		}
	}
	for _, ss := range c.srvList {
		if err := ss.checkWhole(); err != nil {
			return err
		}
	}
	for _, l := range c.allLinks() {
		slices.Sort(l.jobs)
	}
	return nil
}

// checkAllocation finds the tenant and server allocation a (at path) names
// and checks that the server has the GPUs it holds.
func (c *compiler) checkAllocation(a *Allocation, path string) (*tenantState, *serverState, error) {
	ts := c.tenants[a.Tenant]
	if ts == nil {
		return nil, nil, domain.Invalid(path+".tenant", "allocation names tenant %q, which is not in the input", a.Tenant)
	}
	ss := c.servers[a.Server]
	if ss == nil {
		return nil, nil, domain.Invalid(path+".server", "allocation names server %q, which is not in the topology", a.Server)
	}
	for j, g := range a.GPUs {
		if g < 0 || g >= ss.srv.GPUs {
			return nil, nil, domain.Invalid(fmt.Sprintf("%s.gpus[%d]", path, j), "server %s has GPUs 0..%d, not %d", a.Server, ss.srv.GPUs-1, g)
		}
	}
	return ts, ss, nil
}

// checkWhole refuses a server held whole by one tenant (server isolation)
// on which another tenant also holds GPUs, once all its allocations are
// claimed.
func (ss *serverState) checkWhole() error {
	if ss.whole == "" {
		return nil
	}
	for _, t := range slices.Sorted(maps.Keys(ss.holders)) {
		if t != ss.whole {
			return domain.Invalid(ss.holders[t], "server %s is held whole by tenant %q (server isolation), but tenant %q also holds GPUs on it", ss.srv.Name, ss.whole, t)
		}
	}
	return nil
}

// allLinks lists every server link, leaf by leaf (file order), port by port.
func (c *compiler) allLinks() []*link {
	var out []*link
	for _, l := range c.leaves {
		out = append(out, l.links...)
	}
	return out
}

// linkIDs checks and attaches the ids of vlan-aware links and derives their
// gateway subnets.
func (c *compiler) linkIDs() error {
	if err := c.gatewayRoom(); err != nil {
		return err
	}
	gateways := map[netip.Prefix]*link{}
	for _, leaf := range c.leaves {
		vlans := map[uint32]string{}
		for _, l := range leaf.links {
			if !c.vlanAware(l) {
				continue
			}
			ids, ok := c.in.IDs.Links[l.ref]
			field, who, err := c.checkLinkIDs(l, ids, ok)
			if err != nil {
				return err
			}
			if err := claim(vlans, uint32(ids.VLAN), "VLAN", who, field+".vlan"); err != nil {
				return err
			}
			if err := claim(c.vnis, ids.L2VNI, "VNI", who+" (L2VNI)", field+".l2vni"); err != nil {
				return err
			}
			gw4, gw6, err := c.gatewaySubnets(l, field, who, gateways)
			if err != nil {
				return err
			}
			for _, g := range []netip.Prefix{gw4.Masked(), gw6.Masked()} {
				if g.IsValid() {
					gateways[g] = l
				}
			}
			l.ids, l.gw4, l.gw6 = ids, gw4, gw6
		}
	}
	return nil
}

// gatewayRoom refuses gateway pools too small for the fabrics they serve
// once any tenant is vlan-aware: every server link may come to need a
// gateway subnet, so a pool must hold one per link of the largest fabric.
func (c *compiler) gatewayRoom() error {
	if !slices.ContainsFunc(c.tenantList, func(ts *tenantState) bool { return ts.t.Network == domain.NetworkVLANAware }) {
		return nil
	}
	links := map[*fabricState]int{}
	for _, sw := range c.leaves {
		links[sw.fab] += len(sw.links)
	}
	for _, fs := range c.fabrics {
		n := links[fs]
		for _, p := range []struct {
			field string
			pool  netip.Prefix
			bits  int
			ok    bool
		}{{"options.irbPool4", c.opts.irb4, irbBits4, fs.pool4.IsValid()}, {"options.irbPool6", c.opts.irb6, irbBits6, fs.pool6.IsValid()}} {
			if !p.ok || p.bits-p.pool.Bits() >= 62 {
				continue
			}
			if room := 1 << (p.bits - p.pool.Bits()); n > room {
				need := p.bits
				for 1<<(p.bits-need) < n {
					need--
				}
				return domain.Invalid(p.field, "gateway pool %s holds %d /%d subnets, but fabric %s has %d server links and a vlan-aware tenant's link needs one each: use a /%d or larger",
					p.pool, room, p.bits, domain.Ref(fs.site, fs.name), n, need)
			}
		}
	}
	return nil
}

// vlanAware reports whether link l belongs to a vlan-aware tenant, and so
// needs link ids.
func (c *compiler) vlanAware(l *link) bool {
	ts := c.tenants[l.tenant]
	return ts != nil && ts.t.Network == domain.NetworkVLANAware
}

// checkLinkIDs checks the ids of vlan-aware link l (ok: it has some)
// against its owner and the tenants' L3 VLANs, and names the link for
// errors: field is its path in the input, who its name. Whether another
// link uses the same VLAN or VNI is the caller's check.
func (c *compiler) checkLinkIDs(l *link, ids LinkIDs, ok bool) (field, who string, err error) {
	field = fmt.Sprintf("ids.links[%s/%s]", l.ref.Leaf, l.ref.Port)
	who = fmt.Sprintf("link %s/%s", l.ref.Leaf, l.ref.Port)
	switch {
	case !ok:
		return "", "", domain.Invalid(field, "%s belongs to vlan-aware tenant %q but has no VLAN and L2VNI: allocate them first", who, l.tenant)
	case ids.Tenant != l.tenant:
		return "", "", domain.Invalid(field+".tenant", "%s belongs to tenant %q but its VLAN and L2VNI were allocated for %q: release them and allocate new ones", who, l.tenant, ids.Tenant)
	case ids.VLAN < 2 || ids.VLAN > 4094:
		return "", "", domain.Invalid(field+".vlan", "%s has VLAN %d; a VLAN is 2..4094", who, ids.VLAN)
	case ids.L2VNI == 0 || ids.L2VNI >= 1<<24:
		return "", "", domain.Invalid(field+".l2vni", "%s has L2VNI %d; a VNI is 1..16777215", who, ids.L2VNI)
	}
	if other, taken := c.l3vlans[uint32(ids.VLAN)]; taken {
		return "", "", domain.Invalid(field+".vlan", "%s has VLAN %d, which is the L3 VLAN of %s", who, ids.VLAN, other)
	}
	if other, taken := c.leafL3[l.ref.Leaf][ids.VLAN]; taken {
		return "", "", domain.Invalid(field+".vlan", "%s has VLAN %d, which is the L3 VLAN of tenant %s on leaf %s", who, ids.VLAN, other, l.ref.Leaf)
	}
	return field, who, nil
}

// gatewaySubnets derives the gateway subnets of vlan-aware link l (field
// and who as checkLinkIDs gives them), refusing none at all and one that
// another link already has in gateways. It records nothing.
func (c *compiler) gatewaySubnets(l *link, field, who string, gateways map[netip.Prefix]*link) (gw4, gw6 netip.Prefix, err error) {
	fs := l.srv.fab
	gw4, gw6, err = IRBSubnets(fs.pool4, l.ipv4, c.opts.irb4, fs.pool6, l.ipv6, c.opts.irb6)
	if err != nil {
		return netip.Prefix{}, netip.Prefix{}, domain.Invalid(field, "%s: %v", who, err)
	}
	if !gw4.IsValid() && !gw6.IsValid() {
		return netip.Prefix{}, netip.Prefix{}, domain.Invalid(field, "%s has no gateway subnet: give its fabric linkPools and its cable addresses from them", who)
	}
	for _, g := range []netip.Prefix{gw4.Masked(), gw6.Masked()} {
		if other := gateways[g]; g.IsValid() && other != nil && other != l {
			return netip.Prefix{}, netip.Prefix{}, domain.Invalid(field, "%s and link %s/%s get the same gateway subnet %s (their fabrics' link pools overlap): give the fabrics distinct link pools", who, other.ref.Leaf, other.ref.Port, g)
		}
	}
	return gw4, gw6, nil
}

// --- groups ---------------------------------------------------------------

func (c *compiler) indexGroups() error {
	for i := range c.in.Groups {
		ts, gs, err := c.newGroup(&c.in.Groups[i], fmt.Sprintf("groups[%d]", i))
		if err != nil {
			return err
		}
		ts.groups[gs.g.Name] = gs
	}
	for i, ct := range c.in.Contracts {
		path := fmt.Sprintf("contracts[%d]", i)
		ts, err := c.contractTenant(ct, path)
		if err != nil {
			return err
		}
		if err := ts.contract(ct, path); err != nil {
			return err
		}
	}
	for _, ts := range c.tenantList {
		ts.sortContracts()
	}
	return nil
}

// newGroup checks group g (at path), claims its ID and indexes it by its
// job. It returns the group's tenant; adding the group to the tenant's
// groups is the caller's.
func (c *compiler) newGroup(g *Group, path string) (*tenantState, *groupState, error) {
	ts := c.tenants[g.Tenant]
	switch {
	case ts == nil:
		return nil, nil, domain.Invalid(path+".tenant", "group %q names tenant %q, which is not in the input", g.Name, g.Tenant)
	case !ts.t.JobSegmentation:
		return nil, nil, domain.Invalid(path+".tenant", "tenant %q does not ask for job segmentation, so it has no groups", g.Tenant)
	case g.Name == "":
		return nil, nil, domain.Invalid(path+".name", "a group needs a name")
	case g.ID == 0:
		return nil, nil, domain.Invalid(path+".id", "group %q has no ID (0 means \"no group\" in the VXLAN header)", g.Name)
	}
	if _, dup := ts.groups[g.Name]; dup {
		return nil, nil, domain.Invalid(path+".name", "tenant %q has two groups named %q", g.Tenant, g.Name)
	}
	who := fmt.Sprintf("group %s/%s", g.Tenant, g.Name)
	if err := claim(c.groupIDs, uint32(g.ID), "group ID", who, path+".id"); err != nil {
		return nil, nil, err
	}
	gs := &groupState{g: g}
	for j, s := range g.Prefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			return nil, nil, domain.Invalid(fmt.Sprintf("%s.prefixes[%d]", path, j), "%q is not a prefix written with its first address, such as 10.9.0.0/24", s)
		}
		gs.external = append(gs.external, p)
	}
	sortPrefixes(gs.external)
	if g.JobID != "" {
		k := jobKey{g.Tenant, g.JobID}
		if other, dup := c.groupByJob[k]; dup {
			return nil, nil, domain.Invalid(path+".jobId", "job %q of tenant %q has two groups, %q and %q", g.JobID, g.Tenant, other.g.Name, g.Name)
		}
		c.groupByJob[k] = gs
	}
	return ts, gs, nil
}

// contractTenant finds the tenant contract ct (at path) names.
func (c *compiler) contractTenant(ct Contract, path string) (*tenantState, error) {
	ts := c.tenants[ct.Tenant]
	if ts == nil {
		return nil, domain.Invalid(path+".tenant", "contract names tenant %q, which is not in the input", ct.Tenant)
	}
	return ts, nil
}

// contract makes the groups contract ct (at path) joins peers, and lists
// the pair in ts.contracts once however many contracts join it; sort the
// list with sortContracts once every contract is in.
func (ts *tenantState) contract(ct Contract, path string) error {
	a, b := ts.groups[ct.A], ts.groups[ct.B]
	if a == nil {
		return domain.Invalid(path+".a", "tenant %q has no group %q", ct.Tenant, ct.A)
	}
	if b == nil {
		return domain.Invalid(path+".b", "tenant %q has no group %q", ct.Tenant, ct.B)
	}
	if a == b {
		return domain.Invalid(path+".b", "a contract joins two different groups; members of group %q already talk to each other", ct.A)
	}
	if a.g.ID > b.g.ID {
		a, b = b, a
	}
	if slices.Contains(a.peers, b) {
		return nil
	}
	a.peers = append(a.peers, b)
	b.peers = append(b.peers, a)
	ts.contracts = append(ts.contracts, [2]*groupState{a, b})
	return nil
}

// sortContracts orders the contracted pairs by group IDs.
func (ts *tenantState) sortContracts() {
	slices.SortFunc(ts.contracts, func(x, y [2]*groupState) int {
		return cmp.Or(cmp.Compare(x[0].g.ID, y[0].g.ID), cmp.Compare(x[1].g.ID, y[1].g.ID))
	})
}

// --- ports ----------------------------------------------------------------

// buildPorts classifies every link into its job's group and computes each
// group's members and allow-list.
func (c *compiler) buildPorts() error {
	for _, l := range c.allLinks() {
		g, warns := c.linkGroup(l)
		c.warnings = append(c.warnings, warns...)
		if g != nil {
			l.group = g
			g.links = append(g.links, l)
		}
	}
	for _, ts := range c.tenantList {
		for _, g := range ts.groups {
			g.members = c.groupMembers(g)
		}
		for _, g := range ts.groups {
			g.allowed = g.allowList()
		}
	}
	return nil
}

// linkGroup decides the group of link l: for a link of a segmented tenant,
// the group of its jobs with the lowest ID, else none. warns are what the
// link is warned of: jobs without a group, and jobs of several groups
// sharing it.
func (c *compiler) linkGroup(l *link) (g *groupState, warns []string) {
	ts := c.tenants[l.tenant]
	if ts == nil || !ts.t.JobSegmentation {
		return nil, nil
	}
	var groups []*groupState
	for _, j := range l.jobs {
		if jg := c.groupByJob[jobKey{l.tenant, j}]; jg != nil && !slices.Contains(groups, jg) {
			groups = append(groups, jg)
		} else if jg == nil {
			warns = append(warns, fmt.Sprintf("job %q of segmented tenant %q has no group: its port %s/%s reaches nothing", j, l.tenant, l.ref.Leaf, l.ref.Port))
		}
	}
	if len(groups) == 0 {
		return nil, warns
	}
	slices.SortFunc(groups, func(a, b *groupState) int { return cmp.Compare(a.g.ID, b.g.ID) })
	if len(groups) > 1 {
		warns = append(warns, fmt.Sprintf("port %s/%s serves jobs %s of tenant %q: the network cannot separate jobs that share a NIC; it is classified into group %d (%s)",
			l.ref.Leaf, l.ref.Port, strings.Join(l.jobs, ", "), l.tenant, groups[0].g.ID, groups[0].g.Name))
	}
	return groups[0], warns
}

// groupMembers lists every member prefix of group g, fabric-wide: its
// external prefixes and those of its links, sorted.
func (c *compiler) groupMembers(g *groupState) []netip.Prefix {
	m := slices.Clone(g.external)
	for _, l := range g.links {
		m = append(m, c.linkPrefixes(l)...)
	}
	sortPrefixes(m)
	return m
}

// allowList lists the members of group g and of its contracted groups,
// sorted, once each.
func (g *groupState) allowList() []netip.Prefix {
	a := slices.Clone(g.members)
	for _, p := range g.peers {
		a = append(a, p.members...)
	}
	sortPrefixes(a)
	return slices.Compact(a)
}

func (c *compiler) linkPrefixes(l *link) []netip.Prefix {
	return linkPrefixes(l.ids.VLAN != 0, l.ipv4, l.ipv6, l.gw4, l.gw6)
}

// port is the intent of one server port.
func (c *compiler) port(l *link) Port {
	p := Port{Name: l.ref.Port, Server: l.srv.srv.Name, NIC: l.nic.Name, Rail: l.nic.Rail, GPU: l.nic.GPU, IPv4: l.ipv4, IPv6: l.ipv6, Guarded: true}
	ts := c.tenants[l.tenant]
	if ts == nil {
		p.Quarantined = true
		return p
	}
	p.VRF, p.Tenant, p.Jobs = ts.vrf, l.tenant, l.jobs
	if ts.t.Network == domain.NetworkVLANAware {
		p.VLAN, p.L2VNI, p.Gateway4, p.Gateway6 = l.ids.VLAN, l.ids.L2VNI, l.gw4, l.gw6
	}
	p.Sources = p.OwnSources()
	if ts.t.JobSegmentation {
		p.ACL = &ACL{Allow: []netip.Prefix{}}
		if l.group != nil {
			p.Group = l.group.g.ID
			p.ACL.Allow = l.group.allowed
		}
	}
	return p
}

// --- devices --------------------------------------------------------------

func (c *compiler) intent() *Intent {
	in := &Intent{}
	for _, sw := range c.supers {
		in.Devices = append(in.Devices, c.device(sw))
	}
	for _, sw := range c.spines {
		in.Devices = append(in.Devices, c.device(sw))
	}
	for _, sw := range c.leaves {
		in.Devices = append(in.Devices, c.device(sw))
	}
	slices.SortFunc(in.Devices, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(c.warnings)
	in.Warnings = slices.Compact(c.warnings)
	return in
}

func (c *compiler) device(sw *switchState) Device { return c.renderDevice(sw, nil, nil) }

// renderDevice renders sw. Given old, an earlier render of sw, it takes the
// VRF of every tenant not in dirty from old instead of building it again:
// the incremental Compiler knows which tenants' VRFs a change may touch on
// a leaf, and a leaf carries every tenant's VRF.
func (c *compiler) renderDevice(sw *switchState, old *Device, dirty map[string]bool) Device {
	d := Device{
		Name: sw.sw.Name, Role: sw.role, NOS: cmp.Or(sw.sw.NOS, c.opts.nos), Site: sw.fab.site, Fabric: sw.fab.name,
		ASN: sw.sw.ASN, Loopback: sw.loopback,
		Uplinks: slices.Clone(sw.uplinks), Sessions: slices.Clone(sw.sessions),
		Breakouts: slices.Clone(sw.sw.Breakouts), PortPrefix: sw.sw.PortPrefix, PortCount: sw.sw.PortCount,
	}
	if sw.sw.Pod != nil {
		d.Pod = *sw.sw.Pod
	}
	if sw.sw.Platform != nil {
		p := *sw.sw.Platform
		d.Platform = &p
	}
	slices.SortFunc(d.Uplinks, func(a, b Uplink) int { return ComparePorts(a.Port, b.Port) })
	slices.SortFunc(d.Sessions, func(a, b Session) int {
		return cmp.Or(cmpBool(a.Multihop, b.Multihop), ComparePorts(a.Interface, b.Interface), strings.Compare(a.Peer, b.Peer))
	})
	if sw.role != RoleLeaf {
		return d
	}
	d.Underlay = c.underlay
	owners := map[string]bool{}
	for _, l := range sw.links {
		p := c.port(l)
		if p.Assigned() {
			owners[l.tenant] = true
		}
		d.Ports = append(d.Ports, p)
	}
	if old != nil && len(dirty) == 0 {
		d.VRFs, d.AnycastMAC = old.VRFs, old.AnycastMAC // shared: intents are read-only
		return d
	}
	// The tenants whose VRF to build here: with old, only the dirty ones
	// (the others keep old's); with VRFs where used, the port owners;
	// otherwise every tenant. (A leaf of a large fabric carries a few of
	// thousands of tenants: looking at each would dominate.) The order
	// does not matter: VRFs are sorted by name below.
	build := c.tenantList
	switch {
	case old != nil:
		d.VRFs = make([]VRF, 0, len(old.VRFs)+len(dirty))
		for _, v := range old.VRFs {
			if !dirty[v.Tenant] {
				if v.MAC != nil {
					d.AnycastMAC = c.opts.mac
				}
				d.VRFs = append(d.VRFs, v)
			}
		}
		build = make([]*tenantState, 0, len(dirty))
		for name := range dirty {
			if ts := c.tenants[name]; ts != nil {
				build = append(build, ts)
			}
		}
	case c.opts.placement == VRFsWhereUsed:
		build = make([]*tenantState, 0, len(owners))
		for name := range owners {
			build = append(build, c.tenants[name])
		}
	}
	for _, ts := range build {
		if !c.vrfHere(sw, ts, owners) {
			continue
		}
		v := VRF{
			Name: ts.vrf, Tenant: ts.t.Name, Model: ts.t.Network, L3VNI: ts.ids.L3VNI, L3VLAN: c.l3vlanOn(sw, ts),
			RD: RD{Addr: sw.loopback, Num: ts.ids.VRFID}, RT: ts.rt,
		}
		if ts.t.Network == domain.NetworkVLANAware {
			v.MAC = &MACVRF{Name: ts.vrf + "-mac", RD: RD{Addr: sw.loopback, Num: ts.ids.MACVRFID}, RT: ts.macRT}
			d.AnycastMAC = c.opts.mac
		}
		if ts.t.JobSegmentation {
			v.Policy = c.policy(ts, sw)
		}
		d.VRFs = append(d.VRFs, v)
	}
	slices.SortFunc(d.VRFs, func(a, b VRF) int { return strings.Compare(a.Name, b.Name) })
	if len(d.VRFs) == 0 {
		d.VRFs = nil // as a render from scratch has it
	}
	return d
}

// policy is a segmented tenant's group policy on one leaf: the groups with
// local members, the groups contracted with them, and those contracts.
func (c *compiler) policy(ts *tenantState, sw *switchState) *Policy {
	pol := &Policy{Unclassified: ts.ids.UnclassifiedGroup, Switch: SwitchGroup}
	local := map[*groupState][]*link{}
	for _, l := range sw.links {
		if l.tenant == ts.t.Name && l.group != nil {
			local[l.group] = append(local[l.group], l)
		}
	}
	listed := map[*groupState]bool{}
	for g := range local {
		listed[g] = true
		for _, p := range g.peers {
			listed[p] = true
		}
	}
	for g := range listed {
		pg := PolicyGroup{ID: g.g.ID, Name: g.g.Name, Job: g.g.JobID, External: g.external}
		for _, l := range local[g] {
			pg.Ports = append(pg.Ports, l.ref.Port)
			pg.Prefixes = append(pg.Prefixes, c.linkPrefixes(l)...)
		}
		sortPrefixes(pg.Prefixes)
		pol.Groups = append(pol.Groups, pg)
	}
	slices.SortFunc(pol.Groups, func(a, b PolicyGroup) int { return cmp.Compare(a.ID, b.ID) })
	for _, pair := range ts.contracts {
		if local[pair[0]] != nil || local[pair[1]] != nil {
			pol.Contracts = append(pol.Contracts, PolicyContract{A: pair[0].g.ID, B: pair[1].g.ID})
		}
	}
	return pol
}

func (c *compiler) warn(format string, args ...any) {
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func sortPrefixes(ps []netip.Prefix) {
	slices.SortFunc(ps, ComparePrefixes)
}

// ComparePrefixes orders prefixes IPv4 first, then by address and length.
func ComparePrefixes(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// ComparePorts orders port names the way people read them: every run of
// digits as a number (swp2 before swp10, Ethernet2/1 before Ethernet10/1,
// Ethernet1/1/4 before Ethernet1/2), ties by the spelling.
func ComparePorts(a, b string) int {
	return cmp.Or(comparePortNames(a, b), strings.Compare(a, b))
}

func comparePortNames(a, b string) int {
	// Every run of digits compares as a number, so Ethernet2/1 sorts
	// before Ethernet10/1 and Ethernet1/1/4 before Ethernet1/2.
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 && da <= 9 && db <= 9 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits is the length of the run of digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// LinkOwner says which tenant owns a server link and which jobs use it.
type LinkOwner struct {
	Link   LinkRef
	Server string
	NIC    string
	Tenant string
	Jobs   []string
}

// Owners applies the ownership rules of Compile to the topology, tenants
// and allocations only (no ids needed) and lists every owned link, leaf by
// leaf in file order, port by port. The caller uses it to allocate the VLAN
// and L2VNI of vlan-aware tenants' links before compiling.
func Owners(in Input) ([]LinkOwner, error) {
	c, err := compileSteps(in, (*compiler).indexTopology, (*compiler).registerTenants, (*compiler).assign)
	if err != nil {
		return nil, err
	}
	var out []LinkOwner
	for _, l := range c.allLinks() {
		if l.tenant != "" {
			out = append(out, LinkOwner{Link: l.ref, Server: l.srv.srv.Name, NIC: l.nic.Name, Tenant: l.tenant, Jobs: l.jobs})
		}
	}
	return out, nil
}

// claim gives an allocation's links to its tenant and jobs (the ownership
// rule shared by Compile and Compiler.Apply): a whole server or a
// server-isolated tenant takes every link of the server, otherwise the link
// of each GPU held. warn is told of GPUs without a link of their own.
func (ss *serverState) claim(a *Allocation, path string, iso domain.Isolation, warn func(string)) error {
	gpus := map[int]bool{}
	for _, g := range a.GPUs {
		gpus[g] = true
	}
	whole := a.Whole || iso == domain.IsolationServer
	if whole {
		if ss.whole != "" && ss.whole != a.Tenant {
			return domain.Invalid(path, "server %s is held whole by tenant %q and by tenant %q", a.Server, ss.whole, a.Tenant)
		}
		ss.whole = a.Tenant
	}
	if _, ok := ss.holders[a.Tenant]; !ok {
		ss.holders[a.Tenant] = path
	}
	for _, l := range ss.nics {
		if l == nil {
			continue
		}
		own := gpus[l.nic.GPU]
		if !whole && !own {
			continue
		}
		if l.tenant != "" && l.tenant != a.Tenant {
			return domain.Invalid(path, "link %s/%s (%s %s) is claimed by tenant %q (%s) and tenant %q: one link belongs to one VRF",
				l.ref.Leaf, l.ref.Port, a.Server, l.nic.Name, l.tenant, l.claimedBy, a.Tenant)
		}
		if l.tenant == "" {
			l.tenant, l.claimedBy = a.Tenant, path
		}
		if a.JobID != "" && (a.Whole || own) && !slices.Contains(l.jobs, a.JobID) {
			l.jobs = append(l.jobs, a.JobID)
		}
	}
	if !a.Whole {
		for _, g := range a.GPUs {
			if !slices.ContainsFunc(ss.nics, func(l *link) bool { return l != nil && l.nic.GPU == g }) {
				warn(fmt.Sprintf("job %q: GPU %d of server %s has no cabled NIC of its own (NIC.gpu), so it has no fabric link", a.JobID, g, a.Server))
			}
		}
	}
	return nil
}
