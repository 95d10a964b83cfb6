package pool

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Names of the fabric's pools. Link VLANs are leaf-local, so each leaf has
// its own pool, named by LinkVLAN.
const (
	// VNI holds L3VNIs and L2VNIs alike: both live in one 24-bit space on a
	// VTEP, so one pool keeps them apart.
	VNI = "vni"
	// L3VLAN held the VLAN that carries a tenant's L3VNI on NOSes that need
	// one (NX-OS, SONiC), the same on every leaf; it capped the tenants at
	// its range. L3 VLANs now come from each leaf's own pool (LeafL3VLAN);
	// this one only keeps the ids deployed before, until they are not.
	L3VLAN = "l3vlan"
	// VRFID holds the assigned number of route distinguishers
	// (RD = loopback:id), 16 bits in a type-1 RD.
	VRFID = "vrf-id"
	// RT holds route-target values (RT = rtASN:value) for targets that are
	// not derived from a VNI.
	RT = "rt"
	// Group holds VXLAN group-policy IDs (16 bits; 0 means "no group").
	Group = "group"
)

// LinkVLAN names the pool of per-link VLANs of one leaf (vlan-aware tenants).
func LinkVLAN(leaf string) string { return "vlan/" + leaf }

// LeafL3VLAN names the pool of one leaf's L3 VLANs: one per tenant VRF on
// the leaf, where its NOS needs one (fabric.L3VLANNeeds). An L3 VLAN means
// something only on its leaf, so a leaf carries up to the pool's range of
// tenants (1,095 by default) however many the fabric has.
func LeafL3VLAN(leaf string) string { return "l3vlan/" + leaf }

// LeafL3VLANSpec returns the default pool of one leaf's L3 VLANs.
func LeafL3VLANSpec(leaf string, quarantine time.Duration) Spec {
	lo, hi := defaultRange(LeafL3VLAN(leaf))
	return Spec{Name: LeafL3VLAN(leaf), Min: lo, Max: hi, Quarantine: quarantine}
}

// NXOSReservedVLANs is the first of NX-OS's 128 internal VLANs (3968-4094)
// unless `system vlan N reserve` moves them: an NX-OS leaf's default L3
// VLAN pool stops below it (the render lint refuses a VLAN inside).
const NXOSReservedVLANs = 3968

// LeafL3VLANSpecFor is LeafL3VLANSpec for a leaf running nos: on NX-OS
// the default range ends below the switch's reserved VLANs.
func LeafL3VLANSpecFor(leaf, nos string, quarantine time.Duration) Spec {
	sp := LeafL3VLANSpec(leaf, quarantine)
	if nos == "nxos" {
		sp.Max = min(sp.Max, NXOSReservedVLANs-1)
	}
	return sp
}

// Spec describes a pool to create.
type Spec struct {
	Name       string
	Min, Max   uint32
	Quarantine time.Duration
}

// DefaultQuarantine is how long a released id waits before reuse unless the
// operator says otherwise: long enough for a failed deploy to be retried and
// for stale EVPN routes to age out.
const DefaultQuarantine = time.Hour

// defaultRange is each pool's default range. VNIs start at 10000 to stay
// clear of small hand-made VNIs; L3 VLANs and link VLANs use disjoint ranges
// so they never meet on a leaf; route-target values from the RT pool start
// above the largest VNI, so they never equal a target derived from a VNI
// (65000:<L3VNI>).
func defaultRange(name string) (lo, hi uint32) {
	switch name {
	case VNI:
		return 10000, 1<<24 - 1
	case L3VLAN:
		return 3000, 3999
	case VRFID:
		return 1, 1<<16 - 1
	case Group:
		return 1, maxGroup
	case RT:
		return 1 << 24, 1<<32 - 1
	}
	if strings.HasPrefix(name, "l3vlan/") {
		return 3000, 4094 // a leaf's L3 VLANs, clear of its link VLANs
	}
	return 1000, 2999 // link VLANs
}

// maxGroup is the largest group ID a pool hands out: 65535 is
// fabric.SwitchGroup, the leaves' own packets.
const maxGroup = 1<<16 - 2

// DefaultSpecs returns the fabric-wide pools with their default ranges.
func DefaultSpecs(quarantine time.Duration) []Spec {
	var out []Spec
	for _, n := range []string{VNI, L3VLAN, VRFID, RT, Group} {
		lo, hi := defaultRange(n)
		out = append(out, Spec{Name: n, Min: lo, Max: hi, Quarantine: quarantine})
	}
	return out
}

// LinkVLANSpec returns the default pool of link VLANs of one leaf.
func LinkVLANSpec(leaf string, quarantine time.Duration) Spec {
	lo, hi := defaultRange(LinkVLAN(leaf))
	return Spec{Name: LinkVLAN(leaf), Min: lo, Max: hi, Quarantine: quarantine}
}

// State is every pool, keyed by name. It is the replicated state's copy:
// change it only through its methods, inside the state machine.
type State struct {
	Pools map[string]*Pool `json:"pools"`
}

// Pool is one range of ids and what is known about each id in use.
type Pool struct {
	Min               uint32 `json:"min"`
	Max               uint32 `json:"max"`
	QuarantineSeconds int64  `json:"quarantineSeconds"`
	// Next is where the next allocation starts looking (next-fit).
	Next uint32 `json:"next"`
	// Entries are the ids that are held, quarantined or deployed, sorted by ID.
	Entries []Entry `json:"entries,omitempty"`
	// owners indexes the held entries, owner -> id, once Index built it;
	// the methods keep it up to date, Clone and decoding drop it. Without
	// it an owner is found by a scan.
	owners map[string]uint32
}

// Entry is one id that may not be handed out freely.
type Entry struct {
	ID uint32 `json:"id"`
	// Owner holds the id ("tenant/acme", "job/42"); empty once released.
	Owner string `json:"owner,omitempty"`
	// Until ends the quarantine of a released id.
	Until time.Time `json:"until,omitzero"`
	// Deployed: the id is in a deployed device configuration, so it is not
	// reused whatever its quarantine says.
	Deployed bool `json:"deployed,omitempty"`
}

// New returns a State with the given pools.
func New(specs ...Spec) (*State, error) {
	s := &State{Pools: map[string]*Pool{}}
	for _, sp := range specs {
		if err := s.Ensure(sp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Ensure creates the pool if it does not exist; an existing pool keeps its
// range and entries (so replaying a create is harmless). Use Resize to change
// a range.
func (s *State) Ensure(sp Spec) error {
	if err := sp.validate(); err != nil {
		return err
	}
	if s.Pools == nil {
		s.Pools = map[string]*Pool{}
	}
	if _, ok := s.Pools[sp.Name]; ok {
		return nil
	}
	s.Pools[sp.Name] = &Pool{Min: sp.Min, Max: sp.Max, QuarantineSeconds: int64(sp.Quarantine / time.Second), Next: sp.Min}
	return nil
}

func (sp Spec) validate() error {
	if sp.Name == "" {
		return domain.Invalid("name", "a pool needs a name")
	}
	if sp.Min == 0 || sp.Min > sp.Max {
		return domain.Invalid("range", "pool %q range %d-%d must be non-empty and start at 1 or above (0 means \"none\" in every id it holds)", sp.Name, sp.Min, sp.Max)
	}
	if sp.Quarantine < 0 {
		return domain.Invalid("quarantine", "pool %q quarantine %s must not be negative", sp.Name, sp.Quarantine)
	}
	return nil
}

// Resize changes a pool's range and quarantine. Ids already given out stay
// valid (and stay blocked) even outside the new range, so shrinking a pool
// never silently frees a deployed id.
func (s *State) Resize(sp Spec) error {
	if err := sp.validate(); err != nil {
		return err
	}
	p, err := s.pool(sp.Name)
	if err != nil {
		return err
	}
	p.Min, p.Max, p.QuarantineSeconds = sp.Min, sp.Max, int64(sp.Quarantine/time.Second)
	if p.Next < p.Min || p.Next > p.Max {
		p.Next = p.Min
	}
	return nil
}

func (s *State) pool(name string) (*Pool, error) {
	if s == nil || s.Pools[name] == nil {
		return nil, domain.NotFound("pool", name)
	}
	return s.Pools[name], nil
}

// Names lists the pools, sorted.
func (s *State) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Pools))
}

// Clone returns a deep copy (for snapshots and what-if compiles).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := &State{Pools: make(map[string]*Pool, len(s.Pools))}
	for n, p := range s.Pools {
		cp := *p
		cp.Entries = slices.Clone(p.Entries)
		cp.owners = nil // the copy's own, if Index builds one
		c.Pools[n] = &cp
	}
	return c
}

// Lookup returns the id owner holds in the pool.
func (s *State) Lookup(pool, owner string) (uint32, bool) {
	p, err := s.pool(pool)
	if err != nil || owner == "" {
		return 0, false
	}
	if i := p.owned(owner); i >= 0 {
		return p.Entries[i].ID, true
	}
	return 0, false
}

// Index builds every pool's owner index, for a caller about to look up
// or allocate many owners (the state machine's id sync, thousands per
// pool with every VRF on every leaf): an owner then costs a map access
// and a binary search, not a scan of the pool. The index is not persisted.
// It writes to s: call it on a State nobody else reads (a Clone).
func (s *State) Index() {
	for _, p := range s.Pools {
		if p.owners != nil {
			continue
		}
		p.owners = make(map[string]uint32, len(p.Entries))
		for _, e := range p.Entries {
			if e.Owner != "" {
				p.owners[e.Owner] = e.ID
			}
		}
	}
}

// owned is the index of owner's entry, or -1: by the owner index where
// there is one (Index), else by a scan.
func (p *Pool) owned(owner string) int {
	if p.owners != nil {
		id, ok := p.owners[owner]
		if !ok {
			return -1
		}
		if i, found := p.find(id); found && p.Entries[i].Owner == owner {
			return i
		}
		return -1 // cannot happen: the methods keep the index
	}
	for i := range p.Entries {
		if p.Entries[i].Owner == owner {
			return i
		}
	}
	return -1
}

// find is the index of id's entry, or where it would be inserted.
func (p *Pool) find(id uint32) (int, bool) {
	i := sort.Search(len(p.Entries), func(i int) bool { return p.Entries[i].ID >= id })
	return i, i < len(p.Entries) && p.Entries[i].ID == id
}

// free reports whether an entry's id may be handed out at now.
func (e *Entry) free(now time.Time) bool {
	return e.Owner == "" && !e.Deployed && !now.Before(e.Until)
}

// Allocate gives owner an id from the pool. An owner that already holds an id
// gets the same one back, so a command applied twice allocates once. The
// error is a failed_precondition *domain.Error naming the pool and its range
// when every id is held, quarantined or deployed.
func (s *State) Allocate(pool, owner string, now time.Time) (uint32, error) {
	p, err := s.pool(pool)
	if err != nil {
		return 0, err
	}
	if owner == "" {
		return 0, domain.Invalid("owner", "allocating from pool %q needs an owner", pool)
	}
	if i := p.owned(owner); i >= 0 {
		return p.Entries[i].ID, nil
	}
	hi := p.Max
	if pool == Group && hi > maxGroup {
		// A range made before the switch group was reserved, or resized
		// past it, still never hands it out.
		hi = maxGroup
	}
	start := p.Next
	if start < p.Min || start > hi {
		start = p.Min
	}
	id, ok := p.scan(start, hi, now)
	if !ok && start > p.Min {
		id, ok = p.scan(p.Min, start-1, now)
	}
	if !ok {
		return 0, p.exhausted(pool, now)
	}
	i, found := p.find(id)
	e := Entry{ID: id, Owner: owner}
	if found {
		p.Entries[i] = e
	} else {
		p.Entries = slices.Insert(p.Entries, i, e)
	}
	if p.owners != nil {
		p.owners[owner] = id
	}
	p.Next = id + 1
	if id >= hi {
		p.Next = p.Min
	}
	return id, nil
}

// scan returns the first id in [lo, hi] that is free at now. It walks the
// sorted entries alongside the candidate, so its cost is bounded by the
// number of entries, not by the size of the range.
func (p *Pool) scan(lo, hi uint32, now time.Time) (uint32, bool) {
	i, _ := p.find(lo)
	for c := uint64(lo); c <= uint64(hi); c++ {
		if i >= len(p.Entries) || uint64(p.Entries[i].ID) > c {
			return uint32(c), true
		}
		if p.Entries[i].free(now) {
			return uint32(c), true
		}
		i++
	}
	return 0, false
}

func (p *Pool) exhausted(pool string, now time.Time) error {
	var held, quarantined, deployed int
	var soonest time.Time
	for _, e := range p.Entries {
		if e.ID < p.Min || e.ID > p.Max {
			continue
		}
		switch {
		case e.Owner != "":
			held++
		case e.Deployed:
			deployed++
		case now.Before(e.Until):
			quarantined++
			if soonest.IsZero() || e.Until.Before(soonest) {
				soonest = e.Until
			}
		}
	}
	msg := fmt.Sprintf("pool %q (%d-%d) is exhausted: %d held, %d released but still deployed, %d in quarantine", pool, p.Min, p.Max, held, deployed, quarantined)
	if !soonest.IsZero() {
		msg += fmt.Sprintf(" (the first leaves quarantine at %s)", soonest.UTC().Format(time.RFC3339))
	}
	return &domain.Error{Code: domain.CodeFailedPrecondition, Field: "pools." + pool, Message: msg + "; release ids or widen the pool"}
}

// Reserve gives owner a specific id (an operator's choice, or an id adopted
// from an existing fabric). It fails with already_exists when the id is held
// by another owner, still deployed or in quarantine.
func (s *State) Reserve(pool, owner string, id uint32, now time.Time) error {
	p, err := s.pool(pool)
	if err != nil {
		return err
	}
	if owner == "" {
		return domain.Invalid("owner", "reserving from pool %q needs an owner", pool)
	}
	if id < p.Min || id > p.Max {
		return domain.Invalid("id", "id %d is outside pool %q (%d-%d)", id, pool, p.Min, p.Max)
	}
	if j := p.owned(owner); j >= 0 {
		if p.Entries[j].ID == id {
			return nil
		}
		return &domain.Error{Code: domain.CodeAlreadyExists, Field: "owner", Message: fmt.Sprintf("%s already holds %d in pool %q", owner, p.Entries[j].ID, pool)}
	}
	i, found := p.find(id)
	if found {
		e := p.Entries[i]
		if !e.free(now) {
			why := "held by " + e.Owner
			switch {
			case e.Owner != "":
			case e.Deployed:
				why = "released but still deployed"
			default:
				why = "in quarantine until " + e.Until.UTC().Format(time.RFC3339)
			}
			return &domain.Error{Code: domain.CodeAlreadyExists, Field: "id", Message: fmt.Sprintf("id %d of pool %q is %s", id, pool, why)}
		}
		p.Entries[i] = Entry{ID: id, Owner: owner}
	} else {
		p.Entries = slices.Insert(p.Entries, i, Entry{ID: id, Owner: owner})
	}
	if p.owners != nil {
		p.owners[owner] = id
	}
	return nil
}

// Release ends owner's hold: the id enters quarantine until now plus the
// pool's quarantine, and stays blocked after that for as long as it is
// deployed. Releasing an owner that holds nothing is not an error (the
// command may be replayed); ok says whether anything was released.
func (s *State) Release(pool, owner string, now time.Time) (id uint32, ok bool, err error) {
	p, err := s.pool(pool)
	if err != nil {
		return 0, false, err
	}
	i := p.owned(owner)
	if owner == "" || i < 0 {
		return 0, false, nil
	}
	id = p.Entries[i].ID
	p.Entries[i].Owner = ""
	if p.owners != nil {
		delete(p.owners, owner)
	}
	p.Entries[i].Until = now.Add(time.Duration(p.QuarantineSeconds) * time.Second)
	p.prune(now)
	return id, true, nil
}

// SetDeployed records which ids of the pool the deployed configurations now
// carry (the union over every device, including devices whose last deploy
// failed and still run an older revision). Ids not listed lose their
// deployed mark; released ones then wait only for their quarantine.
func (s *State) SetDeployed(pool string, ids []uint32, now time.Time) error {
	p, err := s.pool(pool)
	if err != nil {
		return err
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	want = slices.Compact(want)
	for i := range p.Entries {
		_, in := slices.BinarySearch(want, p.Entries[i].ID)
		p.Entries[i].Deployed = in
	}
	for _, id := range want {
		if i, found := p.find(id); !found {
			// Deployed but unknown to the pool (adopted or left over from
			// before a restore): block it all the same.
			p.Entries = slices.Insert(p.Entries, i, Entry{ID: id, Deployed: true})
		}
	}
	p.prune(now)
	return nil
}

// prune drops entries that are free again, keeping the state small.
func (p *Pool) prune(now time.Time) {
	p.Entries = slices.DeleteFunc(p.Entries, func(e Entry) bool { return e.free(now) })
}

// Usage counts a pool's ids by condition at now.
type Usage struct {
	Size        uint64 `json:"size"`
	Held        int    `json:"held"`
	Quarantined int    `json:"quarantined"`
	Deployed    int    `json:"deployed"` // released, still deployed
}

// Usage reports how full a pool is.
func (s *State) Usage(pool string, now time.Time) (Usage, error) {
	p, err := s.pool(pool)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Size: uint64(p.Max) - uint64(p.Min) + 1}
	for _, e := range p.Entries {
		switch {
		case e.Owner != "":
			u.Held++
		case e.Deployed:
			u.Deployed++
		case now.Before(e.Until):
			u.Quarantined++
		}
	}
	return u, nil
}
