package sched

import (
	"maps"
	"math"
	"sort"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// usage is phase 2's result: capacity held per workspace and tenant.
//
// Workspaces and tenants are numbered once per cycle and their figures kept
// in slices: a what-if check (fitsWithout) clones the usage many times per
// cycle, and the protected capacity a job may not take is kept up to date on
// every change instead of summed over all workspaces for every job.
type usage struct {
	ix *usageIndex // shared by clones: never changed after buildUsage

	used      []int // by workspace index
	prot      []int // protected (idle, not lendable) guarantee, by workspace
	tUsed     []int // by tenant index
	tProtWs   []int // sum of prot over the tenant's workspaces
	tProt     []int // what the tenant withholds from other tenants (>= 0)
	protTotal int   // sum of tProt
	usedTotal int
	// decayed is each workspace's time-decayed usage in GPU-seconds: the
	// fair-share measure among borrowers.
	decayed []float64
	// Per GPU model, kept only when some workspace has model quotas
	// (tracksModels): mUsed by workspace index, usedModel cluster-wide.
	mUsed     []map[string]int
	usedModel map[string]int
	modelOf   func(server string) string
}

// usageIndex numbers the workspaces (sorted by ref) and tenants.
type usageIndex struct {
	ws       []*domain.Workspace
	wsTenant []int // tenant index of each workspace, -1 when unknown
	byRef    map[string]int
	tenants  []*domain.Tenant // nil entries for workspaces' tenants not in the snapshot
	byTenant map[string]int
	// byPair memoizes of: a job names its workspace by tenant and name,
	// and building the ref for every job in every pass over the jobs was
	// a tenth of a later cycle at 100,000 GPUs. Filled as asked (the only
	// change after buildUsage).
	byPair map[[2]string][2]int32
	// numbered is the numbering's identity: an index a Carry keeps
	// for the next cycle is a new one with the same numbering (of
	// answers alike), and shares it.
	numbered *numbering
	// asSnap: ws[i] is the snapshot's Workspaces[ref] for the ref byRef
	// numbers i, and tenants[t] its Tenants[name] for the name byTenant
	// numbers t, every one (a Carry's kept index, checked entry by entry
	// against the snapshot), so a workspace or tenant known by number is
	// read here, not looked up by name.
	asSnap bool
}

// numbering identifies a usage index's numbering (of size 1: distinct
// ones are never one pointer).
type numbering struct{ _ byte }

// of is the index of the workspace a job of tenant and workspace names
// (byRef of "tenant/workspace"), and of the tenant (byTenant); -1 when
// unknown.
func (ix *usageIndex) of(tenant, workspace string) (wi, ti int) {
	k := [2]string{tenant, workspace}
	if v, ok := ix.byPair[k]; ok {
		return int(v[0]), int(v[1])
	}
	wi, ti = -1, -1
	if i, ok := ix.byRef[tenant+"/"+workspace]; ok {
		wi = i
	}
	if t, ok := ix.byTenant[tenant]; ok {
		ti = t
	}
	ix.byPair[k] = [2]int32{int32(wi), int32(ti)}
	return wi, ti
}

func buildUsage(s *Snapshot, c *cluster) *usage {
	return usageOn(newUsageIndex(s), s, c)
}

// newUsageIndex numbers the snapshot's workspaces and tenants.
func newUsageIndex(s *Snapshot) *usageIndex {
	ws, refs := sortedWorkspaceRefs(s)
	ix := &usageIndex{ws: ws, byRef: make(map[string]int, len(ws)), byTenant: make(map[string]int, len(s.Tenants)), byPair: make(map[[2]string][2]int32, len(ws)), numbered: &numbering{}}
	names := make([]string, 0, len(s.Tenants))
	for n := range s.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ix.byTenant[n] = len(ix.tenants)
		ix.tenants = append(ix.tenants, s.Tenants[n])
	}
	ix.wsTenant = make([]int, len(ix.ws))
	for i, w := range ix.ws {
		ix.byRef[refs[i]] = i
		t, ok := ix.byTenant[w.Tenant]
		if !ok {
			t = -1
		}
		ix.wsTenant[i] = t
	}
	return ix
}

// usageOn is buildUsage with ix, the index of a snapshot with the same
// workspaces and tenants as s (a what-if snapshot of other jobs reuses
// its cycle's).
func usageOn(ix *usageIndex, s *Snapshot, c *cluster) *usage {
	return usageWith(ix, s, c, nil)
}

// usageBufs back a Carry's cycle's usage (usageWith).
type usageBufs struct {
	used, prot, tUsed, tProtWs, tProt []int
	decayed                           []float64
}

// usageWith is usageOn, the units held per workspace and tenant taken
// from cr's sums when it is not nil (synced to s) and no workspace has
// model quotas.
func usageWith(ix *usageIndex, s *Snapshot, c *cluster, cr *Carry) *usage {
	var u *usage
	if cr != nil {
		// In the arrays of the Carry's cycle before, zeroed: its usage
		// is dead once its plan is made (0.7 MB a cycle at 100,000 GPUs).
		b := &cr.usageBufs
		b.used, b.prot, b.decayed = zeroed(b.used, len(ix.ws)), zeroed(b.prot, len(ix.ws)), zeroed(b.decayed, len(ix.ws))
		b.tUsed, b.tProtWs, b.tProt = zeroed(b.tUsed, len(ix.tenants)), zeroed(b.tProtWs, len(ix.tenants)), zeroed(b.tProt, len(ix.tenants))
		u = &usage{ix: ix, used: b.used, prot: b.prot, tUsed: b.tUsed, tProtWs: b.tProtWs, tProt: b.tProt, decayed: b.decayed}
	} else {
		u = &usage{ix: ix, used: make([]int, len(ix.ws)), prot: make([]int, len(ix.ws)),
			tUsed: make([]int, len(ix.tenants)), tProtWs: make([]int, len(ix.tenants)), tProt: make([]int, len(ix.tenants)),
			decayed: make([]float64, len(ix.ws))}
	}
	u.modelOf = func(server string) string {
		if v := c.server(server); v != nil {
			return v.s.GPUModel
		}
		return ""
	}
	for _, w := range ix.ws {
		if len(w.Models) > 0 {
			u.mUsed, u.usedModel = make([]map[string]int, len(ix.ws)), map[string]int{}
			break
		}
	}
	if cr != nil && !u.tracksModels() {
		cr.usageInto(u)
	} else {
		for _, j := range s.Jobs {
			if len(j.Placement) > 0 {
				// The held figures only (protection is computed once
				// after them), by the memoized indices.
				n := held(j)
				i, t := ix.of(j.Tenant, j.Workspace)
				if i >= 0 {
					u.used[i] += n
				}
				if t >= 0 {
					u.tUsed[t] += n
				}
				u.usedTotal += n
				if u.tracksModels() {
					for _, p := range j.Placement {
						m, n := u.modelOf(p.Server), placementUnits(p)
						u.usedModel[m] += n
						if i >= 0 {
							if u.mUsed[i] == nil {
								u.mUsed[i] = map[string]int{}
							}
							u.mUsed[i][m] += n
						}
					}
				}
			}
		}
	}
	for i := range ix.ws {
		u.prot[i] = u.protectedAt(i)
		if t := ix.wsTenant[i]; t >= 0 {
			u.tProtWs[t] += u.prot[i]
		}
	}
	for t := range ix.tenants {
		u.tProt[t] = u.tenantWithheld(t)
		u.protTotal += u.tProt[t]
	}
	return u
}

// index is workspace ref's index, -1 if unknown.
func (u *usage) index(ref string) int {
	if i, ok := u.ix.byRef[ref]; ok {
		return i
	}
	return -1
}

// usedOf is what workspace ref holds, in units.
func (u *usage) usedOf(ref string) int {
	if i, ok := u.ix.byRef[ref]; ok {
		return u.used[i]
	}
	return 0
}

// tenantUsedOf is what tenant holds, in units.
func (u *usage) tenantUsedOf(tenant string) int {
	if t, ok := u.ix.byTenant[tenant]; ok {
		return u.tUsed[t]
	}
	return 0
}

// decayedOf is workspace ref's time-decayed usage.
func (u *usage) decayedOf(ref string) float64 {
	if i, ok := u.ix.byRef[ref]; ok {
		return u.decayed[i]
	}
	return 0
}

// add records n units more (or less) held by a workspace, and updates what
// it and its tenant protect.
func (u *usage) add(tenant, ref string, n int) {
	ri, ti := -1, -1
	if i, ok := u.ix.byRef[ref]; ok {
		ri = i
	}
	if t, ok := u.ix.byTenant[tenant]; ok {
		ti = t
	}
	u.addAt(ri, ti, n)
}

// addAt is add for the workspace at ri and the tenant at ti (-1:
// unknown), as byRef and byTenant answer for its ref and tenant.
func (u *usage) addAt(ri, ti, n int) {
	if ri >= 0 {
		u.used[ri] += n
	}
	if ti >= 0 {
		u.tUsed[ti] += n
	}
	u.usedTotal += n
	if ri < 0 {
		return
	}
	p := u.protectedAt(ri)
	if t := u.ix.wsTenant[ri]; t >= 0 {
		u.tProtWs[t] += p - u.prot[ri]
	}
	u.prot[ri] = p
	if ti >= 0 {
		w := u.tenantWithheld(ti)
		u.protTotal += w - u.tProt[ti]
		u.tProt[ti] = w
	}
}

// protectedAt is the idle guarantee of workspace i that others may not
// borrow.
func (u *usage) protectedAt(i int) int {
	w := u.ix.ws[i]
	idle := w.Guaranteed*unit - u.used[i]
	return max(0, idle-w.LendLimit*unit)
}

// tenantWithheld is what tenant t withholds from other tenants: its
// workspaces' protected guarantees, or (with a tenant quota) the tenant's
// own idle guarantee beyond its lendLimit when that is larger.
func (u *usage) tenantWithheld(t int) int {
	p := u.tProtWs[t]
	if q := u.ix.tenants[t].Quota; q != nil {
		p = max(p, q.Guaranteed*unit-u.tUsed[t]-q.LendLimit*unit)
	}
	return max(0, p)
}

func (u *usage) clone() *usage {
	cp := *u
	cp.used = append([]int(nil), u.used...)
	cp.prot = append([]int(nil), u.prot...)
	cp.tUsed = append([]int(nil), u.tUsed...)
	cp.tProtWs = append([]int(nil), u.tProtWs...)
	cp.tProt = append([]int(nil), u.tProt...)
	if u.tracksModels() {
		cp.mUsed = make([]map[string]int, len(u.mUsed))
		for i, m := range u.mUsed {
			cp.mUsed[i] = maps.Clone(m)
		}
		cp.usedModel = maps.Clone(u.usedModel)
	}
	return &cp
}

// anyAbove reports whether a workspace other than ref uses more than its
// guarantee (borrows).
func (u *usage) anyAbove(ref string) bool {
	own := u.index(ref) // -1 when unknown: every workspace is another
	for i, w := range u.ix.ws {
		if u.used[i] > w.Guaranteed*unit && i != own {
			return true
		}
	}
	return false
}

// protectedFrom counts the GPUs a job of workspace w may not take: the
// protected idle guarantees of the other workspaces of its tenant, and of
// every other tenant the larger of its workspaces' and (with a tenant
// quota) the tenant's own: a tenant lends other tenants at most its
// lendLimit, whatever its workspaces would lend.
func (u *usage) protectedFrom(w *domain.Workspace) int {
	total := u.protTotal
	i, known := u.ix.byRef[w.Ref()]
	if t, ok := u.ix.byTenant[w.Tenant]; ok {
		total += u.tProtWs[t] - u.tProt[t]
		if known {
			total -= u.prot[i]
		}
	}
	return total
}

// decayWeights remembers decayedUsage's weights 2^-(now-t)/h by t (the
// whole time.Time, monotonic reading included: the same value gives the
// same weight), a few slots chosen by the time's seconds.
type decayWeights struct {
	t  [64]time.Time
	w  [64]float64
	ok [64]bool
}

// of is 2^-(now-t)/hs as decayedUsage works it out.
func (c *decayWeights) of(t, now time.Time, hs float64) float64 {
	x := uint(t.Unix()^int64(t.Nanosecond())) % 64
	if c.ok[x] && c.t[x] == t {
		return c.w[x]
	}
	w := math.Exp2(-now.Sub(t).Seconds() / hs)
	c.t[x], c.w[x], c.ok[x] = t, w, true
	return w
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

// addDecayRows is addDecay with the live jobs read from their rows (tbl
// is s's jobs; pairWS maps its pairs to u's workspaces): the same terms,
// summed in the same order.
func (u *usage) addDecayRows(s *Snapshot, tbl *jobTable, pairWS []int32, now time.Time, h time.Duration) {
	var wc decayWeights
	for k := range tbl.rows {
		r := &tbl.rows[k]
		if !r.hasPlacedAt {
			continue
		}
		i := pairWS[r.pair]
		if i < 0 {
			continue
		}
		if r.ended {
			u.decayed[i] += decayedUsage(r.held, tbl.placedAt(k), *tbl.jobs[k].EndedAt, now, h) / unit
			continue
		}
		// decayedUsage(r.held, r.placedAt, now, now, h), its weights
		// remembered by time: the jobs placed by one plan share their
		// PlacedAt, and an Exp2 apiece was most of this pass.
		if at := tbl.placedAt(k); now.After(at) {
			hs := h.Seconds()
			u.decayed[i] += float64(r.held) * hs / math.Ln2 * (wc.of(now, now, hs) - wc.of(at, now, hs)) / unit
		}
	}
	for _, j := range s.History {
		if j.PlacedAt == nil {
			continue
		}
		end := now
		if j.EndedAt != nil {
			end = *j.EndedAt
		}
		if i, _ := u.ix.of(j.Tenant, j.Workspace); i >= 0 {
			u.decayed[i] += decayedUsage(demand(j), *j.PlacedAt, end, now, h) / unit
		}
	}
}

func (u *usage) addDecay(s *Snapshot, now time.Time, h time.Duration) {
	add := func(j *domain.Job, units int) {
		if j.PlacedAt == nil {
			return
		}
		end := now
		if j.EndedAt != nil {
			end = *j.EndedAt
		}
		if i, _ := u.ix.of(j.Tenant, j.Workspace); i >= 0 {
			u.decayed[i] += decayedUsage(units, *j.PlacedAt, end, now, h) / unit
		}
	}
	for _, j := range s.Jobs {
		add(j, held(j))
	}
	for _, j := range s.History {
		add(j, demand(j))
	}
}
