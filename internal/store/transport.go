package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// handshakeTimeout bounds the TLS handshake of an inbound raft connection.
const handshakeTimeout = 10 * time.Second

// streamLayer is raft's network: a TCP listener, optionally wrapped in TLS,
// and a dialer to match. It tracks accepted connections because raft's
// NetworkTransport does not close them on shutdown: a stopped store would
// otherwise keep answering (with errors) on connections peers still hold.
type streamLayer struct {
	ln        net.Listener // raw TCP
	advertise net.Addr
	// tls is what the next accept serves and the next dial presents;
	// setTLS swaps it (a rotation). Nil inside: plain TCP.
	tls atomic.Pointer[layerTLS]
	// handshakeTimeout bounds an inbound TLS handshake.
	handshakeTimeout time.Duration
	// guard refuses connections over the admission limits at accept;
	// nil admits everyone.
	guard *guard

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// layerTLS is one generation of the layer's TLS configurations.
type layerTLS struct {
	server, dial *tls.Config
}

func newStreamLayer(ln net.Listener, advertise net.Addr, serverTLS, dialTLS *tls.Config) *streamLayer {
	s := &streamLayer{
		ln:        ln,
		advertise: advertise,
		conns:     make(map[*trackedConn]struct{}),

		handshakeTimeout: handshakeTimeout,
	}
	s.tls.Store(&layerTLS{server: serverTLS, dial: dialTLS})
	return s
}

// setTLS makes the next handshakes, accepted and dialled, use serverTLS
// and dialTLS. Connections open go on, except those whose peer's
// certificate the new configuration no longer verifies (a CA or secret
// dropped: the peer it let in is no longer a member); it returns how many
// it closed.
func (s *streamLayer) setTLS(serverTLS, dialTLS *tls.Config, now time.Time) int {
	s.tls.Store(&layerTLS{server: serverTLS, dial: dialTLS})
	s.mu.Lock()
	var drop []*trackedConn
	for c := range s.conns {
		chain := c.peer.Load()
		if chain == nil {
			continue
		}
		if c.outbound && !verifiesServer(dialTLS, *chain, now) || !c.outbound && !verifiesClient(serverTLS, *chain, now) {
			drop = append(drop, c)
		}
	}
	s.mu.Unlock()
	for _, c := range drop {
		c.Close()
	}
	return len(drop)
}

// verifiesClient reports whether cfg, as a server requiring client
// certificates, would accept chain now.
func verifiesClient(cfg *tls.Config, chain []*x509.Certificate, now time.Time) bool {
	if cfg == nil || cfg.ClientCAs == nil || len(chain) == 0 {
		return true // nothing verifies clients: nothing to drop for
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: cfg.ClientCAs, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err == nil
}

// verifiesServer reports whether cfg, dialling, would trust chain now.
// Names are not checked again: the question is whether the issuer is
// still trusted.
func verifiesServer(cfg *tls.Config, chain []*x509.Certificate, now time.Time) bool {
	if cfg == nil || cfg.InsecureSkipVerify || len(chain) == 0 {
		return true
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: cfg.RootCAs, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err == nil
}

// Accept returns the next inbound connection the guard admits; it resets
// the others itself (an error here would make raft back off accepting
// from everyone). The TLS handshake is left to the first read, which
// happens on raft's per-connection goroutine, so a slow or hostile client
// cannot stall the accept loop.
func (s *streamLayer) Accept() (net.Conn, error) {
	var c net.Conn
	for c == nil {
		raw, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		c = raw
		if s.guard != nil {
			c = s.guard.admit(raw)
		}
	}
	tc := &trackedConn{Conn: c, layer: s}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	if cfg := s.tls.Load().server; cfg != nil {
		return &serverConn{Conn: tls.Server(tc, cfg), raw: c, tracked: tc, timeout: s.handshakeTimeout}, nil
	}
	return tc, nil
}

// serverConn bounds the TLS handshake of an accepted connection: a client
// that connects and says nothing, or stalls mid-handshake, is dropped
// after timeout instead of holding a goroutine and a descriptor for good.
// Raft's transport reads and writes a connection from one goroutine, and
// the handshake happens on the first read.
type serverConn struct {
	*tls.Conn
	raw     net.Conn // gives back its guard's handshake slot
	tracked *trackedConn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) Read(b []byte) (int, error) {
	c.once.Do(func() {
		c.Conn.SetDeadline(time.Now().Add(c.timeout))
		c.err = c.Conn.Handshake()
		handshakeDone(c.raw)
		if c.err == nil {
			// Kept so that a rotation can tell whether the peer is
			// still trusted (setTLS).
			chain := c.Conn.ConnectionState().PeerCertificates
			c.tracked.peer.Store(&chain)
			c.err = c.Conn.SetDeadline(time.Time{})
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

// Close stops accepting and closes every accepted connection.
func (s *streamLayer) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = make(map[*trackedConn]struct{})
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		c.Conn.Close()
	}
	if errors.Is(err, net.ErrClosed) {
		return nil // closed twice: raft closes the transport, and so do we
	}
	return err
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer. With TLS the handshake completes here, within
// timeout, so certificate problems surface as dial errors in raft's logs.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cfg := s.tls.Load().dial
	if cfg == nil {
		return nd.DialContext(ctx, "tcp", string(address))
	}
	d := &tls.Dialer{NetDialer: nd, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	// Tracked so that a rotation can tell whether the peer is still
	// trusted (setTLS) and Close ends it.
	tc := &trackedConn{Conn: c, layer: s, outbound: true}
	chain := c.(*tls.Conn).ConnectionState().PeerCertificates
	tc.peer.Store(&chain)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return nil, net.ErrClosed
	}
	s.conns[tc] = struct{}{}
	s.mu.Unlock()
	return tc, nil
}

// probe dials addr as raft would, TLS handshake included, so that a peer
// this member cannot reach, or whose certificate it does not accept (another
// cluster secret or CA), is found before it enters the configuration: a
// voter nobody can replicate to would stall every commit.
func (s *streamLayer) probe(addr string, timeout time.Duration) error {
	c, err := s.Dial(raft.ServerAddress(addr), timeout)
	if err != nil {
		return err
	}
	return c.Close()
}

type trackedConn struct {
	net.Conn
	layer *streamLayer
	// peer is the certificate chain a TLS peer presented, once its
	// handshake completed; outbound: this side dialled it.
	peer     atomic.Pointer[[]*x509.Certificate]
	outbound bool
}

func (c *trackedConn) Close() error {
	c.layer.mu.Lock()
	delete(c.layer.conns, c)
	c.layer.mu.Unlock()
	return c.Conn.Close()
}

// advertiseAddr is a net.Addr for a host:port that need not resolve at
// startup (a DNS name in a StatefulSet, say).
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// checkAdvertise rejects addresses peers could not dial back: no port, port
// 0, or an unspecified IP such as 0.0.0.0.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("advertise address %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("advertise address %q: invalid port", addr)
	}
	if host == "" {
		return fmt.Errorf("advertise address %q: no host", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("advertise address %q is unspecified; set AdvertiseAddr to an address peers can reach", addr)
	}
	return nil
}
