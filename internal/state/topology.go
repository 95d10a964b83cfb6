package state

import (
	"fmt"
	"maps"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// The topology command: a new inventory is refused while it would strand
// a running job or an existing guarantee.

func (f *FSM) applyTopology(c *Command) (any, *domain.Error) {
	p, derr := decode[TopologyApply](c)
	if derr != nil {
		return nil, derr
	}
	t := &p.Topology
	if err := topology.Normalize(t, f.d.Topology); err != nil {
		return nil, asDomainError(err)
	}
	if err := topology.Validate(t); err != nil {
		return nil, err
	}
	fp := topology.Fingerprint(t)
	if fp == f.d.Fingerprint {
		return &domain.TopologyResult{Changed: false, Revision: f.d.TopologyRev, Fingerprint: fp, Summary: t.Summary()}, nil
	}
	next := capacityOf(t)
	// A server (or GPUs of it) holding an active job cannot disappear.
	for j := range f.jobs.liveJobs() {
		for _, pl := range j.Placement {
			s, ok := next.servers[pl.Server]
			if !ok {
				return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
					Message: fmt.Sprintf("server %s holds %s job %d (%s/%s): it cannot be removed while the job runs", pl.Server, j.State, j.ID, j.Tenant, j.Workspace)}
			}
			for _, g := range pl.GPUs {
				if g >= s.GPUs {
					return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
						Message: fmt.Sprintf("GPU %d of server %s holds %s job %d: the server cannot shrink to %d GPUs while the job runs", g, pl.Server, j.State, j.ID, s.GPUs)}
				}
			}
		}
	}
	if g := f.totalGuaranteed(); g > next.total {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
			Message: fmt.Sprintf("workspaces guarantee %d GPUs but this topology has %d: lower guarantees first", g, next.total)}
	}
	for _, ref := range slices.Sorted(maps.Keys(f.d.Workspaces)) {
		if err := f.checkModelGuarantees(f.d.Workspaces[ref], next.byModel); err != nil {
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "sites",
				Message: fmt.Sprintf("workspace %s: %s: lower its model guarantees first", ref, err.Message)}
		}
	}
	// Leaves that need an L3 VLAN per VRF (a leaf's NOS changed to NX-OS
	// or SONiC, a new one) must hold every tenant's VRF they would carry.
	if err := f.checkL3VLANRoom("sites", t, nil, c.At); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	next.static = sched.NewStatic(t)
	f.d.Topology, f.d.Fingerprint, f.cap = t, fp, next
	f.d.TopologyRev++
	sum := t.Summary()
	f.event(c, "topology.apply", "topology", "", "", fmt.Sprintf("revision %d: %d servers, %d GPUs, %d leaves, %d spines", f.d.TopologyRev, sum.Servers, sum.GPUs, sum.Leaves, sum.Spines))
	return &domain.TopologyResult{Changed: true, Revision: f.d.TopologyRev, Fingerprint: fp, Summary: sum}, nil
}

// Switches returns copies of the named switches of the applied topology
// (leaves and spines), those it has.
func (f *FSM) Switches(names ...string) map[string]domain.Switch {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]domain.Switch, len(names))
	if f.d.Topology == nil {
		return out
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, site := range f.d.Topology.Sites {
		for _, fab := range site.Fabrics {
			for _, sws := range [][]domain.Switch{fab.Leaves, fab.Spines, fab.SuperSpines} {
				for _, sw := range sws {
					if !want[sw.Name] {
						continue
					}
					if sw.Platform != nil {
						p := *sw.Platform
						sw.Platform = &p
					}
					sw.Breakouts = slices.Clone(sw.Breakouts)
					out[sw.Name] = sw
				}
			}
		}
	}
	return out
}
