package fabric

import (
	"cmp"
	"slices"
)

// NeedsL3VLAN reports whether a NOS carries an L3VNI on a VLAN of its own
// (NX-OS, SONiC), so that each of its VRFs needs an L3 VLAN.
func NeedsL3VLAN(nos string) bool { return nos == "nxos" || nos == "sonic" }

// VRFPlacements lists every (leaf, tenant) where Compile places the
// tenant's VRF, leaf by leaf in file order, tenants by name: on every leaf
// of the tenant's sites (VRFsOnAllLeaves), or where it owns a port
// (VRFsWhereUsed). It needs no ids.
func VRFPlacements(in Input) ([]LeafTenant, error) {
	c, err := compileSteps(in, (*compiler).indexTopology, (*compiler).registerTenants, (*compiler).assign)
	if err != nil {
		return nil, err
	}
	var out []LeafTenant
	for _, sw := range c.leaves {
		for _, ts := range c.placed(sw) {
			out = append(out, LeafTenant{Leaf: sw.sw.Name, Tenant: ts.t.Name})
		}
	}
	return out, nil
}

// L3VLANNeeds lists the VRF placements (VRFPlacements) on leaves whose NOS
// needs an L3 VLAN per VRF: the per-leaf L3 VLANs (IDs.L3VLANs) the caller
// allocates before compiling.
func L3VLANNeeds(in Input) ([]LeafTenant, error) {
	if in.Topology == nil {
		return nil, nil
	}
	need := map[string]bool{}
	for leaf, nos := range LeafNOS(in) {
		if NeedsL3VLAN(nos) {
			need[leaf] = true
		}
	}
	if len(need) == 0 {
		return nil, nil // no placement pass: the state machine runs this on every sync
	}
	all, err := VRFPlacements(in)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(lt LeafTenant) bool { return !need[lt.Leaf] }), nil
}

// placed lists the tenants whose VRF is on leaf sw, by name.
func (c *compiler) placed(sw *switchState) []*tenantState {
	owners := map[string]bool{}
	for _, l := range sw.links {
		if l.tenant != "" {
			owners[l.tenant] = true
		}
	}
	var out []*tenantState
	for _, ts := range c.tenantList {
		if c.vrfHere(sw, ts, owners) {
			out = append(out, ts)
		}
	}
	return out
}

// vrfHere reports whether tenant ts has its VRF on leaf sw, given the
// tenants owning a port there.
func (c *compiler) vrfHere(sw *switchState, ts *tenantState, owners map[string]bool) bool {
	if owners[ts.t.Name] {
		return true
	}
	return c.opts.placement == VRFsOnAllLeaves && (ts.sites == nil || ts.sites[sw.fab.site])
}

// LeafNOS is each leaf's NOS: its entry's, or the input's default.
func LeafNOS(in Input) map[string]string {
	out := map[string]string{}
	if in.Topology == nil {
		return out
	}
	def := cmp.Or(in.Options.DefaultNOS, DefaultNOS)
	for _, site := range in.Topology.Sites {
		for _, f := range site.Fabrics {
			for _, l := range f.Leaves {
				out[l.Name] = cmp.Or(l.NOS, def)
			}
		}
	}
	return out
}
