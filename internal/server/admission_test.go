package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/srclimit"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
	"github.com/jobfabric/jobfabric/internal/tstime"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// from dials from ip: Linux accepts any 127/8 address as a source, so
// one test plays several hosts.
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
}

// httpFrom is an HTTP client whose connections come from ip.
func httpFrom(ip string, tc *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = from(ip).DialContext
	tr.TLSClientConfig = tc.Clone() // the transport writes NextProtos into it
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// call sends method path with a token and a JSON body from ip; it
// returns the status and the body.
func call(t *testing.T, ip string, tc *tls.Config, method, base, path, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctxT(t), method, base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := httpFrom(ip, tc)
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error() // callers compare the status (and may run in goroutines)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// refused reads jobfabric_api_connections_refused_total{reason} from s.
func refused(hc *http.Client, base, token, reason string) (float64, error) {
	return metric(hc, base, token, "jobfabric_api_connections_refused_total", map[string]string{"reason": reason})
}

// metric reads one series from s's /metrics.
func metric(hc *http.Client, base, token, name string, labels map[string]string) (float64, error) {
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	v, _ := value(fams, name, labels)
	return v, nil
}

// waitRefused waits (at most 20s) until the server counted want refusals
// for reason: the attacker sees its reset before the count is taken.
func waitRefused(t *testing.T, hc *http.Client, base, token, reason string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := refused(hc, base, token, reason)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections refused for %s: %v (%v), want %v", reason, got, err, want)
		}
		backoff(ctxT(t))
	}
}

// countingConn counts the bytes the server sent.
type countingConn struct {
	net.Conn
	read atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// TestAdmissionHandshakeFlood: a host flooding TLS handshakes at a server
// with an RSA-2048 key gets its burst of handshakes and no more: every
// other connection is reset before the server sends a byte (so before it
// signs anything), and counted. A client writing meanwhile keeps being
// acknowledged, and a new host is served at once after the flood.
func TestAdmissionHandshakeFlood(t *testing.T) {
	const burst, attempts = 20, 300
	ctx := ctxT(t)
	// Refills one connection in 100 s: the test sees the burst only.
	s, tc := startTLS(t, ctx, 2048, server.Admission{Admission: srclimit.Admission{ConnRate: 0.01, ConnBurst: burst}})
	admin, err := client.New(s.URL(), s.AdminToken(), tc)
	if err != nil {
		t.Fatal(err)
	}
	admin.RetryFor = 0
	scraper := httpFrom("127.0.0.1", tc)

	var acked, failed atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	var writes sync.WaitGroup
	writes.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			_, err := admin.CreateTenant(wctx, api.TenantCreateRequest{Name: fmt.Sprintf("t%d", i), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
			switch {
			case err == nil:
				acked.Add(1)
			case wctx.Err() == nil:
				failed.Add(1)
				t.Errorf("a legitimate write failed during the flood: %v", err)
			}
		}
	})

	var next, handshakes, reset, other atomic.Int64
	var flood sync.WaitGroup
	for range 4 {
		flood.Go(func() {
			for next.Add(1) <= attempts {
				raw, err := from("127.0.0.2").DialContext(ctx, "tcp", s.ListenAddr())
				if errors.Is(err, syscall.ECONNRESET) {
					reset.Add(1) // reset before connect returned
					continue
				}
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				cc := &countingConn{Conn: raw}
				tconn := tls.Client(cc, &tls.Config{InsecureSkipVerify: true})
				err = tconn.HandshakeContext(ctx)
				switch {
				case err == nil:
					handshakes.Add(1)
				case cc.read.Load() == 0:
					reset.Add(1) // closed at accept: not one byte of handshake
				default:
					other.Add(1)
					t.Errorf("a handshake failed after the server answered: %v", err)
				}
				tconn.Close()
			}
		})
	}
	flood.Wait()
	stop()
	writes.Wait()
	t.Logf("flood: %d handshakes, %d reset at accept; meanwhile %d writes acknowledged", handshakes.Load(), reset.Load(), acked.Load())
	if handshakes.Load() > burst+1 {
		t.Errorf("the flooding host completed %d handshakes; its burst is %d", handshakes.Load(), burst)
	}
	if reset.Load() < attempts-burst-1 {
		t.Errorf("only %d of %d connections over the burst were refused at accept", reset.Load(), attempts-burst)
	}
	if acked.Load() == 0 || failed.Load() > 0 {
		t.Errorf("legitimate writes during the flood: %d acknowledged, %d failed", acked.Load(), failed.Load())
	}
	waitRefused(t, scraper, s.URL(), s.AdminToken(), "rate", float64(reset.Load()))
	// Another host has its own bucket.
	if code, body := call(t, "127.0.0.3", tc, "GET", s.URL(), "/v1/whoami", s.AdminToken(), ""); code != http.StatusOK {
		t.Fatalf("a new host after the flood: %d %s", code, body)
	}
}

// stallConn stalls a TLS client after its ClientHello: its second write
// (after it read the server's first flight, signature included) blocks
// until the connection is closed, so the server's handshake stays in
// progress.
type stallConn struct {
	net.Conn
	writes  int
	stalled chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.writes++; c.writes == 2 {
		close(c.stalled)
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestAdmissionHandshakesInProgress: with two handshakes held in progress
// by stalling clients, a third ClientHello (from another host) is refused
// before the server signs: an alert, not a certificate. When a stalled
// client goes, its slot is free again.
func TestAdmissionHandshakesInProgress(t *testing.T) {
	ctx := ctxT(t)
	s, tc := startTLS(t, ctx, 0, server.Admission{Admission: srclimit.Admission{Handshakes: 2, SourceHandshakes: 1}})
	handshake := func(ip string, wrap func(net.Conn) net.Conn) (*tls.Conn, *countingConn, error) {
		raw, err := from(ip).DialContext(ctx, "tcp", s.ListenAddr())
		if err != nil {
			t.Fatal(err)
		}
		cc := &countingConn{Conn: raw}
		tconn := tls.Client(wrap(cc), &tls.Config{InsecureSkipVerify: true})
		return tconn, cc, tconn.HandshakeContext(ctx)
	}
	var stalls []*stallConn
	var wg sync.WaitGroup
	for _, ip := range []string{"127.0.0.10", "127.0.0.11"} {
		sc := &stallConn{stalled: make(chan struct{}), closed: make(chan struct{})}
		stalls = append(stalls, sc)
		wg.Go(func() {
			handshake(ip, func(c net.Conn) net.Conn { sc.Conn = c; return sc })
		})
		select {
		case <-sc.stalled:
		case <-ctx.Done():
			t.Fatal("the stalling client never got the server's first flight")
		}
	}
	defer func() {
		for _, sc := range stalls {
			sc.Close()
		}
		wg.Wait()
	}()

	// A stalling source holds one slot at most.
	if _, _, err := handshake("127.0.0.10", func(c net.Conn) net.Conn { return c }); err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
		t.Fatalf("a second handshake from a source stalling one: %v, want a TLS alert", err)
	}
	_, cc, err := handshake("127.0.0.12", func(c net.Conn) net.Conn { return c })
	if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
		t.Fatalf("a third handshake while two are in progress: %v, want a TLS alert", err)
	}
	if cc.read.Load() > 64 {
		t.Errorf("the refused client read %d bytes: the server sent more than an alert (a certificate?)", cc.read.Load())
	}
	waitRefused(t, httpFrom("127.0.0.1", tc), s.URL(), s.AdminToken(), "handshakes", 1)
	waitRefused(t, httpFrom("127.0.0.1", tc), s.URL(), s.AdminToken(), "source_handshakes", 1)
	if v, err := metric(httpFrom("127.0.0.1", tc), s.URL(), s.AdminToken(), "jobfabric_api_handshakes_in_progress", nil); err != nil || v != 2 {
		t.Fatalf("jobfabric_api_handshakes_in_progress = %v (%v), want the 2 stalled", v, err)
	}

	// The scrape above took a slot and gave it back; a stalled client
	// leaving gives back another.
	stalls[0].Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tconn, _, err := handshake("127.0.0.12", func(c net.Conn) net.Conn { return c })
		if err == nil {
			tconn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stalled client left, yet handshakes are still refused: %v", err)
		}
		backoff(ctx)
	}
}

// TestAdmissionHandshakeRate: past the server-wide handshake rate, a
// ClientHello from any new source is refused before the server signs;
// the members' own address is not limited.
func TestAdmissionHandshakeRate(t *testing.T) {
	ctx := ctxT(t)
	s, tc := startTLS(t, ctx, 0, server.Admission{Admission: srclimit.Admission{HandshakeRate: 0.01, HandshakeBurst: 3}})
	for i, ip := range []string{"127.0.0.20", "127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"} {
		code, body := call(t, ip, tc, "GET", s.URL(), "/v1/health", "", "")
		switch {
		case i < 3 && code != http.StatusOK:
			t.Fatalf("handshake %d of the burst: %d %s", i+1, code, body)
		case i >= 3 && (code != 0 || !strings.Contains(body, "remote error: tls:")):
			t.Fatalf("handshake %d past the burst: %d %s; want a TLS alert", i+1, code, body)
		}
	}
	// The scrapes come from 127.0.0.1, the member's own address: trusted.
	for range 5 {
		waitRefused(t, httpFrom("127.0.0.1", tc), s.URL(), s.AdminToken(), "handshake_rate", 2)
	}
}

// TestAdmissionConnsPerSource: a host holding connections open with a
// request header it never finishes (slowloris) holds at most its cap; the
// connections past it are closed at once and counted, another host is
// served, and a held connection closed makes room again.
func TestAdmissionConnsPerSource(t *testing.T) {
	const cap, tries = 8, 20
	c := startClusterWith(t, 1, devcluster.Options{Tune: func(cfg *server.Config) {
		cfg.Admission = server.Admission{Admission: srclimit.Admission{ConnsPerSource: cap}}
	}})
	addr := strings.TrimPrefix(c.Servers[0].URL(), "http://")
	ctx := ctxT(t)
	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for i := range tries {
		cn, err := from("127.0.0.2").DialContext(ctx, "tcp", addr)
		if err == nil {
			conns = append(conns, cn)
			_, err = io.WriteString(cn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n")
		}
		if i < cap {
			if err != nil {
				t.Fatalf("connection %d, within the cap: %v", i+1, err)
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
				t.Fatalf("connection %d past the cap: %v; want it reset", i+1, err)
			}
			continue // reset already
		}
		// Accepted in order: the connections past the cap are closed
		// without an answer.
		cn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := cn.Read(make([]byte, 1))
		var ne net.Error
		if n > 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("connection %d past the cap: read %d bytes, %v; want it closed", i+1, n, err)
		}
	}
	waitRefused(t, http.DefaultClient, c.Servers[0].URL(), c.AdminToken, "per_source", tries-cap)
	// Another host is served.
	if code, body := call(t, "127.0.0.3", nil, "GET", c.Servers[0].URL(), "/v1/whoami", c.AdminToken, ""); code != http.StatusOK {
		t.Fatalf("another host while one holds its cap: %d %s", code, body)
	}
	// A held connection goes: the host may open one again.
	conns[0].Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := httpFrom("127.0.0.2", nil).Get(c.Servers[0].URL() + "/v1/health")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a held connection closed, yet the host is still refused: %v", err)
		}
		backoff(ctx)
	}
}

func startClusterWith(t *testing.T, n int, o devcluster.Options) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o.Logger, o.RaftTimeout = quietLogger(), time.Second
	c, err := devcluster.Start(ctx, t.TempDir(), n, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// authAs sends GET /v1/whoami with token from ip.
func authAs(t *testing.T, ip, base, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", base+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	hc := httpFrom(ip, nil)
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAdmissionAuthFailures: after N invalid tokens a host is answered
// 429 with Retry-After, whatever it sends (its valid token too: the token
// is not looked at, so the answer says nothing of it); another host is
// not; after the window the host's valid token works.
func TestAdmissionAuthFailures(t *testing.T) {
	const n = 5
	clk := tstime.NewFake(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	c := startClusterWith(t, 1, devcluster.Options{Clock: clk, Tune: func(cfg *server.Config) {
		cfg.Admission = server.Admission{AuthFailures: n, AuthWindow: time.Minute}
	}})
	base, good := c.Servers[0].URL(), c.AdminToken
	id, _, _ := strings.Cut(strings.TrimPrefix(good, "jf_"), "_")
	bad := "jf_" + id + "_" + strings.Repeat("0", 64)       // a token that exists, wrong secret
	unknown := "jf_000000000000_" + strings.Repeat("0", 64) // a token that does not
	for i := range n {
		tok := []string{bad, unknown}[i%2]
		if resp, body := authAs(t, "127.0.0.2", base, tok); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("invalid token %d: %d %s, want 401", i+1, resp.StatusCode, body)
		}
	}
	var bodies []string
	for _, tok := range []string{bad, unknown, good, "garbage"} {
		resp, body := authAs(t, "127.0.0.2", base, tok)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" || !strings.Contains(body, `"rate_limited"`) {
			t.Fatalf("after %d invalid tokens, %q: %d Retry-After %q %s; want 429, 60, rate_limited", n, tok[:min(len(tok), 20)], resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		bodies = append(bodies, body)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("the 429 differs by token: %s vs %s", bodies[0], b)
		}
	}
	// Public routes still answer the host.
	if code, _ := doFrom(t, "127.0.0.2", base, "/v1/health"); code != http.StatusOK {
		t.Fatalf("health from the refused host: %d", code)
	}
	// Another host: its invalid token is 401, its valid one works.
	if resp, _ := authAs(t, "127.0.0.3", base, unknown); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another host's invalid token: %d, want 401", resp.StatusCode)
	}
	if resp, body := authAs(t, "127.0.0.3", base, good); resp.StatusCode != http.StatusOK {
		t.Fatalf("another host's valid token: %d %s", resp.StatusCode, body)
	}
	clk.Advance(30 * time.Second)
	if resp, _ := authAs(t, "127.0.0.2", base, good); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" {
		t.Fatalf("half way through the window: %d, Retry-After %q; want 429, 30", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clk.Advance(30 * time.Second)
	if resp, body := authAs(t, "127.0.0.2", base, good); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the window, a valid token: %d %s", resp.StatusCode, body)
	}
	code, body := doFrom(t, "127.0.0.1", base, "/metrics", good)
	if v, _ := value(parseMetrics(t, body), "jobfabric_api_auth_refused_total", nil); code != http.StatusOK || v != 5 {
		t.Fatalf("jobfabric_api_auth_refused_total = %v (scrape %d), want 5", v, code)
	}
}

// doFrom GETs path from ip, with a token if one is given.
func doFrom(t *testing.T, ip, base, path string, token ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", base+path, nil)
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+token[0])
	}
	hc := httpFrom(ip, nil)
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdmissionForwarding: a follower forwards from its own address, which
// the leader trusts: many clients at once through a follower are all
// served although the limits are tight, and the leader refuses nothing.
// The follower limits its clients' failed authentications itself (the
// leader's 401s are counted against the client, not the follower), so a
// host sending invalid tokens through the follower is refused while
// another host's requests through the same follower are served.
func TestAdmissionForwarding(t *testing.T) {
	c := startClusterWith(t, 2, devcluster.Options{Tune: func(cfg *server.Config) {
		cfg.Admission = server.Admission{Admission: srclimit.Admission{ConnRate: 0.01, ConnBurst: 4, ConnsPerSource: 4}, AuthFailures: 2, AuthWindow: time.Hour}
	}})
	ctx := ctxT(t)
	l, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := 1 - l
	fURL := c.Servers[f].URL()
	seed(t, c.Client(f))
	// 32 hosts submit at once through the follower: it opens many
	// connections to the leader at once, far over 4.
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			code, body := call(t, fmt.Sprintf("127.0.1.%d", i+1), nil, "POST", fURL, "/v1/jobs", c.AdminToken, `{"tenant":"acme","workspace":"research","gpus":1}`)
			if code != http.StatusCreated {
				t.Errorf("submit through the follower: %d %s", code, body)
			}
		})
	}
	wg.Wait()
	lURL := c.Servers[l].URL()
	for _, reason := range []string{"rate", "per_source"} {
		if v, err := refused(http.DefaultClient, lURL, c.AdminToken, reason); err != nil || v != 0 {
			t.Errorf("the leader refused %v connections (%s; %v): the follower's forwarding was limited", v, reason, err)
		}
	}
	bad := "jf_000000000000_" + strings.Repeat("0", 64)
	for i := range 2 {
		if resp, _ := authAs(t, "127.0.0.2", fURL, bad); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("invalid token %d through the follower: %d", i+1, resp.StatusCode)
		}
	}
	if resp, _ := authAs(t, "127.0.0.2", fURL, bad); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third invalid token through the follower: %d, want 429", resp.StatusCode)
	}
	if resp, body := authAs(t, "127.0.0.3", fURL, c.AdminToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("another host through the follower: %d %s", resp.StatusCode, body)
	}
}

// startTLS starts a one-server cluster serving TLS on loopback with adm,
// its certificate's key RSA of rsaBits bits (0: ECDSA P-256), and returns
// it (closed with the test) and a client configuration trusting it.
func startTLS(t *testing.T, ctx context.Context, rsaBits int, adm server.Admission) (*server.Server, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	var cert, key, ca string
	if rsaBits > 0 {
		cert, key, ca = tlstest.GenerateRSA(t, dir, rsaBits, "127.0.0.1")
	} else {
		cert, key, ca = tlstest.Generate(t, dir, "127.0.0.1")
	}
	s, err := server.Start(ctx, server.Config{DataDir: dir + "/n1", TLSCert: cert, TLSKey: key, TLSCA: ca, Logger: quietLogger(),
		Listen: "127.0.0.1:0", FabricDriver: "none", Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tc, err := tlsutil.ClientConfig(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, tc
}

// TestAdmissionConfigErrors: a wrong limit of either port fails Start as
// invalid_argument naming its flag (the field and the message the CLI
// prints), before the data directory is made.
func TestAdmissionConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate         func(*server.Config)
		field, message string
	}{
		"api rate": {func(c *server.Config) { c.Admission.ConnRate = -1 },
			"api-conn-rate", "--api-conn-rate -1 is negative (0: no limit)"},
		"api handshake burst": {func(c *server.Config) { c.Admission.HandshakeRate = 100 },
			"api-handshake-burst", "--api-handshake-burst 0: with --api-handshake-rate 100 at least 1 handshake must be possible"},
		"api auth window": {func(c *server.Config) { c.Admission.AuthFailures = 3 },
			"api-auth-window", "--api-auth-window 0s: with --api-auth-failures 3 the window must be positive"},
		"raft rate, no burst": {func(c *server.Config) { c.RaftAdmission.ConnRate = 10 },
			"raft-conn-burst", "--raft-conn-burst 0: with --raft-conn-rate 10 a source must be able to open at least 1 connection"},
		"raft source handshakes": {func(c *server.Config) { c.RaftAdmission.SourceHandshakes = -1 },
			"raft-source-handshakes", "--raft-source-handshakes -1 is negative (0: no limit)"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			cfg := server.Config{DataDir: dir, Logger: quietLogger(), Listen: "127.0.0.1:0", FabricDriver: "none"}
			tc.mutate(&cfg)
			s, err := server.Start(ctxT(t), cfg)
			if err == nil {
				s.Close()
				t.Fatal("Start accepted the limits")
			}
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field != tc.field || de.Message != tc.message {
				t.Fatalf("Start: %v\nwant invalid_argument, field %s: %s", err, tc.field, tc.message)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data directory was made (stat: %v)", err)
			}
		})
	}
}
