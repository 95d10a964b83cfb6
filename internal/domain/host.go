package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Host facts: what a node agent found on its GPU server (nvidia-smi, the
// PCIe topology, sysfs), and how the control plane compares them with the
// declared inventory. The agent reports facts; the state machine keeps the
// last report, a pinned baseline of GPU identities, and the conditions
// (drift, lost heartbeats) derived from them.

// HostFacts is one discovery of a server.
type HostFacts struct {
	Hostname string `json:"hostname,omitempty"`
	// Driver and CUDA are the NVIDIA driver and CUDA versions nvidia-smi
	// reports ("535.183.01", "12.2").
	Driver string    `json:"driver,omitempty"`
	CUDA   string    `json:"cuda,omitempty"`
	GPUs   []HostGPU `json:"gpus"`
	NICs   []HostNIC `json:"nics"`
	// NVLinkGroups partitions the GPU indices into sets joined by NVLink
	// (nvidia-smi topo -m NV# cells); nil when the topology is unknown.
	NVLinkGroups [][]int `json:"nvlinkGroups,omitempty"`
	// NVLinkCluster identifies a multi-node NVLink domain (the GPU fabric
	// cluster UUID and clique of NVL72-class systems); empty on servers whose
	// NVLink domain is the server itself.
	NVLinkCluster string `json:"nvlinkCluster,omitempty"`
	// Sources names what answered ("nvidia-smi -q -x", "sysfs"); Problems
	// says what could not be read, so a partial discovery is visible.
	Sources  []string `json:"sources,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// HostGPU is one GPU as nvidia-smi sees it.
type HostGPU struct {
	// Index is nvidia-smi's index (PCI bus order).
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	// Product is nvidia-smi's product name ("NVIDIA H100 80GB HBM3"); Model
	// the inventory's model name it maps to ("H100-80GB"), empty if none.
	Product   string `json:"product"`
	Model     string `json:"model,omitempty"`
	MemoryMiB int    `json:"memoryMiB"`
	PCIBusID  string `json:"pciBusId"`
	// Minor is N of /dev/nvidiaN, -1 when unknown.
	Minor int `json:"minor"`
	// NUMA is the GPU's NUMA node, -1 when unknown; CPUs its CPU affinity
	// list ("0-47,96-143").
	NUMA int    `json:"numa"`
	CPUs string `json:"cpus,omitempty"`
	// MIGMode is "Enabled", "Disabled" or "" (not MIG capable).
	MIGMode string          `json:"migMode,omitempty"`
	MIG     []HostMIGDevice `json:"mig,omitempty"`
	// NVLinks and NVLinksDown count the GPU's active and inactive NVLink
	// links (nvidia-smi nvlink --status); 0 and 0 when unknown.
	NVLinks     int `json:"nvlinks,omitempty"`
	NVLinksDown int `json:"nvlinksDown,omitempty"`
}

// HostMIGDevice is one MIG device (a GPU instance with its compute
// instance) on a GPU.
type HostMIGDevice struct {
	// Index is the MIG device's index on its GPU (nvidia-smi -L "Device N").
	Index int `json:"index"`
	// GI and CI are the GPU and compute instance IDs.
	GI int `json:"gi"`
	CI int `json:"ci"`
	// Profile is the GPU instance profile ("3g.40gb"), empty when unknown.
	Profile string `json:"profile,omitempty"`
	// Start is the memory slot the instance starts at (mig -lgi
	// Placement), -1 when unknown.
	Start     int    `json:"start"`
	UUID      string `json:"uuid,omitempty"`
	MemoryMiB int    `json:"memoryMiB,omitempty"`
	SMs       int    `json:"sms,omitempty"`
	// GICap and CICap are the minors of /dev/nvidia-caps/nvidia-capN that
	// grant access to the GPU and compute instance, 0 when unknown.
	GICap int `json:"giCap,omitempty"`
	CICap int `json:"ciCap,omitempty"`
}

// HostNIC is one RDMA port.
type HostNIC struct {
	RDMADevice string `json:"rdmaDevice"` // mlx5_0
	Port       int    `json:"port"`
	// Netdev is the network interface of the port (ens1np0, ib0), empty
	// when unknown.
	Netdev    string `json:"netdev,omitempty"`
	LinkLayer string `json:"linkLayer,omitempty"` // InfiniBand or Ethernet
	// State is the port state in upper case (ACTIVE, DOWN, INIT).
	State    string `json:"state,omitempty"`
	RateGbps int    `json:"rateGbps,omitempty"`
	HCAType  string `json:"hcaType,omitempty"` // MT4129
	Firmware string `json:"firmware,omitempty"`
	PCIBusID string `json:"pciBusId,omitempty"`
	// NUMA is the NIC's NUMA node, -1 when unknown.
	NUMA int `json:"numa"`
	// GPU is the GPU this NIC is closest to in the PCIe topology (the one
	// best connected, PIX before PXB before PHB before NODE before SYS,
	// when exactly one GPU is), -1 when none or unknown; Path is that
	// connection's topo -m code.
	GPU  int    `json:"gpu"`
	Path string `json:"path,omitempty"`
	// RoCEGID is the GID index of the port's RoCE v2 IPv4 address, -1 when
	// unknown or not RoCE.
	RoCEGID int `json:"roceGid"`
	// Uverbs names the verbs device (uverbs3 for /dev/infiniband/uverbs3).
	Uverbs string `json:"uverbs,omitempty"`
}

// Host condition types. Drift kinds compare the facts with the declared
// inventory; heartbeat says the agent went silent.
const (
	CondHeartbeat    = "heartbeat"
	DriftGPUCount    = "gpu-count"
	DriftGPUModel    = "gpu-model"
	DriftGPUMissing  = "gpu-missing"
	DriftGPUUUID     = "gpu-uuid"
	DriftDriver      = "driver"
	DriftNICMissing  = "nic-missing"
	DriftNICAffinity = "nic-affinity"
	DriftNICRail     = "nic-rail"
	DriftNICDown     = "nic-down"
	DriftNVLink      = "nvlink"
)

// DriftKinds lists every drift kind, for help texts and validation.
var DriftKinds = []string{DriftGPUCount, DriftGPUModel, DriftGPUMissing, DriftGPUUUID, DriftDriver,
	DriftNICMissing, DriftNICAffinity, DriftNICRail, DriftNICDown, DriftNVLink}

// HostCondition is one thing wrong with a server, as the control plane
// sees it: a drift between facts and inventory, or lost heartbeats.
type HostCondition struct {
	Type    string    `json:"type" enum:"CondHeartbeat,DriftKinds"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
	// Cordons: the host policy cordons the server for this kind.
	Cordons bool `json:"cordons,omitempty"`
}

// HostPolicy says when a server is unhealthy and which drift cordons it.
type HostPolicy struct {
	// HeartbeatTimeoutSeconds: a server whose agent has not been heard for
	// this long is marked unhealthy (the scheduler places nothing there).
	HeartbeatTimeoutSeconds int64 `json:"heartbeatTimeoutSeconds" openapi:"required"`
	// CordonOn lists the drift kinds that cordon the server when they
	// appear; the others are recorded only.
	CordonOn []string `json:"cordonOn" enum:"DriftKinds"`
	// TenantMinDriver is the lowest driver a tenant's jobs accept (added to
	// each job's own minDriver, the higher one applying).
	TenantMinDriver map[string]string `json:"tenantMinDriver,omitempty"`
}

// Heartbeat timeout bounds.
const (
	DefaultHeartbeatTimeout = 60 * time.Second
	MinHeartbeatSeconds     = 1
	MaxHeartbeatSeconds     = 24 * 3600
)

// DefaultHostPolicy cordons on drift that makes placements wrong (GPUs or
// NICs missing, another model or driver) and records the rest.
func DefaultHostPolicy() HostPolicy {
	return HostPolicy{
		HeartbeatTimeoutSeconds: int64(DefaultHeartbeatTimeout / time.Second),
		CordonOn:                []string{DriftGPUCount, DriftGPUMissing, DriftGPUModel, DriftDriver, DriftNICMissing, DriftNICDown},
	}
}

// HeartbeatTimeout is the policy's timeout as a duration.
func (p HostPolicy) HeartbeatTimeout() time.Duration {
	return time.Duration(p.HeartbeatTimeoutSeconds) * time.Second
}

// Cordons reports whether drift of this kind cordons the server.
func (p HostPolicy) Cordons(kind string) bool { return slices.Contains(p.CordonOn, kind) }

// ValidateHostPolicy checks a policy.
func ValidateHostPolicy(p *HostPolicy) *Error {
	if err := ValidateRange("heartbeatTimeoutSeconds", p.HeartbeatTimeoutSeconds, MinHeartbeatSeconds, MaxHeartbeatSeconds); err != nil {
		return err
	}
	for i, k := range p.CordonOn {
		if !slices.Contains(DriftKinds, k) {
			return &Error{Code: CodeInvalidArgument, Field: fmt.Sprintf("cordonOn[%d]", i),
				Message: fmt.Sprintf("drift kind %q is not one of %s", k, strings.Join(DriftKinds, ", ")),
				Details: []Detail{{Field: fmt.Sprintf("cordonOn[%d]", i), Rule: "drift-kind", Message: "value " + truncate(k, 40)}}}
		}
		if slices.Index(p.CordonOn, k) != i {
			return Invalid(fmt.Sprintf("cordonOn[%d]", i), "drift kind %s is listed twice", k)
		}
	}
	for t, v := range p.TenantMinDriver {
		if err := ValidateName("tenantMinDriver", t); err != nil {
			return err
		}
		if _, ok := versionParts(v); !ok {
			return Invalid("tenantMinDriver."+t, "driver %q is not a dotted numeric version such as 535.104", v)
		}
	}
	return nil
}

// BaselineGPU pins the identity of declared GPU Index: the UUID and bus
// id the agent first reported for it (or that an operator accepted). A
// GPU is "vanished" when its UUID is no longer reported, whatever index
// nvidia-smi now gives the others.
type BaselineGPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	PCIBusID string `json:"pciBusId,omitempty"`
}

// HostStatus is a server's agent record: its last facts, the pinned GPU
// baseline and the conditions derived from them.
type HostStatus struct {
	Node  string `json:"node"`
	Agent string `json:"agent,omitempty"` // agent version and host name
	// Facts is the last report; FactsHash its fingerprint (a heartbeat
	// carries it, so facts are sent again only when they change).
	Facts      *HostFacts    `json:"facts,omitempty"`
	FactsHash  string        `json:"factsHash,omitempty"`
	FirstSeen  time.Time     `json:"firstSeen"`
	ReportedAt time.Time     `json:"reportedAt"`
	Baseline   []BaselineGPU `json:"baseline,omitempty"`
	// Conditions are the current drift and heartbeat conditions, by type.
	Conditions []HostCondition `json:"conditions,omitempty"`
	// CordonedForDrift and UnhealthyForHeartbeat say the control plane (not
	// an operator) set the server's cordon or unhealthy mark, so it lifts
	// them when the cause goes away.
	CordonedForDrift      bool `json:"cordonedForDrift,omitempty"`
	UnhealthyForHeartbeat bool `json:"unhealthyForHeartbeat,omitempty"`
	// LastHeartbeat is when the leader last heard the agent (kept in the
	// leader's memory, not replicated: filled in by the API server).
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
}

// Condition returns the condition of a type, if present.
func (h *HostStatus) Condition(typ string) (HostCondition, bool) {
	for _, c := range h.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return HostCondition{}, false
}

// Limits of a facts report.
const (
	maxHostGPUs   = 1024
	maxHostNICs   = 256
	maxHostMIG    = 64
	maxHostString = 256
	maxHostNotes  = 64
)

// ValidateHostFacts bounds a facts report: the agent is a remote program,
// its report is input like any other.
func ValidateHostFacts(f *HostFacts) *Error {
	if len(f.GPUs) > maxHostGPUs {
		return Invalid("gpus", "%d GPUs; the limit is %d", len(f.GPUs), maxHostGPUs)
	}
	if len(f.NICs) > maxHostNICs {
		return Invalid("nics", "%d NICs; the limit is %d", len(f.NICs), maxHostNICs)
	}
	if len(f.Sources) > maxHostNotes || len(f.Problems) > maxHostNotes {
		return Invalid("problems", "at most %d sources and %d problems", maxHostNotes, maxHostNotes)
	}
	strs := map[string]string{"hostname": f.Hostname, "driver": f.Driver, "cuda": f.CUDA, "nvlinkCluster": f.NVLinkCluster}
	for i, s := range f.Sources {
		strs[fmt.Sprintf("sources[%d]", i)] = s
	}
	for i, s := range f.Problems {
		strs[fmt.Sprintf("problems[%d]", i)] = s
	}
	if f.Driver != "" {
		if _, ok := versionParts(f.Driver); !ok {
			return Invalid("driver", "driver %q is not a dotted numeric version", truncate(f.Driver, 40))
		}
	}
	seen := map[int]bool{}
	uuids := map[string]bool{}
	for i, g := range f.GPUs {
		p := fmt.Sprintf("gpus[%d]", i)
		if g.Index < 0 || g.Index >= maxHostGPUs || seen[g.Index] {
			return Invalid(p+".index", "GPU index %d is out of range or repeated", g.Index)
		}
		seen[g.Index] = true
		if !strings.HasPrefix(g.UUID, "GPU-") || uuids[g.UUID] {
			return Invalid(p+".uuid", "GPU UUID %q must start with GPU- and be unique", truncate(g.UUID, 60))
		}
		uuids[g.UUID] = true
		if len(g.MIG) > maxHostMIG {
			return Invalid(p+".mig", "%d MIG devices; the limit is %d", len(g.MIG), maxHostMIG)
		}
		strs[p+".uuid"], strs[p+".product"], strs[p+".model"], strs[p+".pciBusId"], strs[p+".cpus"], strs[p+".migMode"] = g.UUID, g.Product, g.Model, g.PCIBusID, g.CPUs, g.MIGMode
		for j, m := range g.MIG {
			mp := fmt.Sprintf("%s.mig[%d]", p, j)
			if m.UUID != "" && !strings.HasPrefix(m.UUID, "MIG-") {
				return Invalid(mp+".uuid", "MIG UUID %q must start with MIG-", truncate(m.UUID, 60))
			}
			strs[mp+".uuid"], strs[mp+".profile"] = m.UUID, m.Profile
		}
	}
	for i, n := range f.NICs {
		p := fmt.Sprintf("nics[%d]", i)
		if n.RDMADevice == "" && n.Netdev == "" {
			return Invalid(p, "a NIC needs an RDMA device or a netdev name")
		}
		for k, v := range map[string]string{"rdmaDevice": n.RDMADevice, "netdev": n.Netdev, "linkLayer": n.LinkLayer, "state": n.State,
			"hcaType": n.HCAType, "firmware": n.Firmware, "pciBusId": n.PCIBusID, "path": n.Path, "uverbs": n.Uverbs} {
			strs[p+"."+k] = v
		}
		for k, v := range map[string]string{"rdmaDevice": n.RDMADevice, "netdev": n.Netdev, "uverbs": n.Uverbs} {
			if !deviceName(v) {
				return Invalid(p+"."+k, "%s %q must be letters, digits, '_', '-', '.' or ':'", k, truncate(v, 40))
			}
		}
	}
	for k, v := range strs {
		if len(v) > maxHostString {
			return Invalid(k, "%s is %d characters; the limit is %d", k, len(v), maxHostString)
		}
	}
	for i, grp := range f.NVLinkGroups {
		for _, g := range grp {
			if !seen[g] {
				return Invalid(fmt.Sprintf("nvlinkGroups[%d]", i), "NVLink group names GPU %d, which is not reported", g)
			}
		}
	}
	return nil
}

// deviceName: device and interface names end up in environment variables
// and paths, so they must be plain.
func deviceName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// ValidateExternalID checks a runtime's id of a job: "system:id" such as
// "slurm:4242", the system lower-case letters, digits and '-', the id
// printable without spaces; at most 128 characters.
func ValidateExternalID(field, id string) *Error {
	sys, rest, ok := strings.Cut(id, ":")
	if !ok || sys == "" || rest == "" || len(id) > 128 {
		return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf("%s %q must be SYSTEM:ID such as slurm:4242, at most 128 characters", field, truncate(id, 60)),
			Details: []Detail{{Field: field, Rule: "external-id", Message: "value " + truncate(id, 60)}}}
	}
	if err := ValidateName(field, sys); err != nil {
		return err
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c <= ' ' || c > '~' {
			return Invalid(field, "%s %q: the id after %s: must be printable ASCII without spaces", field, truncate(id, 60), sys)
		}
	}
	return nil
}

// ValidateTokenNode checks a node-scoped token: only a runtime token
// without a tenant may be scoped to a node (the node's agent).
func ValidateTokenNode(role Role, tenant, node string) *Error {
	if node == "" {
		return nil
	}
	if role != RoleRuntime || tenant != "" {
		return Invalid("node", "only a runtime token without a tenant may be scoped to a node (the node's agent)")
	}
	return ValidateName("node", node)
}

// JobWarning codes, on Job.Warnings.
const (
	WarningGPUVanished   = "gpu_vanished"
	WarningHeartbeatLost = "node_heartbeat_lost"
)

// MaxJobWarnings bounds the warnings kept on a job (the newest stay).
const MaxJobWarnings = 16
