package fabric

import (
	"github.com/jobfabric/jobfabric/internal/domain"
)

// Input is everything the compiler reads. The caller builds it from one
// snapshot of the replicated state; the compiler keeps no reference to it
// after Compile returns, except to prefix slices it shares read-only.
type Input struct {
	// Topology is the normalized, validated inventory (topology.Normalize
	// and topology.Validate have run): cable addresses are filled in.
	Topology *domain.Topology
	// Tenants are every tenant; each needs its ids in IDs.Tenants.
	Tenants []domain.Tenant
	// Allocations say which tenant (and job) holds which GPUs of which
	// server: one per placed job and server (see Allocation).
	Allocations []Allocation
	// Groups are the policy groups of segmented tenants: one per running job,
	// plus named groups such as "storage".
	Groups []Group
	// Contracts allow traffic between two groups of one tenant.
	Contracts []Contract
	// IDs are the numbers allocated from the pools (internal/fabric/pool).
	IDs IDs
	// Options choose between designs; the zero value is the default design.
	Options Options
}

// Allocation is one job's hold on one server, as the scheduler placed it
// (domain.Placement): the caller writes one Allocation per placement of
// every job that holds GPUs (Placed, Ready, Running, Preempting).
type Allocation struct {
	Tenant string
	Server string
	// GPUs are the GPU indices held; the fabric link of a GPU is the cable
	// of the NIC whose NIC.GPU names it (the GPU's rail).
	GPUs []int
	// Whole: the allocation holds the whole server, so all its links join
	// the tenant's VRF and the job's group. Links of a server-isolated
	// tenant's server join the VRF whether or not Whole is set.
	Whole bool
	// JobID names the job ("42"); the links of its GPUs are the members of
	// the job's group when the tenant is segmented. Empty for holds that are
	// not jobs (a reservation).
	JobID string
}

// Group is a policy group of a segmented tenant. Endpoints of one group may
// talk to each other; between groups of a tenant everything is denied unless
// a Contract allows it.
type Group struct {
	Tenant string
	// Name is unique within the tenant: "job-42" for a job, or a named
	// group such as "storage".
	Name string
	// ID is the 16-bit group-policy ID carried in the VXLAN GBP header (1..65535),
	// unique in the fabric (NX-OS security-group IDs are switch-wide).
	ID uint16
	// JobID: the group's members are the links of this job's allocations.
	JobID string
	// Prefixes are members that are not server links (e.g. a storage
	// subnet reached through the tenant VRF), as "10.9.0.0/24" or "fd00:9::/64".
	Prefixes []string
}

// Contract allows all traffic between two groups of one tenant, both ways:
// group policy is stateless, so a one-way allow would drop the replies.
type Contract struct {
	Tenant string
	A, B   string // group names
}

// IDs are the pool numbers the compiler renders. They are decided (and
// stored) by the state machine, never by the compiler, so a recompile never
// renumbers anything.
type IDs struct {
	Tenants map[string]TenantIDs
	// Links are the per-link ids of vlan-aware tenants' links.
	Links map[LinkRef]LinkIDs
	// L3VLANs are per-leaf L3 VLANs: the VLAN that carries a tenant's
	// L3VNI on one leaf (pool "l3vlan/<leaf>"). An L3 VLAN means something
	// only on its leaf, so numbering them per leaf bounds the tenants by
	// what one leaf carries, not by 4,094 VLANs across the fabric. On a
	// leaf where a tenant has one, it replaces TenantIDs.L3VLAN. See
	// L3VLANNeeds for where they are needed.
	L3VLANs map[LeafTenant]uint16
}

// LeafTenant names a tenant's VRF on one leaf.
type LeafTenant struct {
	Leaf   string
	Tenant string
}

// TenantIDs are one tenant's numbers.
type TenantIDs struct {
	// L3VNI is the IP-VRF's VNI (pool "vni").
	L3VNI uint32
	// VRFID is the route distinguisher's assigned number (pool "vrf-id"):
	// RD = loopback:VRFID, unique per device and VRF.
	VRFID uint16
	// RT is the route-target value of the IP-VRF (RT = Options.RTASN:RT,
	// import and export); 0 means the L3VNI.
	RT uint32
	// L3VLAN is the VLAN that carries the L3VNI on NOSes that need one
	// (NX-OS, SONiC), the same on every leaf, where IDs.L3VLANs gives the
	// leaf none. Renderers for those NOSes refuse a VRF without either.
	L3VLAN uint16
	// MACVRFID and MACRT are the MAC-VRF's RD number and route-target value
	// (vlan-aware tenants only; pools "vrf-id" and "rt").
	MACVRFID uint16
	MACRT    uint32
	// UnclassifiedGroup is the group ID of traffic no group claims (NX-OS
	// "security enforce tag"); segmented tenants on NX-OS need it (pool "group").
	UnclassifiedGroup uint16
}

// LinkRef names a server link by its leaf port.
type LinkRef struct {
	Leaf string
	Port string
}

// LinkIDs are the ids of one link while a vlan-aware tenant owns it. Tenant
// says for whom they were allocated, so ids left over from a previous owner
// are caught instead of rendered.
type LinkIDs struct {
	Tenant string
	VLAN   uint16 // leaf-local (pool pool.LinkVLAN(leaf))
	L2VNI  uint32 // pool "vni"
}

// VRFPlacement says on which leaves a tenant's VRF is created.
type VRFPlacement string

const (
	// VRFsOnAllLeaves creates every tenant's VRF on every leaf of the sites
	// it may use (the JVD recommendation: a port moves between tenants
	// without creating a VRF first).
	VRFsOnAllLeaves VRFPlacement = "all"
	// VRFsWhereUsed creates a VRF only on leaves where the tenant owns a port
	// (Apstra's resource optimisation).
	VRFsWhereUsed VRFPlacement = "used"
)

// OverlaySessions says how EVPN routes travel.
type OverlaySessions string

const (
	// OverlayOnLinks runs EVPN on the same eBGP session as the underlay, one
	// per uplink (the FRR lab and SONiC/Cumulus style; spines keep the EVPN
	// next hop per address family).
	OverlayOnLinks OverlaySessions = "link"
	// OverlayOnLoopbacks runs EVPN on separate multihop eBGP sessions between
	// loopbacks (the Junos/AVD style; needed where next-hop-unchanged is per
	// session, as on Junos spines).
	OverlayOnLoopbacks OverlaySessions = "loopback"
)

// Options choose between designs. The zero value is the default.
type Options struct {
	// VRFPlacement: "" means VRFsOnAllLeaves.
	VRFPlacement VRFPlacement
	// Overlay: "" means OverlayOnLinks.
	Overlay OverlaySessions
	// RTASN is the administrator field of every route target; 0 means 65000.
	// One value for the whole fabric, so leaves in different ASNs import
	// each other's routes.
	RTASN uint32
	// IRBPool4 and IRBPool6 hold the per-link subnets of vlan-aware links
	// (a /27 and a /64 each); "" means 10.64.0.0/10 and fd00:100::/40,
	// which hold 131,072 links (100,000 GPUs of 8 rails fit). See
	// IRBSubnets.
	IRBPool4, IRBPool6 string
	// AnycastMAC is the gateway MAC of every IRB on every leaf; "" means
	// 02:4a:46:00:00:01 (locally administered, "JF").
	AnycastMAC string
	// DefaultNOS is the NOS of switches whose topology entry names none;
	// "" means frr.
	DefaultNOS string
}

// Defaults of Options.
const (
	DefaultRTASN      = 65000
	DefaultIRBPool4   = "10.64.0.0/10"
	DefaultIRBPool6   = "fd00:100::/40"
	DefaultAnycastMAC = "02:4a:46:00:00:01"
	DefaultNOS        = "frr"
)
