package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/jobfabric/jobfabric/internal/domain"
)

func (f *FSM) applyNodeSet(c *Command) (any, *domain.Error) {
	p, derr := decode[NodeSet](c)
	if derr != nil {
		return nil, derr
	}
	if _, ok := f.cap.servers[p.Server]; !ok {
		return nil, domain.NotFound("server", p.Server)
	}
	if len(p.Reason) > 256 {
		return nil, domain.Invalid("reason", "reason is %d characters; the limit is 256", len(p.Reason))
	}
	cur := f.node(p.Server)
	for _, x := range []struct {
		v   *bool
		dst *bool
	}{{p.Cordoned, &cur.Cordoned}, {p.Draining, &cur.Draining}, {p.Unhealthy, &cur.Unhealthy}} {
		if x.v != nil {
			*x.dst = *x.v
		}
	}
	if err := domain.ValidateRange("graceSeconds", p.GraceSeconds, 0, domain.MaxSeconds); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	cur.Reason, cur.UpdatedAt, cur.UpdatedBy = p.Reason, c.At, c.Actor
	if p.Cordoned != nil {
		cur.Runtime = "" // the operator's word replaces the runtime's
	}
	f.operatorSetNode(c, p) // hosts.go: the operator's word replaces the host policy's
	if cur.Schedulable() && cur.Reason == "" {
		delete(f.d.Nodes, p.Server) // back to normal: nothing to keep
	} else {
		f.d.Nodes[p.Server] = &cur
	}
	f.event(c, "node.set", "server/"+p.Server, "", "", fmt.Sprintf("cordoned=%t draining=%t unhealthy=%t %s", cur.Cordoned, cur.Draining, cur.Unhealthy, cur.Reason))
	return &cur, nil
}

// maxRuntimeName bounds NodeRuntime.Runtime ("slurm:" and a cluster name).
const maxRuntimeName = 128

func (f *FSM) applyNodeRuntime(c *Command) (any, *domain.Error) {
	p, derr := decode[NodeRuntime](c)
	if derr != nil {
		return nil, derr
	}
	if c.rules() < RulesRuntimeNodes {
		// The leader's check: a member that does not know the command
		// would stop at it. (No entry below 4 has this type.)
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "the cluster applies rules %d: runtime cordons need %d, once every member runs a binary with them (jobfabric cluster status)", c.rules(), RulesRuntimeNodes)
	}
	if p.Runtime == "" || len(p.Runtime) > maxRuntimeName {
		return nil, domain.Invalid("runtime", "runtime %q must be 1 to %d characters (slurm:CLUSTER)", clip(p.Runtime, 40), maxRuntimeName)
	}
	for _, s := range p.Usable {
		if _, both := p.Unusable[s]; both {
			return nil, domain.Invalid("usable", "server %q is both usable and unusable", clip(s, 64))
		}
	}
	for s, why := range p.Unusable {
		if why == "" || len(why) > 256 {
			return nil, domain.Invalid("unusable."+clip(s, 64), "reason is %d characters; it must be 1 to 256", len(why))
		}
	}
	if c.check {
		return nil, nil
	}
	changed := []domain.NodeCondition{}
	for _, s := range slices.Sorted(maps.Keys(p.Unusable)) {
		if _, ok := f.cap.servers[s]; !ok {
			continue // a node of the runtime's that jobfabric does not manage
		}
		cur := f.node(s)
		switch {
		case cur.Runtime == p.Runtime && cur.Reason == p.Unusable[s]:
			continue
		case cur.Runtime != p.Runtime && !cur.Schedulable():
			continue // an operator, the host policy or another runtime keeps work off it already
		}
		fresh := cur.Runtime != p.Runtime
		cur.Cordoned, cur.Runtime, cur.Reason, cur.UpdatedAt, cur.UpdatedBy = true, p.Runtime, p.Unusable[s], c.At, c.Actor
		f.setNode(&cur)
		changed = append(changed, cur)
		if fresh {
			f.event(c, "node.cordon", "server/"+s, "", "", "cordoned for runtime "+p.Runtime+": "+cur.Reason)
		}
	}
	for _, s := range slices.Sorted(slices.Values(p.Usable)) {
		cur := f.node(s)
		if cur.Runtime != p.Runtime {
			continue
		}
		cur.Cordoned, cur.Runtime, cur.Reason, cur.UpdatedAt, cur.UpdatedBy = false, "", "", c.At, c.Actor
		f.setNode(&cur)
		changed = append(changed, cur)
		f.event(c, "node.uncordon", "server/"+s, "", "", "uncordoned: runtime "+p.Runtime+" can use it again")
	}
	return changed, nil
}

// clip shortens a value quoted in an error.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// node returns a copy of a server's condition (the zero condition when none
// is recorded).
func (f *FSM) node(server string) domain.NodeCondition {
	if c, ok := f.d.Nodes[server]; ok {
		return *c
	}
	return domain.NodeCondition{Server: server}
}

// Nodes lists every server of the inventory with its condition and use.
func (f *FSM) Nodes() []domain.NodeView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	used := map[string]int{}
	tenants := map[string]map[string]bool{}
	// The live jobs with a placement (readindex.go), not every live job.
	for j := range f.listed(listKey{listHolding, ""}, 0) {
		for _, p := range j.Placement {
			used[p.Server] += len(p.GPUs)
			if tenants[p.Server] == nil {
				tenants[p.Server] = map[string]bool{}
			}
			tenants[p.Server][j.Tenant] = true
		}
	}
	out := []domain.NodeView{}
	if f.d.Topology == nil {
		return out
	}
	for _, site := range f.d.Topology.Sites {
		for _, fab := range site.Fabrics {
			cabled := make(map[[2]string]string, len(fab.Cables))
			for _, c := range fab.Cables {
				cabled[[2]string{c.Server, c.NIC}] = c.Leaf
			}
			for _, s := range fab.Servers {
				v := domain.NodeView{Name: s.Name, Site: site.Name, Fabric: fab.Name, Stripe: s.Stripe, NVLinkDomain: s.NVLinkDomain,
					GPUModel: s.GPUModel, GPUs: s.GPUs, Driver: s.Driver, UsedGPUs: used[s.Name], Tenants: []string{}, Condition: f.node(s.Name)}
				v.Conditions, v.ReportedDriver = f.hostView(s.Name)
				for _, n := range s.NICs {
					if n.Rail < 0 || n.Rail > len(s.NICs) {
						continue
					}
					for len(v.Leaves) <= n.Rail {
						v.Leaves = append(v.Leaves, "")
					}
					v.Leaves[n.Rail] = cabled[[2]string{s.Name, n.Name}]
				}
				for t := range tenants[s.Name] {
					v.Tenants = append(v.Tenants, t)
				}
				sort.Strings(v.Tenants)
				out = append(out, v)
			}
		}
	}
	return out
}
