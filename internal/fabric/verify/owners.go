package verify

import (
	"fmt"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
)

// expected is what the input says the fabric must do, derived here from the
// topology, tenants and allocations with rules of its own (the same rules
// as the compiler's, written again so that a compiler bug shows up as a
// disagreement instead of being copied):
//
//   - a server-isolated tenant, or an allocation with Whole set, owns every
//     cabled link of the server (a NIC's first cable is its link);
//   - otherwise an allocation owns the link of each GPU it holds: the link
//     of the NIC whose NIC.GPU names it (the GPU's rail);
//   - a job's endpoints are the links of its GPUs, or every link of the
//     server when the allocation is Whole.
type expected struct {
	tenants map[string]*domain.Tenant
	links   map[fabric.LinkRef]*owner
	// cables are every cable of the topology (not only a NIC's first).
	cables map[fabric.LinkRef]bool
	jobs   []job // sorted by tenant, then job id
	// groups: (tenant, job) -> the job's group; named: (tenant, group name).
	groups    map[jobRef]*fabric.Group
	named     map[jobRef]*fabric.Group
	contracts map[contractKey]bool
	problems  []Failure
}

type owner struct {
	tenant string
	jobs   []string // sorted, each once
}

type jobRef struct{ tenant, name string }

type contractKey struct{ tenant, a, b string }

type job struct {
	tenant, id string
	links      []fabric.LinkRef
}

func deriveExpected(in fabric.Input) *expected {
	// Maps sized up front: at 100,000 GPUs growing them is a good part of
	// the cost.
	ncables, nservers := 0, 0
	if in.Topology != nil {
		for si := range in.Topology.Sites {
			for fi := range in.Topology.Sites[si].Fabrics {
				ncables += len(in.Topology.Sites[si].Fabrics[fi].Cables)
				nservers += len(in.Topology.Sites[si].Fabrics[fi].Servers)
			}
		}
	}
	x := &expected{tenants: make(map[string]*domain.Tenant, len(in.Tenants)), links: make(map[fabric.LinkRef]*owner, ncables), cables: make(map[fabric.LinkRef]bool, ncables),
		groups: make(map[jobRef]*fabric.Group, len(in.Groups)), named: make(map[jobRef]*fabric.Group, len(in.Groups)), contracts: make(map[contractKey]bool, 2*len(in.Contracts))}
	problem := func(format string, args ...any) {
		x.problems = append(x.problems, Failure{Rule: RuleInput, Detail: fmt.Sprintf(format, args...)})
	}
	for i := range in.Tenants {
		t := &in.Tenants[i]
		x.tenants[t.Name] = t
	}
	type srv struct {
		s     *domain.Server
		links []fabric.LinkRef // per NIC; zero when uncabled
		whole string
	}
	servers := make(map[string]*srv, nservers)
	if in.Topology != nil {
		for si := range in.Topology.Sites {
			for fi := range in.Topology.Sites[si].Fabrics {
				f := &in.Topology.Sites[si].Fabrics[fi]
				for i := range f.Servers {
					s := &f.Servers[i]
					servers[s.Name] = &srv{s: s, links: make([]fabric.LinkRef, len(s.NICs))}
				}
				for _, c := range f.Cables {
					ref := fabric.LinkRef{Leaf: c.Leaf, Port: c.Port}
					x.cables[ref] = true
					s := servers[c.Server]
					if s == nil {
						continue
					}
					if ni := slices.IndexFunc(s.s.NICs, func(n domain.NIC) bool { return n.Name == c.NIC }); ni >= 0 && s.links[ni] == (fabric.LinkRef{}) {
						s.links[ni] = ref
					}
				}
			}
		}
	}
	jobs := make(map[jobRef]*job, len(in.Allocations))
	// Owners, jobs and an owner's first job come from slabs: a few
	// allocations instead of one or two per link and job.
	ownerSlab, jobSlab := make([]owner, 0, ncables), make([]job, 0, len(in.Allocations))
	firstJob := make([]string, 0, ncables)
	for i, a := range in.Allocations {
		t := x.tenants[a.Tenant]
		s := servers[a.Server]
		if t == nil {
			problem("allocations[%d] names tenant %q, which the input does not have", i, a.Tenant)
			continue
		}
		if s == nil {
			problem("allocations[%d] names server %q, which the topology does not have", i, a.Server)
			continue
		}
		var held gpuSet
		for _, g := range a.GPUs {
			if g < 0 || g >= s.s.GPUs {
				problem("allocations[%d] holds GPU %d of server %s, which has %d", i, g, a.Server, s.s.GPUs)
			}
			held.add(g)
		}
		whole := a.Whole || t.Isolation == domain.IsolationServer
		if whole {
			if s.whole != "" && s.whole != a.Tenant {
				problem("server %s is held whole by tenants %q and %q", a.Server, s.whole, a.Tenant)
			}
			s.whole = a.Tenant
		}
		var j *job
		if a.JobID != "" {
			k := jobRef{a.Tenant, a.JobID}
			if j = jobs[k]; j == nil {
				if len(jobSlab) < cap(jobSlab) {
					jobSlab = append(jobSlab, job{tenant: a.Tenant, id: a.JobID})
					j = &jobSlab[len(jobSlab)-1]
				} else {
					j = &job{tenant: a.Tenant, id: a.JobID}
				}
				jobs[k] = j
			}
		}
		for ni, ref := range s.links {
			if ref == (fabric.LinkRef{}) {
				continue
			}
			own := held.has(s.s.NICs[ni].GPU)
			if !whole && !own {
				continue
			}
			o := x.links[ref]
			if o == nil {
				if len(ownerSlab) < cap(ownerSlab) {
					ownerSlab = append(ownerSlab, owner{tenant: a.Tenant})
					o = &ownerSlab[len(ownerSlab)-1]
				} else {
					o = &owner{tenant: a.Tenant}
				}
				x.links[ref] = o
			} else if o.tenant != a.Tenant {
				problem("link %s/%s of server %s is held by tenants %q and %q", ref.Leaf, ref.Port, a.Server, o.tenant, a.Tenant)
				continue
			}
			if j != nil && (a.Whole || own) {
				switch {
				case o.jobs == nil && len(firstJob) < cap(firstJob):
					firstJob = append(firstJob, a.JobID)
					o.jobs = firstJob[len(firstJob)-1 : len(firstJob) : len(firstJob)]
				case !slices.Contains(o.jobs, a.JobID):
					o.jobs = append(o.jobs, a.JobID)
				}
				if !slices.Contains(j.links, ref) {
					j.links = append(j.links, ref)
				}
			}
		}
	}
	// A server held whole by one tenant holds no other tenant's GPUs.
	for i, a := range in.Allocations {
		if s := servers[a.Server]; s != nil && s.whole != "" && s.whole != a.Tenant && x.tenants[a.Tenant] != nil {
			problem("allocations[%d]: tenant %q holds GPUs of server %s, which tenant %q holds whole", i, a.Tenant, a.Server, s.whole)
		}
	}
	for _, o := range x.links {
		slices.Sort(o.jobs)
	}
	// Sorted as pointers: a job is too large to swap cheaply.
	sorted := make([]*job, 0, len(jobs))
	for _, j := range jobs {
		slices.SortFunc(j.links, compareRefs)
		sorted = append(sorted, j)
	}
	slices.SortFunc(sorted, func(a, b *job) int {
		if a.tenant != b.tenant {
			if a.tenant < b.tenant {
				return -1
			}
			return 1
		}
		return compareJobIDs(a.id, b.id)
	})
	x.jobs = make([]job, len(sorted))
	for i, j := range sorted {
		x.jobs[i] = *j
	}
	for i := range in.Groups {
		g := &in.Groups[i]
		x.named[jobRef{g.Tenant, g.Name}] = g
		if g.JobID != "" {
			x.groups[jobRef{g.Tenant, g.JobID}] = g
		}
	}
	for _, c := range in.Contracts {
		x.contracts[contractKey{c.Tenant, c.A, c.B}] = true
		x.contracts[contractKey{c.Tenant, c.B, c.A}] = true
	}
	return x
}

// gpuSet is the GPUs an allocation holds: a bitmask for the first 64 (a
// server has 8), a map for the rest, so the common case allocates nothing.
type gpuSet struct {
	low  uint64
	rest map[int]bool
}

func (s *gpuSet) add(g int) {
	if g >= 0 && g < 64 {
		s.low |= 1 << g
		return
	}
	if s.rest == nil {
		s.rest = map[int]bool{}
	}
	s.rest[g] = true
}

func (s *gpuSet) has(g int) bool {
	if g >= 0 && g < 64 {
		return s.low&(1<<g) != 0
	}
	return s.rest[g]
}

func compareRefs(a, b fabric.LinkRef) int {
	return compareEndpoints(Endpoint(a), Endpoint(b))
}

// compareJobIDs orders job ids numerically when both are numbers.
func compareJobIDs(a, b string) int {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// segmented reports whether the input's tenant asks for job segmentation.
func (x *expected) segmented(tenant string) bool {
	t := x.tenants[tenant]
	return t != nil && t.JobSegmentation
}

// jobKeys are the owners' jobs resolved once for job isolation: each
// (tenant, job) and each (tenant, group name) an integer, the contracts a
// set of integer pairs, so that deciding whether two endpoints may talk
// costs integer compares instead of string-keyed look-ups per pair.
type jobKeys struct {
	off       []int32  // endpoint e's keys are flat[off[e]:off[e+1]]
	flat      []jobKey // in the order of the owner's jobs
	contracts map[[2]int32]bool
}

type jobKey struct {
	job   int32
	group int32 // the job's group's name, -1 when the job has none
}

// jobKeys resolves the owner of every endpoint of a segmented tenant.
func (v *verifier) jobKeys() *jobKeys {
	k := &jobKeys{off: make([]int32, len(v.owners)+1), contracts: map[[2]int32]bool{}}
	jobs, names := make(map[jobRef]int32, len(v.x.jobs)), make(map[jobRef]int32, len(v.in.Groups))
	intern := func(ids map[jobRef]int32, r jobRef) int32 {
		id, ok := ids[r]
		if !ok {
			id = int32(len(ids))
			ids[r] = id
		}
		return id
	}
	for _, c := range v.in.Contracts {
		a, b := intern(names, jobRef{c.Tenant, c.A}), intern(names, jobRef{c.Tenant, c.B})
		k.contracts[[2]int32{a, b}] = true
		k.contracts[[2]int32{b, a}] = true
	}
	for e, o := range v.owners {
		k.off[e] = int32(len(k.flat))
		if o == nil || !v.x.segmented(o.tenant) {
			continue
		}
		for _, j := range o.jobs {
			key := jobKey{job: intern(jobs, jobRef{o.tenant, j}), group: -1}
			if g := v.x.groups[jobRef{o.tenant, j}]; g != nil {
				key.group = intern(names, jobRef{o.tenant, g.Name})
			}
			k.flat = append(k.flat, key)
		}
	}
	k.off[len(v.owners)] = int32(len(k.flat))
	return k
}

func (k *jobKeys) of(e int32) []jobKey { return k.flat[k.off[e]:k.off[e+1]] }

// intended reports whether endpoints used by jobs js and jt of one
// segmented tenant may talk: they share a job, or the input has a contract
// between their jobs' groups.
func (k *jobKeys) intended(js, jt []jobKey) bool {
	for _, a := range js {
		for _, b := range jt {
			if a.job == b.job {
				return true
			}
			if a.group >= 0 && b.group >= 0 && len(k.contracts) > 0 && k.contracts[[2]int32{a.group, b.group}] {
				return true
			}
		}
	}
	return false
}
