package metrics

import (
	"sync"

	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// hashicorp/raft reports through github.com/hashicorp/go-metrics/compat,
// which without the hashicorpmetrics build tag forwards to the package-level
// functions of github.com/armon/go-metrics: a process-wide sink is the only
// way to see raft's own figures. This file is the one global of the
// package: the sink is installed once per process, into a registry of its
// own (never Prometheus' default), and every server's registry reads it
// through raftCollector. With several servers in one process (tests) they
// all read the same figures: raft's metrics carry no server name.

// raftSeries are raft's keys that jobfabric exports, and their names:
// snake_case, base units (armon's timers are milliseconds), _total on
// counters. The sink's filter drops every other key at the source, so
// per-peer keys (raft.replication.heartbeat.<peer>) never reach it.
var raftSeries = map[string]raftSeriesDef{
	"raft_commitTime":                   {"raft_commit_time_seconds", "Time from a log entry's dispatch on the leader to its commit (raft library, process-wide).", 1e-3},
	"raft_fsm_apply":                    {"raft_fsm_apply_seconds", "Time to apply a committed entry to the state machine (raft library, process-wide).", 1e-3},
	"raft_leader_lastContact":           {"raft_leader_last_contact_seconds", "Time since the leader last heard from its followers (raft library, process-wide).", 1e-3},
	"raft_state_leader":                 {"raft_state_leader_total", "Times raft became leader in this process.", 1},
	"raft_state_candidate":              {"raft_state_candidate_total", "Times raft started an election in this process.", 1},
	"raft_state_follower":               {"raft_state_follower_total", "Times raft became follower in this process.", 1},
	"raft_transition_heartbeat_timeout": {"raft_heartbeat_timeouts_total", "Heartbeat timeouts that moved a follower to candidate.", 1},
	"raft_apply":                        {"raft_applies_total", "Commands applied through raft's Apply in this process.", 1},
	"raft_peers":                        {"raft_peers", "Voters and non-voters in raft's latest configuration.", 1},
	// What a commit waits for, member by member (issue 18: the slow 1 %
	// of submits): the leader's own log write and fsync, each follower's
	// round trip as the leader sees it, a follower's log write and fsync
	// and its whole AppendEntries, and the snapshots that compete with
	// them for the CPU and the disk.
	"raft_leader_dispatchLog":            {"raft_leader_dispatch_log_seconds", "Time for the leader to write (and fsync) a batch of new entries to its own log (raft library, process-wide).", 1e-3},
	"raft_replication_appendEntries_rpc": {"raft_replication_append_entries_rpc_seconds", "Time of one AppendEntries round trip from the leader to a follower, by peer (raft library, process-wide).", 1e-3},
	"raft_rpc_appendEntries":             {"raft_append_entries_seconds", "Time for a follower to handle one AppendEntries (raft library, process-wide).", 1e-3},
	"raft_rpc_appendEntries_storeLogs":   {"raft_append_entries_store_seconds", "Time for a follower to write (and fsync) the entries of one AppendEntries to its log (raft library, process-wide).", 1e-3},
	"raft_snapshot_create":               {"raft_snapshot_create_seconds", "Time to take a raft snapshot, from the FSM's snapshot to the persisted file (raft library, process-wide).", 1e-3},
	"raft_snapshot_persist":              {"raft_snapshot_persist_seconds", "Time to write a raft snapshot's file (raft library, process-wide).", 1e-3},
}

type raftSeriesDef struct {
	name, help string
	scale      float64
}

// raftKeys are raftSeries' keys as go-metrics prefixes (dot-separated).
var raftKeys = []string{"raft.commitTime", "raft.fsm.apply", "raft.leader.lastContact", "raft.state.leader",
	"raft.state.candidate", "raft.state.follower", "raft.transition.heartbeat_timeout", "raft.apply", "raft.peers",
	"raft.leader.dispatchLog", "raft.replication.appendEntries.rpc", "raft.rpc.appendEntries", "raft.snapshot.create", "raft.snapshot.persist"}

var (
	raftOnce sync.Once
	raftReg  *prometheus.Registry // the process-wide sink's registry
	raftErr  error
)

// raftBridge installs the process-wide sink on first use and returns a
// collector of it.
func raftBridge() prometheus.Collector {
	raftOnce.Do(func() {
		raftReg = prometheus.NewRegistry()
		// Expiration 0: raft's counters are kept, not dropped after a
		// minute without change.
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: raftReg, Name: "jobfabric_raft_sink"})
		if err != nil {
			raftErr = err
			return
		}
		cfg := gometrics.DefaultConfig("") // no service prefix: keys stay raft.*
		cfg.EnableHostname = false         // no hostname prefix on gauges
		cfg.EnableRuntimeMetrics = false   // the Go collector covers the runtime
		cfg.FilterDefault = false
		cfg.AllowedPrefixes = raftKeys
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			raftErr = err
		}
	})
	return raftCollector{}
}

// raftCollector re-exports the sink's allowed series under raftSeries'
// names. It is unchecked (no Describe): what raft has reported so far
// varies.
type raftCollector struct{}

func (raftCollector) Describe(chan<- *prometheus.Desc) {}

func (raftCollector) Collect(ch chan<- prometheus.Metric) {
	if raftErr != nil || raftReg == nil {
		return
	}
	fams, err := raftReg.Gather()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc(Namespace+"_raft_bridge_error", "raft metrics bridge", nil, nil), err)
		return
	}
	for _, f := range fams {
		def, ok := raftSeries[f.GetName()]
		if !ok {
			continue
		}
		for _, m := range f.Metric {
			var names, values []string
			for _, l := range m.Label {
				names, values = append(names, l.GetName()), append(values, l.GetValue())
			}
			desc := prometheus.NewDesc(Namespace+"_"+def.name, def.help, names, nil)
			if cm, err := convert(desc, f.GetType(), m, def.scale, values); err == nil {
				ch <- cm
			}
		}
	}
}

func convert(desc *prometheus.Desc, t dto.MetricType, m *dto.Metric, scale float64, values []string) (prometheus.Metric, error) {
	switch t {
	case dto.MetricType_COUNTER:
		return prometheus.NewConstMetric(desc, prometheus.CounterValue, m.GetCounter().GetValue()*scale, values...)
	case dto.MetricType_GAUGE:
		return prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.GetGauge().GetValue()*scale, values...)
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		q := map[float64]float64{}
		for _, v := range s.Quantile {
			q[v.GetQuantile()] = v.GetValue() * scale
		}
		return prometheus.NewConstSummary(desc, s.GetSampleCount(), s.GetSampleSum()*scale, q, values...)
	}
	return prometheus.NewConstMetric(desc, prometheus.UntypedValue, m.GetUntyped().GetValue()*scale, values...)
}
