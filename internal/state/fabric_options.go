package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/pool"
)

// The operator's fabric options live in the replicated state, not in a
// server flag: the state machine syncs the id pools by them when it
// applies a revision (applyFabricRevision), so every member must read the
// same ones, and a leader elected with another flag would renumber what is
// deployed.

// FabricOptions are the operator's choices for the fabric.
type FabricOptions struct {
	// VRFPlacement is where a tenant's VRF is created: "all" (every leaf of
	// its sites, the default) or "used" (only the leaves where it owns a
	// server port).
	VRFPlacement fabric.VRFPlacement `json:"vrfPlacement,omitempty"`
	// L3VLANMin and L3VLANMax bound each leaf's L3 VLAN pool on NOSes that
	// carry an L3VNI on a VLAN (NX-OS, SONiC); 0 and 0: 3000-4094.
	L3VLANMin uint32 `json:"l3VLANMin,omitempty"`
	L3VLANMax uint32 `json:"l3VLANMax,omitempty"`
}

// L3VLAN ranges: link VLANs take 1000-2999 of the same leaf (the pools'
// default ranges), and 4095 is reserved.
const (
	minL3VLAN = 3000
	maxL3VLAN = 4094
)

// normalize fills in the defaults and checks o.
func (o *FabricOptions) normalize() *domain.Error {
	switch o.VRFPlacement {
	case "":
		o.VRFPlacement = fabric.VRFsOnAllLeaves
	case fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed:
	default:
		return domain.Invalid("vrfPlacement", "VRF placement %q is not one of %s (every leaf of the tenant's sites), %s (only leaves where the tenant owns a port)", o.VRFPlacement, fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed)
	}
	if o.L3VLANMin == 0 && o.L3VLANMax == 0 {
		sp := pool.LeafL3VLANSpec("", 0)
		o.L3VLANMin, o.L3VLANMax = sp.Min, sp.Max
	}
	if o.L3VLANMin < minL3VLAN || o.L3VLANMax > maxL3VLAN || o.L3VLANMin > o.L3VLANMax {
		return domain.Invalid("l3VLANs", "L3 VLAN range %d-%d must be a non-empty range within %d-%d (a leaf's link VLANs take 1000-2999, 4095 is reserved)", o.L3VLANMin, o.L3VLANMax, minL3VLAN, maxL3VLAN)
	}
	return nil
}

// FabricOptions returns the options in force, defaults filled in.
func (f *FSM) FabricOptions() FabricOptions {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fabricOptions()
}

func (f *FSM) fabricOptions() FabricOptions {
	fd := &f.d.Fabric
	o := FabricOptions{VRFPlacement: fd.Options.VRFPlacement, L3VLANMin: fd.L3VLANMin, L3VLANMax: fd.L3VLANMax}
	_ = o.normalize() // stored options passed normalize
	return o
}

// applyFabricOptions sets the options. What the fabric needs under them
// must fit the id pools now: a change that leaves a leaf without an L3
// VLAN for a VRF it would carry (every tenant on every leaf, or a range
// narrower than what a leaf holds) is refused here, naming the option,
// rather than stalling every revision after it.
func (f *FSM) applyFabricOptions(c *Command) (any, *domain.Error) {
	p, derr := decode[FabricOptionsSet](c)
	if derr != nil {
		return nil, derr
	}
	o := p.Options
	if derr := o.normalize(); derr != nil {
		return nil, derr
	}
	cur := f.fabricOptions()
	if f.d.Topology != nil {
		var held []uint64
		for _, h := range f.d.Fabric.Held {
			held = append(held, h.Job)
		}
		in, _ := f.fabricInput(held)
		in.Options.VRFPlacement = o.VRFPlacement
		if err := syncIDs(f.pools().Clone(), &in, c.At, vlanRange{o.L3VLANMin, o.L3VLANMax}); err != nil {
			why := err.Error()
			if de := asDomainError(err); de != nil {
				why = de.Message
			}
			field, value := "vrfPlacement", string(o.VRFPlacement)
			if o.VRFPlacement == cur.VRFPlacement {
				field, value = "l3VLANs", fmt.Sprintf("%d-%d", o.L3VLANMin, o.L3VLANMax)
			}
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
				Message: fmt.Sprintf("%s %s: the VRFs the leaves would carry need more L3 VLANs than a leaf has (each VRF on an NX-OS or SONiC leaf needs one of the leaf's own): %s", field, value, why)}
		}
	}
	if c.check {
		return nil, nil
	}
	fd := &f.d.Fabric
	fd.Options.VRFPlacement = o.VRFPlacement
	if o.VRFPlacement == fabric.VRFsOnAllLeaves {
		fd.Options.VRFPlacement = "" // the compiler's default: the input of a state that never set it
	}
	fd.L3VLANMin, fd.L3VLANMax = o.L3VLANMin, o.L3VLANMax
	if sp := pool.LeafL3VLANSpec("", 0); o.L3VLANMin == sp.Min && o.L3VLANMax == sp.Max {
		fd.L3VLANMin, fd.L3VLANMax = 0, 0
	}
	f.event(c, "fabric.options", "fabric", "", "", fmt.Sprintf("vrfPlacement=%s l3VLANs=%d-%d", o.VRFPlacement, o.L3VLANMin, o.L3VLANMax))
	return &o, nil
}

// L3VLANWaiters lists the jobs to hold out of a revision, best first,
// when leaf's L3 VLAN pool has no id for every VRF the leaf would carry:
// with VRFs where used, the jobs no revision carries yet (not in held)
// whose tenant holds no L3 VLAN on the leaf, those with a GPU on it first,
// newest first. Holding them leaves the pool to the tenants already there;
// with VRFs on every leaf a job brings no VRF, and the list is empty.
func (f *FSM) L3VLANWaiters(leaf string, held []uint64) []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.d.Fabric.Options.VRFPlacement != fabric.VRFsWhereUsed {
		return nil
	}
	ps := f.pools()
	var on, off []uint64
	for j := range f.listed(listKey{listState, string(domain.JobPlaced)}, 0) { // not every live job (readindex.go)
		if j.State != domain.JobPlaced || j.NetworkRev != 0 || !holdsGPUs(j) || slices.Contains(held, j.ID) {
			continue
		}
		if _, ok := ps.Lookup(pool.LeafL3VLAN(leaf), "tenant/"+j.Tenant); ok {
			continue
		}
		if slices.Contains(f.jobLeaves(j), leaf) {
			on = append(on, j.ID)
		} else {
			off = append(off, j.ID)
		}
	}
	newest := func(a, b uint64) int { return cmp.Compare(b, a) }
	slices.SortFunc(on, newest)
	slices.SortFunc(off, newest)
	return append(on, off...)
}

// checkL3VLANRoom refuses tenant t (created, or given other sites; nil:
// every tenant, for a new topology top) when, with every VRF on every leaf
// of its sites, a leaf of top whose NOS needs an L3 VLAN per VRF would
// have none left for it: the revision would fail, and with it every
// revision after, until a tenant leaves. Ids in quarantine or still
// deployed are not room; a tenant already holding one (even outside the
// range, after a narrowing) needs no other.
func (f *FSM) checkL3VLANRoom(field string, top *domain.Topology, t *domain.Tenant, now time.Time) *domain.Error {
	fd := &f.d.Fabric
	if top == nil || fd.Options.VRFPlacement == fabric.VRFsWhereUsed {
		return nil
	}
	r := f.fabricOptions()
	def := cmp.Or(fd.Options.DefaultNOS, fabric.DefaultNOS)
	covers := func(t *domain.Tenant, site string) bool { return len(t.Sites) == 0 || slices.Contains(t.Sites, site) }
	ps := f.pools()
	for _, site := range top.Sites {
		if t != nil && !covers(t, site.Name) {
			continue
		}
		var placed map[string]bool // made at the first leaf that needs it
		for _, fab := range site.Fabrics {
			for _, l := range fab.Leaves {
				nos := cmp.Or(l.NOS, def)
				if !fabric.NeedsL3VLAN(nos) {
					continue
				}
				// The leaf's range: the options', or by default its NOS's
				// (NX-OS stops below its reserved VLANs).
				lo, hi := r.L3VLANMin, r.L3VLANMax
				if fd.L3VLANMin == 0 {
					sp := pool.LeafL3VLANSpecFor(l.Name, nos, 0)
					lo, hi = sp.Min, sp.Max
				}
				if placed == nil {
					placed = map[string]bool{}
					if t != nil {
						placed["tenant/"+t.Name] = true
					}
					for name, o := range f.d.Tenants {
						if (t == nil || name != t.Name) && covers(o, site.Name) {
							placed["tenant/"+name] = true
						}
					}
				}
				blocked, outside := 0, 0
				if p := ps.Pools[pool.LeafL3VLAN(l.Name)]; p != nil {
					for _, e := range p.Entries {
						in := e.ID >= lo && e.ID <= hi
						switch held := placed[e.Owner]; {
						case held && !in:
							outside++
						case in && !held && (e.Owner != "" || e.Deployed || now.Before(e.Until)):
							blocked++ // held by a tenant leaving the leaf: it goes to quarantine
						}
					}
				}
				room := int(hi-lo+1) - blocked
				if need := len(placed) - outside; need > room {
					who := "the topology"
					if t != nil {
						who = "tenant " + t.Name
					}
					return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
						Message: fmt.Sprintf("%s: with every tenant's VRF on every leaf of its sites, leaf %s would carry %d VRFs, and its L3 VLANs %d-%d have room for %d (%d in quarantine or still deployed): place VRFs where used (jobfabric fabric options --vrf-placement used) or widen the range",
							who, l.Name, need, lo, hi, room, blocked)}
				}
			}
		}
	}
	return nil
}
