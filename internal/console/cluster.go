package console

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strconv"
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
	maxPx       = 1240
	// sliver separates the slices and shares drawn inside one GPU.
	sliver = 0.4
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
	// Marked: cordoned, draining, unhealthy or drifted.
	Marked bool
	jobs   []serverJob
}

// serverJob is a job on a server and the GPUs it holds there.
type serverJob struct {
	j    *domain.Job
	gpus []int
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

// colours gives each tenant the caller sees a colour class: the one its
// name hashes to, or the next free one when another tenant of the page
// has it, so a tenant keeps its colour in every view (its own and the
// admin's) unless two collide.
func colours(tenants []domain.Tenant) map[string]string {
	names := make([]string, len(tenants))
	for i, t := range tenants {
		names[i] = t.Name
	}
	slices.Sort(names)
	var taken [palette]bool
	m := map[string]string{}
	for i, n := range names {
		h := fnv.New32a()
		h.Write([]byte(n))
		c := int(h.Sum32() % palette)
		for k := 0; k < palette && i < palette && taken[c]; k++ {
			c = (c + 1) % palette
		}
		taken[c] = true
		m[n] = fmt.Sprintf("t%d", c)
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
	jobs, err := getAll[domain.Job](ctx, q.api, "/v1/jobs?state="+liveStates, false)
	if err != nil {
		return "", nil, err
	}
	col := colours(tenants)
	v := &clusterView{}
	for _, t := range tenants {
		v.Tenants = append(v.Tenants, tenantColor{t.Name, col[t.Name]})
	}
	slices.SortFunc(v.Tenants, func(a, b tenantColor) int { return cmp.Compare(a.Name, b.Name) })
	// The inventory, as an admin reads it: every server with its stripe,
	// condition and leaves (GET /v1/nodes, not the whole topology: that
	// document is megabytes for 2,048 servers).
	var nodes []domain.NodeView
	err = q.api.get(ctx, "/v1/nodes", &nodes)
	switch {
	case err == nil && len(nodes) > 0:
		v.Full = true
		buildFull(v, nodes, jobs, col)
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
					o.parts = append(o.parts, partView{X: float64(s.Start) * cell / memorySlots, W: float64(size)*cell/memorySlots - sliver, Class: col[j.Tenant], Job: j.ID})
					o.jobs = append(o.jobs, j)
				}
			case p.Share > 0 && len(p.GPUs) > 0:
				o := at(p.Server, p.GPUs[0])
				k := [2]string{p.Server, fmt.Sprint(p.GPUs[0])}
				o.parts = append(o.parts, partView{X: shareAt[k] * cell, W: p.Share*cell - sliver, Class: col[j.Tenant], Job: j.ID})
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

// addJobs notes on the server the jobs of one GPU, once each, for its
// tooltip.
func (sv *serverView) addJobs(idx int, o *occupant) {
	if o == nil {
		return
	}
	for _, j := range o.jobs {
		if n := len(sv.jobs); n > 0 && sv.jobs[n-1].j == j {
			sv.jobs[n-1].gpus = append(sv.jobs[n-1].gpus, idx)
			continue
		}
		seen := false
		for k := range sv.jobs {
			if sv.jobs[k].j == j {
				sv.jobs[k].gpus, seen = append(sv.jobs[k].gpus, idx), true
			}
		}
		if !seen {
			sv.jobs = append(sv.jobs, serverJob{j: j, gpus: []int{idx}})
		}
	}
}

// buildFull lays out every server of the inventory by stripe, GPU i under
// rail i's leaf.
func buildFull(v *clusterView, nodes []domain.NodeView, jobs []domain.Job, col map[string]string) {
	models := make(map[string]string, len(nodes))
	for i := range nodes {
		models[nodes[i].Name] = nodes[i].GPUModel
	}
	occ := occupancy(jobs, col, func(s string) string { return models[s] })
	type key struct {
		site, fabric string
		stripe       int
	}
	stripes := map[key]*stripeView{}
	var order []key
	for i := range nodes {
		n := &nodes[i]
		k := key{n.Site, n.Fabric, n.Stripe}
		s := stripes[k]
		if s == nil {
			s = &stripeView{Label: fmt.Sprintf("%s/%s stripe %d", n.Site, n.Fabric, n.Stripe)}
			for rail, l := range n.Leaves {
				s.Leaves = append(s.Leaves, leafView{Rail: rail, Name: l})
			}
			stripes[k] = s
			order = append(order, k)
		}
		sv := serverView{Name: n.Name, Title: n.Name + " · " + n.GPUModel}
		var marks []string
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
		if len(marks) > 0 {
			sv.Class, sv.Marked = strings.Join(marks, " "), true
			sv.Title += " · " + sv.Class
		}
		for g := 0; g < n.GPUs; g++ {
			o := occ[n.Name][g]
			gv := gpuOf(pad+g*(cell+gap), o)
			if gv.Job != 0 {
				gv.Class = col[o.whole.Tenant]
			}
			if o != nil {
				s.Used++
			}
			sv.GPUs = append(sv.GPUs, gv)
			sv.addJobs(g, o)
		}
		s.GPUs += n.GPUs
		s.Servers = append(s.Servers, sv)
	}
	for _, k := range order {
		s := stripes[k]
		layout(s)
		v.Servers += len(s.Servers)
		v.GPUs += s.GPUs
		v.UsedGPUs += s.Used
		v.Stripes = append(v.Stripes, *s)
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
			sv.addJobs(i, o)
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
	// Up to three times the user units, as wide as the page at most: a
	// small cluster is not drawn with pinheads, a large one still fits.
	s.PxW = min(s.Width*3, maxPx)
	s.PxH = s.Height * s.PxW / max(s.Width, 1)
}

// SVG draws the stripe: a rectangle per server (its tooltip and what a
// click hits, with the job of each GPU in data-jobs), and the GPU cells as
// one path per colour. 16,384 cells as elements took the browser over a
// second to lay out and paint, and the template most of a second to
// render; a few hundred paths take neither. It is written by hand: text
// is escaped, everything else is numbers and the console's own class
// names.
func (s *stripeView) SVG() template.HTML {
	var b bytes.Buffer
	b.Grow(len(s.Servers) * 300)
	num := func(n int) { b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(n), 10)) }
	paths := map[string]*bytes.Buffer{}
	var classes []string
	cellAt := func(class string, x, y, w float64) {
		p := paths[class]
		if p == nil {
			p = &bytes.Buffer{}
			paths[class] = p
			classes = append(classes, class)
		}
		p.WriteByte('M')
		p.Write(strconv.AppendFloat(p.AvailableBuffer(), x, 'f', -1, 64))
		p.WriteByte(' ')
		p.Write(strconv.AppendFloat(p.AvailableBuffer(), y, 'f', -1, 64))
		p.WriteByte('h')
		p.Write(strconv.AppendFloat(p.AvailableBuffer(), w, 'f', -1, 64))
		p.WriteString("v10h-")
		p.Write(strconv.AppendFloat(p.AvailableBuffer(), w, 'f', -1, 64))
		p.WriteByte('z')
	}
	for i := range s.Servers {
		sv := &s.Servers[i]
		b.WriteString(`<g class="srv`)
		if sv.Marked {
			b.WriteByte(' ')
			b.WriteString(html.EscapeString(sv.Class))
		}
		b.WriteString(`" transform="translate(`)
		num(sv.X)
		b.WriteByte(' ')
		num(sv.Y)
		b.WriteString(`)" data-s="`)
		b.WriteString(html.EscapeString(sv.Name))
		b.WriteString(`" data-jobs="`)
		for k, g := range sv.GPUs {
			if k > 0 {
				b.WriteByte(' ')
			}
			switch {
			case g.Job != 0:
				num(int(g.Job))
			case len(g.Parts) > 0:
				for n, p := range g.Parts {
					if n > 0 {
						b.WriteByte('+')
					}
					num(int(p.Job))
				}
			default:
				b.WriteByte('-')
			}
		}
		b.WriteString(`"><title>`)
		b.WriteString(html.EscapeString(sv.Title))
		// The jobs by ID only: a click names them (a 2,048-server page
		// would carry every job's name once per server otherwise).
		for k, sj := range sv.jobs {
			if k == 0 {
				b.WriteString(" · job ")
			} else {
				b.WriteString(", ")
			}
			num(int(sj.j.ID))
			b.WriteString(" gpu ")
			b.WriteString(joinInts(sj.gpus))
		}
		b.WriteString(`</title><rect width="`)
		num(sv.W)
		b.WriteString(`" height="`)
		num(sv.H)
		b.WriteString(`"/></g>`)
		for _, g := range sv.GPUs {
			x, y := float64(sv.X+g.X), float64(sv.Y+pad)
			switch {
			case len(g.Parts) > 0:
				cellAt("free", x, y, cell)
				for _, p := range g.Parts {
					cellAt(p.Class, float64(sv.X)+p.X, y, p.W)
				}
			case g.Class == "":
				cellAt("free", x, y, cell)
			default:
				cellAt(g.Class, x, y, cell)
			}
		}
	}
	b.WriteString("\n")
	// Free cells first, so slices and shares are drawn over them.
	slices.SortStableFunc(classes, func(a, b string) int {
		return cmp.Compare(btoi(b == "free"), btoi(a == "free"))
	})
	for _, c := range classes {
		b.WriteString(`<path class="cells `)
		b.WriteString(c)
		b.WriteString(`" d="`)
		b.Write(paths[c].Bytes())
		b.WriteString("\"/>\n")
	}
	return template.HTML(b.String())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
