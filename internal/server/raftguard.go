package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfabric/jobfabric/internal/metrics"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// checkRaftAdmission names the --raft-* flag that is wrong.
func checkRaftAdmission(a store.Admission) error { return checkLimits(a.Admission, "raft") }

// raftAdmission is a with the server's clock and its refusals counted.
func raftAdmission(a store.Admission, clock tstime.Clock, refused *prometheus.CounterVec) store.Admission {
	a.Clock = clock
	a.Refused = func(reason string) { refused.WithLabelValues(reason).Inc() }
	return a
}

// registerRaftAdmission exposes the Raft port's admission table, read at
// scrape, next to the API's.
func registerRaftAdmission(m *metrics.Metrics, st *store.Store) {
	m.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "jobfabric", Subsystem: "raft", Name: "sources",
			Help: "Sources (IPv4 addresses, IPv6 /64s) the Raft port's admission table remembers: at most its bound plus one per open connection."},
			func() float64 { return float64(st.Sources()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "jobfabric", Subsystem: "raft", Name: "handshakes_in_progress",
			Help: "TLS handshakes in progress on the Raft port from sources that are not members (accept to the handshake's end), against --raft-handshakes."},
			func() float64 { return float64(st.HandshakesInProgress()) }))
}
