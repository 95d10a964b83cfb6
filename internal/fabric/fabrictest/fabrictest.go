package fabrictest

import (
	"fmt"
	"net/netip"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
	"github.com/jobfabric/jobfabric/internal/fabric/platform"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// Models of the scenarios: the network model the scenario exercises.
const (
	PureRT5   = "pure-rt5"     // acme (server isolation) and globex (GPU isolation), routed /31 links
	VLANAware = "vlan-aware"   // adds initech, vlan-aware with per-link VLANs and anycast gateways
	Segmented = "segmentation" // globex (pure type-5) and initech (vlan-aware) segmented: a group per job, a storage group, a contract
)

// Models lists the scenarios.
func Models() []string { return []string{PureRT5, VLANAware, Segmented} }

// NOSes lists the NOSes renderers exist for.
func NOSes() []string { return []string{"eos", "frr", "junos", "nxos", "sonic"} }

// PortName is the name of front-panel port n of the generated switches of
// nos: the NOS's default platform names it (swp4, Ethernet1/4, et-0/0/3,
// Ethernet4/1, Ethernet24).
func PortName(nos string, n int) string {
	d, _ := platform.DefaultFor(nos)
	m, _ := platform.Lookup(d.Vendor, d.Model)
	return platform.NewPorts(m, nos, topology.DefaultPortPrefix, 0).Name(platform.Port{N: n})
}

// Topology returns the cluster with every switch running nos on the NOS's
// default platform, its ports named as that platform names them; numbered
// gives every uplink a /31 from 10.253.0.0/24 (otherwise uplinks are
// unnumbered).
func Topology(nos string, numbered bool) (*domain.Topology, error) {
	t, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 2, Spines: 2, NOS: nos})
	if err != nil {
		return nil, err
	}
	f := &t.Sites[0].Fabrics[0]
	for i := range f.Uplinks {
		if numbered {
			f.Uplinks[i].IPv4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 253, 0, byte(2 * i)}), 31).String()
		}
	}
	return t, nil
}

// Input returns the scenario of model on a cluster of nos switches. Junos
// spines keep EVPN next hops only per session, so the Junos scenarios use
// loopback overlay sessions; EOS and NX-OS get numbered uplinks, the others
// unnumbered, so both underlays are covered.
func Input(nos, model string) (fabric.Input, error) {
	top, err := Topology(nos, nos == "eos" || nos == "nxos")
	if err != nil {
		return fabric.Input{}, err
	}
	in := fabric.Input{
		Topology: top,
		Tenants: []domain.Tenant{
			{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5},
			{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5},
		},
		Allocations: []fabric.Allocation{
			{Tenant: "acme", Server: "s1-gpu001", GPUs: []int{0, 1}, Whole: true, JobID: "11"},
			{Tenant: "acme", Server: "s2-gpu001", GPUs: []int{0}, JobID: "11"},
			{Tenant: "globex", Server: "s1-gpu002", GPUs: []int{0}, JobID: "21"},
			{Tenant: "globex", Server: "s1-gpu002", GPUs: []int{1}, JobID: "22"},
			{Tenant: "globex", Server: "s2-gpu002", GPUs: []int{0, 1}, JobID: "22"},
		},
		IDs: fabric.IDs{Tenants: map[string]fabric.TenantIDs{
			"acme":   {L3VNI: 10001, VRFID: 1, L3VLAN: 3001},
			"globex": {L3VNI: 10002, VRFID: 2, L3VLAN: 3002},
		}},
	}
	if nos == "junos" {
		in.Options.Overlay = fabric.OverlayOnLoopbacks
	}
	switch model {
	case PureRT5:
	case VLANAware:
		in.Tenants = append(in.Tenants, domain.Tenant{Name: "initech", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware})
		in.IDs.Tenants["initech"] = fabric.TenantIDs{L3VNI: 10003, VRFID: 3, L3VLAN: 3003, MACVRFID: 103, MACRT: 1<<24 + 3}
		in.Allocations = append(in.Allocations,
			fabric.Allocation{Tenant: "initech", Server: "s1-gpu003", GPUs: []int{0, 1}, JobID: "31"},
			fabric.Allocation{Tenant: "initech", Server: "s2-gpu003", GPUs: []int{0}, JobID: "31"})
		if err := AssignLinkIDs(&in, 1000, 20000); err != nil {
			return in, err
		}
	case Segmented:
		in.Tenants[1].JobSegmentation = true
		ids := in.IDs.Tenants["globex"]
		ids.UnclassifiedGroup = 999
		in.IDs.Tenants["globex"] = ids
		in.Groups = []fabric.Group{
			{Tenant: "globex", Name: "job-21", ID: 101, JobID: "21"},
			{Tenant: "globex", Name: "job-22", ID: 102, JobID: "22"},
			{Tenant: "globex", Name: "storage", ID: 110, Prefixes: []string{"10.99.0.0/24", "fd00:99::/64"}},
		}
		in.Contracts = []fabric.Contract{{Tenant: "globex", A: "job-22", B: "storage"}}
		in.Tenants = append(in.Tenants, domain.Tenant{Name: "initech", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware, JobSegmentation: true})
		in.IDs.Tenants["initech"] = fabric.TenantIDs{L3VNI: 10003, VRFID: 3, L3VLAN: 3003, MACVRFID: 103, MACRT: 1<<24 + 3, UnclassifiedGroup: 998}
		in.Allocations = append(in.Allocations,
			fabric.Allocation{Tenant: "initech", Server: "s1-gpu003", GPUs: []int{0, 1}, JobID: "31"},
			fabric.Allocation{Tenant: "initech", Server: "s2-gpu003", GPUs: []int{0}, JobID: "31"})
		in.Groups = append(in.Groups, fabric.Group{Tenant: "initech", Name: "job-31", ID: 131, JobID: "31"})
		if err := AssignLinkIDs(&in, 1000, 20000); err != nil {
			return in, err
		}
	default:
		return in, fmt.Errorf("unknown model %q", model)
	}
	return in, nil
}

// AssignLinkIDs gives every link of a vlan-aware tenant a VLAN (from vlan0,
// counting per leaf) and an L2VNI (from vni0, counting fabric-wide), the way
// the state machine would from the pools, keeping ids a link already has
// for the same tenant.
func AssignLinkIDs(in *fabric.Input, vlan0 uint16, vni0 uint32) error {
	owners, err := fabric.Owners(*in)
	if err != nil {
		return err
	}
	vlanAware := map[string]bool{}
	for _, t := range in.Tenants {
		vlanAware[t.Name] = t.Network == domain.NetworkVLANAware
	}
	if in.IDs.Links == nil {
		in.IDs.Links = map[fabric.LinkRef]fabric.LinkIDs{}
	}
	usedVLAN := map[string]map[uint16]bool{}
	usedVNI := map[uint32]bool{}
	for _, ids := range in.IDs.Tenants {
		usedVNI[ids.L3VNI] = true
	}
	for ref, ids := range in.IDs.Links {
		if usedVLAN[ref.Leaf] == nil {
			usedVLAN[ref.Leaf] = map[uint16]bool{}
		}
		usedVLAN[ref.Leaf][ids.VLAN] = true
		usedVNI[ids.L2VNI] = true
	}
	for _, o := range owners {
		if !vlanAware[o.Tenant] {
			continue
		}
		if ids, ok := in.IDs.Links[o.Link]; ok && ids.Tenant == o.Tenant {
			continue
		}
		if usedVLAN[o.Link.Leaf] == nil {
			usedVLAN[o.Link.Leaf] = map[uint16]bool{}
		}
		v := vlan0
		for usedVLAN[o.Link.Leaf][v] {
			v++
		}
		n := vni0
		for usedVNI[n] {
			n++
		}
		usedVLAN[o.Link.Leaf][v], usedVNI[n] = true, true
		in.IDs.Links[o.Link] = fabric.LinkIDs{Tenant: o.Tenant, VLAN: v, L2VNI: n}
	}
	return nil
}

// ThreeTierTopology is a three-tier cluster of nos switches: 2 pods, each
// of 1 stripe of 2 rails (2 leaves) under 1 spine, joined by 2
// super-spines; 4 servers of 2 GPUs per stripe. numbered gives every
// fabric link a /31 from 10.253.0.0/24.
func ThreeTierTopology(nos string, numbered bool) (*domain.Topology, error) {
	t, err := topology.Generate(topology.GenerateOptions{Stripes: 2, Pods: 2, SuperSpines: 2, Spines: 1, ServersPerStripe: 4, GPUsPerServer: 2, NOS: nos})
	if err != nil {
		return nil, err
	}
	if numbered {
		f := &t.Sites[0].Fabrics[0]
		n := 0
		next := func() string {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 253, 0, byte(2 * n)}), 31).String()
			n++
			return p
		}
		for i := range f.Uplinks {
			f.Uplinks[i].IPv4 = next()
		}
		for i := range f.SpineUplinks {
			f.SpineUplinks[i].IPv4 = next()
		}
	}
	return t, nil
}

// ThreeTierInput is the pure type-5 scenario on ThreeTierTopology: acme
// (server isolation) and globex (GPU isolation) each run a job with one
// server in each pod, so their traffic crosses the super-spines. Junos
// uses loopback overlay sessions and EOS and NX-OS numbered links, as in
// Input.
func ThreeTierInput(nos string) (fabric.Input, error) {
	top, err := ThreeTierTopology(nos, nos == "eos" || nos == "nxos")
	if err != nil {
		return fabric.Input{}, err
	}
	in := fabric.Input{
		Topology: top,
		Tenants: []domain.Tenant{
			{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5},
			{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5},
		},
		Allocations: []fabric.Allocation{
			{Tenant: "acme", Server: "s1-gpu001", GPUs: []int{0, 1}, Whole: true, JobID: "11"},
			{Tenant: "acme", Server: "s2-gpu001", GPUs: []int{0, 1}, Whole: true, JobID: "11"},
			{Tenant: "globex", Server: "s1-gpu002", GPUs: []int{0}, JobID: "21"},
			{Tenant: "globex", Server: "s2-gpu002", GPUs: []int{0}, JobID: "21"},
		},
		IDs: fabric.IDs{Tenants: map[string]fabric.TenantIDs{
			"acme":   {L3VNI: 10001, VRFID: 1, L3VLAN: 3001},
			"globex": {L3VNI: 10002, VRFID: 2, L3VLAN: 3002},
		}},
	}
	if nos == "junos" {
		in.Options.Overlay = fabric.OverlayOnLoopbacks
	}
	return in, nil
}
