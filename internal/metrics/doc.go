// Package metrics holds jobfabric's Prometheus metrics: the families a
// server records into (scheduler, fabric, API, raft), one registry per
// server (no global registry), the scope filter that lets a tenant-scoped
// token read only the series labelled with its own tenant, and the bridge
// that turns hashicorp/raft's go-metrics samples into Prometheus families.
//
// The only process-wide piece is that bridge: raft reports through the
// package-level functions of github.com/armon/go-metrics (the default
// backend of hashicorp/go-metrics' compat package), so its sink can only be
// global. raft.go isolates it: one sink per process, installed once, read
// by every server's registry through a collector that renames its series.
package metrics
