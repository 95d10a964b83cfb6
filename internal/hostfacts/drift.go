package hostfacts

import (
	"fmt"
	"sort"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// DriftInput is a server as declared and as reported.
type DriftInput struct {
	Server        *domain.Server
	RailOptimized bool
	Facts         *domain.HostFacts
	// Baseline pins the UUID of each declared GPU index (empty before the
	// first report).
	Baseline []domain.BaselineGPU
	// Peers are the other servers the inventory puts in the same NVLink
	// domain, with the NVLink cluster each reported ("" when it reported
	// none or has no agent).
	Peers map[string]string
}

// maxItems bounds how many mismatches of one kind a condition spells out.
const maxItems = 4

// Compare returns one condition per drift kind found, in DriftKinds order,
// each message naming what differs (the declared and the reported value).
// It is pure and deterministic: the state machine calls it while applying
// a report.
func Compare(in DriftInput) []domain.HostCondition {
	s, f := in.Server, in.Facts
	found := map[string][]string{}
	add := func(kind, format string, args ...any) {
		found[kind] = append(found[kind], fmt.Sprintf(format, args...))
	}

	if len(f.GPUs) != s.GPUs {
		add(domain.DriftGPUCount, "%d GPUs reported, the inventory declares %d", len(f.GPUs), s.GPUs)
	}
	byProduct := map[string][]int{}
	for _, g := range f.GPUs {
		if g.Model != s.GPUModel {
			byProduct[g.Product] = append(byProduct[g.Product], g.Index)
		}
	}
	for _, p := range sortedKeys(byProduct) {
		model := ModelOf(p, memoryOf(f, byProduct[p][0]))
		if model == "" {
			model = "no known model"
		}
		add(domain.DriftGPUModel, "GPU %s is %s (%s), the inventory declares %s", intList(byProduct[p]), p, model, s.GPUModel)
	}

	reported := map[string]*domain.HostGPU{}
	for i := range f.GPUs {
		reported[f.GPUs[i].UUID] = &f.GPUs[i]
	}
	pinned := map[string]int{}
	for _, b := range in.Baseline {
		pinned[b.UUID] = b.Index
		if reported[b.UUID] == nil {
			add(domain.DriftGPUMissing, "GPU %d (%s, bus %s) is no longer reported", b.Index, b.UUID, b.PCIBusID)
		}
	}
	if len(in.Baseline) > 0 {
		for _, g := range f.GPUs {
			if _, ok := pinned[g.UUID]; !ok {
				add(domain.DriftGPUUUID, "%s (bus %s) is not in the server's GPU baseline (replaced or added; accept it with jobfabric host accept %s)", g.UUID, g.PCIBusID, s.Name)
			}
		}
	}

	if s.Driver != "" && f.Driver != "" && f.Driver != s.Driver {
		add(domain.DriftDriver, "driver %s is running, the inventory declares %s", f.Driver, s.Driver)
	}

	// declaredIndex maps a reported GPU index to the declared index it is
	// pinned to (indices shift when a GPU falls off the bus).
	declaredIndex := func(i int) int {
		for _, g := range f.GPUs {
			if g.Index == i {
				if d, ok := pinned[g.UUID]; ok {
					return d
				}
			}
		}
		return i
	}
	railOfGPU := map[int]int{}
	for _, n := range s.NICs {
		if n.GPU >= 0 {
			railOfGPU[n.GPU] = n.Rail
		}
	}
	for _, dn := range s.NICs {
		rn := matchNIC(f, dn)
		if rn == nil {
			id := dn.Name
			if dn.RDMADevice != "" {
				id += " (" + dn.RDMADevice + ")"
			}
			add(domain.DriftNICMissing, "NIC %s is not reported", id)
			continue
		}
		if rn.State != "ACTIVE" {
			add(domain.DriftNICDown, "NIC %s (%s port %d) is %s", dn.Name, rn.RDMADevice, rn.Port, orUnknown(rn.State))
		}
		if rn.GPU < 0 {
			continue
		}
		g := declaredIndex(rn.GPU)
		if g == dn.GPU {
			continue
		}
		r, ok := railOfGPU[g]
		if in.RailOptimized && ok && r != dn.Rail {
			add(domain.DriftNICRail, "NIC %s (rail %d) is closest to GPU %d (%s), whose rail is %d: the inventory pairs it with GPU %d", dn.Name, dn.Rail, g, rn.Path, r, dn.GPU)
		} else {
			add(domain.DriftNICAffinity, "NIC %s is closest to GPU %d (%s), the inventory pairs it with GPU %d", dn.Name, g, rn.Path, dn.GPU)
		}
	}

	domainName := s.NVLinkDomain
	if domainName == "" {
		domainName = s.Name
	}
	switch {
	case len(in.Peers) == 0 && f.NVLinkGroups != nil && len(f.GPUs) > 1 && len(f.NVLinkGroups) > 1:
		var gs []string
		for _, g := range f.NVLinkGroups {
			gs = append(gs, "["+intList(g)+"]")
		}
		add(domain.DriftNVLink, "the GPUs form %d NVLink groups %s, the inventory declares one NVLink domain %s", len(f.NVLinkGroups), strings.Join(gs, " "), domainName)
	case len(in.Peers) > 0 && f.NVLinkCluster == "":
		add(domain.DriftNVLink, "the inventory puts the server in NVLink domain %s with %d other servers, but it reports no multi-node NVLink fabric", domainName, len(in.Peers))
	case len(in.Peers) > 0:
		for _, p := range sortedKeys(in.Peers) {
			if c := in.Peers[p]; c != "" && c != f.NVLinkCluster {
				add(domain.DriftNVLink, "NVLink cluster %s differs from %s's %s, though the inventory puts both in NVLink domain %s", f.NVLinkCluster, p, c, domainName)
			}
		}
	}
	for _, g := range f.GPUs {
		if g.NVLinksDown > 0 {
			add(domain.DriftNVLink, "GPU %d has %d of %d NVLink links inactive", g.Index, g.NVLinksDown, g.NVLinks+g.NVLinksDown)
		}
	}

	var out []domain.HostCondition
	for _, k := range domain.DriftKinds {
		items := found[k]
		if len(items) == 0 {
			continue
		}
		msg := strings.Join(items[:min(len(items), maxItems)], "; ")
		if len(items) > maxItems {
			msg += fmt.Sprintf("; and %d more", len(items)-maxItems)
		}
		out = append(out, domain.HostCondition{Type: k, Message: msg})
	}
	return out
}

// matchNIC finds the reported port of a declared NIC: by RDMA device when
// the inventory names one, else by interface name.
func matchNIC(f *domain.HostFacts, dn domain.NIC) *domain.HostNIC {
	for i := range f.NICs {
		n := &f.NICs[i]
		if dn.RDMADevice != "" && n.RDMADevice == dn.RDMADevice {
			return n
		}
		if dn.RDMADevice == "" && n.Netdev == dn.Name {
			return n
		}
	}
	return nil
}

// MatchNIC is matchNIC for the binder: the reported port of a declared NIC.
func MatchNIC(f *domain.HostFacts, dn domain.NIC) *domain.HostNIC {
	if f == nil {
		return nil
	}
	return matchNIC(f, dn)
}

// NewBaseline pins the reported GPUs to declared indices in index order.
func NewBaseline(f *domain.HostFacts) []domain.BaselineGPU {
	out := make([]domain.BaselineGPU, 0, len(f.GPUs))
	for _, g := range f.GPUs {
		out = append(out, domain.BaselineGPU{Index: g.Index, UUID: g.UUID, PCIBusID: g.PCIBusID})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out
}

func memoryOf(f *domain.HostFacts, idx int) int {
	for _, g := range f.GPUs {
		if g.Index == idx {
			return g.MemoryMiB
		}
	}
	return 0
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown state"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// intList formats GPU indices compactly: 0-3,6.
func intList(xs []int) string {
	xs = append([]int(nil), xs...)
	sort.Ints(xs)
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		} else {
			parts = append(parts, fmt.Sprint(xs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
