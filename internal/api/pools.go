package api

import "time"

// PoolSetRequest is the body of PUT /v1/pools/{name}: the pool's servers,
// replacing the ones it had. A job naming the pool is placed on these
// servers only, from the next scheduling cycle on (jobs already placed
// keep their GPUs).
type PoolSetRequest struct {
	// Servers are the pool's servers (1 to 100,000 names, none twice).
	// Names the inventory does not have are kept (a runtime may know
	// nodes jobfabric does not) and never placed on.
	Servers []string `json:"servers" openapi:"required"`
}

// Pool is a server pool: a named set of servers where a workload runtime
// can run a job (a Slurm partition: slurm:CLUSTER:PARTITION), or a set an
// admin names. A job that names a pool (pool) is placed on its servers
// only.
type Pool struct {
	Name string `json:"name" openapi:"required"`
	// Servers are the pool's servers, sorted.
	Servers []string `json:"servers" openapi:"required"`
	// Unknown are the pool's servers the inventory does not have: never
	// placed on. Shown to admins and platform runtimes only.
	Unknown []string `json:"unknown,omitempty"`
	// UpdatedAt is when the pool last changed.
	UpdatedAt time.Time `json:"updatedAt"`
	// UpdatedBy is who changed it last (admins and platform runtimes
	// only).
	UpdatedBy string `json:"updatedBy,omitempty"`
}
