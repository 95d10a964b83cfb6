package sched

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// Snapshot is everything a decision depends on. The scheduler never
// changes it.
type Snapshot struct {
	Topology   *domain.Topology
	Tenants    map[string]*domain.Tenant
	Workspaces map[string]*domain.Workspace // by "tenant/name"
	// Jobs are the non-terminal jobs: pending ones to place, the others
	// holding GPUs (their Placement).
	Jobs []*domain.Job
	// Static, when set, is NewStatic(Topology) built once by the caller.
	Static *Static
	// Nodes holds the conditions of servers that are not plainly
	// schedulable (cordoned, draining, unhealthy).
	Nodes map[string]domain.NodeCondition
	// History holds recently ended jobs: their usage still counts, decayed,
	// in fair share.
	History []*domain.Job
	// Policy holds the cluster-wide knobs.
	Policy Policy
}

// Policy is the scheduler's configuration.
type Policy struct {
	// Grace is how long a preempted job has to stop before its GPUs are
	// released anyway.
	Grace time.Duration
	// ReclaimBackoff keeps a job reclaimed from borrowed capacity from
	// borrowing again for this long (no admit-reclaim-admit thrash).
	ReclaimBackoff time.Duration
	// HalfLife is how fast past usage stops counting in fair share: usage
	// one half-life ago weighs half as much as usage now.
	HalfLife time.Duration
}

// DefaultPolicy is used for zero fields.
var DefaultPolicy = Policy{Grace: 30 * time.Second, ReclaimBackoff: 5 * time.Minute, HalfLife: time.Hour}

// HistoryHorizon is how far back ended jobs still matter: past 8
// half-lives their weight is under 0.4%.
func (p Policy) HistoryHorizon() time.Duration {
	h := p.HalfLife
	if h <= 0 {
		h = DefaultPolicy.HalfLife
	}
	return 8 * h
}

// Placement is one job's decided GPUs.
type Placement struct {
	JobID     uint64             `json:"jobID"`
	Placement []domain.Placement `json:"placement"`
	// Level says how tightly the gang was packed: server, nvlink-domain,
	// stripe or fabric.
	Level string `json:"level"`
}

// Plan is the outcome of one cycle.
type Plan struct {
	Placements []Placement `json:"placements"`
	// Pending explains every pending job that was not placed.
	Pending map[uint64]domain.Reason `json:"pending"`
	// Preemptions tell running jobs to stop (reclaim, priority).
	Preemptions []Preemption `json:"preemptions,omitempty"`
	// Releases end allocations that are due: grace deadlines passed, time
	// limits reached.
	Releases []Release `json:"releases,omitempty"`
	// Next is the earliest future time a deadline or time limit falls due
	// (zero if none): the leader runs a cycle then.
	Next time.Time `json:"next,omitempty"`
}

// Preemption tells one job to stop by Deadline.
type Preemption struct {
	JobID         uint64        `json:"jobID"`
	ForJob        uint64        `json:"forJob"`
	Reason        domain.Reason `json:"reason"`
	Deadline      time.Time     `json:"deadline"`
	BorrowBackoff *time.Time    `json:"borrowBackoff,omitempty"`
}

// Release ends one allocation: Cause is "deadline" or "time_limit".
type Release struct {
	JobID uint64 `json:"jobID"`
	Cause string `json:"cause"`
}

// Reason codes of a pending job.
const (
	ReasonWorkspaceQuota = "workspace_quota" // above guaranteed + borrowLimit
	ReasonClusterQuota   = "cluster_quota"   // the GPUs it could use are others' protected guarantees
	ReasonCapacity       = "capacity"        // quota allows it, but no placement fits now
	ReasonNoInventory    = "no_inventory"    // no server could ever hold it
	ReasonUnknown        = "unknown_workspace"
	ReasonGangOrder      = "queued_behind"   // a higher-ranked job of the workspace waits first
	ReasonReclaim        = "reclaim_pending" // GPUs are being freed for it (graceful preemption)
	ReasonBackoff        = "reclaim_backoff" // recently reclaimed: may not borrow yet
	ReasonTopology       = "topology"        // a required topology level cannot be met now
	ReasonTenantQuota    = "tenant_quota"    // above the tenant's guaranteed + borrowLimit
)

// server is the scheduler's working view of one server.
type server struct {
	*static
	free []bool // free[i]: GPU i is wholly free (no job, slice or share on it)
	// mig[i] holds the MIG instances on GPU i; share[i] the units of
	// time-sliced shares on it and shareTenant[i] their tenant (shares
	// never mix tenants on a GPU).
	mig         [][]mig.Instance
	share       []int
	shareTenant []string
	nfree       int
	idx         int // position in cluster.servers
	// tenants holding GPUs here, and whether any of them is server-isolated.
	holders   map[string]bool
	exclusive string // a server-isolated tenant holding it, "" if none
}

// take marks a placement's GPUs, slices or share as used.
func (v *server) take(p domain.Placement, tenant string) {
	for _, g := range p.GPUs {
		if g < 0 || g >= len(v.free) {
			continue
		}
		switch {
		case p.Share > 0:
			v.share[g] += domain.ShareUnits(p.Share)
			v.shareTenant[g] = tenant
		case len(p.MIG) > 0:
			for _, sl := range p.MIG {
				if sl.GPU == g {
					v.mig[g] = append(v.mig[g], mig.Instance{Profile: sl.Profile, Start: sl.Start})
				}
			}
		}
		if v.free[g] {
			v.free[g] = false
			v.nfree--
		}
	}
}

// give undoes take.
func (v *server) give(p domain.Placement) {
	for _, g := range p.GPUs {
		if g < 0 || g >= len(v.free) {
			continue
		}
		switch {
		case p.Share > 0:
			v.share[g] -= domain.ShareUnits(p.Share)
			if v.share[g] <= 0 {
				v.share[g], v.shareTenant[g] = 0, ""
			}
		case len(p.MIG) > 0:
			var keep []mig.Instance
			for _, in := range v.mig[g] {
				if !slices.ContainsFunc(p.MIG, func(sl domain.MIGSlice) bool { return sl.GPU == g && sl.Profile == in.Profile && sl.Start == in.Start }) {
					keep = append(keep, in)
				}
			}
			v.mig[g] = keep
		}
		if !v.free[g] && len(v.mig[g]) == 0 && v.share[g] == 0 {
			v.free[g] = true
			v.nfree++
		}
	}
}

// usedUnits is the capacity jobs hold on the server.
func (v *server) usedUnits() int {
	n := 0
	for g := range v.free {
		switch {
		case v.share[g] > 0:
			n += v.share[g]
		case len(v.mig[g]) > 0:
			for _, in := range v.mig[g] {
				if p, err := migProfile(v.s.GPUModel, in.Profile); err == nil {
					n += p.GPUUnits()
				}
			}
		case !v.free[g]:
			n += unit
		}
	}
	return n
}

func (v *server) clone() *server {
	cp := *v
	cp.free = append([]bool(nil), v.free...)
	cp.mig = make([][]mig.Instance, len(v.mig))
	for i, l := range v.mig {
		cp.mig[i] = append([]mig.Instance(nil), l...)
	}
	cp.share = append([]int(nil), v.share...)
	cp.shareTenant = append([]string(nil), v.shareTenant...)
	cp.holders = make(map[string]bool, len(v.holders))
	for k := range v.holders {
		cp.holders[k] = true
	}
	return &cp
}

// cluster is phase 1's result.
type cluster struct {
	servers []*server // in topology order
	byName  map[string]*server
	// total counts the GPUs jobs may use: all GPUs of schedulable servers,
	// and the busy ones of the others (free GPUs of a cordoned server are
	// no capacity).
	total int
	nodes map[string]domain.NodeCondition
	// cow marks a shallow what-if view (see shallow).
	cow bool
}

// Static is what the scheduler derives from the topology alone. The caller
// may build it once per topology (NewStatic) and pass it in every snapshot;
// a snapshot without it (or with one of another topology) builds its own.
type Static struct {
	topo    *domain.Topology
	servers []static
}

// static is one server's fixed facts.
type static struct {
	s      *domain.Server
	site   string
	fabric string // site/fabric
	stripe int
	domain string // NVLink domain
	// Packing group keys, built once: they are compared for every gang.
	domainKey, stripeKey string
	// leafOf[i] is the leaf GPU i's NIC is cabled to ("" if none).
	leafOf []string
}

// NewStatic indexes a topology for the scheduler.
func NewStatic(t *domain.Topology) *Static {
	st := &Static{topo: t}
	if t == nil {
		return st
	}
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			leafOf := map[[2]string]string{} // server, nic -> leaf
			for _, cb := range f.Cables {
				leafOf[[2]string{cb.Server, cb.NIC}] = cb.Leaf
			}
			for i := range f.Servers {
				srv := &f.Servers[i]
				d := srv.NVLinkDomain
				if d == "" {
					d = srv.Name
				}
				fab := site.Name + "/" + f.Name
				x := static{s: srv, site: site.Name, fabric: fab, stripe: srv.Stripe, domain: d,
					domainKey: fab + "|" + d, stripeKey: fmt.Sprintf("%s|%d", fab, srv.Stripe), leafOf: make([]string, srv.GPUs)}
				for _, nic := range srv.NICs {
					if nic.GPU >= 0 && nic.GPU < srv.GPUs && x.leafOf[nic.GPU] == "" {
						x.leafOf[nic.GPU] = leafOf[[2]string{srv.Name, nic.Name}]
					}
				}
				st.servers = append(st.servers, x)
			}
		}
	}
	return st
}

func buildCluster(s *Snapshot) *cluster {
	c := &cluster{byName: map[string]*server{}, nodes: s.Nodes}
	st := s.Static
	if st == nil || st.topo != s.Topology {
		st = NewStatic(s.Topology)
	}
	gpus := 0
	for i := range st.servers {
		gpus += st.servers[i].s.GPUs
	}
	// One backing array per field for the whole cluster: a few allocations
	// instead of several per server.
	free, migs, share, sharer := make([]bool, gpus), make([][]mig.Instance, gpus), make([]int, gpus), make([]string, gpus)
	views := make([]server, len(st.servers))
	c.servers = make([]*server, len(st.servers))
	off := 0
	for i := range st.servers {
		n := st.servers[i].s.GPUs
		v := &views[i]
		*v = server{static: &st.servers[i], free: free[off : off+n : off+n], mig: migs[off : off+n : off+n],
			share: share[off : off+n : off+n], shareTenant: sharer[off : off+n : off+n], nfree: n}
		for g := range v.free {
			v.free[g] = true
		}
		off += n
		v.idx = i
		c.servers[i] = v
		c.byName[v.s.Name] = v
	}
	for _, j := range s.Jobs {
		for _, p := range j.Placement {
			v := c.byName[p.Server]
			if v == nil {
				continue // the state machine refuses removing busy servers; be safe anyway
			}
			v.take(p, j.Tenant)
			c.hold(v, j.Tenant, s.Tenants[j.Tenant])
		}
	}
	for _, v := range c.servers {
		if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
			c.total += v.usedUnits()
		} else {
			c.total += len(v.free) * unit
		}
	}
	return c
}

// shallow returns a copy-on-write view of the cluster for what-if checks:
// servers are shared until release changes one, which is then cloned. The
// view must only be read (place) and released into, never committed to.
func (c *cluster) shallow() *cluster {
	return &cluster{servers: append([]*server(nil), c.servers...), byName: c.byName, total: c.total, nodes: c.nodes, cow: true}
}

// release frees a job's GPUs in the working view and recomputes who holds
// the servers it leaves.
func (c *cluster) release(j *domain.Job, holders func(server string) (map[string]bool, string)) {
	for _, p := range j.Placement {
		v := c.byName[p.Server]
		if v == nil {
			continue
		}
		if c.cow {
			if c.servers[v.idx] == v {
				c.servers[v.idx] = v.clone()
			}
			v = c.servers[v.idx]
		}
		v.give(p)
		v.holders, v.exclusive = holders(p.Server)
	}
}

func (c *cluster) hold(v *server, tenant string, t *domain.Tenant) {
	if v.holders == nil {
		v.holders = map[string]bool{}
	}
	v.holders[tenant] = true
	if t != nil && t.Isolation == domain.IsolationServer {
		v.exclusive = tenant
	}
}

// usage is phase 2's result: capacity held per workspace and tenant.
type usage struct {
	used       map[string]int // by workspace ref
	tenantUsed map[string]int // by tenant
	usedTotal  int
	guaranteed int
	// ws lists the workspaces sorted by ref, once per cycle.
	ws []*domain.Workspace
	// decayed is each workspace's time-decayed usage in GPU-seconds: the
	// fair-share measure among borrowers.
	decayed map[string]float64
}

// add records n units more (or less) held by a workspace.
func (u *usage) add(tenant, ref string, n int) {
	u.used[ref] += n
	u.tenantUsed[tenant] += n
	u.usedTotal += n
}

func (u *usage) clone() *usage {
	cp := *u
	cp.used = make(map[string]int, len(u.used))
	for k, n := range u.used {
		cp.used[k] = n
	}
	cp.tenantUsed = make(map[string]int, len(u.tenantUsed))
	for k, n := range u.tenantUsed {
		cp.tenantUsed[k] = n
	}
	return &cp
}

// decayedUsage is amount x the integral over [start, end] of 2^-(now-t)/h.
func decayedUsage(amount int, start, end, now time.Time, h time.Duration) float64 {
	if !end.After(start) {
		return 0
	}
	hs := h.Seconds()
	w := func(t time.Time) float64 { return math.Exp2(-now.Sub(t).Seconds() / hs) }
	return float64(amount) * hs / math.Ln2 * (w(end) - w(start))
}

func (u *usage) addDecay(s *Snapshot, now time.Time, h time.Duration) {
	u.decayed = map[string]float64{}
	add := func(j *domain.Job, units int) {
		if j.PlacedAt == nil {
			return
		}
		end := now
		if j.EndedAt != nil {
			end = *j.EndedAt
		}
		u.decayed[j.Tenant+"/"+j.Workspace] += decayedUsage(units, *j.PlacedAt, end, now, h) / unit
	}
	for _, j := range s.Jobs {
		add(j, held(j))
	}
	for _, j := range s.History {
		add(j, demand(j))
	}
}

func buildUsage(s *Snapshot) *usage {
	u := &usage{used: map[string]int{}, tenantUsed: map[string]int{}, ws: sortedWorkspaces(s)}
	for _, j := range s.Jobs {
		if len(j.Placement) > 0 {
			u.add(j.Tenant, j.Tenant+"/"+j.Workspace, held(j))
		}
	}
	for _, w := range u.ws {
		u.guaranteed += w.Guaranteed * unit
	}
	return u
}

// protected is the idle guarantee of w that others may not borrow.
func (u *usage) protected(w *domain.Workspace) int {
	idle := w.Guaranteed*unit - u.used[w.Ref()]
	return max(0, idle-w.LendLimit*unit)
}

// protectedFrom counts the GPUs a job of workspace w may not take: the
// protected idle guarantees of the other workspaces of its tenant, and of
// every other tenant the larger of its workspaces' and (with a tenant
// quota) the tenant's own: a tenant lends other tenants at most its
// lendLimit, whatever its workspaces would lend.
func (u *usage) protectedFrom(s *Snapshot, w *domain.Workspace) int {
	byTenant := map[string]int{}
	own := 0
	for _, o := range u.ws {
		switch {
		case o == w || (o.Tenant == w.Tenant && o.Name == w.Name):
		case o.Tenant == w.Tenant:
			own += u.protected(o)
		default:
			byTenant[o.Tenant] += u.protected(o)
		}
	}
	total := own
	for name, t := range s.Tenants {
		if name == w.Tenant {
			continue
		}
		p := byTenant[name]
		if t.Quota != nil {
			idle := t.Quota.Guaranteed*unit - u.tenantUsed[name]
			p = max(p, idle-t.Quota.LendLimit*unit)
		}
		total += max(0, p)
	}
	return total
}

func sortedWorkspaces(s *Snapshot) []*domain.Workspace {
	out := make([]*domain.Workspace, 0, len(s.Workspaces))
	for _, w := range s.Workspaces {
		out = append(out, w)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Ref() < out[b].Ref() })
	return out
}
