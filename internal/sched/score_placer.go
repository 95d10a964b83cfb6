package sched

import (
	"iter"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Placer places jobs one at a time with the scheduler's own placement
// functions (eligibility, isolation, CPU and memory, gang shapes, MIG
// geometry, shares, and the snapshot's Scorer) on a cluster view built once
// from a snapshot, and keeps that view up to date as it places and releases
// jobs. It is phase 1 and the placement step of Schedule without queue
// order, quotas or reclaim: trace simulators use it where building a whole
// snapshot per decision would cost more than the decision.
//
// One difference from Schedule: a job's GPUModels are a set here (any of
// them, every eligible server rated together), as placement traces such as
// openb's gpu_spec mean them; Schedule takes them as an order of preference.
type Placer struct {
	c       *cluster
	tenants map[string]*domain.Tenant
}

// NewPlacer builds the cluster view of s: its topology, node conditions,
// scorer, and the placements of s.Jobs.
//
// Its JobFabric policy's weights follow the cluster as jobs are placed and
// released (weighed again every 1/epochShare of its GPUs), where a
// scheduling cycle weighs them once on its snapshot.
func NewPlacer(s *Snapshot) *Placer {
	c := buildCluster(s)
	if c.sc != nil {
		c.sc.epochs = true
		c.sc.follow()
		if c.sc.dyn != nil {
			// Weighed again every epoch, which re-rates every server: the
			// ranked trees would be rebuilt each time (a scan each, per
			// shape), so a following Placer scans.
			c.rank = &ranking{off: true}
		}
	}
	return &Placer{c: c, tenants: s.Tenants}
}

// tenant is j's tenant; an unknown tenant shares GPUs (isolation gpu).
func (p *Placer) tenant(j *domain.Job) *domain.Tenant {
	if t := p.tenants[j.Tenant]; t != nil {
		return t
	}
	return &domain.Tenant{Name: j.Tenant, Isolation: domain.IsolationGPU}
}

// Find returns where j would go now, or why it cannot, without placing it.
func (p *Placer) Find(j *domain.Job) ([]domain.Placement, domain.Reason) {
	t := p.tenant(j)
	models := j.Models()
	if p.c.sc != nil && scorable(j, p.c.largestServer(j, t)) && p.c.sc.active() {
		pl, _, r := p.c.placeScored(j, t, models)
		return pl, r
	}
	pl, _, r := p.c.placeIn(j, t, models)
	return pl, r
}

// Place finds a placement for j and commits it to the view (j.Placement is
// left to the caller).
func (p *Placer) Place(j *domain.Job) ([]domain.Placement, domain.Reason) {
	pl, r := p.Find(j)
	if pl != nil {
		p.c.commit(j, p.tenant(j), pl)
	}
	return pl, r
}

// Release gives back what j holds (j.Placement).
func (p *Placer) Release(j *domain.Job) {
	p.c.release(j)
}

// Hosts calls fn with every server as a job of tenant would see it (the
// Host is reused between calls).
func (p *Placer) Hosts(tenant string, fn func(*Host)) {
	sc := p.c.sc
	if sc == nil {
		sc = newScoring(BestFit{}, len(p.c.servers))
	}
	saved := p.c.sc
	p.c.sc = sc
	j := &domain.Job{}
	j.Tenant = tenant
	for _, v := range p.c.servers {
		fn(p.c.hostOf(v, j))
	}
	p.c.sc = saved
}

// Commit records a placement decided earlier (Find) or given back for a
// what-if (Release) as held again.
func (p *Placer) Commit(j *domain.Job, pl []domain.Placement) {
	p.c.commit(j, p.tenant(j), pl)
}

// scoring is the snapshot's Scorer, else the JobFabric policy for the
// mix of its live jobs (pending and running: the work the cluster holds
// and is about to take; none: the built-in best fit), made when a cycle
// first places a single-server job. A JobFabric policy is weighed on the
// snapshot's servers (JobFabric.weigh): a function of the snapshot, not
// of when the cycle first rates a server.
//
// With a Carry (synced to s), the shapes and hosts come from its sums.
func (s *Snapshot) scoring(servers int, cr *Carry) *scoring {
	hosts := s.hosts
	if cr != nil {
		hosts = func() iter.Seq[*Host] { return cr.hosts(s) }
	}
	if s.Scorer != nil {
		if p, ok := s.Scorer.(*JobFabric); ok && len(p.Shapes) > 0 {
			p.weigh(hosts())
		}
		return newScoring(s.Scorer, servers)
	}
	jobs := s.Jobs
	return lazyScoring(func() Scorer {
		var shapes []Shape
		ok := false
		if cr != nil {
			shapes, ok = cr.shapesOf()
		}
		if !ok {
			shapes = ShapesOf(jobs)
		}
		if len(shapes) == 0 {
			return nil
		}
		p := NewJobFabric(shapes)
		p.weigh(hosts())
		return p
	}, servers)
}

// hosts are the snapshot's schedulable servers as the jobs' placements
// leave them, for weighing shapes: a GPU holding a MIG slice or any part
// of a whole-GPU job is taken, a time-sliced one keeps what its shares
// leave.
func (s *Snapshot) hosts() iter.Seq[*Host] {
	return func(yield func(*Host) bool) {
		// The cycle's Static, when it has one, already numbers the servers.
		var servers []*domain.Server
		var idx map[string]int
		if st := s.Static; st != nil && st.topo == s.Topology {
			servers, idx = make([]*domain.Server, len(st.servers)), st.byName
			for i := range st.servers {
				servers[i] = st.servers[i].s
			}
		} else {
			servers = s.Topology.Servers()
			idx = make(map[string]int, len(servers))
			for i, v := range servers {
				idx[v.Name] = i
			}
		}
		n := 0
		for _, v := range servers {
			n += v.GPUs
		}
		free := make([]int, n) // one backing array
		for g := range free {
			free[g] = 1000
		}
		hs := make([]Host, len(servers))
		for i, v := range servers {
			hs[i] = Host{Name: v.Name, Model: v.GPUModel, Free: free[:v.GPUs:v.GPUs], CPUMilli: v.CPUMilli, CPUFree: v.CPUMilli, MemoryMiB: v.MemoryMiB, MemFree: v.MemoryMiB}
			free = free[v.GPUs:]
		}
		for _, j := range s.Jobs {
			for _, p := range j.Placement {
				i, ok := idx[p.Server]
				if !ok {
					continue
				}
				h := &hs[i]
				h.CPUFree -= j.CPUMilli
				h.MemFree -= j.MemoryMiB
				eachGPUTaken(p, func(g, milli int) {
					if g >= 0 && g < len(h.Free) {
						h.Free[g] = max(0, h.Free[g]-milli)
					}
				})
			}
		}
		for i := range hs {
			if cond, ok := s.Nodes[hs[i].Name]; ok && !cond.Schedulable() {
				continue
			}
			if !yield(&hs[i]) {
				return
			}
		}
	}
}
