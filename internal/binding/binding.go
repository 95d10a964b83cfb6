package binding

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
)

// Identity is the job's place in the fabric, for the record (and for
// launchers that log it): tenant, VRF, the job's group ID.
type Identity struct {
	Tenant    string           `json:"tenant"`
	Workspace string           `json:"workspace"`
	Isolation domain.Isolation `json:"isolation,omitempty"`
	VRF       string           `json:"vrf,omitempty"`
	L3VNI     uint32           `json:"l3vni,omitempty"`
	GroupID   uint16           `json:"groupId,omitempty"`
}

// Input is everything a binding depends on.
type Input struct {
	Job  *domain.Job
	Node string
	// Server is the node as declared in the inventory; RailOptimized is
	// its fabric's.
	Server        *domain.Server
	RailOptimized bool
	// Host is the node agent's record (facts and GPU baseline); nil when
	// no agent reported.
	Host *domain.HostStatus
	// Others are the other jobs holding GPUs (on any node): a NIC serves a
	// job only when no other tenant holds its GPU.
	Others []domain.Job
	Fabric Identity
}

// GPU is one device the job may use.
type GPU struct {
	// Index is the inventory's GPU index; UUID the GPU's.
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	// Visible is how CUDA_VISIBLE_DEVICES names it: the GPU or MIG UUID,
	// or the index when the node has not reported UUIDs.
	Visible string           `json:"visible"`
	Minor   int              `json:"minor"`
	NUMA    int              `json:"numa"`
	MIG     *domain.MIGSlice `json:"mig,omitempty"`
	// MIGCaps are the nvidia-caps minors of the MIG instance.
	MIGCaps []int   `json:"migCaps,omitempty"`
	Share   float64 `json:"share,omitempty"`
	// PCIBusID is the GPU's PCI address as its node agent reported it
	// (nvidia-smi's 00000000:53:00.0); empty when no agent reported it.
	PCIBusID string `json:"pciBusId,omitempty"`
}

// NIC is one RDMA port on a rail of the job's GPUs.
type NIC struct {
	// Name is the NIC's name in the inventory (nic0), not a host interface.
	Name string `json:"name"`
	// Netdev is the host's network interface (ens1f0np0) as the node agent
	// reported it; empty when no report names it.
	Netdev     string `json:"netdev"`
	RDMADevice string `json:"rdmaDevice"`
	Port       int    `json:"port"`
	Rail       int    `json:"rail"`
	GPU        int    `json:"gpu"`
	NUMA       int    `json:"numa"`
	LinkLayer  string `json:"linkLayer,omitempty"`
	RoCEGID    int    `json:"roceGid"`
	Uverbs     string `json:"uverbs,omitempty"`
	// PCIBusID is the NIC port's PCI function (0000:4b:00.0) as its node
	// agent reported it from sysfs; empty when unknown.
	PCIBusID string `json:"pciBusId,omitempty"`
}

// EnvVar is one variable of the task environment.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Binding is what a host applies for one job on one node.
type Binding struct {
	Job       uint64   `json:"job"`
	JobName   string   `json:"jobName,omitempty"`
	Node      string   `json:"node"`
	Fabric    Identity `json:"fabric"`
	GPUs      []GPU    `json:"gpus"`
	NICs      []NIC    `json:"nics"`
	NUMANodes []int    `json:"numaNodes"`
	CPUs      string   `json:"cpus,omitempty"`
	Env       []EnvVar `json:"env"`
	// DeviceNodes are the host device files a container needs.
	DeviceNodes []string `json:"deviceNodes"`
	// CDIDevices name the job's GPUs in the NVIDIA Container Toolkit's
	// CDI spec (nvidia-ctk cdi generate --device-name-strategy=uuid).
	CDIDevices []string `json:"cdiDevices"`
	// Warnings say what could not be bound and why.
	Warnings []string `json:"warnings,omitempty"`
}

func precondition(field, format string, args ...any) *domain.Error {
	return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Bind returns the binding of in.Job on in.Node. It names only the GPUs,
// MIG instances and NICs the job holds there: another job's device never
// appears, and a NIC whose GPU another tenant shares (MIG, time-slicing)
// is left out.
func Bind(in Input) (*Binding, error) {
	j := in.Job
	if !j.State.HoldsGPUs() {
		return nil, precondition("state", "job %d is %s: it holds no GPUs to bind", j.ID, j.State)
	}
	var pl *domain.Placement
	for i := range j.Placement {
		if j.Placement[i].Server == in.Node {
			pl = &j.Placement[i]
		}
	}
	if pl == nil {
		var nodes []string
		for _, p := range j.Placement {
			nodes = append(nodes, p.Server)
		}
		return nil, precondition("node", "job %d holds nothing on node %s (it runs on %s)", j.ID, in.Node, strings.Join(nodes, ", "))
	}
	if in.Server == nil || in.Server.Name != in.Node {
		return nil, precondition("node", "node %s is not in the inventory", in.Node)
	}
	b := &Binding{Job: j.ID, JobName: j.Name, Node: in.Node, Fabric: in.Fabric, GPUs: []GPU{}, NICs: []NIC{}, NUMANodes: []int{}, DeviceNodes: []string{}, CDIDevices: []string{}}
	r := resolver{in: in}
	if err := r.gpus(b, pl); err != nil {
		return nil, err
	}
	r.nics(b, pl)
	r.affinity(b)
	b.Env = env(b, in)
	devices(b)
	return b, nil
}

type resolver struct{ in Input }

func (r resolver) facts() *domain.HostFacts {
	if r.in.Host == nil {
		return nil
	}
	return r.in.Host.Facts
}

// uuidOf is the UUID pinned to declared GPU g (baseline), else the one
// reported at index g, else "".
func (r resolver) uuidOf(g int) string {
	if h := r.in.Host; h != nil {
		for _, b := range h.Baseline {
			if b.Index == g {
				return b.UUID
			}
		}
		if h.Facts != nil && len(h.Baseline) == 0 {
			for _, rg := range h.Facts.GPUs {
				if rg.Index == g {
					return rg.UUID
				}
			}
		}
	}
	return ""
}

func (r resolver) reported(uuid string) *domain.HostGPU {
	f := r.facts()
	if f == nil || uuid == "" {
		return nil
	}
	for i := range f.GPUs {
		if f.GPUs[i].UUID == uuid {
			return &f.GPUs[i]
		}
	}
	return nil
}

func (r resolver) declaredNUMA(g int) int {
	if g >= 0 && g < len(r.in.Server.GPUNUMA) {
		return r.in.Server.GPUNUMA[g]
	}
	return 0
}

func (r resolver) gpus(b *Binding, pl *domain.Placement) error {
	node := r.in.Node
	if len(pl.MIG) > 0 {
		slicesSorted := slices.Clone(pl.MIG)
		sort.Slice(slicesSorted, func(a, c int) bool {
			if slicesSorted[a].GPU != slicesSorted[c].GPU {
				return slicesSorted[a].GPU < slicesSorted[c].GPU
			}
			return slicesSorted[a].Start < slicesSorted[c].Start
		})
		for _, sl := range slicesSorted {
			uuid := r.uuidOf(sl.GPU)
			hg := r.reported(uuid)
			if hg == nil {
				if r.facts() == nil {
					return precondition("node", "node %s has not reported its GPUs: MIG instances are bound by UUID, so its agent must report first", node)
				}
				return precondition("placement", "GPU %d of node %s (%s) is not reported by its agent: it vanished or was replaced", sl.GPU, node, orUnknown(uuid))
			}
			if hg.MIGMode != "Enabled" {
				return precondition("placement", "MIG is not enabled on GPU %d of node %s: the job holds MIG %s at slot %d", sl.GPU, node, sl.Profile, sl.Start)
			}
			var dev *domain.HostMIGDevice
			for i := range hg.MIG {
				if hg.MIG[i].Profile == sl.Profile && hg.MIG[i].Start == sl.Start {
					dev = &hg.MIG[i]
				}
			}
			if dev == nil {
				return precondition("placement", "GPU %d of node %s has no MIG %s instance at slot %d: the GPU's MIG layout must match the placement", sl.GPU, node, sl.Profile, sl.Start)
			}
			if dev.UUID == "" {
				return precondition("placement", "the agent of node %s did not report MIG UUIDs (nvidia-smi -L): MIG %s at slot %d of GPU %d cannot be named", node, sl.Profile, sl.Start, sl.GPU)
			}
			s := sl
			g := GPU{Index: sl.GPU, UUID: uuid, Visible: dev.UUID, Minor: hg.Minor, NUMA: hg.NUMA, MIG: &s, PCIBusID: hg.PCIBusID}
			if dev.GICap > 0 && dev.CICap > 0 {
				g.MIGCaps = []int{dev.GICap, dev.CICap}
			} else {
				b.Warnings = append(b.Warnings, fmt.Sprintf("MIG device %s: capability minors unknown (mig-minors not reported); a container needs /dev/nvidia-caps entries", dev.UUID))
			}
			b.GPUs = append(b.GPUs, g)
		}
		return nil
	}
	indexOnly := false
	for _, gi := range slices.Sorted(slices.Values(pl.GPUs)) {
		uuid := r.uuidOf(gi)
		g := GPU{Index: gi, UUID: uuid, Visible: uuid, Minor: -1, NUMA: r.declaredNUMA(gi), Share: pl.Share}
		switch hg := r.reported(uuid); {
		case hg != nil:
			g.Minor, g.PCIBusID = hg.Minor, hg.PCIBusID
			if hg.NUMA >= 0 {
				g.NUMA = hg.NUMA
			}
		case uuid != "":
			return precondition("placement", "GPU %d of node %s (%s) is not reported by its agent: it vanished or was replaced", gi, node, uuid)
		default:
			g.Visible = strconv.Itoa(gi)
			indexOnly = true
		}
		b.GPUs = append(b.GPUs, g)
	}
	if indexOnly {
		b.Warnings = append(b.Warnings, fmt.Sprintf("node %s has not reported its GPUs: devices are named by index in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID), not by UUID", node))
	}
	return nil
}

// sharedWithOtherTenant reports whether another tenant's job holds any
// part of GPU g of the node.
func (r resolver) sharedWithOtherTenant(g int) bool {
	for _, o := range r.in.Others {
		if o.ID == r.in.Job.ID || o.Tenant == r.in.Job.Tenant || !o.State.HoldsGPUs() {
			continue
		}
		for _, p := range o.Placement {
			if p.Server == r.in.Node && slices.Contains(p.GPUs, g) {
				return true
			}
		}
	}
	return false
}

func (r resolver) nics(b *Binding, pl *domain.Placement) {
	var noNetdev []string
	defer func() {
		if len(noNetdev) > 0 {
			b.Warnings = append(b.Warnings, fmt.Sprintf("network interfaces of NICs %s unknown (the node agent has not reported them): NCCL_SOCKET_IFNAME leaves them out", strings.Join(noNetdev, ", ")))
		}
	}()
	whole := len(pl.MIG) == 0 && pl.Share == 0
	gpus := slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(pl.GPUs)))))
	for _, g := range gpus {
		found := false
		for _, dn := range r.in.Server.NICs {
			if dn.GPU != g {
				continue
			}
			found = true
			if !whole {
				if r.sharedWithOtherTenant(g) {
					// The other tenant stays unnamed: a binding tells a job
					// nothing about other tenants.
					b.Warnings = append(b.Warnings, fmt.Sprintf("NIC %s serves GPU %d, which another tenant's job also uses: it is not bound (one link belongs to one tenant)", dn.Name, g))
					continue
				}
			}
			n := NIC{Name: dn.Name, RDMADevice: dn.RDMADevice, Port: 1, Rail: dn.Rail, GPU: g, NUMA: dn.NUMA, RoCEGID: -1}
			if rn := hostfacts.MatchNIC(r.facts(), dn); rn != nil {
				if rn.RDMADevice != "" {
					n.RDMADevice = rn.RDMADevice
				}
				if rn.Netdev != "" {
					n.Netdev = rn.Netdev
				}
				if rn.Port > 0 {
					n.Port = rn.Port
				}
				if rn.NUMA >= 0 {
					n.NUMA = rn.NUMA
				}
				n.LinkLayer, n.RoCEGID, n.Uverbs, n.PCIBusID = rn.LinkLayer, rn.RoCEGID, rn.Uverbs, rn.PCIBusID
				if rn.State != "" && rn.State != "ACTIVE" {
					b.Warnings = append(b.Warnings, fmt.Sprintf("NIC %s (%s) is %s", dn.Name, n.RDMADevice, rn.State))
				}
			} else if r.facts() != nil {
				b.Warnings = append(b.Warnings, fmt.Sprintf("NIC %s of GPU %d is not reported by the node's agent", dn.Name, g))
			}
			if n.RDMADevice == "" {
				b.Warnings = append(b.Warnings, fmt.Sprintf("NIC %s has no known RDMA device: NCCL and UCX cannot name it", dn.Name))
				continue
			}
			if n.Netdev == "" {
				// The inventory's NIC name is not an interface of the host:
				// NCCL would find no such interface.
				noNetdev = append(noNetdev, dn.Name+" ("+n.RDMADevice+")")
			}
			b.NICs = append(b.NICs, n)
		}
		if !found && len(r.in.Server.NICs) > 0 {
			b.Warnings = append(b.Warnings, fmt.Sprintf("GPU %d has no NIC of its own in the inventory (NIC.gpu): its traffic has no rail", g))
		}
	}
}

// affinity collects the NUMA nodes and CPUs of the job's GPUs.
func (r resolver) affinity(b *Binding) {
	numa := map[int]bool{}
	cpus := cpuSet{}
	known := len(b.GPUs) > 0
	for _, g := range b.GPUs {
		if g.NUMA >= 0 {
			numa[g.NUMA] = true
		}
		hg := r.reported(g.UUID)
		if hg == nil || hg.CPUs == "" || !cpus.add(hg.CPUs) {
			known = false
		}
	}
	for n := range numa {
		b.NUMANodes = append(b.NUMANodes, n)
	}
	sort.Ints(b.NUMANodes)
	if known {
		b.CPUs = cpus.String()
	}
}

// env builds the task environment, in a fixed order.
func env(b *Binding, in Input) []EnvVar {
	var out []EnvVar
	set := func(k, v string) { out = append(out, EnvVar{k, v}) }
	if len(b.GPUs) == 0 {
		// A CPU-only job sees no GPU.
		set("CUDA_VISIBLE_DEVICES", "")
		set("NVIDIA_VISIBLE_DEVICES", "void")
	} else {
		var vis []string
		for _, g := range b.GPUs {
			vis = append(vis, g.Visible)
		}
		set("CUDA_VISIBLE_DEVICES", strings.Join(vis, ","))
		set("NVIDIA_VISIBLE_DEVICES", strings.Join(vis, ","))
		set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	}
	if len(b.NICs) > 0 {
		var hca, ifs []string
		gid, sameGID, ethernet := b.NICs[0].RoCEGID, true, true
		for _, n := range b.NICs {
			hca = append(hca, fmt.Sprintf("%s:%d", n.RDMADevice, n.Port))
			if n.Netdev != "" && !slices.Contains(ifs, n.Netdev) {
				ifs = append(ifs, n.Netdev)
			}
			sameGID = sameGID && n.RoCEGID == gid
			ethernet = ethernet && n.LinkLayer == "Ethernet"
		}
		// "=" makes NCCL match names exactly (mlx5_1 must not select mlx5_10).
		set("NCCL_IB_HCA", "="+strings.Join(hca, ","))
		if len(ifs) > 0 {
			set("NCCL_SOCKET_IFNAME", "="+strings.Join(ifs, ","))
		}
		if ethernet && sameGID && gid >= 0 {
			set("NCCL_IB_GID_INDEX", strconv.Itoa(gid))
		}
		if in.RailOptimized {
			// Rings and trees stay on one rail: crossing rails would go
			// through the spines of a rail-optimized fabric.
			set("NCCL_CROSS_NIC", "0")
		}
		set("UCX_NET_DEVICES", strings.Join(hca, ","))
	}
	set("JOBFABRIC_JOB_ID", strconv.FormatUint(b.Job, 10))
	set("JOBFABRIC_NODE", b.Node)
	set("JOBFABRIC_TENANT", b.Fabric.Tenant)
	set("JOBFABRIC_WORKSPACE", b.Fabric.Workspace)
	if b.Fabric.VRF != "" {
		set("JOBFABRIC_VRF", b.Fabric.VRF)
	}
	if b.Fabric.GroupID != 0 {
		set("JOBFABRIC_GROUP_ID", strconv.Itoa(int(b.Fabric.GroupID)))
	}
	if len(b.NUMANodes) > 0 {
		var ns []string
		for _, n := range b.NUMANodes {
			ns = append(ns, strconv.Itoa(n))
		}
		set("JOBFABRIC_NUMA_NODES", strings.Join(ns, ","))
	}
	if b.CPUs != "" {
		set("JOBFABRIC_CPUS", b.CPUs)
	}
	return out
}

// devices lists the host device files and the NVIDIA CDI device names.
func devices(b *Binding) {
	add := func(p string) {
		if !slices.Contains(b.DeviceNodes, p) {
			b.DeviceNodes = append(b.DeviceNodes, p)
		}
	}
	if len(b.GPUs) > 0 {
		add("/dev/nvidiactl")
		add("/dev/nvidia-uvm")
		add("/dev/nvidia-uvm-tools")
	}
	unknown := false
	for _, g := range b.GPUs {
		if g.Minor >= 0 {
			add(fmt.Sprintf("/dev/nvidia%d", g.Minor))
		} else {
			unknown = true
		}
		for _, c := range g.MIGCaps {
			add(fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", c))
		}
		if strings.HasPrefix(g.Visible, "GPU-") || strings.HasPrefix(g.Visible, "MIG-") {
			b.CDIDevices = append(b.CDIDevices, "nvidia.com/gpu="+g.Visible)
		}
	}
	if unknown {
		b.Warnings = append(b.Warnings, "GPU device minors unknown: /dev/nvidiaN entries are missing from the device list")
	}
	if len(b.NICs) > 0 {
		add("/dev/infiniband/rdma_cm")
	}
	var noVerbs []string
	for _, n := range b.NICs {
		if n.Uverbs != "" {
			add("/dev/infiniband/" + n.Uverbs)
		} else {
			noVerbs = append(noVerbs, n.RDMADevice)
		}
	}
	if len(noVerbs) > 0 {
		b.Warnings = append(b.Warnings, fmt.Sprintf("verbs devices of %s unknown: their /dev/infiniband/uverbsN entries are missing from the device list", strings.Join(noVerbs, ", ")))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "UUID unknown"
	}
	return s
}
