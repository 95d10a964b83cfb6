package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Namespace prefixes every family jobfabric defines.
const Namespace = "jobfabric"

// Label names. Every series about a tenant's objects carries Tenant (and
// Workspace when it is about one workspace): the scope filter keeps a
// tenant-scoped reader to the series whose tenant is its own, so a family
// that names a tenant's objects without these labels leaks.
const (
	LabelTenant    = "tenant"
	LabelWorkspace = "workspace"
)

// Known pending reason codes (sched's Reason* constants and the state's
// own); any other code is counted as "other", so a new code cannot grow the
// label set without a change here.
var pendingReasons = map[string]bool{
	"workspace_quota": true, "cluster_quota": true, "capacity": true, "no_inventory": true,
	"unknown_workspace": true, "queued_behind": true, "reclaim_pending": true, "reclaim_backoff": true,
	"topology": true, "tenant_quota": true, "plan_mismatch": true, "requeued": true,
}

// PendingReason is the reason label of a pending job's code: the code when
// known, "new" when the scheduler has not looked at the job yet, else
// "other".
func PendingReason(code string) string {
	switch {
	case code == "":
		return "new"
	case pendingReasons[code]:
		return code
	}
	return "other"
}

// PreemptionKind is the kind label of a preemption's reason code.
func PreemptionKind(code string) string {
	switch code {
	case "reclaimed", "preempted_by_priority", "drained":
		return code
	}
	return "other"
}

// Metrics is one server's registry and the families its loops record into.
type Metrics struct {
	reg *prometheus.Registry

	// Scheduler.
	CycleDuration    prometheus.Histogram
	AdmissionLatency prometheus.Histogram
	Placements       *prometheus.CounterVec // tenant, workspace
	Preemptions      *prometheus.CounterVec // tenant, workspace, kind
	ReclaimLatency   prometheus.Histogram
	ReclaimBound     prometheus.Gauge
	ReclaimsOverdue  prometheus.Counter

	// Fabric.
	DeployDuration *prometheus.HistogramVec // device
	RevisionDeploy prometheus.Histogram     // per revision deployed in full
	DeployFailures *prometheus.CounterVec   // device
	VerifyOK       prometheus.Gauge
	VerifyFailures prometheus.Gauge

	// API.
	Requests        *prometheus.CounterVec   // method, route, code
	RequestDuration *prometheus.HistogramVec // method, route
	// ConnsRefused counts API connections closed at accept or at the
	// ClientHello, before any handshake work, by reason.
	ConnsRefused *prometheus.CounterVec // reason
	// AuthRefused counts requests answered 429 because their source failed
	// authentication too often.
	AuthRefused prometheus.Counter

	// Raft, as this server sees it (the process-wide raft library's own
	// figures come through the bridge, raft.go).
	ApplyDuration prometheus.Histogram
	// RaftConnsRefused counts connections to the Raft port reset at
	// accept, before any TLS byte, by reason.
	RaftConnsRefused *prometheus.CounterVec // reason
	LeaderChanges    prometheus.Counter
}

// New makes a registry with jobfabric's families, the Go and process
// collectors and the raft bridge.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	// Every family is jobfabric_*, registered in this registry only.
	f := promauto.With(prometheus.WrapRegistererWithPrefix(Namespace+"_", reg))
	durations := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	waits := []float64{.01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600}
	m := &Metrics{
		reg: reg,
		CycleDuration: f.NewHistogram(prometheus.HistogramOpts{Subsystem: "scheduler", Name: "cycle_duration_seconds",
			Help: "Time of one scheduling cycle on the leader: snapshot, schedule and the commit of its plan.", Buckets: durations}),
		AdmissionLatency: f.NewHistogram(prometheus.HistogramOpts{Subsystem: "scheduler", Name: "admission_latency_seconds",
			Help: "Time from a job's submission to its placement, observed when the placement commits.", Buckets: waits}),
		Placements: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "scheduler", Name: "placements_total",
			Help: "Jobs placed (committed placements)."}, []string{LabelTenant, LabelWorkspace}),
		Preemptions: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "scheduler", Name: "preemptions_total",
			Help: "Jobs told to stop, by the victim's tenant and workspace and the kind (reclaimed, preempted_by_priority, drained, other)."}, []string{LabelTenant, LabelWorkspace, "kind"}),
		ReclaimLatency: f.NewHistogram(prometheus.HistogramOpts{Subsystem: "scheduler", Name: "reclaim_latency_seconds",
			Help: "Time from the first reclaim issued for a job within its guarantee to its placement; compare with jobfabric_scheduler_reclaim_bound_seconds.", Buckets: waits}),
		ReclaimBound: f.NewGauge(prometheus.GaugeOpts{Subsystem: "scheduler", Name: "reclaim_bound_seconds",
			Help: "The reclaim bound: a job within its guarantee is placed within the preemption grace plus one scheduling interval."}),
		ReclaimsOverdue: f.NewCounter(prometheus.CounterOpts{Subsystem: "scheduler", Name: "reclaims_over_bound_total",
			Help: "Reclaims whose job was placed later than the reclaim bound."}),
		DeployDuration: f.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "fabric", Name: "deploy_duration_seconds",
			Help: "Time to deploy one device's configuration (lint and apply), by device.", Buckets: durations}, []string{"device"}),
		RevisionDeploy: f.NewHistogram(prometheus.HistogramOpts{Subsystem: "fabric", Name: "revision_deploy_seconds",
			Help: "Time from a fabric revision's first deploy round to every device running it or a newer one (retries of failed devices included); each revision is timed, also one replaced while a device still deployed an older one.", Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}),
		DeployFailures: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "fabric", Name: "deploy_failures_total",
			Help: "Device deploys that failed, by device."}, []string{"device"}),
		VerifyOK: f.NewGauge(prometheus.GaugeOpts{Subsystem: "fabric", Name: "verify_ok",
			Help: "1 when the verifier passed the latest compiled intent, 0 when it found failures."}),
		VerifyFailures: f.NewGauge(prometheus.GaugeOpts{Subsystem: "fabric", Name: "verify_failures",
			Help: "Failures the verifier found in the latest compiled intent."}),
		Requests: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "http", Name: "requests_total",
			Help: "API requests by method, route pattern and status code."}, []string{"method", "route", "code"}),
		RequestDuration: f.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "http", Name: "request_duration_seconds",
			Help: "API request latency by method and route pattern (streams: their whole life).", Buckets: durations}, []string{"method", "route"}),
		ConnsRefused: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "api", Name: "connections_refused_total",
			Help: "API connections closed before a TLS handshake, by reason: rate (the source's new-connection rate), per_source (connections the source holds open), source_handshakes (the source's TLS handshakes in progress), handshakes (TLS handshakes in progress on this server), handshake_rate (TLS handshakes a second on this server). The handshake reasons refuse a ClientHello before any key operation."}, []string{"reason"}),
		AuthRefused: f.NewCounter(prometheus.CounterOpts{Subsystem: "api", Name: "auth_refused_total",
			Help: "API requests answered 429 without looking at their token: their source failed authentication too often in the window."}),
		ApplyDuration: f.NewHistogram(prometheus.HistogramOpts{Subsystem: "raft", Name: "apply_duration_seconds",
			Help: "Time for this server to commit a command through raft and apply it (propose to result).", Buckets: durations}),
		RaftConnsRefused: f.NewCounterVec(prometheus.CounterOpts{Subsystem: "raft", Name: "connections_refused_total",
			Help: "Raft port connections from sources that are not members reset at accept, before any TLS byte, by reason: rate (the source's new-connection rate), per_source (connections the source holds open), source_handshakes (the source's TLS handshakes in progress), handshakes (untrusted TLS handshakes in progress on this server), handshake_rate (--raft-handshake-rate), not_member (--raft-members-only)."}, []string{"reason"}),
		LeaderChanges: f.NewCounter(prometheus.CounterOpts{Subsystem: "raft", Name: "leader_changes_total",
			Help: "Leadership changes this server observed (gained or lost)."}),
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), raftBridge())
	return m
}

// Register adds a collector to the server's registry: the hook for
// families built elsewhere (per-job path health). Series about a tenant's
// jobs must carry the tenant label (LabelTenant) and the workspace label
// (LabelWorkspace): a tenant-scoped reader sees only series labelled with
// its tenant, a member only those labelled with its workspace too.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// MustRegister is Register for collectors whose families are fixed.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }

// Gatherer is the registry, to read in tests or serve (Handler).
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Since is the seconds since start, for observations.
func Since(start time.Time) float64 { return time.Since(start).Seconds() }
