package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/metrics"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// checkRaftAdmission names the --raft-* flag that is wrong.
func checkRaftAdmission(a store.Admission) error {
	switch {
	case a.ConnRate < 0:
		return domain.Invalid("raft-conn-rate", "--raft-conn-rate %g is negative (0: no limit)", a.ConnRate)
	case a.ConnBurst < 0:
		return domain.Invalid("raft-conn-burst", "--raft-conn-burst %d is negative", a.ConnBurst)
	case a.ConnRate > 0 && a.ConnBurst < 1:
		return domain.Invalid("raft-conn-burst", "--raft-conn-burst %d: with --raft-conn-rate %g a source must be able to open at least 1 connection", a.ConnBurst, a.ConnRate)
	case a.ConnsPerSource < 0:
		return domain.Invalid("raft-conns-per-source", "--raft-conns-per-source %d is negative (0: no limit)", a.ConnsPerSource)
	case a.Handshakes < 0:
		return domain.Invalid("raft-handshakes", "--raft-handshakes %d is negative (0: no limit)", a.Handshakes)
	case a.SourceHandshakes < 0:
		return domain.Invalid("raft-source-handshakes", "--raft-source-handshakes %d is negative (0: no limit)", a.SourceHandshakes)
	case a.HandshakeRate < 0:
		return domain.Invalid("raft-handshake-rate", "--raft-handshake-rate %g is negative (0: no limit)", a.HandshakeRate)
	case a.HandshakeRate > 0 && a.HandshakeBurst < 1:
		return domain.Invalid("raft-handshake-burst", "--raft-handshake-burst %d: with --raft-handshake-rate %g at least 1 handshake must be possible", a.HandshakeBurst, a.HandshakeRate)
	}
	return nil
}

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
