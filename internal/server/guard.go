package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/srclimit"
)

// Admission limits what one source may cost the API before it has proved
// anything: new connections (each TLS handshake costs a signature with the
// server's key), connections held open, handshakes in progress, and failed
// authentications. Sources are IPv4 addresses and IPv6 /64s
// (internal/srclimit). A zero field turns its limit off; the zero value
// limits nothing (the CLI's defaults are DefaultAdmission's).
//
// The members' own addresses and TrustedSources are never limited: a
// follower forwards its clients' requests to the leader from its own
// address, and a busy follower's forwarding must not be refused.
type Admission struct {
	// The limits the Raft port has too. ConnsPerSource counts idle
	// keep-alive connections and streams. A handshake holds its slots
	// (Handshakes, SourceHandshakes) from the ClientHello to its end;
	// past Handshakes a ClientHello is refused before any key operation,
	// and SourceHandshakes keeps one source stalling handshakes (each may
	// wait for the client until ReadHeaderTimeout) from taking every
	// slot. Past HandshakeRate new connections from anyone but the
	// members and TrustedSources are refused until the flood ends;
	// connections already open are not touched. TrustedSources: load
	// balancers, members reached from another address than the one they
	// advertise.
	srclimit.Admission
	// AuthFailures is how many failed authentications one source may make
	// in AuthWindow; past it, its requests that need a token are answered
	// 429 with Retry-After until the window ends, without looking at the
	// token.
	AuthFailures int
	AuthWindow   time.Duration
}

// DefaultAdmission is what the CLI serves with. The figures let a whole
// site reach the API through one NAT address: CLI commands (one connection
// each), the console, a Slurm and a kube bridge on keep-alive connections
// and watch streams; node agents each have their own address. One source
// flooding handshakes gets 50 a second, a tenth of a core with an RSA-2048
// key.
func DefaultAdmission() Admission {
	return Admission{Admission: srclimit.Admission{ConnRate: 50, ConnBurst: 200, ConnsPerSource: 512, Handshakes: 1024, SourceHandshakes: 32},
		AuthFailures: 100, AuthWindow: time.Minute}
}

// Check says which field is wrong, naming its --api-* flag. It shadows
// srclimit.Admission's, which does not know the authentication limits.
func (a Admission) Check() error {
	if err := checkLimits(a.Admission, "api"); err != nil {
		return err
	}
	switch {
	case a.AuthFailures < 0:
		return domain.Invalid("api-auth-failures", "--api-auth-failures %d is negative (0: no limit)", a.AuthFailures)
	case a.AuthFailures > 0 && a.AuthWindow <= 0:
		return domain.Invalid("api-auth-window", "--api-auth-window %s: with --api-auth-failures %d the window must be positive", a.AuthWindow, a.AuthFailures)
	}
	return nil
}

// checkLimits checks the limits both ports have, naming the flags of
// prefix (api, raft), and carries a wrong one as invalid_argument.
func checkLimits(a srclimit.Admission, prefix string) error {
	err := a.Check(prefix)
	var fe *srclimit.FieldError
	if errors.As(err, &fe) {
		return domain.Invalid(fe.Field, "%s", fe.Message)
	}
	return err
}

// Refusal reasons of a ClientHello (besides srclimit's): past
// Admission.Handshakes, past Admission.HandshakeRate.
const (
	reasonHandshakes    = "handshakes"
	reasonHandshakeRate = "handshake_rate"
)

var errHandshakesBusy = errors.New("too many TLS handshakes in progress")

// guard applies Admission to the API's listener and its authentication.
type guard struct {
	s   *Server
	lim Admission
	tab *srclimit.Table
	// trusted is the members' addresses and TrustedSources (trustLoop).
	trusted  srclimit.Trusted
	inFlight atomic.Int64 // handshakes in progress
	hsRate   *srclimit.Bucket

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

func newGuard(s *Server, lim Admission) *guard {
	tl := lim.Limits()
	tl.AuthFailures, tl.AuthWindow = lim.AuthFailures, lim.AuthWindow
	g := &guard{s: s, lim: lim, tab: srclimit.New(tl, s.clock), hsRate: lim.HandshakeBucket(s.clock)}
	g.trusted.Set(lim.TrustedSources)
	// Read at scrape: how close the table is to its bound, and the
	// handshakes in progress against --api-handshakes.
	s.metrics.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "jobfabric", Subsystem: "api", Name: "sources",
			Help: "Sources (IPv4 addresses, IPv6 /64s) the API's admission table remembers: at most its bound plus one per open connection."},
			func() float64 { return float64(g.tab.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "jobfabric", Subsystem: "api", Name: "handshakes_in_progress",
			Help: "TLS handshakes from untrusted sources in progress (ClientHello to the server's part done)."},
			func() float64 { return float64(g.inFlight.Load()) }))
	return g
}

// source is the limited source of a remote address: ok is false for a
// trusted one or one that is not an IP address (in process).
func (g *guard) source(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil || g.trusted.Contains(ap.Addr()) {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// listener wraps the API's listener: connections over the limits are
// closed as they are accepted, before TLS.
func (g *guard) listener(ln net.Listener) net.Listener { return guardedListener{ln, g} }

type guardedListener struct {
	net.Listener
	g *guard
}

func (l guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

func (g *guard) admit(c net.Conn) net.Conn {
	src, limited := g.source(c.RemoteAddr().String())
	if !limited {
		return &guardedConn{Conn: c, g: g, trusted: true}
	}
	release, why := g.tab.Open(src)
	if why != "" {
		g.refuse(c, src, why)
		return nil
	}
	return &guardedConn{Conn: c, g: g, src: src, release: release}
}

// refuse counts c, closes it at once (a reset: no handshake, and no
// TIME_WAIT kept here) and logs it. It counts before the reset, so that
// whoever sees the reset finds it counted.
func (g *guard) refuse(c net.Conn, src netip.Addr, why string) {
	g.count(why)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
	g.log(src, why)
}

// refused counts and logs a refusal whose connection the caller ends.
func (g *guard) refused(src netip.Addr, why string) {
	g.count(why)
	g.log(src, why)
}

func (g *guard) count(why string) { g.s.metrics.ConnsRefused.WithLabelValues(why).Inc() }

func (g *guard) log(src netip.Addr, why string) {
	g.warn("API connection refused", slog.String("source", src.String()), slog.String("reason", why))
}

// warn logs at most one line a second: a flood must not flood the log.
// The line says how many were not logged since the last.
func (g *guard) warn(msg string, attrs ...slog.Attr) {
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
	g.s.log.LogAttrs(context.Background(), slog.LevelWarn, msg, append(attrs, slog.Int("not_logged_since_last", n))...)
}

// Handshake states of a guardedConn.
const (
	hsNone int32 = iota
	hsRunning
	hsDone // ended, or the connection closed
)

// guardedConn releases its source's count when it closes, and its
// handshake slot if it still holds one.
type guardedConn struct {
	net.Conn
	g       *guard
	src     netip.Addr
	trusted bool
	release func()
	// hsEnd ends the source's count of the handshake (under hs).
	hsEnd func()
	hs    atomic.Int32
	once  sync.Once
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
		c.endHandshake()
	})
	return err
}

// CloseWrite keeps the half-close net/http makes after an error answer
// on a plain connection (so the client reads the answer before the close).
func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *guardedConn) endHandshake() {
	if c.hs.Swap(hsDone) == hsRunning {
		c.g.inFlight.Add(-1)
		c.hsEnd()
	}
}

// tlsConfig is the API's TLS configuration with the handshake limits: a
// ClientHello past them is answered with an alert before the server's key
// exchange and signature. A slot is held until VerifyConnection runs (the
// server's part done: its signature sent, and the client's certificate
// read when the server asks for one, as it does with --ca) or the
// connection closes. base is not changed (raft shares it).
//
// The configuration a ClientHello gets offers h2 and http/1.1, as ServeTLS
// would; a server that must not speak HTTP/2 sets base.NextProtos. A base
// with GetConfigForClient (a certificate that is reloaded, see
// tlsutil.Reloader) gives the configuration of each handshake; the limits
// wrap it.
func (g *guard) tlsConfig(base *tls.Config) *tls.Config {
	if base == nil || (g.lim.Handshakes <= 0 && g.lim.SourceHandshakes <= 0 && g.lim.HandshakeRate <= 0) {
		return base
	}
	per := base.Clone()
	if len(per.NextProtos) == 0 {
		// What ServeTLS would offer; a config returned by
		// GetConfigForClient is used as it is.
		per.NextProtos = []string{"h2", "http/1.1"}
	}
	perFor := func(*tls.ClientHelloInfo) (*tls.Config, error) { return per, nil }
	if base.GetConfigForClient != nil {
		perFor = base.GetConfigForClient
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
		c, ok := hi.Conn.(*guardedConn)
		if !ok || c.trusted {
			return perFor(hi)
		}
		end, why := g.tab.BeginHandshake(c.src)
		if why != "" {
			g.refused(c.src, why)
			return nil, errHandshakesBusy
		}
		c.hsEnd = end
		if !c.hs.CompareAndSwap(hsNone, hsRunning) {
			end()
			return nil, errHandshakesBusy // closed meanwhile
		}
		if n := g.inFlight.Add(1); g.lim.Handshakes > 0 && n > int64(g.lim.Handshakes) {
			c.endHandshake()
			g.refused(c.src, reasonHandshakes)
			return nil, errHandshakesBusy
		}
		if !g.hsRate.Allow() {
			c.endHandshake()
			g.refused(c.src, reasonHandshakeRate)
			return nil, errHandshakesBusy
		}
		base, err := perFor(hi)
		if err != nil || base == nil {
			c.endHandshake()
			return base, err
		}
		one := base.Clone()
		prev := one.VerifyConnection
		one.VerifyConnection = func(cs tls.ConnectionState) error {
			c.endHandshake()
			if prev != nil {
				return prev(cs)
			}
			return nil
		}
		return one, nil
	}
	return cfg
}

// errAuthRefused answers a source over its failed authentications. It
// says nothing of the token it carries, which is not looked at.
func errAuthRefused(retry time.Duration) error {
	return domain.Errorf(domain.CodeRateLimited, "too many failed authentications from this address; retry in %s", retry)
}

// authRefused answers 429 with Retry-After when r's source is over its
// failed authentications, and says whether it did. It runs before the
// token is looked at (and before forwarding: the follower limits its
// clients, the leader trusts the follower).
func (g *guard) authRefused(w http.ResponseWriter, r *http.Request) bool {
	src, limited := g.source(r.RemoteAddr)
	if !limited {
		return false
	}
	retry, refused := g.tab.AuthRefused(src)
	if !refused {
		return false
	}
	secs := int((retry + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	g.s.metrics.AuthRefused.Inc()
	g.warn("API request refused: too many failed authentications", slog.String("source", src.String()), slog.Int("retry_after_s", secs))
	writeError(w, errAuthRefused(time.Duration(secs)*time.Second))
	return true
}

// authFailed counts a request whose token was refused (401).
func (g *guard) authFailed(r *http.Request) {
	if src, limited := g.source(r.RemoteAddr); limited {
		g.tab.AuthFailed(src)
	}
}

// trustLoop keeps the members' addresses trusted: their API and raft
// hosts, resolved when they are names. It looks again after every change
// to the state (a member joins: trusted before its first forward), and
// looks names up again every minute. A follower forwards from the address
// it reaches the leader by, normally the one it advertises; one that
// forwards from another must be given in TrustedSources.
func (g *guard) trustLoop(ctx context.Context) {
	var last []string
	var lastResolve time.Time
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		changed := g.s.fsm.Changed()
		var hosts []string
		for _, m := range g.s.fsm.Members() {
			if u, err := url.Parse(m.APIAddr); err == nil && u.Hostname() != "" {
				hosts = append(hosts, u.Hostname())
			}
			if h, _, err := net.SplitHostPort(m.RaftAddr); err == nil && h != "" {
				hosts = append(hosts, h)
			}
		}
		slices.Sort(hosts)
		hosts = slices.Compact(hosts)
		if lastResolve.IsZero() || !slices.Equal(hosts, last) || time.Since(lastResolve) >= time.Minute {
			last, lastResolve = hosts, time.Now()
			g.setTrusted(ctx, hosts)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

func (g *guard) setTrusted(ctx context.Context, hosts []string) {
	g.trusted.Set(srclimit.Resolve(ctx, g.lim.TrustedSources, hosts, func(h string, err error) {
		g.s.log.Warn("resolve a member's address to trust it", "host", h, "err", err)
	}))
}

// String names the limits for the start log line.
func (a Admission) String() string {
	return fmt.Sprintf("%v auth-failures=%d/%s trusted=%v", a.Admission, a.AuthFailures, a.AuthWindow, a.TrustedSources)
}
