package domain

import "time"

// NodeCondition is an operator's (or node agent's) word on a server: the
// scheduler places nothing new on a cordoned, draining or unhealthy server,
// and stops the jobs of a draining one after the grace period.
type NodeCondition struct {
	Server    string    `json:"server"`
	Cordoned  bool      `json:"cordoned"`
	Draining  bool      `json:"draining"`
	Unhealthy bool      `json:"unhealthy"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy,omitempty"`
	// Runtime names the workload runtime (a Slurm cluster: slurm:CLUSTER)
	// that cordoned the server because it cannot run jobs there; it lifts
	// the cordon when it can again. An operator's cordon or uncordon
	// replaces its word.
	Runtime string `json:"runtime,omitempty"`
}

// Schedulable reports whether new work may land on the server.
func (c NodeCondition) Schedulable() bool { return !c.Cordoned && !c.Draining && !c.Unhealthy }

// NodeView is a server as `node list` shows it: inventory, condition and use.
type NodeView struct {
	Name         string        `json:"name"`
	Site         string        `json:"site"`
	Fabric       string        `json:"fabric"`
	Stripe       int           `json:"stripe"`
	NVLinkDomain string        `json:"nvlinkDomain"`
	GPUModel     string        `json:"gpuModel"`
	GPUs         int           `json:"gpus"`
	Driver       string        `json:"driver,omitempty"`
	UsedGPUs     int           `json:"usedGPUs"`
	Tenants      []string      `json:"tenants"`
	Condition    NodeCondition `json:"condition"`
	// Leaves are the leaves the server's NICs are cabled to, by rail (on a
	// rail-optimized stripe, the stripe's leaf of each rail).
	Leaves []string `json:"leaves,omitempty"`
	// ReportedDriver and Conditions come from the node's agent: the driver
	// it runs, drift from the inventory and lost heartbeats.
	ReportedDriver string          `json:"reportedDriver,omitempty"`
	Conditions     []HostCondition `json:"conditions,omitempty"`
}
