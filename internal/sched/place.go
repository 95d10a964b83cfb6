package sched

import (
	"fmt"
	"slices"
	"sort"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Packing levels, tightest first.
const (
	LevelServer       = "server"
	LevelNVLinkDomain = "nvlink-domain"
	LevelStripe       = "stripe"
	LevelFabric       = "fabric"
)

// eligible reports whether j may use GPUs of v at all: the GPU model, and
// isolation (a server-isolated tenant shares a server with no one; nobody
// joins a server a server-isolated tenant holds).
func (c *cluster) eligible(v *server, j *domain.Job, t *domain.Tenant) bool {
	if j.GPUModel != "" && v.s.GPUModel != j.GPUModel {
		return false
	}
	if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
		return false
	}
	if len(t.Sites) > 0 && !slices.Contains(t.Sites, v.site) {
		return false
	}
	if j.MinDriver != "" {
		if cmp, ok := domain.CompareVersions(v.s.Driver, j.MinDriver); !ok || cmp < 0 {
			return false
		}
	}
	if v.exclusive != "" && v.exclusive != j.Tenant {
		return false
	}
	if t.Isolation == domain.IsolationServer {
		for h := range v.holders {
			if h != j.Tenant {
				return false
			}
		}
	}
	return true
}

// shape decides how many servers and how many GPUs on each: the job's
// gpusPerNode, else one server when it fits, else the largest divisor of
// gpus that fits a server (fewest servers, equal share on each).
func shape(j *domain.Job, serverSize int) (nodes, perNode int, ok bool) {
	if j.GPUsPerNode > 0 {
		return j.GPUs / j.GPUsPerNode, j.GPUsPerNode, j.GPUsPerNode <= serverSize
	}
	if j.GPUs <= serverSize {
		return 1, j.GPUs, true
	}
	for d := serverSize; d >= 1; d-- {
		if j.GPUs%d == 0 {
			return j.GPUs / d, d, true
		}
	}
	return 0, 0, false
}

// indexSets lists the GPU index sets of size n a server of size size may
// give, in preference order: aligned blocks first (0-3, 4-7), then every
// other contiguous window. Every server of a gang uses the same set, so
// GPU i of each talks on rail i.
func indexSets(size, n int) [][]int {
	var out [][]int
	seen := map[int]bool{}
	add := func(start int) {
		if start < 0 || start+n > size || seen[start] {
			return
		}
		seen[start] = true
		set := make([]int, n)
		for i := range set {
			set[i] = start + i
		}
		out = append(out, set)
	}
	for start := 0; start+n <= size; start += n {
		add(start)
	}
	for start := 0; start+n <= size; start++ {
		add(start)
	}
	return out
}

func hasAll(v *server, set []int) bool {
	for _, g := range set {
		if g >= len(v.free) || !v.free[g] {
			return false
		}
	}
	return true
}

// place finds a gang placement for j or explains why there is none.
func (c *cluster) place(j *domain.Job, t *domain.Tenant) ([]domain.Placement, string, domain.Reason) {
	var cands []*server
	size := 0
	for _, v := range c.servers {
		if c.eligible(v, j, t) {
			cands = append(cands, v)
			size = max(size, len(v.free))
		}
	}
	model := "GPUs"
	if j.GPUModel != "" {
		model = j.GPUModel + " GPUs"
	}
	if len(cands) == 0 {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.noServer(j, t, model)}
	}
	nodes, per, ok := shape(j, size)
	if !ok {
		return nil, "", domain.Reason{Code: ReasonNoInventory, Message: fmt.Sprintf("%d GPUs per node do not fit the largest eligible server (%d %s)", j.GPUsPerNode, size, model)}
	}
	best := (*choice)(nil)
	for _, set := range indexSets(size, per) {
		var fit []*server
		for _, v := range cands {
			if hasAll(v, set) {
				fit = append(fit, v)
			}
		}
		if ch := pack(fit, nodes, per); ch != nil && (best == nil || ch.better(best)) {
			ch.set = set
			best = ch
		}
	}
	if best == nil {
		return nil, "", domain.Reason{Code: ReasonCapacity, Message: c.largestFit(cands, nodes, per, model)}
	}
	if req := j.Topology; req != nil && req.Required && best.rank > maxRank(req.Level) {
		return nil, "", domain.Reason{Code: ReasonTopology, Message: fmt.Sprintf(
			"requires one %s; the tightest placement available now spans a %s (%d servers x %d %s)", req.Level, best.level, nodes, per, model)}
	}
	out := make([]domain.Placement, len(best.servers))
	for i, v := range best.servers {
		out[i] = domain.Placement{Server: v.s.Name, GPUs: append([]int(nil), best.set...), NVLinkDomain: v.domain}
		for _, g := range best.set {
			if l := v.leafOf[g]; l != "" {
				out[i].Leaves = append(out[i].Leaves, l)
			}
		}
	}
	return out, best.level, domain.Reason{}
}

// maxRank is the loosest packing rank a required topology level accepts
// (0 server, 1 NVLink domain, 2 stripe, 3 fabric). A leaf in a
// rail-optimized fabric serves one rail of one stripe, so a gang under one
// leaf per rail is a gang within one stripe.
func maxRank(level string) int {
	switch level {
	case domain.TopologyNVLinkDomain:
		return 1
	case domain.TopologyLeaf, domain.TopologyStripe:
		return 2
	}
	return 3
}

type choice struct {
	servers []*server
	level   string
	rank    int // lower is tighter
	set     []int
}

// better: a tighter level, then fewer spare GPUs left on the chosen servers
// (best fit keeps whole servers whole); ties keep the earlier, aligned set.
func (c *choice) better(o *choice) bool {
	if c.rank != o.rank {
		return c.rank < o.rank
	}
	return c.spare() < o.spare()
}

func (c *choice) spare() int {
	n := 0
	for _, v := range c.servers {
		n += v.nfree
	}
	return n
}

// pack picks nodes servers among fit, in the tightest group that holds
// them: one server, one NVLink domain, one stripe, one fabric. Within a
// level it takes the group that fits most snugly (fewest spare candidates),
// and within the group the servers with the fewest free GPUs (best fit), so
// the largest free blocks stay whole.
func pack(fit []*server, nodes, per int) *choice {
	if len(fit) < nodes {
		return nil
	}
	sorted := append([]*server(nil), fit...)
	sort.SliceStable(sorted, func(a, b int) bool { return sorted[a].nfree < sorted[b].nfree })
	if nodes == 1 {
		return &choice{servers: sorted[:1], level: LevelServer}
	}
	levels := []struct {
		name string
		key  func(*server) string
	}{
		{LevelNVLinkDomain, func(v *server) string { return v.fabric + "|" + v.domain }},
		{LevelStripe, func(v *server) string { return fmt.Sprintf("%s|%d", v.fabric, v.stripe) }},
		{LevelFabric, func(v *server) string { return v.fabric }},
	}
	for rank, lv := range levels {
		groups := map[string][]*server{}
		var keys []string
		for _, v := range sorted {
			k := lv.key(v)
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], v)
		}
		bestKey := ""
		for _, k := range keys {
			if n := len(groups[k]); n >= nodes && (bestKey == "" || n < len(groups[bestKey])) {
				bestKey = k
			}
		}
		if bestKey == "" {
			continue
		}
		g := groups[bestKey]
		if rank > 0 {
			g = fewestSubgroups(g, levels[rank-1].key)
		}
		return &choice{servers: g[:nodes], level: lv.name, rank: rank + 1}
	}
	return nil
}

// fewestSubgroups reorders servers so that the largest subgroups (by key)
// come first: taking from them spans the fewest NVLink domains or stripes.
func fewestSubgroups(g []*server, key func(*server) string) []*server {
	count := map[string]int{}
	first := map[string]int{}
	for i, v := range g {
		k := key(v)
		if _, ok := first[k]; !ok {
			first[k] = i
		}
		count[k]++
	}
	out := append([]*server(nil), g...)
	sort.SliceStable(out, func(a, b int) bool {
		ka, kb := key(out[a]), key(out[b])
		if count[ka] != count[kb] {
			return count[ka] > count[kb]
		}
		return first[ka] < first[kb]
	})
	return out
}

// largestFit says what the best placement available now could hold, so a
// user sees how far the request is from fitting.
func (c *cluster) largestFit(cands []*server, nodes, per int, model string) string {
	fabrics := map[string]int{}
	freeGPUs := 0
	for _, v := range cands {
		freeGPUs += v.nfree
		if v.nfree >= per {
			fabrics[v.fabric]++
		}
	}
	most := 0
	for _, n := range fabrics {
		most = max(most, n)
	}
	return fmt.Sprintf("needs %d servers with %d free %s each (rail-aligned) in one fabric; %d servers have that now (%d free %s on eligible servers in all)",
		nodes, per, model, most, freeGPUs, model)
}

// noServer explains why no server is eligible at all, naming the first
// filter that removes the last candidates.
func (c *cluster) noServer(j *domain.Job, t *domain.Tenant, model string) string {
	var withModel, schedulable, inSite, withDriver int
	for _, v := range c.servers {
		if j.GPUModel != "" && v.s.GPUModel != j.GPUModel {
			continue
		}
		withModel++
		if cond, ok := c.nodes[v.s.Name]; ok && !cond.Schedulable() {
			continue
		}
		schedulable++
		if len(t.Sites) > 0 && !slices.Contains(t.Sites, v.site) {
			continue
		}
		inSite++
		if j.MinDriver != "" {
			if cmp, ok := domain.CompareVersions(v.s.Driver, j.MinDriver); !ok || cmp < 0 {
				continue
			}
		}
		withDriver++
	}
	switch {
	case withModel == 0:
		return fmt.Sprintf("no server has %s", model)
	case schedulable == 0:
		return fmt.Sprintf("every server with %s is cordoned, draining or unhealthy", model)
	case inSite == 0:
		return fmt.Sprintf("no schedulable server with %s is in the tenant's sites %v", model, t.Sites)
	case withDriver == 0:
		return fmt.Sprintf("no schedulable server with %s has driver %s or newer", model, j.MinDriver)
	}
	return fmt.Sprintf("no server with %s is free of other tenants (isolation %s)", model, t.Isolation)
}
