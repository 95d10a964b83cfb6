package api

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// JobHealth is the answer of GET /v1/jobs/{id}/health: the job's path
// (GPUs -> NICs -> leaf ports -> uplinks) with the worst signals on each
// hop, a verdict, and the other jobs that share its hot links.
type JobHealth struct {
	Job uint64 `json:"job" openapi:"required"`
	// Verdict is the worst hop's verdict now (not debounced); Committed is
	// the debounced one the job carries (job get, job watch, events).
	Verdict domain.PathVerdict `json:"verdict" openapi:"required"`
	// Message names the worst signal and where.
	Message   string             `json:"message,omitempty"`
	Committed *domain.PathHealth `json:"committed,omitempty"`
	// At is when the readings were judged.
	At   time.Time `json:"at" openapi:"required"`
	Hops []PathHop `json:"hops" openapi:"required"`
	// Shared lists the job's hot links (hops whose verdict is a fault) that
	// carry other jobs too.
	Shared []SharedLink `json:"shared"`
}

// PathHop is one hop of a job's path.
type PathHop struct {
	// Kind is gpu, nic, port (the leaf port a NIC is cabled to) or uplink
	// (a leaf-to-spine link, both ends).
	Kind string `json:"kind" openapi:"required"`
	// Name is the hop as the topology names it: server/gpuN, server/nic,
	// leaf/port, leaf/port-spine/port.
	Name    string             `json:"name" openapi:"required"`
	Verdict domain.PathVerdict `json:"verdict" openapi:"required"`
	// Signals are the hop's signals beyond their thresholds, worst first
	// (at most a few); Note says why a hop is unknown.
	Signals []SignalValue `json:"signals,omitempty"`
	Note    string        `json:"note,omitempty"`
}

// SignalValue is one signal of one entity and the threshold it crossed.
type SignalValue struct {
	// Entity is the device and port, NIC or GPU the reading is about.
	Entity string `json:"entity" openapi:"required"`
	Signal string `json:"signal" openapi:"required"`
	// Priority is the PFC priority, -1 when the series has none.
	Priority int `json:"priority"`
	// Value is the per-second rate of a counter or the value of a gauge.
	Value     float64            `json:"value"`
	Threshold float64            `json:"threshold"`
	Verdict   domain.PathVerdict `json:"verdict" openapi:"required"`
}

// SharedLink is a hot link of a job's path and who else it carries: jobs
// the caller may see by name, the others only as a count (no name,
// workspace or tenant).
type SharedLink struct {
	Link      string             `json:"link" openapi:"required"`
	Verdict   domain.PathVerdict `json:"verdict" openapi:"required"`
	Jobs      []JobRef           `json:"jobs"`
	OtherJobs int                `json:"otherJobs"`
}

// JobRef names a job the caller may see.
type JobRef struct {
	ID        uint64 `json:"id" openapi:"required"`
	Name      string `json:"name,omitempty"`
	Tenant    string `json:"tenant" openapi:"required"`
	Workspace string `json:"workspace" openapi:"required"`
}

// Hotspots is the answer of GET /v1/fabric/hotspots: the worst switch
// ports, ranked, with the jobs and tenants they affect. A tenant-scoped
// caller sees only ports on its own jobs' paths.
type Hotspots struct {
	At    time.Time `json:"at" openapi:"required"`
	Ports []Hotspot `json:"ports" openapi:"required"`
}

// Hotspot is one switch port (or uplink) and what crosses it.
type Hotspot struct {
	// Port is leaf/port for a server link, leaf/port-spine/port for an
	// uplink; Kind is port or uplink.
	Port    string             `json:"port" openapi:"required"`
	Kind    string             `json:"kind" openapi:"required"`
	Verdict domain.PathVerdict `json:"verdict" openapi:"required"`
	Signals []SignalValue      `json:"signals"`
	// Jobs are the jobs on the port the caller may see, Tenants their
	// tenants; OtherJobs counts the rest.
	Jobs      []JobRef `json:"jobs"`
	Tenants   []string `json:"tenants"`
	OtherJobs int      `json:"otherJobs"`
}
