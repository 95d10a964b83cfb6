package srclimit_test

import (
	"errors"
	"testing"

	"github.com/jobfabric/jobfabric/internal/srclimit"
)

// TestAdmissionCheck: each rule names its field, as a flag with a prefix
// and in words without one. The messages are the ones the API's, the
// Raft port's and the store's checks gave before they were one.
func TestAdmissionCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		a              srclimit.Admission
		prefix         string
		field, message string
	}{
		"api rate": {srclimit.Admission{ConnRate: -1}, "api",
			"api-conn-rate", "--api-conn-rate -1 is negative (0: no limit)"},
		"api burst": {srclimit.Admission{ConnBurst: -2}, "api",
			"api-conn-burst", "--api-conn-burst -2 is negative"},
		"api rate, no burst": {srclimit.Admission{ConnRate: 50}, "api",
			"api-conn-burst", "--api-conn-burst 0: with --api-conn-rate 50 a source must be able to open at least 1 connection"},
		"api per source": {srclimit.Admission{ConnsPerSource: -3}, "api",
			"api-conns-per-source", "--api-conns-per-source -3 is negative (0: no limit)"},
		"api handshakes": {srclimit.Admission{Handshakes: -1}, "api",
			"api-handshakes", "--api-handshakes -1 is negative (0: no limit)"},
		"api source handshakes": {srclimit.Admission{SourceHandshakes: -1}, "api",
			"api-source-handshakes", "--api-source-handshakes -1 is negative (0: no limit)"},
		"api handshake rate": {srclimit.Admission{HandshakeRate: -0.5}, "api",
			"api-handshake-rate", "--api-handshake-rate -0.5 is negative (0: no limit)"},
		"api handshake burst": {srclimit.Admission{HandshakeRate: 100}, "api",
			"api-handshake-burst", "--api-handshake-burst 0: with --api-handshake-rate 100 at least 1 handshake must be possible"},
		"raft rate, no burst": {srclimit.Admission{ConnRate: 10}, "raft",
			"raft-conn-burst", "--raft-conn-burst 0: with --raft-conn-rate 10 a source must be able to open at least 1 connection"},
		"raft source handshakes": {srclimit.Admission{SourceHandshakes: -1}, "raft",
			"raft-source-handshakes", "--raft-source-handshakes -1 is negative (0: no limit)"},
		"words rate": {srclimit.Admission{ConnRate: -1}, "",
			"conn-rate", "connection rate -1 is negative (0: no limit)"},
		"words rate, no burst": {srclimit.Admission{ConnRate: 5}, "",
			"conn-burst", "connection burst 0: with a connection rate of 5 a source must be able to open at least 1 connection"},
		"words per source": {srclimit.Admission{ConnsPerSource: -1}, "",
			"conns-per-source", "connections per source -1 is negative (0: no limit)"},
		"words source handshakes": {srclimit.Admission{SourceHandshakes: -1}, "",
			"source-handshakes", "handshakes per source -1 is negative (0: no limit)"},
		"words handshake burst": {srclimit.Admission{HandshakeRate: 5}, "",
			"handshake-burst", "handshake burst 0: with a handshake rate of 5 at least 1 handshake must be possible"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.a.Check(tc.prefix)
			var fe *srclimit.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Check(%q) = %v, want a *FieldError", tc.prefix, err)
			}
			if fe.Field != tc.field || fe.Error() != tc.message {
				t.Errorf("Check(%q) = field %q %q\nwant field %q %q", tc.prefix, fe.Field, fe.Error(), tc.field, tc.message)
			}
		})
	}
	for _, a := range []srclimit.Admission{{}, {ConnRate: 10, ConnBurst: 1, HandshakeRate: 1, HandshakeBurst: 1}} {
		if err := a.Check("api"); err != nil {
			t.Errorf("%v: %v, want no error", a, err)
		}
	}
}

// TestAdmissionLimits: the Table gets the per-source fields, SourceHandshakes
// as its Handshakes (the server-wide Handshakes is the caller's).
func TestAdmissionLimits(t *testing.T) {
	a := srclimit.Admission{ConnRate: 1.5, ConnBurst: 2, ConnsPerSource: 3, Handshakes: 40, SourceHandshakes: 4,
		HandshakeRate: 9, HandshakeBurst: 9, MaxSources: 5}
	want := srclimit.Limits{Rate: 1.5, Burst: 2, PerSource: 3, Handshakes: 4, MaxSources: 5}
	if got := a.Limits(); got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
}
