package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/srclimit"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Admission limits what a source that is not a member may cost the Raft
// port before it has proved anything. Each inbound TLS handshake costs the
// server its half (a key exchange and a signature, an RSA one with an
// operator's --ca keys) before the client's certificate is refused, and a
// handshake may be held open until handshakeTimeout. Every limit is checked
// as the connection is accepted, before any TLS byte: one over a limit is
// reset. Sources are IPv4 addresses and IPv6 /64s (internal/srclimit). A
// zero field turns its limit off; the zero value limits nothing.
//
// The members' own addresses (the Raft configuration's, names resolved)
// and TrustedSources are never limited.
type Admission struct {
	// The limits the API port has too. Handshakes and SourceHandshakes
	// count a connection from its accept to the end of its handshake;
	// past HandshakeRate every untrusted source is refused until the
	// flood ends, a member whose address is not recognised included.
	// TrustedSources: members behind NAT or whose source address differs
	// from their advertised Raft address.
	srclimit.Admission
	// MembersOnly refuses at accept every source that is not in the Raft
	// configuration or TrustedSources, once this server has a
	// configuration (a joiner has none until the leader first reaches it,
	// and the leader dials it before it knows anyone).
	MembersOnly bool
	// Refused, when set, is told of every refusal with its reason (the
	// server counts them in a metric).
	Refused func(reason string)
	// Clock paces the buckets; nil: the system's.
	Clock tstime.Clock
}

// DefaultAdmission is what the CLI serves Raft with. Raft's own traffic
// from one peer is a handful of long-lived connections (up to
// transportMaxPool pooled ones for RPCs and heartbeats, one pipeline) plus
// one per snapshot, RequestVote or reconnect: a new leader dials each
// follower once or twice, a restarted member is dialled again by each
// peer, and raft backs off after a failed dial. A member whose source
// address is not recognised (NAT, several interfaces), through leader
// changes, snapshots and restarts of a 5-member cluster, opens fewer than
// ten connections at once and holds fewer than ten: the figures leave it
// ten times that. One source flooding handshakes gets 100 and then 10 a
// second; stalled handshakes (10 s each at most) are held 16 to a source
// and 64 in all. The server-wide handshake rate and members-only stay
// off: either would refuse such an unrecognised member during a flood.
func DefaultAdmission() Admission {
	return Admission{Admission: srclimit.Admission{ConnRate: 10, ConnBurst: 100, ConnsPerSource: 64, Handshakes: 64, SourceHandshakes: 16}}
}

// Check says which limit is wrong (plain errors, naming the limits in
// words: the server names its flags).
func (a Admission) Check() error { return a.Admission.Check("") }

func (a Admission) String() string {
	return fmt.Sprintf("%v members-only=%v trusted=%v", a.Admission, a.MembersOnly, a.TrustedSources)
}

// Reasons a Raft connection is refused, besides srclimit's (rate,
// per_source, source_handshakes).
const (
	ReasonHandshakes    = "handshakes"     // Admission.Handshakes in progress
	ReasonHandshakeRate = "handshake_rate" // Admission.HandshakeRate
	ReasonNotMember     = "not_member"     // Admission.MembersOnly
)

// trustRefresh is how often the guard reads the Raft configuration again
// (a cached copy: cheap); trustResolve how often it looks names up again.
const (
	trustRefresh = 500 * time.Millisecond
	trustResolve = time.Minute
)

// guard applies Admission at the Raft listener's accept.
type guard struct {
	lim    Admission
	tab    *srclimit.Table
	logger *slog.Logger
	tls    bool // handshakes are counted only when the layer serves TLS

	// trusted is the members' addresses and TrustedSources; configured
	// says whether this server has a Raft configuration yet.
	trusted    srclimit.Trusted
	configured atomic.Bool
	inFlight   atomic.Int64 // handshakes in progress, untrusted sources
	// hosts were trusted at resolved (refresh's, one goroutine at a time).
	hosts    []string
	resolved time.Time
	hsRate   *srclimit.Bucket

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

func newGuard(lim Admission, tlsOn bool, logger *slog.Logger) *guard {
	if lim.Clock == nil {
		lim.Clock = tstime.Std{}
	}
	g := &guard{lim: lim, logger: logger, tls: tlsOn, tab: srclimit.New(lim.Limits(), lim.Clock), hsRate: lim.HandshakeBucket(lim.Clock)}
	g.trusted.Set(lim.TrustedSources)
	return g
}

// admit wraps an accepted connection, or refuses it (a reset, before any
// TLS byte) and returns nil.
func (g *guard) admit(c net.Conn) net.Conn {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil || g.trusted.Contains(ap.Addr()) {
		return c
	}
	src := ap.Addr().Unmap()
	if g.lim.MembersOnly && g.configured.Load() {
		g.refuse(c, src, ReasonNotMember)
		return nil
	}
	release, why := g.tab.Open(src)
	if why != "" {
		g.refuse(c, src, why)
		return nil
	}
	gc := &guardedConn{Conn: c, release: release}
	if !g.tls {
		return gc
	}
	end, why := g.tab.BeginHandshake(src)
	if why != "" {
		release()
		g.refuse(c, src, why)
		return nil
	}
	if n := g.inFlight.Add(1); g.lim.Handshakes > 0 && n > int64(g.lim.Handshakes) {
		g.inFlight.Add(-1)
		end()
		release()
		g.refuse(c, src, ReasonHandshakes)
		return nil
	}
	// Last: a source over its own limits does not take the server's tokens.
	if !g.hsRate.Allow() {
		g.inFlight.Add(-1)
		end()
		release()
		g.refuse(c, src, ReasonHandshakeRate)
		return nil
	}
	gc.hsEnd = func() { end(); g.inFlight.Add(-1) }
	return gc
}

// refuse counts, resets c (no handshake, no TIME_WAIT kept here) and
// logs. It counts first: whoever sees the reset then finds it counted
// (TestRaftPortMembersOnly read the metric between the two).
func (g *guard) refuse(c net.Conn, src netip.Addr, why string) {
	if g.lim.Refused != nil {
		g.lim.Refused(why)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
	g.warn(src, why)
}

// warn logs at most one line a second: a flood must not flood the log.
func (g *guard) warn(src netip.Addr, why string) {
	now := time.Now()
	g.logMu.Lock()
	if now.Sub(g.lastLog) < time.Second {
		g.suppressed++
		g.logMu.Unlock()
		return
	}
	n := g.suppressed
	g.lastLog, g.suppressed = now, 0
	g.logMu.Unlock()
	g.logger.Warn("raft connection refused", "source", src.String(), "reason", why, "not_logged_since_last", n)
}

// guardedConn gives back its source's count when it closes, and its
// handshake slot when the handshake ends or it closes.
type guardedConn struct {
	net.Conn
	release func()
	hsEnd   func() // nil: no slot held
	hsOnce  sync.Once
	once    sync.Once
}

func (c *guardedConn) handshakeDone() {
	c.hsOnce.Do(func() {
		if c.hsEnd != nil {
			c.hsEnd()
		}
	})
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.release()
		c.handshakeDone()
	})
	return err
}

// handshakeDone ends the handshake slot of a connection admitted by a
// guard, if it holds one.
func handshakeDone(c net.Conn) {
	if gc, ok := c.(*guardedConn); ok {
		gc.handshakeDone()
	}
}

// trustLoop keeps the members' Raft hosts trusted: it reads the
// configuration every trustRefresh (a change is seen within it: a voter
// being added is in the leader's latest configuration before the leader
// first replicates to it, and the joiner never dials anyone before it has
// been reached), and resolves names again every trustResolve. Open runs
// the first refresh before it returns.
func (g *guard) trustLoop(r *raft.Raft, stop <-chan struct{}) {
	t := time.NewTicker(trustRefresh)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		g.refresh(r, stop)
	}
}

// refresh reads the configuration and, when its hosts changed or
// trustResolve passed, trusts them anew.
func (g *guard) refresh(r *raft.Raft, stop <-chan struct{}) {
	servers := r.GetConfiguration().Configuration().Servers
	hosts := make([]string, 0, len(servers))
	for _, s := range servers {
		if h, _, err := net.SplitHostPort(string(s.Address)); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	if g.resolved.IsZero() || !slices.Equal(hosts, g.hosts) || time.Since(g.resolved) >= trustResolve {
		g.hosts, g.resolved = hosts, time.Now()
		g.setTrusted(hosts, stop)
	}
	// Set after the trust: members-only must not refuse members.
	g.configured.Store(len(servers) > 0)
}

func (g *guard) setTrusted(hosts []string, stop <-chan struct{}) {
	// stop cuts a lookup short: Close must not wait for a dead resolver.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	g.trusted.Set(srclimit.Resolve(ctx, g.lim.TrustedSources, hosts, func(h string, err error) {
		g.logger.Warn("resolve a member's raft address to trust it", "host", h, "err", err)
	}))
}

// Sources is how many sources the Raft port's admission table remembers,
// and HandshakesInProgress the untrusted handshakes in progress; both 0
// when nothing listens.
func (s *Store) Sources() int {
	if s.layer == nil || s.layer.guard == nil {
		return 0
	}
	return s.layer.guard.tab.Len()
}

// HandshakesInProgress: see Sources.
func (s *Store) HandshakesInProgress() int {
	if s.layer == nil || s.layer.guard == nil {
		return 0
	}
	return int(s.layer.guard.inFlight.Load())
}
