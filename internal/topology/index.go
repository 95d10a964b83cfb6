package topology

import (
	"maps"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Index answers the graph questions other packages ask of a normalized,
// valid topology. It points into the topology it was built from: do not
// change that topology while the index is in use. Lists are in file order.
type Index struct {
	servers   map[string]serverEntry
	leaves    map[string]*domain.Switch
	spines    map[string]*domain.Switch
	fabrics   map[string]*domain.Fabric
	cables    map[nicKey]*domain.Cable
	stripes   map[stripeKey][]*domain.Server
	nvlink    map[string][]*domain.Server
	totalGPUs int
	byModel   map[string]int
}

type serverEntry struct {
	srv    *domain.Server
	fabric string
}

type stripeKey struct {
	fabric string
	stripe int
}

// Distance is how close two servers are, nearest first. The scheduler packs
// a job at the smallest distance that fits it.
type Distance int

const (
	SameServer       Distance = iota // the same server
	SameNVLinkDomain                 // one NVLink/NVSwitch domain
	SameStripe                       // one leaf hop on every rail
	SameFabric                       // through the spines
	OtherFabric                      // different fabrics or sites
)

// NewIndex indexes t. Where names repeat (only in a topology Validate
// refused) the first wins.
func NewIndex(t *domain.Topology) *Index {
	x := &Index{
		servers: map[string]serverEntry{}, leaves: map[string]*domain.Switch{}, spines: map[string]*domain.Switch{},
		fabrics: map[string]*domain.Fabric{}, cables: map[nicKey]*domain.Cable{},
		stripes: map[stripeKey][]*domain.Server{}, nvlink: map[string][]*domain.Server{}, byModel: map[string]int{},
	}
	if t == nil {
		return x
	}
	for si := range t.Sites {
		site := &t.Sites[si]
		for fi := range site.Fabrics {
			f := &site.Fabrics[fi]
			ref := domain.Ref(site.Name, f.Name)
			if _, ok := x.fabrics[ref]; !ok {
				x.fabrics[ref] = f
			}
			for i := range f.Spines {
				addFirst(x.spines, f.Spines[i].Name, &f.Spines[i])
			}
			for i := range f.Leaves {
				addFirst(x.leaves, f.Leaves[i].Name, &f.Leaves[i])
			}
			for i := range f.Servers {
				s := &f.Servers[i]
				if _, dup := x.servers[s.Name]; dup {
					continue
				}
				x.servers[s.Name] = serverEntry{srv: s, fabric: ref}
				k := stripeKey{ref, s.Stripe}
				x.stripes[k] = append(x.stripes[k], s)
				d := s.NVLinkDomain
				if d == "" {
					d = s.Name
				}
				x.nvlink[d] = append(x.nvlink[d], s)
				x.totalGPUs += s.GPUs
				x.byModel[s.GPUModel] += s.GPUs
			}
			for i := range f.Cables {
				c := &f.Cables[i]
				addFirst(x.cables, nicKey{c.Server, c.NIC}, c)
			}
		}
	}
	return x
}

func addFirst[K comparable, V any](m map[K]V, k K, v V) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// Server returns the named server and the fabric holding it as "site/fabric",
// or nil and "".
func (x *Index) Server(name string) (*domain.Server, string) {
	e, ok := x.servers[name]
	if !ok {
		return nil, ""
	}
	return e.srv, e.fabric
}

// Fabric returns the fabric named "site/fabric", or nil.
func (x *Index) Fabric(ref string) *domain.Fabric { return x.fabrics[ref] }

// Leaf returns the named leaf, or nil.
func (x *Index) Leaf(name string) *domain.Switch { return x.leaves[name] }

// Spine returns the named spine, or nil.
func (x *Index) Spine(name string) *domain.Switch { return x.spines[name] }

// LeafFor returns the leaf and port a server NIC is cabled to, and the cable
// (with its link addresses); cable is nil when the NIC has no cable.
func (x *Index) LeafFor(server, nic string) (leaf, port string, cable *domain.Cable) {
	c, ok := x.cables[nicKey{server, nic}]
	if !ok {
		return "", "", nil
	}
	return c.Leaf, c.Port, c
}

// ServersInStripe returns the servers of one stripe of a fabric ("site/fabric").
func (x *Index) ServersInStripe(fabric string, stripe int) []*domain.Server {
	return x.stripes[stripeKey{fabric, stripe}]
}

// NVLinkDomains maps each NVLink domain to its servers. The map is the
// caller's; the server lists are shared and must not be modified.
func (x *Index) NVLinkDomains() map[string][]*domain.Server { return maps.Clone(x.nvlink) }

// TotalGPUs counts the GPUs of every server.
func (x *Index) TotalGPUs() int { return x.totalGPUs }

// GPUsByModel counts GPUs per model. The map is the caller's.
func (x *Index) GPUsByModel() map[string]int { return maps.Clone(x.byModel) }

// Distance says how close servers a and b are; ok is false when either is
// not in the topology.
func (x *Index) Distance(a, b string) (d Distance, ok bool) {
	ea, oka := x.servers[a]
	eb, okb := x.servers[b]
	switch {
	case !oka || !okb:
		return 0, false
	case a == b:
		return SameServer, true
	case ea.fabric != eb.fabric:
		return OtherFabric, true
	case nvlinkDomain(ea.srv) == nvlinkDomain(eb.srv):
		return SameNVLinkDomain, true
	case ea.srv.Stripe == eb.srv.Stripe:
		return SameStripe, true
	}
	return SameFabric, true
}

func nvlinkDomain(s *domain.Server) string {
	if s.NVLinkDomain == "" {
		return s.Name
	}
	return s.NVLinkDomain
}
