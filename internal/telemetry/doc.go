// Package telemetry ingests fabric, NIC and GPU counters from Prometheus
// exposition endpoints (switch exporters, node_exporter, NVIDIA's DCGM
// exporter) and from pushed samples, maps each series to an inventory
// entity (a leaf port, a host NIC, a GPU) by configurable label rules, and
// keeps a bounded window per series from which it computes rates.
//
// Parsing is github.com/prometheus/common/expfmt's; this package adds
// what a control plane needs on top: counter resets that are not spikes,
// stale targets and missing series, and a cardinality limit that logs
// what it drops. It knows nothing of jobs: internal/health joins its
// readings to jobs and tenants.
package telemetry
