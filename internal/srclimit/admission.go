package srclimit

import (
	"fmt"
	"net/netip"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Admission is what a listener admits before TLS: the per-source limits
// of a Table and the server-wide handshake limits. The API port
// (server.Admission) and the Raft port (store.Admission) embed it, each
// with what only it has. A zero field turns its limit off; the zero value
// limits nothing.
type Admission struct {
	// ConnRate is the new connections a second one source may open on
	// average; ConnBurst how many at once.
	ConnRate  float64
	ConnBurst int
	// ConnsPerSource caps the connections one source holds open.
	ConnsPerSource int
	// Handshakes caps the TLS handshakes in progress from all untrusted
	// sources together; SourceHandshakes caps one source's, so that one
	// source stalling handshakes cannot take every slot.
	Handshakes, SourceHandshakes int
	// HandshakeRate bounds the TLS handshakes a second the server begins
	// for all untrusted sources together (HandshakeBurst at once): the
	// CPU a flood from many addresses can take.
	HandshakeRate  float64
	HandshakeBurst int
	// TrustedSources are never limited.
	TrustedSources []netip.Prefix
	// MaxSources bounds the sources remembered (0: DefaultMaxSources).
	MaxSources int
}

// FieldError is a wrong Admission field. It is a plain error (the store,
// which links this package, must not link internal/domain): a server
// carries it over its API as domain.Invalid(Field, Message).
type FieldError struct {
	// Field is the flag named, without its dashes ("api-conn-rate"), or
	// with no prefix the field's flag suffix ("conn-rate").
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

// Check says which field is wrong. With a prefix the message names the
// flag (--<prefix>-conn-rate); without one it names the limit in words
// ("connection rate"), for a caller that has no flags.
func (a Admission) Check(prefix string) error {
	// name is how the message names a field; with how it names the other
	// field a rule ties it to.
	name := func(flag, words string) string {
		if prefix == "" {
			return words
		}
		return "--" + prefix + "-" + flag
	}
	with := func(flag, words string) string {
		if prefix == "" {
			return "a " + words + " of"
		}
		return name(flag, words)
	}
	bad := func(flag, format string, args ...any) error {
		field := flag
		if prefix != "" {
			field = prefix + "-" + flag
		}
		return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case a.ConnRate < 0:
		return bad("conn-rate", "%s %g is negative (0: no limit)", name("conn-rate", "connection rate"), a.ConnRate)
	case a.ConnBurst < 0:
		return bad("conn-burst", "%s %d is negative", name("conn-burst", "connection burst"), a.ConnBurst)
	case a.ConnRate > 0 && a.ConnBurst < 1:
		return bad("conn-burst", "%s %d: with %s %g a source must be able to open at least 1 connection",
			name("conn-burst", "connection burst"), a.ConnBurst, with("conn-rate", "connection rate"), a.ConnRate)
	case a.ConnsPerSource < 0:
		return bad("conns-per-source", "%s %d is negative (0: no limit)", name("conns-per-source", "connections per source"), a.ConnsPerSource)
	case a.Handshakes < 0:
		return bad("handshakes", "%s %d is negative (0: no limit)", name("handshakes", "handshakes"), a.Handshakes)
	case a.SourceHandshakes < 0:
		return bad("source-handshakes", "%s %d is negative (0: no limit)", name("source-handshakes", "handshakes per source"), a.SourceHandshakes)
	case a.HandshakeRate < 0:
		return bad("handshake-rate", "%s %g is negative (0: no limit)", name("handshake-rate", "handshake rate"), a.HandshakeRate)
	case a.HandshakeRate > 0 && a.HandshakeBurst < 1:
		return bad("handshake-burst", "%s %d: with %s %g at least 1 handshake must be possible",
			name("handshake-burst", "handshake burst"), a.HandshakeBurst, with("handshake-rate", "handshake rate"), a.HandshakeRate)
	}
	return nil
}

// Limits is the Table's part of a: the caller adds what only it limits
// (the API its failed authentications).
func (a Admission) Limits() Limits {
	return Limits{Rate: a.ConnRate, Burst: a.ConnBurst, PerSource: a.ConnsPerSource, Handshakes: a.SourceHandshakes,
		MaxSources: a.MaxSources}
}

// HandshakeBucket is the server-wide bucket of HandshakeRate.
func (a Admission) HandshakeBucket(clock tstime.Clock) *Bucket {
	return NewBucket(a.HandshakeRate, a.HandshakeBurst, clock)
}

// String names the limits for a start log line; the embedding types add
// theirs and the trusted sources.
func (a Admission) String() string {
	return fmt.Sprintf("conn-rate=%g conn-burst=%d conns-per-source=%d handshakes=%d source-handshakes=%d handshake-rate=%g handshake-burst=%d",
		a.ConnRate, a.ConnBurst, a.ConnsPerSource, a.Handshakes, a.SourceHandshakes, a.HandshakeRate, a.HandshakeBurst)
}
