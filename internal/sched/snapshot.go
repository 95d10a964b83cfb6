package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// Pools are the server pools by name: a job that names one is placed
	// on its servers only. Shared with the source, not copied: a pool is
	// replaced whole, never changed in place.
	Pools map[string]*domain.ServerPool
	// History holds recently ended jobs: their usage still counts, decayed,
	// in fair share.
	History []*domain.Job
	// Policy holds the cluster-wide knobs.
	Policy Policy
	// Scorer, when set, places single-server jobs (whole GPUs on one
	// server, shares, CPU-only jobs) on the server it rates highest; nil
	// rates them with the JobFabric policy over the live jobs' mix
	// (score.go).
	Scorer Scorer
	// exhaustive decides every job by full scans, without the cycle's scan
	// cache (scans.go) or ranked servers (ranked.go): the equivalence
	// tests compare both.
	exhaustive bool
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
	// FairShareReclaim lets a job beyond its workspace's guarantee but
	// within its fair share reclaim from workspaces above theirs (KAI's
	// reclaim up to the fair share); off by default. ChurnBudget bounds
	// it: GPUs of jobs reclaimed within the last ReclaimBackoff (0: no
	// fair-share reclaim).
	FairShareReclaim bool
	ChurnBudget      int
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
	// Pending explains every pending job that was not placed, by ID.
	Pending Reasons `json:"pending"`
	// Preemptions tell running jobs to stop (reclaim, priority).
	Preemptions []Preemption `json:"preemptions,omitempty"`
	// Releases end allocations that are due: grace deadlines passed, time
	// limits reached.
	Releases []Release `json:"releases,omitempty"`
	// Order is the pending jobs in the order this cycle considered them
	// (the queue's order: guarantees first, then priorities, fair share,
	// age); placed ones included.
	Order []uint64 `json:"order,omitempty"`
	// Next is the earliest future time a deadline or time limit falls due,
	// the deadlines of this plan's preemptions included (zero if none): the
	// leader runs a cycle then.
	Next time.Time `json:"next,omitempty"`
}

// ByJob indexes the plan's decisions by job: each placed job's
// placement, the jobs released, and each preempted job's preemption (for
// the callers that commit a plan to jobs of their own: benchmarks, tests).
func (p *Plan) ByJob() (placed map[uint64][]domain.Placement, released map[uint64]bool, stopping map[uint64]Preemption) {
	placed = make(map[uint64][]domain.Placement, len(p.Placements))
	for _, x := range p.Placements {
		placed[x.JobID] = x.Placement
	}
	released = make(map[uint64]bool, len(p.Releases))
	for _, r := range p.Releases {
		released[r.JobID] = true
	}
	stopping = make(map[uint64]Preemption, len(p.Preemptions))
	for _, x := range p.Preemptions {
		stopping[x.JobID] = x
	}
	return placed, released, stopping
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
	// They are maps, nil until used: most servers hold whole GPUs only, and
	// per-GPU slices for every server were most of a cycle's allocation.
	mig         map[int][]mig.Instance
	share       map[int]int
	shareTenant map[int]string
	nfree       int
	idx         int // position in cluster.servers
	// tenants holding GPUs here, and whether any of them is server-isolated.
	holders   []holder
	exclusive string // a server-isolated tenant holding it, "" if none
	// cpuUsed and memUsed are what jobs here request of CPU and memory;
	// ver counts changes (scorers cache by it).
	cpuUsed, memUsed int64
	ver              uint32
	// cpuCap, memCap and model copy the server's CPU and memory capacity
	// and GPU model: read for every server in a placement scan, they sit
	// with the figures above instead of behind two pointers.
	cpuCap, memCap int64
	model          string
	// sigID numbers the server's idleSig: equal ids, equal signatures.
	sigID int32
}

// take marks a placement's GPUs, slices or share as used.
func (v *server) take(p domain.Placement, tenant string) {
	for _, g := range p.GPUs {
		if g < 0 || g >= len(v.free) {
			continue
		}
		switch {
		case p.Share > 0:
			if v.share == nil {
				v.share, v.shareTenant = map[int]int{}, map[int]string{}
			}
			v.share[g] += domain.ShareUnits(p.Share)
			v.shareTenant[g] = tenant
		case len(p.MIG) > 0:
			if v.mig == nil {
				v.mig = map[int][]mig.Instance{}
			}
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
				delete(v.share, g)
				delete(v.shareTenant, g)
			}
		case len(p.MIG) > 0:
			var keep []mig.Instance
			for _, in := range v.mig[g] {
				if !slices.ContainsFunc(p.MIG, func(sl domain.MIGSlice) bool { return sl.GPU == g && sl.Profile == in.Profile && sl.Start == in.Start }) {
					keep = append(keep, in)
				}
			}
			if len(keep) == 0 {
				delete(v.mig, g)
			} else {
				v.mig[g] = keep
			}
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
				if u, ok := mig.Units(v.s.GPUModel, in.Profile); ok {
					n += u
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
	if v.mig != nil {
		cp.mig = make(map[int][]mig.Instance, len(v.mig))
		for g, l := range v.mig {
			cp.mig[g] = append([]mig.Instance(nil), l...)
		}
	}
	cp.share = maps.Clone(v.share)
	cp.shareTenant = maps.Clone(v.shareTenant)
	cp.holders = append([]holder(nil), v.holders...)
	return &cp
}

// cluster is phase 1's result.
type cluster struct {
	servers []*server // in topology order
	// spare is the Carry's ranked trees of earlier cycles, whose arrays a
	// new tree reuses (nil: none kept).
	spare  *[]*rankTree
	byName map[string]int // server name -> index, from Static
	// total counts the GPUs jobs may use: all GPUs of schedulable servers,
	// and the busy ones of the others (free GPUs of a cordoned server are
	// no capacity).
	total int
	nodes map[string]domain.NodeCondition
	// cow marks a shallow what-if view (see shallow); cloned marks the
	// servers it has copied.
	cow    bool
	cloned map[int]bool
	// owned marks a what-if view whose servers are all its own (the
	// horizon's empty view): writes need no copy, none is in cloned.
	owned bool
	// shared marks the servers whose holders and maps are still a
	// Carry's view (carryview.go): mut copies them first.
	shared []bool
	// statics caches static eligibility; shared with what-if views.
	statics *statics
	// totalModel is total per GPU model, modelNames the models by name.
	totalModel map[string]int
	modelNames []string
	// cands and fit are placeGang's reused buffers; what-if views share
	// them (one check runs at a time).
	cands, fit []*server
	// sc is the snapshot's placement scorer (score.go).
	sc *scoring
	// ver counts changes to the base cluster's servers (mut, and the GPUs
	// placeAround hides); cache holds whole-cluster scans at a version and
	// hist the servers by free GPUs (scans.go); exhaustive turns both off
	// (Snapshot.exhaustive).
	ver        uint64
	cache      *scanCache
	hist       *freeHist
	exhaustive bool
	// sver counts each server's changes, for migNoRoom: GPUs found to
	// have no room for one more instance of a profile (scans.go).
	sver      []uint32
	migNoRoom map[migKeyGPU]uint32
	// mrooms keeps the servers with room in MIG mode per profile
	// (scans.go), for placeMIG's walk.
	mrooms *migRooms
	// owners indexes servers by the tenant that could be alone on them
	// (scans.go), for server-isolated tenants' reasons.
	owners *ownerIndex
	// sums keeps eligibleFree's sums per class server by server, reading
	// the servers changed since from changed (scans.go).
	sums    map[sumsKey]*freeSums
	changed []int
	// sumsSpare is a Carry's sums of its last cycle, their arrays reused
	// (newSums); nil without one.
	sumsSpare *[]*freeSums
	// rank keeps the servers ranked by score per request shape
	// (ranked.go).
	rank *ranking
}

// Static is what the scheduler derives from the topology alone. The caller
// may build it once per topology (NewStatic) and pass it in every snapshot;
// a snapshot without it (or with one of another topology) builds its own.
type Static struct {
	topo    *domain.Topology
	servers []static
	byName  map[string]int
	// gpus counts the servers' GPUs.
	gpus int
}

// static is one server's fixed facts.
type static struct {
	s      *domain.Server
	site   string
	fabric string // site/fabric
	stripe int
	domain string // NVLink domain
	// Packing group keys, built once: they are compared for every gang.
	// Packing group ids (dense per Static), compared for every gang.
	domainID, stripeID, fabricID int
	// sigID numbers the server's idleSig (server.sigID), once: a view
	// built each cycle (the horizon reservation's empty cluster) looked
	// each server's up in a map by its model's name.
	sigID int32
	// leafOf[i] is the leaf GPU i's NIC is cabled to ("" if none).
	leafOf []string
}

// NewStatic indexes a topology for the scheduler.
func NewStatic(t *domain.Topology) *Static {
	st := &Static{topo: t, byName: map[string]int{}}
	groups := map[string]int{}
	ids := func(key string) int {
		id, ok := groups[key]
		if !ok {
			id = len(groups) + 1
			groups[key] = id
		}
		return id
	}
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
					domainID: ids(fab + "|" + d), stripeID: ids(fmt.Sprintf("%s|%d", fab, srv.Stripe)), fabricID: ids(fab), leafOf: make([]string, srv.GPUs)}
				for _, nic := range srv.NICs {
					if nic.GPU >= 0 && nic.GPU < srv.GPUs && x.leafOf[nic.GPU] == "" {
						x.leafOf[nic.GPU] = leafOf[[2]string{srv.Name, nic.Name}]
					}
				}
				st.byName[srv.Name] = len(st.servers)
				st.servers = append(st.servers, x)
			}
		}
	}
	// In server order, as the views numbered them.
	sigs := map[idleSig]int32{}
	for i := range st.servers {
		ss := st.servers[i].s
		sig := idleSig{ss.GPUModel, ss.CPUMilli, ss.MemoryMiB, ss.GPUs}
		id, ok := sigs[sig]
		if !ok {
			id = int32(len(sigs))
			sigs[sig] = id
		}
		st.servers[i].sigID = id
		st.gpus += ss.GPUs
	}
	return st
}

func buildCluster(s *Snapshot) *cluster {
	return buildClusterWith(s, nil)
}

// serverBufs back a view's servers: their fields, free GPUs, first
// holders and pointers, one array each for the whole cluster (a few
// allocations instead of several per server). A Carry keeps the ones of
// the horizon's empty view (backfill.go) for the next cycle's: built
// anew, they were 2.3 MB a cycle at 12,500 servers.
type serverBufs struct {
	views []server
	free  []bool
	slots []holder
	ptrs  []*server
}

// empty makes st's servers with every GPU free and nothing held, in b's
// arrays (made when they do not fit st). The views they made before are
// overwritten: b serves one view at a time.
func (b *serverBufs) empty(st *Static) []*server {
	n := len(st.servers)
	if len(b.views) != n || len(b.free) != st.gpus {
		// One holder slot per server from one array: most servers have
		// at most one holder; a second one grows that server's slice
		// alone.
		*b = serverBufs{views: make([]server, n), free: make([]bool, st.gpus), slots: make([]holder, n), ptrs: make([]*server, n)}
	} else {
		clear(b.slots) // the tenants the last view's holders named
	}
	for g := range b.free {
		b.free[g] = true
	}
	off := 0
	for i := range st.servers {
		g := st.servers[i].s.GPUs
		v := &b.views[i]
		ss := st.servers[i].s
		*v = server{static: &st.servers[i], free: b.free[off : off+g : off+g], nfree: g, holders: b.slots[i : i : i+1],
			cpuCap: ss.CPUMilli, memCap: ss.MemoryMiB, model: ss.GPUModel, sigID: st.servers[i].sigID}
		off += g
		v.idx = i
		b.ptrs[i] = v
	}
	return b.ptrs
}

// buildClusterWith is buildCluster, its scorer weighed on cr's sums when
// cr is not nil (synced to s).
func buildClusterWith(s *Snapshot, cr *Carry) *cluster {
	return buildClusterIn(s, cr, nil)
}

// buildClusterIn is buildClusterWith, a view built from the jobs (not the
// Carry's) made in into's arrays when into is not nil.
func buildClusterIn(s *Snapshot, cr *Carry, into *serverBufs) *cluster {
	c := &cluster{nodes: s.Nodes, statics: &statics{byKey: map[staticKey]*staticSet{}, exhaustive: s.exhaustive, pools: s.Pools}, exhaustive: s.exhaustive}
	if cr != nil {
		c.statics.pack = &cr.pack
		if !s.exhaustive {
			c.statics.migStarts, c.statics.sets = cr.keptMemos()
		}
	}
	st := s.Static
	if st == nil || st.topo != s.Topology {
		st = NewStatic(s.Topology)
	}
	if cr != nil && s.Scorer == nil {
		// The Carry's view, patched by the jobs that changed
		// (carryview.go). A snapshot's Scorer keeps a tally of each
		// server's jobs while the view is built: such a cycle builds it.
		st = cr.static
		c.byName = st.byName
		c.sc = s.scoring(len(st.servers), cr)
		c.sc.spare = &cr.scoreRows
		if cr.view == nil || cr.view.st != st {
			cr.view = newCarriedView(st, &cr.tbl)
		}
		n, whole := cr.view.bring(s.Tenants)
		cr.viewLoads += n
		if whole {
			cr.viewWhole++
		}
		cr.view.into(c, s.Nodes)
		c.spare, c.sumsSpare = &cr.trees, &cr.sums
		c.cands, c.fit = cr.cands, cr.fit
		return c
	}
	c.byName = st.byName
	c.sc = s.scoring(len(st.servers), cr)
	var b serverBufs
	if into != nil {
		b = *into
	}
	c.servers = b.empty(st)
	if into != nil {
		*into = b
	}
	if cr != nil && cr.static == st {
		// From the Carry's rows: the jobs that hold nothing are not
		// loaded, a one-server job's server is numbered already, and a
		// tenant is looked up once per tenant/workspace pair.
		tbl := &cr.tbl
		tenantOf := make([]*domain.Tenant, len(tbl.pairs))
		asked := make([]bool, len(tbl.pairs))
		for k := range tbl.rows {
			r := &tbl.rows[k]
			if !r.placed {
				continue
			}
			j := tbl.jobs[k]
			if !asked[r.pair] {
				tenantOf[r.pair], asked[r.pair] = s.Tenants[j.Tenant], true
			}
			t := tenantOf[r.pair]
			if r.srv >= 0 {
				v := c.servers[r.srv]
				v.take(j.Placement[0], j.Tenant)
				c.hold(v, j.Tenant, t)
				c.account(v, j, 1)
				continue
			}
			for _, p := range j.Placement {
				v := c.server(p.Server)
				if v == nil {
					continue
				}
				v.take(p, j.Tenant)
				c.hold(v, j.Tenant, t)
				c.account(v, j, 1)
			}
		}
	} else {
		for _, j := range s.Jobs {
			for _, p := range j.Placement {
				v := c.server(p.Server)
				if v == nil {
					continue // the state machine refuses removing busy servers; be safe anyway
				}
				v.take(p, j.Tenant)
				c.hold(v, j.Tenant, s.Tenants[j.Tenant])
				c.account(v, j, 1)
			}
		}
	}
	c.totalModel = map[string]int{}
	// Summed by runs of one model (servers come grouped by model): a
	// map update per server was most of building an empty view.
	model, sum, started := "", 0, false
	flush := func() {
		if !started {
			return
		}
		if _, ok := c.totalModel[model]; !ok {
			c.modelNames = append(c.modelNames, model)
		}
		c.totalModel[model] += sum
	}
	for _, v := range c.servers {
		n := len(v.free) * unit
		if len(c.nodes) > 0 {
			if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
				n = v.usedUnits()
			}
		}
		c.total += n
		if !started || v.s.GPUModel != model {
			flush()
			model, sum, started = v.s.GPUModel, 0, true
		}
		sum += n
	}
	flush()
	slices.Sort(c.modelNames)
	return c
}

// server is the working view of the named server, nil if unknown.
func (c *cluster) server(name string) *server {
	if i, ok := c.byName[name]; ok {
		return c.servers[i]
	}
	return nil
}

// shallow returns a copy-on-write view (its server list in buf, reused) of the cluster for what-if checks:
// servers are shared until release changes one, which is then cloned. The
// view must only be read (place) and released into, never committed to.
func (c *cluster) shallow(buf []*server) *cluster {
	return &cluster{servers: append(buf[:0], c.servers...), byName: c.byName, total: c.total, nodes: c.nodes, cow: true, cloned: map[int]bool{}, statics: c.statics, totalModel: c.totalModel, modelNames: c.modelNames, cands: c.cands, fit: c.fit, sc: c.sc}
}

// release frees a job's GPUs in the view and drops it from the holders of
// the servers it leaves.
func (c *cluster) release(j *domain.Job) {
	for _, p := range j.Placement {
		v := c.mut(p.Server)
		if v == nil {
			continue
		}
		v.give(p)
		v.unhold(j.Tenant)
		c.account(v, j, -1)
	}
}

// mut is the named server, writable: a copy-on-write view copies it first.
func (c *cluster) mut(name string) *server {
	i, ok := c.byName[name]
	if !ok {
		return nil
	}
	if c.cow && !c.owned && !c.cloned[i] {
		c.servers[i] = c.servers[i].clone()
		c.cloned[i] = true
	}
	if c.shared != nil && c.shared[i] {
		c.servers[i].own()
		c.shared[i] = false
	}
	if !c.cow {
		c.touched(i) // the caller changes it
	}
	return c.servers[i]
}

// holder is a tenant holding placements on a server.
type holder struct {
	tenant    string
	n         int  // placements
	exclusive bool // the tenant is server-isolated
}

func (c *cluster) hold(v *server, tenant string, t *domain.Tenant) {
	v.hold(tenant, t != nil && t.Isolation == domain.IsolationServer)
}

// hold counts one placement of tenant on v (excl: the tenant is
// server-isolated).
func (v *server) hold(tenant string, excl bool) {
	if excl {
		v.exclusive = tenant
	}
	for i := range v.holders {
		if v.holders[i].tenant == tenant {
			v.holders[i].n++
			return
		}
	}
	v.holders = append(v.holders, holder{tenant: tenant, n: 1, exclusive: excl})
}

// unhold undoes one hold of tenant.
func (v *server) unhold(tenant string) {
	for i := range v.holders {
		if v.holders[i].tenant != tenant {
			continue
		}
		if v.holders[i].n--; v.holders[i].n > 0 {
			return
		}
		v.holders = slices.Delete(v.holders, i, i+1)
		break
	}
	v.exclusive = ""
	for _, h := range v.holders {
		if h.exclusive {
			v.exclusive = h.tenant
		}
	}
}

// sortedWorkspaces are the snapshot's workspaces by ref.
func sortedWorkspaces(s *Snapshot) []*domain.Workspace {
	ws, _ := sortedWorkspaceRefs(s)
	return ws
}

// sortedWorkspaceRefs are the snapshot's workspaces by ref, and their
// refs. Each ref is built once, not in every comparison (5,000 workspaces
// sorted by refs built in the comparisons were 4 % of a later cycle).
func sortedWorkspaceRefs(s *Snapshot) ([]*domain.Workspace, []string) {
	type ref struct {
		ref string
		w   *domain.Workspace
	}
	rs := make([]ref, 0, len(s.Workspaces))
	for _, w := range s.Workspaces {
		rs = append(rs, ref{w.Ref(), w})
	}
	slices.SortFunc(rs, func(a, b ref) int { return strings.Compare(a.ref, b.ref) })
	ws, refs := make([]*domain.Workspace, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		ws[i], refs[i] = r.w, r.ref
	}
	return ws, refs
}
