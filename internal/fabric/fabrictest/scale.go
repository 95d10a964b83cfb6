package fabrictest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// ScaleOptions size a synthetic cluster for benchmarks. The zero value is
// issue #4's target: 32 stripes x 64 servers x 8 GPUs (256 leaves, 2,048
// servers, 16,384 GPUs), 16 spines, 1,000 tenants, 10,000 running jobs.
type ScaleOptions struct {
	Stripes, ServersPerStripe, GPUsPerServer, Spines int
	// SuperSpines > 0: a three-tier fabric of Pods pods.
	SuperSpines, Pods int
	Tenants           int
	Jobs              int
	// NOS of every switch; "" means the topology generator's default.
	NOS string
	// Placement of the tenants' VRFs ("" = every leaf).
	Placement fabric.VRFPlacement
}

func (o *ScaleOptions) defaults() {
	o.Stripes = cmpOr(o.Stripes, 32)
	o.ServersPerStripe = cmpOr(o.ServersPerStripe, 64)
	o.GPUsPerServer = cmpOr(o.GPUsPerServer, 8)
	o.Spines = cmpOr(o.Spines, 16)
	o.Tenants = cmpOr(o.Tenants, 1000)
	o.Jobs = cmpOr(o.Jobs, 10_000)
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Scale builds the input of a large, busy cluster, deterministically:
//   - tenants: every 4th server-isolated (the others GPU-isolated), every
//     10th (from the 6th) vlan-aware, every 3rd segmented with a "storage"
//     group (an external /24) that every 5th of its jobs has a contract with;
//   - jobs fill servers in order: a server-isolated tenant takes every 4th
//     server whole, GPU-isolated tenants share the others; per server the
//     jobs are 1, 2, 4 or 8 GPUs in a fixed rotation, until Jobs jobs run;
//     the servers after the last job stay free;
//   - ids as the pools would give them: L3VNI 10000+i, VRF id i+1, group
//     IDs counting from 1, per-link VLANs and L2VNIs for vlan-aware links
//     (AssignLinkIDs), and an L3 VLAN per leaf for every VRF the leaf
//     carries, as NX-OS and SONiC leaves need (AssignL3VLANs; FRR leaves
//     ignore them), so a leaf carries at most 1,095 tenants' VRFs.
func Scale(o ScaleOptions) (fabric.Input, error) {
	o.defaults()
	if o.Tenants < 4 || o.Tenants > 30_000 {
		return fabric.Input{}, fmt.Errorf("tenants %d: between 4 and 30,000 (two VRF ids each for vlan-aware tenants)", o.Tenants)
	}
	top, err := topology.Generate(topology.GenerateOptions{Stripes: o.Stripes, ServersPerStripe: o.ServersPerStripe, GPUsPerServer: o.GPUsPerServer, Spines: o.Spines,
		SuperSpines: o.SuperSpines, Pods: o.Pods, NOS: o.NOS})
	if err != nil {
		return fabric.Input{}, err
	}
	in := fabric.Input{Topology: top, IDs: fabric.IDs{Tenants: map[string]fabric.TenantIDs{}}, Options: fabric.Options{VRFPlacement: o.Placement}}
	var srvTenants, gpuTenants []int
	nextGroup := uint16(1)
	for i := range o.Tenants {
		t := domain.Tenant{Name: fmt.Sprintf("t%04d", i), Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5, JobSegmentation: i%3 == 0}
		ids := fabric.TenantIDs{L3VNI: uint32(10000 + i), VRFID: uint16(1 + i)}
		if i%4 == 0 {
			t.Isolation = domain.IsolationServer
			srvTenants = append(srvTenants, i)
		} else {
			gpuTenants = append(gpuTenants, i)
		}
		if i%10 == 5 {
			t.Network = domain.NetworkVLANAware
			ids.MACVRFID, ids.MACRT = uint16(o.Tenants+1+i), uint32(2_000_000+i)
		}
		if t.JobSegmentation {
			ids.UnclassifiedGroup = fabric.SwitchGroup - 1 - uint16(i)
			in.Groups = append(in.Groups, fabric.Group{Tenant: t.Name, Name: "storage", ID: nextGroup,
				Prefixes: []string{fmt.Sprintf("10.%d.%d.0/24", 200+i/256, i%256)}})
			nextGroup++
		}
		in.Tenants = append(in.Tenants, t)
		in.IDs.Tenants[t.Name] = ids
	}
	sizes := []int{1, 1, 2, 1, 1, 1, 4, 1, 1, 2}
	rot, gpuRot := 0, 0
	job := 0
	jobsOf := map[int]int{}
	for s, srv := range top.Servers() {
		if job >= o.Jobs {
			break
		}
		whole := -1
		if s%4 == 0 {
			whole = srvTenants[(s/4)%len(srvTenants)]
		}
		for g := 0; g < srv.GPUs && job < o.Jobs; {
			n := min(sizes[rot%len(sizes)], srv.GPUs-g)
			rot++
			ti := whole
			if ti < 0 {
				ti = gpuTenants[gpuRot%len(gpuTenants)]
				gpuRot++
			}
			job++
			t := in.Tenants[ti]
			id := fmt.Sprint(job)
			a := fabric.Allocation{Tenant: t.Name, Server: srv.Name, JobID: id}
			for k := range n {
				a.GPUs = append(a.GPUs, g+k)
			}
			g += n
			in.Allocations = append(in.Allocations, a)
			if t.JobSegmentation {
				if nextGroup >= fabric.SwitchGroup-1-uint16(o.Tenants) {
					return fabric.Input{}, fmt.Errorf("more segmented jobs than group IDs")
				}
				name := "job-" + id
				in.Groups = append(in.Groups, fabric.Group{Tenant: t.Name, Name: name, ID: nextGroup, JobID: id})
				nextGroup++
				if jobsOf[ti]++; jobsOf[ti]%5 == 0 {
					in.Contracts = append(in.Contracts, fabric.Contract{Tenant: t.Name, A: name, B: "storage"})
				}
			}
		}
	}
	if job < o.Jobs {
		return fabric.Input{}, fmt.Errorf("the cluster holds %d jobs, not %d", job, o.Jobs)
	}
	if err := AssignLinkIDs(&in, 100, 100_000); err != nil {
		return fabric.Input{}, err
	}
	if err := AssignL3VLANs(&in, 3000, 4094); err != nil {
		return fabric.Input{}, err
	}
	return in, nil
}

// AssignL3VLANs gives every VRF placement (fabric.VRFPlacements) an L3
// VLAN from lo..hi, counting per leaf, the way the state machine's per-leaf
// pools would, keeping the ones in.IDs.L3VLANs already has and dropping
// those of VRFs that left. It fails when a leaf carries more VRFs than the
// range holds.
func AssignL3VLANs(in *fabric.Input, lo, hi uint16) error {
	placed, err := fabric.VRFPlacements(*in)
	if err != nil {
		return err
	}
	next := make(map[fabric.LeafTenant]uint16, len(placed))
	used := map[string]map[uint16]bool{}
	for _, lt := range placed {
		if v, ok := in.IDs.L3VLANs[lt]; ok {
			next[lt] = v
			if used[lt.Leaf] == nil {
				used[lt.Leaf] = map[uint16]bool{}
			}
			used[lt.Leaf][v] = true
		}
	}
	for _, lt := range placed {
		if _, ok := next[lt]; ok {
			continue
		}
		if used[lt.Leaf] == nil {
			used[lt.Leaf] = map[uint16]bool{}
		}
		v := lo
		for used[lt.Leaf][v] && v <= hi {
			v++
		}
		if v > hi {
			return fmt.Errorf("leaf %s carries more tenant VRFs than L3 VLANs %d-%d: place VRFs where used", lt.Leaf, lo, hi)
		}
		used[lt.Leaf][v] = true
		next[lt] = v
	}
	in.IDs.L3VLANs = next
	return nil
}

// FreeServers lists the servers no allocation of in touches, in topology
// order: where a benchmark can start a job.
func FreeServers(in fabric.Input) []string {
	used := map[string]bool{}
	for _, a := range in.Allocations {
		used[a.Server] = true
	}
	var out []string
	for _, s := range in.Topology.Servers() {
		if !used[s.Name] {
			out = append(out, s.Name)
		}
	}
	return out
}

// StartJob is the change that starts one job of tenant on gpus of server:
// its allocation, its group (and a contract with "storage") when the tenant
// is segmented, and the ids of its links when the tenant is vlan-aware. in
// is the input before the change; the returned input is the one after.
func StartJob(in fabric.Input, tenant, server, jobID string, gpus []int, groupID uint16) (fabric.Input, fabric.Change, error) {
	var t *domain.Tenant
	for i := range in.Tenants {
		if in.Tenants[i].Name == tenant {
			t = &in.Tenants[i]
		}
	}
	if t == nil {
		return in, fabric.Change{}, fmt.Errorf("no tenant %q", tenant)
	}
	next := in
	next.Allocations = slices.Clone(in.Allocations)
	next.Groups = slices.Clone(in.Groups)
	next.Contracts = slices.Clone(in.Contracts)
	a := fabric.Allocation{Tenant: tenant, Server: server, GPUs: gpus, JobID: jobID}
	ch := fabric.Change{Add: []fabric.Allocation{a}}
	next.Allocations = append(next.Allocations, a)
	if t.JobSegmentation {
		g := fabric.Group{Tenant: tenant, Name: "job-" + jobID, ID: groupID, JobID: jobID}
		c := fabric.Contract{Tenant: tenant, A: g.Name, B: "storage"}
		next.Groups = append(next.Groups, g)
		next.Contracts = append(next.Contracts, c)
		ch.AddGroups, ch.AddContracts = []fabric.Group{g}, []fabric.Contract{c}
	}
	if in.Options.VRFPlacement == fabric.VRFsWhereUsed {
		// The job may bring the tenant's VRF to a leaf: its L3 VLAN
		// there, the lowest the leaf has free. (Only the job's own leaves:
		// a whole ownership pass per start would dwarf what is timed.)
		for _, leaf := range jobLeaves(in, t, server, gpus) {
			lt := fabric.LeafTenant{Leaf: leaf, Tenant: tenant}
			if _, ok := in.IDs.L3VLANs[lt]; ok {
				continue
			}
			used := map[uint16]bool{}
			for k, v := range in.IDs.L3VLANs {
				if k.Leaf == leaf {
					used[v] = true
				}
			}
			v := uint16(3000)
			for used[v] && v <= 4094 {
				v++
			}
			if v > 4094 {
				return in, fabric.Change{}, fmt.Errorf("leaf %s has no L3 VLAN left for tenant %s", leaf, tenant)
			}
			if ch.L3VLANs == nil {
				ch.L3VLANs = map[fabric.LeafTenant]uint16{}
				next.IDs.L3VLANs = maps.Clone(in.IDs.L3VLANs)
			}
			ch.L3VLANs[lt], next.IDs.L3VLANs[lt] = v, v
		}
	}
	if t.Network == domain.NetworkVLANAware {
		links := make(map[fabric.LinkRef]fabric.LinkIDs, len(in.IDs.Links)+len(gpus))
		for k, v := range in.IDs.Links {
			links[k] = v
		}
		next.IDs.Links = links
		if err := AssignLinkIDs(&next, 100, 100_000); err != nil {
			return in, fabric.Change{}, err
		}
		ch.Links = map[fabric.LinkRef]fabric.LinkIDs{}
		for ref, ids := range next.IDs.Links {
			if old, ok := in.IDs.Links[ref]; !ok || old != ids {
				ch.Links[ref] = ids
			}
		}
	}
	return next, ch, nil
}

// jobLeaves lists the leaves of the links a job of tenant t on gpus of
// server would own: every cable of the server for a server-isolated
// tenant, else the cables of the NICs of its GPUs.
func jobLeaves(in fabric.Input, t *domain.Tenant, server string, gpus []int) []string {
	var out []string
	for _, site := range in.Topology.Sites {
		for _, f := range site.Fabrics {
			nicGPU := map[string]int{}
			for _, srv := range f.Servers {
				if srv.Name == server {
					for _, n := range srv.NICs {
						nicGPU[n.Name] = n.GPU
					}
				}
			}
			if len(nicGPU) == 0 {
				continue
			}
			for _, c := range f.Cables {
				if c.Server == server && (t.Isolation == domain.IsolationServer || slices.Contains(gpus, nicGPU[c.NIC])) && !slices.Contains(out, c.Leaf) {
					out = append(out, c.Leaf)
				}
			}
		}
	}
	return out
}

// StopJob is the change that undoes StartJob.
func StopJob(start fabric.Change) fabric.Change {
	ch := fabric.Change{Remove: start.Add, RemoveContracts: start.AddContracts}
	for _, g := range start.AddGroups {
		ch.RemoveGroups = append(ch.RemoveGroups, fabric.GroupRef{Tenant: g.Tenant, Name: g.Name})
	}
	for ref := range start.Links {
		ch.DropLinks = append(ch.DropLinks, ref)
	}
	for lt := range start.L3VLANs {
		ch.DropL3VLANs = append(ch.DropL3VLANs, lt)
	}
	slices.SortFunc(ch.DropLinks, func(a, b fabric.LinkRef) int {
		if a.Leaf != b.Leaf {
			if a.Leaf < b.Leaf {
				return -1
			}
			return 1
		}
		return fabric.ComparePorts(a.Port, b.Port)
	})
	return ch
}
