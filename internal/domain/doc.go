// Package domain holds the types every other package speaks: inventory (sites,
// fabrics, switches, servers, GPUs, NICs, cables), tenancy (tenants, workspaces,
// tokens), jobs, audit events and the typed error carried over the API.
//
// It depends on the standard library only and does no I/O, so the pure cores
// (topology, scheduler, fabric compiler) and the state machine can share it.
package domain
