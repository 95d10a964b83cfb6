package api

// NodeUpdateRequest changes a server's condition; unset fields stay.
type NodeUpdateRequest struct {
	Cordoned  *bool  `json:"cordoned,omitempty"`
	Draining  *bool  `json:"draining,omitempty"`
	Unhealthy *bool  `json:"unhealthy,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// GraceSeconds, with draining true, gives the server's jobs this long
	// to stop (0: the scheduler's preemption grace).
	GraceSeconds int64 `json:"graceSeconds,omitempty"`
}

// RuntimeNodesRequest is the body of POST /v1/nodes/runtime: a workload
// runtime's word on the servers it runs jobs on (the Slurm bridge: the
// nodes slurmctld cannot use). An unusable server is cordoned for the
// runtime, unless something else keeps work off it already; a usable one
// the runtime cordoned is uncordoned. Servers in neither list, or not in
// the inventory, are left as they are. An operator's cordon or uncordon
// replaces the runtime's word.
type RuntimeNodesRequest struct {
	// Runtime names the runtime: slurm:CLUSTER for a Slurm cluster.
	Runtime string `json:"runtime" openapi:"required"`
	// Usable are the servers the runtime can run jobs on.
	Usable []string `json:"usable,omitempty"`
	// Unusable are the servers it cannot run jobs on, each with why.
	Unusable []RuntimeNode `json:"unusable,omitempty"`
}

// RuntimeNode is a server a runtime cannot use.
type RuntimeNode struct {
	Server string `json:"server" openapi:"required"`
	// Reason names the runtime's state of the server and its reason
	// ("slurm jftest: node gpu1 is DOWN: maintenance"); 1 to 256
	// characters. It becomes the cordon's reason.
	Reason string `json:"reason" openapi:"required"`
}
