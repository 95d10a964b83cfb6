package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/mig"
)

// Grid geometry, in SVG user units: a GPU cell, the gap between cells, a
// server's padding, how many servers a row of a stripe holds.
const (
	cell        = 10
	gap         = 1
	pad         = 2
	perRow      = 16
	serverGapX  = 4
	serverGapY  = 4
	memorySlots = 8 // MIG memory slots of a GPU
)

// liveStates are the states in which a job holds GPUs.
const liveStates = "Placed,Ready,Running,Preempting"

type clusterView struct {
	// Full: the token reads the inventory (admin); otherwise the grid
	// shows only the servers of its own jobs, and only their GPUs.
	Full                    bool
	Servers, GPUs, UsedGPUs int
	Stripes                 []stripeView
	Jobs                    []jobRow
	Tenants                 []tenantColor
}

type stripeView struct {
	Label         string
	Width, Height int
	// PxW and PxH are its size on the page before it is shrunk to fit: a
	// few servers are not blown up to the page's width.
	PxW, PxH   int
	Leaves     []leafView
	Servers    []serverView
	Used, GPUs int
}

type leafView struct {
	Rail int
	Name string
}

type serverView struct {
	Name  string
	X, Y  int
	W, H  int
	Class string // cordoned, draining, unhealthy, drifted (space-separated)
	Title string
	GPUs  []gpuView
	// Server is set when the caller may drain it (the inventory's view).
	Drain  bool
	Marked bool
}

type gpuView struct {
	X     int
	Class string // t0..t9: the tenant's colour; "" free; unk: not the caller's
	Job   uint64
	Parts []partView
}

// partView is a MIG slice or a time-sliced share drawn inside its GPU.
type partView struct {
	X, W  float64
	Class string
	Job   uint64
}

type jobRow struct {
	ID                      uint64
	Name, Tenant, Workspace string
	State                   domain.JobState
	Class                   string
	GPUs                    string // what it asks for: 16 GPUs, 2 x 3g.40gb, 0.5 GPU
	Servers                 string
}

type tenantColor struct{ Name, Class string }

// palette is the number of tenant colours in console.css (t0..t9).
const palette = 10

// colours gives each tenant the caller sees a colour class, in name order.
func colours(tenants []domain.Tenant) map[string]string {
	names := make([]string, len(tenants))
	for i, t := range tenants {
		names[i] = t.Name
	}
	slices.Sort(names)
	m := map[string]string{}
	for i, n := range names {
		m[n] = fmt.Sprintf("t%d", i%palette)
	}
	return m
}

func asks(j *domain.Job) string {
	switch {
	case j.MIGCount > 0:
		return fmt.Sprintf("%d x %s", j.MIGCount, j.MIGProfile)
	case j.Share > 0:
		return fmt.Sprintf("%g GPU", j.Share)
	case j.GPUs == 1:
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", j.GPUs)
}

func (c *Console) clusterData(r *http.Request, q *request) (string, any, error) {
	ctx := r.Context()
	var tenants []domain.Tenant
	if err := q.api.get(ctx, "/v1/tenants", &tenants); err != nil {
		return "", nil, err
	}
	var jobs []domain.Job
	if err := q.api.get(ctx, "/v1/jobs?state="+liveStates, &jobs); err != nil {
		return "", nil, err
	}
	col := colours(tenants)
	v := &clusterView{}
	for _, t := range tenants {
		v.Tenants = append(v.Tenants, tenantColor{t.Name, col[t.Name]})
	}
	slices.SortFunc(v.Tenants, func(a, b tenantColor) int { return cmp.Compare(a.Name, b.Name) })
	var topo domain.TopologyView
	err := q.api.get(ctx, "/v1/topology", &topo)
	switch {
	case err == nil && topo.Topology != nil:
		var nodes []domain.NodeView
		if err := q.api.get(ctx, "/v1/nodes", &nodes); err != nil {
			return "", nil, err
		}
		v.Full = true
		buildFull(v, topo.Topology, nodes, jobs, col)
	case err == nil || domain.CodeOf(err) == domain.CodePermissionDenied:
		// No inventory to read (a tenant's token), or none applied yet:
		// the servers the caller's jobs hold.
		buildOwn(v, jobs, col)
	default:
		return "", nil, err
	}
	for i := range jobs {
		j := &jobs[i]
		var servers []string
		for _, p := range j.Placement {
			servers = append(servers, p.Server)
		}
		v.Jobs = append(v.Jobs, jobRow{ID: j.ID, Name: j.Name, Tenant: j.Tenant, Workspace: j.Workspace, State: j.State,
			Class: col[j.Tenant], GPUs: asks(j), Servers: strings.Join(servers, ", ")})
	}
	return "Cluster", v, nil
}

// occupant is what holds one GPU: a whole-GPU job, or MIG slices and shares.
type occupant struct {
	whole *domain.Job
	parts []partView
	jobs  []*domain.Job
}

// occupancy maps server -> GPU index -> what holds it.
func occupancy(jobs []domain.Job, col map[string]string, model func(server string) string) map[string]map[int]*occupant {
	occ := map[string]map[int]*occupant{}
	at := func(server string, gpu int) *occupant {
		m := occ[server]
		if m == nil {
			m = map[int]*occupant{}
			occ[server] = m
		}
		o := m[gpu]
		if o == nil {
			o = &occupant{}
			m[gpu] = o
		}
		return o
	}
	shareAt := map[[2]string]float64{}
	for i := range jobs {
		j := &jobs[i]
		for _, p := range j.Placement {
			switch {
			case len(p.MIG) > 0:
				for _, s := range p.MIG {
					size := migSlots(s.Profile, model(p.Server), j.GPUModel)
					o := at(p.Server, s.GPU)
					o.parts = append(o.parts, partView{X: float64(s.Start) * cell / memorySlots, W: float64(size) * cell / memorySlots, Class: col[j.Tenant], Job: j.ID})
					o.jobs = append(o.jobs, j)
				}
			case p.Share > 0 && len(p.GPUs) > 0:
				o := at(p.Server, p.GPUs[0])
				k := [2]string{p.Server, fmt.Sprint(p.GPUs[0])}
				o.parts = append(o.parts, partView{X: shareAt[k] * cell, W: p.Share * cell, Class: col[j.Tenant], Job: j.ID})
				shareAt[k] += p.Share
				o.jobs = append(o.jobs, j)
			default:
				for _, g := range p.GPUs {
					o := at(p.Server, g)
					o.whole = j
					o.jobs = append(o.jobs, j)
				}
			}
		}
	}
	return occ
}

// migSlots is how many of a GPU's 8 memory slots a MIG profile covers, by
// the first of models that has it (the server's, the job's), else the
// first model of the catalog that does.
func migSlots(profile string, models ...string) int {
	for _, m := range append(models, mig.Models()...) {
		if m == "" {
			continue
		}
		if p, err := mig.Lookup(m, profile); err == nil {
			return p.MemorySlices
		}
	}
	return 1
}

func gpuOf(x int, o *occupant) gpuView {
	g := gpuView{X: x}
	if o == nil {
		return g
	}
	if o.whole != nil {
		g.Job = o.whole.ID
		return g
	}
	for _, p := range o.parts {
		p.X += float64(x)
		g.Parts = append(g.Parts, p)
	}
	return g
}

func describeGPU(server string, idx int, o *occupant) string {
	if o == nil || len(o.jobs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\ngpu%d:", idx)
	for _, j := range o.jobs {
		fmt.Fprintf(&b, " job %d", j.ID)
		if j.Name != "" {
			fmt.Fprintf(&b, " %s", j.Name)
		}
		fmt.Fprintf(&b, " (%s/%s)", j.Tenant, j.Workspace)
	}
	return b.String()
}

// buildFull lays out every server of the inventory by stripe, GPU i under
// rail i's leaf.
func buildFull(v *clusterView, t *domain.Topology, nodes []domain.NodeView, jobs []domain.Job, col map[string]string) {
	byName := map[string]*domain.NodeView{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	models := map[string]string{}
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			for _, s := range f.Servers {
				models[s.Name] = s.GPUModel
			}
		}
	}
	occ := occupancy(jobs, col, func(s string) string { return models[s] })
	for _, site := range t.Sites {
		for _, f := range site.Fabrics {
			stripes := map[int]*stripeView{}
			var order []int
			get := func(n int) *stripeView {
				s := stripes[n]
				if s == nil {
					s = &stripeView{Label: fmt.Sprintf("%s/%s stripe %d", site.Name, f.Name, n)}
					stripes[n] = s
					order = append(order, n)
				}
				return s
			}
			for _, l := range f.Leaves {
				if l.Stripe != nil && l.Rail != nil {
					s := get(*l.Stripe)
					s.Leaves = append(s.Leaves, leafView{Rail: *l.Rail, Name: l.Name})
				}
			}
			for _, srv := range f.Servers {
				s := get(srv.Stripe)
				sv := serverView{Name: srv.Name, Title: srv.Name + " · " + srv.GPUModel, Drain: true}
				var marks []string
				if n := byName[srv.Name]; n != nil {
					if n.Condition.Cordoned {
						marks = append(marks, "cordoned")
					}
					if n.Condition.Draining {
						marks = append(marks, "draining")
					}
					if n.Condition.Unhealthy {
						marks = append(marks, "unhealthy")
					}
					for _, hc := range n.Conditions {
						if hc.Type != domain.CondHeartbeat {
							marks = append(marks, "drifted")
							break
						}
					}
					if n.Condition.Reason != "" {
						sv.Title += " · " + n.Condition.Reason
					}
				}
				if len(marks) > 0 {
					sv.Class, sv.Marked = strings.Join(marks, " "), true
					sv.Title += " · " + sv.Class
				}
				for i := 0; i < srv.GPUs; i++ {
					o := occ[srv.Name][i]
					g := gpuOf(pad+i*(cell+gap), o)
					if g.Job != 0 {
						g.Class = col[o.whole.Tenant]
					}
					if o != nil {
						s.Used++
					}
					sv.GPUs = append(sv.GPUs, g)
					sv.Title += describeGPU(srv.Name, i, o)
				}
				s.GPUs += srv.GPUs
				s.Servers = append(s.Servers, sv)
			}
			for _, n := range order {
				s := stripes[n]
				slices.SortFunc(s.Leaves, func(a, b leafView) int { return cmp.Compare(a.Rail, b.Rail) })
				layout(s)
				v.Servers += len(s.Servers)
				v.GPUs += s.GPUs
				v.UsedGPUs += s.Used
				v.Stripes = append(v.Stripes, *s)
			}
		}
	}
}

// buildOwn draws the servers the caller's jobs hold: only the GPUs of its
// own jobs are known to it; the others are drawn as unknown.
func buildOwn(v *clusterView, jobs []domain.Job, col map[string]string) {
	occ := occupancy(jobs, col, func(string) string { return "" })
	names := make([]string, 0, len(occ))
	for n := range occ {
		names = append(names, n)
	}
	slices.Sort(names)
	s := stripeView{Label: "servers your jobs hold"}
	for _, n := range names {
		top := 0
		for i := range occ[n] {
			top = max(top, i+1)
		}
		sv := serverView{Name: n, Title: n}
		for i := 0; i < top; i++ {
			o := occ[n][i]
			g := gpuOf(pad+i*(cell+gap), o)
			switch {
			case o == nil:
				g.Class = "unk"
			case g.Job != 0:
				g.Class = col[o.whole.Tenant]
			}
			if o != nil {
				s.Used++
			}
			sv.GPUs = append(sv.GPUs, g)
			sv.Title += describeGPU(n, i, o)
		}
		s.Servers = append(s.Servers, sv)
	}
	if len(s.Servers) > 0 {
		layout(&s)
		v.Stripes = append(v.Stripes, s)
		v.Servers, v.UsedGPUs, v.GPUs = len(s.Servers), s.Used, s.Used
	}
}

// layout places a stripe's servers in rows of perRow.
func layout(s *stripeView) {
	w := 0
	for _, sv := range s.Servers {
		w = max(w, len(sv.GPUs))
	}
	sw := 2*pad + w*(cell+gap) - gap
	sh := 2*pad + cell
	for i := range s.Servers {
		s.Servers[i].X = (i % perRow) * (sw + serverGapX)
		s.Servers[i].Y = (i / perRow) * (sh + serverGapY)
		s.Servers[i].W, s.Servers[i].H = sw, sh
	}
	rows := (len(s.Servers) + perRow - 1) / perRow
	s.Width = min(len(s.Servers), perRow)*(sw+serverGapX) - serverGapX
	s.Height = rows*(sh+serverGapY) - serverGapY
	s.PxW, s.PxH = s.Width*6/5, s.Height*6/5
}
