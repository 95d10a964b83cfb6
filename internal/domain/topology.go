package domain

import "strconv"

// Topology is the declared inventory: what the operator says the cluster is.
// It is stored whole in the replicated state and replaced whole by an apply
// (all-or-nothing). Field names are the YAML/JSON names of the topology file.
type Topology struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Sites      []Site `json:"sites" openapi:"required"`
}

// Site is a physical location holding one or more fabrics.
type Site struct {
	Name    string   `json:"name" openapi:"required"`
	Fabrics []Fabric `json:"fabrics"`
}

// Fabric is one EVPN-VXLAN Clos fabric and the servers cabled to it: two
// tiers (leaves and spines) or three (pods of leaves and spines, joined by
// super-spines).
type Fabric struct {
	Name string `json:"name" openapi:"required"`
	// RailOptimized: NIC i of every server of a stripe connects to the leaf of
	// rail i of that stripe, and every server of a stripe has one NIC per rail.
	RailOptimized bool `json:"railOptimized"`
	// LinkPools are the prefixes server-link addresses are generated from when a
	// cable does not give its own.
	LinkPools LinkPools `json:"linkPools,omitempty"`
	Spines    []Switch  `json:"spines" openapi:"required"`
	Leaves    []Switch  `json:"leaves" openapi:"required"`
	Servers   []Server  `json:"servers" openapi:"required"`
	// Cables connect a server NIC to a leaf port (the server links).
	Cables []Cable `json:"cables" openapi:"required"`
	// Uplinks connect a leaf port to a spine port.
	Uplinks []Uplink `json:"uplinks,omitempty"`
	// SuperSpines join the pods of a three-tier fabric; empty in a
	// two-tier one. Every spine then belongs to a pod, every leaf too, and
	// a leaf is uplinked only to spines of its own pod.
	SuperSpines []Switch `json:"superSpines,omitempty"`
	// SpineUplinks connect a spine port to a super-spine port.
	SpineUplinks []SpineUplink `json:"spineUplinks,omitempty"`
}

// ThreeTier reports whether the fabric has super-spines.
func (f *Fabric) ThreeTier() bool { return len(f.SuperSpines) > 0 }

// LinkPools holds the prefixes stable server-link addresses come from.
type LinkPools struct {
	IPv4 string `json:"ipv4,omitempty"` // e.g. 10.0.0.0/16, carved into /31s
	IPv6 string `json:"ipv6,omitempty"` // e.g. fd00:0:0:1::/64, carved into /127s
}

// Switch is a leaf, a spine or a super-spine.
type Switch struct {
	Name     string `json:"name" openapi:"required"`
	ASN      uint32 `json:"asn" openapi:"required"`
	Loopback string `json:"loopback" openapi:"required"` // IPv4 address, also the VTEP address on leaves
	// Stripe and Rail are set on rail-optimized leaves: the leaf serves rail
	// Rail of stripe Stripe. Spines leave both unset.
	Stripe *int `json:"stripe,omitempty"`
	Rail   *int `json:"rail,omitempty"`
	// Pod is the pod of a leaf or spine of a three-tier fabric (1..);
	// unset in a two-tier fabric and on super-spines.
	Pod *int `json:"pod,omitempty"`
	// Ports of the generic Linux platform are named PortPrefix+N for N in
	// 1..PortCount (e.g. swp1..swp64). A switch with a platform has the
	// model's ports: PortCount is filled from the model, PortPrefix unused.
	PortPrefix string `json:"portPrefix,omitempty"`
	PortCount  int    `json:"portCount"`
	NOS        string `json:"nos,omitempty" enum:"render.Junos,render.NXOS,render.EOS,render.SONiC,render.FRR"` // junos, nxos, eos, sonic, frr
	// Platform is the switch's vendor, model and NOS release: the model's
	// port map fixes the port names the switch has (Ethernet1/1 on NX-OS,
	// et-0/0/0 on Junos, ...) and the release the features its
	// configuration may use. Required on junos, nxos, eos and sonic
	// switches; without it a switch is the generic Linux platform (FRR,
	// ports PortPrefix1..PortPrefixN), the lab's.
	Platform *Platform `json:"platform,omitempty"`
	// Breakouts split front-panel ports into sub-ports (a 400G port into
	// 4 x 100G); cables and uplinks then name the sub-ports.
	Breakouts []Breakout `json:"breakouts,omitempty"`
}

// Platform is what a switch is: the model (of the platform table, see
// docs/fabric.md) and the NOS release it runs.
type Platform struct {
	Vendor  string `json:"vendor" openapi:"required"` // e.g. arista, cisco, juniper, nvidia, generic
	Model   string `json:"model" openapi:"required"`  // e.g. DCS-7060X6-64PE, N9K-C9364D-GX2A, QFX5230-64CD, SN5600, linux
	Version string `json:"version,omitempty"`         // the NOS release, e.g. 4.32.2F, 10.5(2)F, 23.4R2-S3-EVO, 202405, 10.2
}

// Breakout splits one front-panel port.
type Breakout struct {
	Port string `json:"port" openapi:"required"` // the whole port, as the switch names it (Ethernet1/1, et-0/0/0)
	Into int    `json:"into" openapi:"required"` // sub-ports: 2, 4 or 8, as the model allows
}

// Server is a GPU server.
type Server struct {
	Name     string `json:"name" openapi:"required"`
	Stripe   int    `json:"stripe" openapi:"required"`
	GPUModel string `json:"gpuModel" openapi:"required"`
	GPUs     int    `json:"gpus" openapi:"required"`
	// NVLinkDomain names the NVLink/NVSwitch domain the server's GPUs belong
	// to; servers of one NVL72 rack share a domain. Defaults to the server name.
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	// GPUNUMA gives the NUMA node of GPU i; empty means all on node 0.
	GPUNUMA []int  `json:"gpuNuma,omitempty"`
	Driver  string `json:"driver,omitempty"`
	NICs    []NIC  `json:"nics" openapi:"required"`
	// CPUMilli and MemoryMiB are what jobs may request of the server's
	// CPUs (in 1/1000 CPU) and memory; 0 means not tracked (no limit).
	CPUMilli  int64 `json:"cpuMilli,omitempty"`
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// Limits of server and job CPU and memory figures.
const (
	MaxCPUMilli  = 1 << 30 // about a million CPUs
	MaxMemoryMiB = 1 << 40 // a zebibyte
)

// ValidateServerResources checks a server's CPU and memory (field is its
// path, e.g. "sites[0].fabrics[0].servers[3]").
func ValidateServerResources(field string, s *Server) *Error {
	if err := ValidateRange(field+".cpuMilli", s.CPUMilli, 0, MaxCPUMilli); err != nil {
		return err
	}
	return ValidateRange(field+".memoryMiB", s.MemoryMiB, 0, MaxMemoryMiB)
}

// NIC is a server's network interface used for GPU traffic.
type NIC struct {
	Name       string `json:"name" openapi:"required"`
	RDMADevice string `json:"rdmaDevice,omitempty"` // e.g. mlx5_0
	Rail       int    `json:"rail"`
	NUMA       int    `json:"numa"`
	// GPU is the index of the GPU this NIC is closest to (PIX/PXB), -1 if none.
	GPU int `json:"gpu"`
}

// Cable is a server link: a server NIC to a leaf port, with its stable
// point-to-point addresses. The leaf takes the first address of each prefix,
// the server the second. Empty prefixes are generated from the fabric's pools.
type Cable struct {
	Server string `json:"server" openapi:"required"`
	NIC    string `json:"nic" openapi:"required"`
	Leaf   string `json:"leaf" openapi:"required"`
	Port   string `json:"port" openapi:"required"`
	IPv4   string `json:"ipv4,omitempty"` // a /31
	IPv6   string `json:"ipv6,omitempty"` // a /127
}

// Uplink is a leaf-to-spine link. Links without addresses run BGP unnumbered.
type Uplink struct {
	Leaf      string `json:"leaf" openapi:"required"`
	LeafPort  string `json:"leafPort" openapi:"required"`
	Spine     string `json:"spine" openapi:"required"`
	SpinePort string `json:"spinePort" openapi:"required"`
	IPv4      string `json:"ipv4,omitempty"`
}

// SpineUplink is a spine-to-super-spine link of a three-tier fabric.
// Links without addresses run BGP unnumbered.
type SpineUplink struct {
	Spine          string `json:"spine" openapi:"required"`
	SpinePort      string `json:"spinePort" openapi:"required"`
	SuperSpine     string `json:"superSpine" openapi:"required"`
	SuperSpinePort string `json:"superSpinePort" openapi:"required"`
	IPv4           string `json:"ipv4,omitempty"` // a /31; the super-spine takes the first address
}

// TopologySummary counts what a topology holds, for `topology show`.
type TopologySummary struct {
	Sites         int            `json:"sites"`
	Fabrics       int            `json:"fabrics"`
	Spines        int            `json:"spines"`
	SuperSpines   int            `json:"superSpines,omitempty"`
	Pods          int            `json:"pods,omitempty"`
	Leaves        int            `json:"leaves"`
	Servers       int            `json:"servers"`
	GPUs          int            `json:"gpus"`
	GPUsByModel   map[string]int `json:"gpusByModel"`
	NICs          int            `json:"nics"`
	Cables        int            `json:"cables"`
	Uplinks       int            `json:"uplinks"`
	SpineUplinks  int            `json:"spineUplinks,omitempty"`
	Stripes       int            `json:"stripes"`
	Rails         int            `json:"rails"`
	NVLinkDomains int            `json:"nvlinkDomains"`
}

// Servers returns every server of every fabric, in file order.
func (t *Topology) Servers() []*Server {
	var out []*Server
	for si := range t.Sites {
		for fi := range t.Sites[si].Fabrics {
			f := &t.Sites[si].Fabrics[fi]
			for i := range f.Servers {
				out = append(out, &f.Servers[i])
			}
		}
	}
	return out
}

// Summary counts the topology's objects.
func (t *Topology) Summary() TopologySummary {
	s := TopologySummary{GPUsByModel: map[string]int{}}
	stripes := map[string]bool{}
	rails := map[int]bool{}
	domains := map[string]bool{}
	s.Sites = len(t.Sites)
	for _, site := range t.Sites {
		s.Fabrics += len(site.Fabrics)
		for _, f := range site.Fabrics {
			s.Spines += len(f.Spines)
			s.Leaves += len(f.Leaves)
			s.Servers += len(f.Servers)
			s.Cables += len(f.Cables)
			s.Uplinks += len(f.Uplinks)
			s.SuperSpines += len(f.SuperSpines)
			s.SpineUplinks += len(f.SpineUplinks)
			pods := map[int]bool{}
			for _, sp := range f.Spines {
				if sp.Pod != nil {
					pods[*sp.Pod] = true
				}
			}
			s.Pods += len(pods)
			for _, l := range f.Leaves {
				if l.Rail != nil {
					rails[*l.Rail] = true
				}
			}
			for _, srv := range f.Servers {
				s.GPUs += srv.GPUs
				s.GPUsByModel[srv.GPUModel] += srv.GPUs
				s.NICs += len(srv.NICs)
				stripes[site.Name+"/"+f.Name+"/"+strconv.Itoa(srv.Stripe)] = true
				d := srv.NVLinkDomain
				if d == "" {
					d = srv.Name
				}
				domains[d] = true
			}
		}
	}
	s.Stripes, s.Rails, s.NVLinkDomains = len(stripes), len(rails), len(domains)
	return s
}

// TopologyView is the stored topology with its revision.
type TopologyView struct {
	Revision    uint64          `json:"revision"`
	Fingerprint string          `json:"fingerprint"`
	Summary     TopologySummary `json:"summary"`
	Topology    *Topology       `json:"topology"`
}

// TopologyResult is the value of a topology apply.
type TopologyResult struct {
	Changed     bool            `json:"changed"`
	Revision    uint64          `json:"revision"`
	Fingerprint string          `json:"fingerprint"`
	Summary     TopologySummary `json:"summary"`
}
