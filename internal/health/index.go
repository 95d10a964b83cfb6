package health

import (
	"cmp"
	"iter"
	"slices"
	"strconv"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// Source is what the index reads of the state; state.View provides it
// (valid only inside FSM.Read: Build copies what it keeps).
type Source interface {
	Topology() *domain.Topology
	LiveJobs() iter.Seq[*domain.Job]
	Host(node string) (*domain.HostStatus, bool)
}

// holdingSource is a Source that lists the live jobs holding GPUs apart
// (state.View): Build then reads those, not every live job, under the
// state's read lock (issue 18).
type holdingSource interface {
	HoldingJobs() iter.Seq[*domain.Job]
}

// Hop kinds.
const (
	HopGPU    = "gpu"
	HopNIC    = "nic"
	HopPort   = "port"   // the leaf port a NIC is cabled to
	HopUplink = "uplink" // a leaf-to-spine link
)

// Hop is one element of a job's path and the telemetry entities that
// speak for it.
type Hop struct {
	Kind string
	Name string
	// Keys are the entities whose readings count for the hop: a GPU by
	// index and by UUID (when the node agent reported one), a NIC by name
	// and RDMA device, a port by its switch port, an uplink by both ends.
	Keys []telemetry.Key
	// port is the hop's index in the topology's switch-side hops, -1 for
	// GPUs and NICs.
	port int
}

// Path is one job's path.
type Path struct {
	Job                     uint64
	Name, Tenant, Workspace string
	Hops                    []Hop
	placement               []domain.Placement // what the path was built from
	facts                   []string           // the node agents' facts it read (GPU UUIDs), by placement
}

// topo is what the index derives from the topology alone.
type topo struct {
	t        *domain.Topology
	servers  map[string]*serverInfo
	cables   map[[2]string]domain.Cable // server, nic -> its cable
	leaves   map[string]*leafInfo
	ports    []Hop                 // every server-link port and uplink, for hotspots
	portHops map[telemetry.Key]int // either end of a port hop -> its index
}

type serverInfo struct {
	s    *domain.Server
	rail bool // the server's fabric is rail-optimized
}

type leafInfo struct {
	rail    int // -1 when the leaf has none
	uplinks []Hop
}

// Index is the correlation index: every live job's path and, for every
// switch port and uplink, the jobs whose path holds it.
type Index struct {
	topo  *topo
	paths map[uint64]*Path
	// byPort holds, per switch-side hop (topo.ports), the jobs on it by ID.
	byPort [][]uint64
}

// Build returns the index of src's live jobs, reusing prev's topology
// lookups when the topology is the same object and the paths of jobs whose
// placement did not change.
func Build(src Source, prev *Index) *Index {
	t := src.Topology()
	var tp *topo
	if prev != nil && prev.topo.t == t {
		tp = prev.topo
	} else {
		tp = newTopo(t)
	}
	ix := &Index{topo: tp, paths: map[uint64]*Path{}, byPort: make([][]uint64, len(tp.ports))}
	jobs := src.LiveJobs()
	if h, ok := src.(holdingSource); ok {
		jobs = h.HoldingJobs()
	}
	for j := range jobs {
		if !j.State.HoldsGPUs() || len(j.Placement) == 0 {
			continue
		}
		var p *Path
		if prev != nil && prev.topo == tp {
			if old, ok := prev.paths[j.ID]; ok && slices.EqualFunc(old.placement, j.Placement, domain.Placement.Equal) &&
				old.Tenant == j.Tenant && old.Workspace == j.Workspace && old.Name == j.Name && slices.Equal(old.facts, factsOf(j, src)) {
				p = old
			}
		}
		if p == nil {
			p = tp.path(j, src)
		}
		ix.paths[j.ID] = p
		for _, h := range p.Hops {
			if h.port >= 0 {
				ix.byPort[h.port] = append(ix.byPort[h.port], j.ID)
			}
		}
	}
	for i, ids := range ix.byPort {
		if len(ids) > 1 {
			slices.Sort(ids)
			ix.byPort[i] = slices.Compact(ids)
		}
	}
	return ix
}

// Path returns a job's path.
func (ix *Index) Path(id uint64) (*Path, bool) {
	p, ok := ix.paths[id]
	return p, ok
}

// JobsOn returns the jobs whose path holds the switch port k (either end
// of an uplink), by ID.
func (ix *Index) JobsOn(k telemetry.Key) []uint64 {
	if i, ok := ix.topo.portHops[k]; ok {
		return ix.byPort[i]
	}
	return nil
}

// Jobs returns the indexed jobs' IDs, in order.
func (ix *Index) Jobs() []uint64 {
	out := make([]uint64, 0, len(ix.paths))
	for id := range ix.paths {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func portKey(device, port string) telemetry.Key {
	return telemetry.Key{Kind: telemetry.KindPort, Device: device, Port: port}
}

func newTopo(t *domain.Topology) *topo {
	tp := &topo{t: t, servers: map[string]*serverInfo{}, cables: map[[2]string]domain.Cable{}, leaves: map[string]*leafInfo{}, portHops: map[telemetry.Key]int{}}
	if t == nil {
		return tp
	}
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			f := &t.Sites[si].Fabrics[fi]
			for i := range f.Servers {
				tp.servers[f.Servers[i].Name] = &serverInfo{s: &f.Servers[i], rail: f.RailOptimized}
			}
			for _, l := range f.Leaves {
				li := &leafInfo{rail: -1}
				if l.Rail != nil {
					li.rail = *l.Rail
				}
				tp.leaves[l.Name] = li
			}
			for _, c := range f.Cables {
				tp.cables[[2]string{c.Server, c.NIC}] = c
				tp.addPort(Hop{Kind: HopPort, Name: c.Leaf + "/" + c.Port, Keys: []telemetry.Key{portKey(c.Leaf, c.Port)}})
			}
			for _, u := range f.Uplinks {
				h := Hop{Kind: HopUplink, Name: u.Leaf + "/" + u.LeafPort + "-" + u.Spine + "/" + u.SpinePort,
					Keys: []telemetry.Key{portKey(u.Leaf, u.LeafPort), portKey(u.Spine, u.SpinePort)}}
				h = tp.addPort(h)
				if li := tp.leaves[u.Leaf]; li != nil {
					li.uplinks = append(li.uplinks, h)
				}
			}
		}
	}
	return tp
}

func (tp *topo) addPort(h Hop) Hop {
	h.port = len(tp.ports)
	for _, k := range h.Keys {
		tp.portHops[k] = h.port
	}
	tp.ports = append(tp.ports, h)
	return h
}

// path builds a job's path (see the package doc for the model).
func (tp *topo) path(j *domain.Job, src Source) *Path {
	p := &Path{Job: j.ID, Name: j.Name, Tenant: j.Tenant, Workspace: j.Workspace,
		placement: slices.Clone(j.Placement), facts: factsOf(j, src)}
	type endpoint struct{ leaf, server string }
	var ends []endpoint
	railOpt := true
	servers := map[string]bool{}
	railsOf := map[string]map[int]bool{} // server -> rails its endpoints use
	seenPort := map[string]bool{}
	for _, pl := range j.Placement {
		si := tp.servers[pl.Server]
		if si == nil {
			continue // a server the topology lost: nothing to join
		}
		servers[pl.Server] = true
		railOpt = railOpt && si.rail
		var uuids map[int]string
		if h, ok := src.Host(pl.Server); ok && h != nil && h.Facts != nil {
			uuids = map[int]string{}
			for _, g := range h.Facts.GPUs {
				uuids[g.Index] = g.UUID
			}
		}
		for _, g := range pl.GPUs {
			gh := Hop{port: -1, Kind: HopGPU, Name: pl.Server + "/gpu" + strconv.Itoa(g),
				Keys: []telemetry.Key{{Kind: telemetry.KindGPU, Device: pl.Server, Port: strconv.Itoa(g)}}}
			if u := uuids[g]; u != "" {
				gh.Keys = append(gh.Keys, telemetry.Key{Kind: telemetry.KindGPU, Device: pl.Server, Port: u})
			}
			p.Hops = append(p.Hops, gh)
			for _, n := range nicsOf(si.s, g) {
				nh := Hop{port: -1, Kind: HopNIC, Name: pl.Server + "/" + n.Name,
					Keys: []telemetry.Key{{Kind: telemetry.KindNIC, Device: pl.Server, Port: n.Name}}}
				if n.RDMADevice != "" && n.RDMADevice != n.Name {
					nh.Keys = append(nh.Keys, telemetry.Key{Kind: telemetry.KindNIC, Device: pl.Server, Port: n.RDMADevice})
				}
				p.Hops = append(p.Hops, nh)
				c, ok := tp.cables[[2]string{pl.Server, n.Name}]
				if !ok {
					continue
				}
				name := c.Leaf + "/" + c.Port
				if !seenPort[name] {
					seenPort[name] = true
					p.Hops = append(p.Hops, tp.ports[tp.portHops[portKey(c.Leaf, c.Port)]])
				}
				ends = append(ends, endpoint{leaf: c.Leaf, server: pl.Server})
				if railsOf[pl.Server] == nil {
					railsOf[pl.Server] = map[int]bool{}
				}
				railsOf[pl.Server][n.Rail] = true
			}
		}
	}
	if len(servers) < 2 {
		return p
	}
	// Leaves whose uplinks the job may cross.
	cross := map[string]bool{}
	aligned := railOpt
	if aligned {
		var first map[int]bool
		for _, rs := range railsOf {
			if first == nil {
				first = rs
			} else if !sameSet(first, rs) {
				aligned = false
				break
			}
		}
		aligned = aligned && len(railsOf) == len(servers)
	}
	if aligned {
		byRail := map[int]map[string]bool{}
		for _, e := range ends {
			r := tp.leaves[e.leaf].railOr(-1)
			if byRail[r] == nil {
				byRail[r] = map[string]bool{}
			}
			byRail[r][e.leaf] = true
		}
		for _, ls := range byRail {
			if len(ls) > 1 {
				for l := range ls {
					cross[l] = true
				}
			}
		}
	} else {
		ls := map[string]bool{}
		for _, e := range ends {
			ls[e.leaf] = true
		}
		if len(ls) > 1 {
			cross = ls
		}
	}
	for _, l := range slices.Sorted(mapKeys(cross)) {
		if li := tp.leaves[l]; li != nil {
			p.Hops = append(p.Hops, li.uplinks...)
		}
	}
	return p
}

// factsOf is the fingerprint of each placement server's reported facts
// (a path holds their GPU UUIDs: new facts, a new path).
func factsOf(j *domain.Job, src Source) []string {
	out := make([]string, len(j.Placement))
	for i, pl := range j.Placement {
		if h, ok := src.Host(pl.Server); ok && h != nil {
			out[i] = h.FactsHash
		}
	}
	return out
}

func (li *leafInfo) railOr(d int) int {
	if li == nil {
		return d
	}
	return li.rail
}

// nicsOf returns the NICs serving GPU g: those closest to it, else those
// of its rail (rail i is GPU i's).
func nicsOf(s *domain.Server, g int) []domain.NIC {
	var out []domain.NIC
	for _, n := range s.NICs {
		if n.GPU == g {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, n := range s.NICs {
		if n.GPU < 0 && n.Rail == g {
			out = append(out, n)
		}
	}
	return out
}

func sameSet(a, b map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func mapKeys[K cmp.Ordered, V any](m map[K]V) iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
