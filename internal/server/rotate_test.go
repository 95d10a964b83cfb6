package server_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/store/raftinject"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// servedSerial is the serial of the certificate the server at url
// presents to a new connection.
func servedSerial(t *testing.T, url string, caFile string) string {
	t.Helper()
	cfg, err := tlsutil.ClientConfig(caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	defer c.Close()
	return fmt.Sprintf("%x", c.ConnectionState().PeerCertificates[0].SerialNumber)
}

func tlsStatus(t *testing.T, c *client.Client) api.TLSStatus {
	t.Helper()
	var st api.TLSStatus
	if err := c.Do(ctxT(t), http.MethodGet, "/v1/cluster/tls", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAPICertificateRotation: the API certificate swapped on disk is
// served to the next client without a restart (by the poll, and by Reload
// as SIGHUP calls it); a connection open before goes on; a bad file is
// refused, the old certificate kept, and /v1/cluster/tls and /metrics say
// so, to an admin only. With and without the handshake limits, which wrap
// the configuration each handshake gets.
func TestAPICertificateRotation(t *testing.T) {
	for name, adm := range map[string]server.Admission{"no limits": {}, "the CLI's limits": server.DefaultAdmission()} {
		t.Run(name, func(t *testing.T) { testAPICertificateRotation(t, adm) })
	}
}

func testAPICertificateRotation(t *testing.T, adm server.Admission) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	caFile := ca.Write(t, filepath.Join(dir, "ca.pem"))
	certFile, keyFile := ca.Issue(t, dir, tlstest.Leaf{})
	logs := &syncBuffer{}
	s, err := startServer(t, server.Config{DataDir: filepath.Join(dir, "data"), TLSCert: certFile, TLSKey: keyFile, TLSCA: caFile,
		ReloadInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil)), Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsutil.ClientConfig(caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(s.URL(), s.AdminToken(), tc)
	if err != nil {
		t.Fatal(err)
	}
	first := tlsStatus(t, admin).API
	if first == nil || servedSerial(t, s.URL(), caFile) != first.Serial {
		t.Fatalf("status %+v does not name the served certificate", first)
	}

	// The poll takes a renewed certificate.
	ca.Issue(t, dir, tlstest.Leaf{})
	ctx := ctxT(t)
	var polled string
	for polled = servedSerial(t, s.URL(), caFile); polled == first.Serial; polled = servedSerial(t, s.URL(), caFile) {
		if ctx.Err() != nil {
			t.Fatal("the renewed certificate was not served: the poll did not take it")
		}
		backoff(ctx)
	}
	if _, err := admin.WhoAmI(ctx); err != nil { // the admin client's connection, opened before
		t.Fatalf("a client connected before the rotation: %v", err)
	}

	// A bad file (expired) is refused, and the one in use kept; Reload
	// (SIGHUP) reports it at once.
	ca.Issue(t, dir, tlstest.Leaf{NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), "expired") {
		// The poll may have met the file first: the status says the same.
		if st := tlsStatus(t, admin).API; !strings.Contains(st.LastError, "expired") {
			t.Fatalf("expired certificate: reload err %v, status %+v", err, st)
		}
	}
	st := tlsStatus(t, admin).API
	if st.Serial != polled || !strings.Contains(st.LastError, certFile) || st.Errors == 0 {
		t.Fatalf("status after a refused reload: %+v", st)
	}
	if got := servedSerial(t, s.URL(), caFile); got != polled {
		t.Fatalf("served %s after a refused reload, want the kept %s", got, polled)
	}
	if !strings.Contains(logs.String(), "TLS reload refused") {
		t.Error("the refusal was not logged")
	}

	// SIGHUP's path: a good file, taken by Reload at once.
	ca.Issue(t, dir, tlstest.Leaf{})
	s.Reload()
	st = tlsStatus(t, admin).API
	if st.LastError != "" || st.Serial == polled || servedSerial(t, s.URL(), caFile) != st.Serial {
		t.Fatalf("after a good reload: status %+v", st)
	}

	t.Run("metrics", func(t *testing.T) {
		body := scrapeTLS(t, s.URL(), s.AdminToken(), tc)
		for _, w := range []string{`jobfabric_tls_certificate_not_after_seconds{listener="api",serial="` + st.Serial + `"}`, `jobfabric_tls_reload_errors_total{what="tls"} `, `jobfabric_tls_reloads_total{what="tls"} 2`} {
			if !strings.Contains(body, w) {
				t.Errorf("/metrics lacks %s", w)
			}
		}
	})
	t.Run("tenant sees nothing", func(t *testing.T) {
		seed(t, admin)
		tok := mustToken(t, admin, domain.RoleTenantAdmin, "acme", "")
		tenant, err := client.New(s.URL(), tok, tc)
		if err != nil {
			t.Fatal(err)
		}
		var got api.TLSStatus
		if err := tenant.Do(ctxT(t), http.MethodGet, "/v1/cluster/tls", nil, &got); err == nil {
			t.Fatalf("a tenant token read the TLS status: %+v", got)
		}
		if body := scrapeTLS(t, s.URL(), tok, tc); strings.Contains(body, "jobfabric_tls_") {
			t.Error("a tenant token sees the TLS series in /metrics")
		}
	})
}

// scrapeTLS reads /metrics over HTTPS with token.
func scrapeTLS(t *testing.T, url, token string, cfg *tls.Config) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg.Clone()}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %s", resp.Status, b)
	}
	return string(b)
}

// newSecret is a cluster secret: base64 of 32 random bytes.
func newSecret(t *testing.T) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b[:])
}

// TestClusterSecretRotation rotates a real 3-member cluster's secret in the
// documented steps (docs/operations.md: accept the new on every member,
// issue under it everywhere, drop the old), each member by rewriting its
// --cluster-secret-file and SIGHUP (Reload), while a client keeps
// writing through a follower: every step keeps writes acknowledged, and a
// member restarted between two steps rejoins. From
// the attacker's side, a raft peer holding only the old secret is answered
// during the overlap and refused everywhere after.
func TestClusterSecretRotation(t *testing.T) {
	oldSecret, newSecret := newSecret(t), newSecret(t)
	var files []string
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 3, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second, Tune: func(cfg *server.Config) {
		f := cfg.DataDir + ".secret"
		if err := os.WriteFile(f, []byte(oldSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.ClusterSecret, cfg.ClusterSecretFile, cfg.ReloadInterval = nil, f, time.Hour // Reload drives it
		files = append(files, f)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	follower := (c.Leader() + 1) % 3
	w := startAPIWriter(c.Client(follower))
	step := func(name string, lines ...string) {
		t.Helper()
		for i, s := range c.Servers {
			if err := os.WriteFile(files[i], []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := s.Reload(); err != nil {
				t.Fatalf("%s: reload on %s: %v", name, s.NodeID(), err)
			}
			// The quorum holds between members too.
			if _, err := c.Client(follower).CreateTenant(ctxT(t), api.TenantCreateRequest{Name: fmt.Sprintf("%s-%d", name, i), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
				t.Fatalf("%s: write after %s: %v", name, s.NodeID(), err)
			}
		}
	}
	_, oldTLS, err := store.SecretTLS([]byte(oldSecret))
	if err != nil {
		t.Fatal(err)
	}
	raftPeer := func(cfg *tls.Config, addr string) error {
		cfg = cfg.Clone()
		cfg.InsecureSkipVerify = true
		in := raftinject.New(raftinject.Options{TLS: cfg})
		defer in.Close()
		_, err := in.Heartbeat(addr, 0)
		return err
	}

	start := time.Now()
	step("accept-new", oldSecret, newSecret)
	if err := raftPeer(oldTLS, c.Servers[0].RaftAddr()); err != nil {
		t.Fatalf("during the overlap a peer of the old secret was refused: %v", err)
	}
	// A bad file in the middle: refused, the secrets in use kept.
	if err := os.WriteFile(files[0], []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Servers[0].Reload(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a weak secret line: reload err %v", err)
	}
	if st := c.Servers[0].TLSStatus().Secret; !strings.Contains(st.LastError, files[0]) || len(st.Accepted) != 1 || st.Errors != 1 {
		t.Fatalf("status after a refused secret: %+v", st)
	}
	// Met again (a second SIGHUP): still refused, counted once.
	if err := c.Servers[0].Reload(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("the same weak secret again: reload err %v", err)
	}
	if st := c.Servers[0].TLSStatus().Secret; st.Errors != 1 {
		t.Fatalf("the same refusal counted again: %+v", st)
	}
	step("issue-new", newSecret, oldSecret)
	// A member restarted mid-rotation starts with both secrets, the new
	// one issuing, and rejoins.
	other := 3 - follower - c.Leader()
	if other == follower || other < 0 || other > 2 {
		t.Fatalf("no third member: leader %d, follower %d", c.Leader(), follower)
	}
	if err := c.Stop(other); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctxT(t), other); err != nil {
		t.Fatalf("restart %d mid-rotation: %v", other, err)
	}
	step("drop-old", newSecret)
	acks, errs := w.stop()
	gap, n := longestAPIGap(acks, start, time.Now())
	t.Logf("%d writes acknowledged during the %v rotation (%d failed), longest gap %v", n, time.Since(start).Round(time.Millisecond), len(errs), gap.Round(time.Millisecond))
	if gap > 3*time.Second {
		t.Errorf("writes stopped for %v during the rotation (errors: %v)", gap, errs)
	}

	want := tlsStatus(t, c.Client(0)).Secret.Issuing
	for i, s := range c.Servers {
		st := s.TLSStatus()
		if st.Secret.Issuing != want || len(st.Secret.Accepted) != 0 || st.Secret.LastError != "" {
			t.Errorf("member %d after the rotation: %+v", i, st.Secret)
		}
		if err := raftPeer(oldTLS, s.RaftAddr()); err == nil {
			t.Errorf("member %d answered a raft peer holding only the old secret", i)
		}
	}
	if _, err := c.Client(follower).CreateTenant(ctxT(t), api.TenantCreateRequest{Name: "after", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers {
		waitState(t, s, "the write after the rotation", func(f *state.FSM) bool { _, ok := f.Tenant("after"); return ok })
	}
}

// apiWriter creates tenants through one client and records when each
// was acknowledged.
type apiWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acks   []time.Time
	errs   []error
}

func startAPIWriter(c *client.Client) *apiWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &apiWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.CreateTenant(rctx, api.TenantCreateRequest{Name: fmt.Sprintf("w%05d", i), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
			rcancel()
			w.mu.Lock()
			if err == nil {
				w.acks = append(w.acks, time.Now())
			} else if ctx.Err() == nil {
				w.errs = append(w.errs, err)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *apiWriter) stop() ([]time.Time, []error) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acks, w.errs
}

func longestAPIGap(acks []time.Time, start, end time.Time) (time.Duration, int) {
	prev, gap, n := start, time.Duration(0), 0
	for _, a := range acks {
		if a.Before(start) || a.After(end) {
			continue
		}
		n++
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return max(gap, end.Sub(prev)), n
}

// TestMutualTLSCARotation moves a 2-member mutual-TLS cluster from one CA
// to another through its files and Reload (SIGHUP), no restart: bundle
// both CAs, reissue every certificate under the new, drop the old. A
// write through the follower (forwarded to the leader, whose certificate
// the follower verifies with the CA in use) works after every step; after
// the last, a client certificate of the dropped CA is refused on the raft
// port, and one of the new CA answered.
func TestMutualTLSCARotation(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := tlstest.NewCA(t), tlstest.NewCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	writeCAs := func(cas ...*tlstest.CA) {
		var pem []byte
		for _, ca := range cas {
			pem = append(pem, ca.PEM()...)
		}
		if err := os.WriteFile(caFile, pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeCAs(ca1)
	dirs := []string{filepath.Join(dir, "n1"), filepath.Join(dir, "n2")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		ca1.Issue(t, d, tlstest.Leaf{})
	}
	cfgOf := func(i int) server.Config {
		return server.Config{TLSCert: filepath.Join(dirs[i], "cert.pem"), TLSKey: filepath.Join(dirs[i], "key.pem"), TLSCA: caFile,
			Logger: quietLogger(), RaftTimeout: time.Second, Listen: "127.0.0.1:0", RaftAddr: "127.0.0.1:0",
			DataDir: filepath.Join(dirs[i], "data"), NodeID: fmt.Sprintf("n%d", i+1), ReloadInterval: time.Hour}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s1, err := server.Start(ctx, cfgOf(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	c2 := cfgOf(1)
	c2.Join, c2.JoinToken = s1.URL(), s1.AdminToken()
	s2, err := server.Start(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	servers := []*server.Server{s1, s2}

	both := filepath.Join(dir, "both.pem")
	var pem []byte
	pem = append(append(pem, ca1.PEM()...), ca2.PEM()...)
	if err := os.WriteFile(both, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	tc, err := tlsutil.ClientConfig(both, "")
	if err != nil {
		t.Fatal(err)
	}
	follower := s2
	if s2.IsLeader() {
		follower = s1
	}
	cl, err := client.New(follower.URL(), s1.AdminToken(), tc)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		t.Helper()
		if _, err := cl.CreateTenant(ctxT(t), api.TenantCreateRequest{Name: name, Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatalf("write %s through the follower: %v", name, err)
		}
	}
	reload := func(name string) {
		t.Helper()
		for _, s := range servers {
			if err := s.Reload(); err != nil {
				t.Fatalf("%s: reload %s: %v", name, s.NodeID(), err)
			}
		}
		write(name)
	}
	raftPeer := func(ca *tlstest.CA, addr string) error {
		cert, key := ca.IssuePEM(t, tlstest.Leaf{})
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		in := raftinject.New(raftinject.Options{TLS: &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true}})
		defer in.Close()
		_, err = in.Heartbeat(addr, 0)
		return err
	}
	write("before")
	if err := raftPeer(ca2, s1.RaftAddr()); err == nil {
		t.Fatal("a certificate of the new CA was answered on the raft port before the rotation")
	}

	writeCAs(ca1, ca2)
	reload("bundle")
	if err := raftPeer(ca1, s1.RaftAddr()); err != nil {
		t.Fatalf("during the overlap a certificate of the old CA was refused: %v", err)
	}
	for _, d := range dirs {
		ca2.Issue(t, d, tlstest.Leaf{})
	}
	reload("reissue")
	writeCAs(ca2)
	reload("drop")

	for _, s := range servers {
		if err := raftPeer(ca1, s.RaftAddr()); err == nil {
			t.Errorf("%s: a client certificate of the dropped CA was answered on the raft port", s.NodeID())
		}
		if err := raftPeer(ca2, s.RaftAddr()); err != nil {
			t.Errorf("%s: a certificate of the new CA was refused: %v", s.NodeID(), err)
		}
		if st := s.TLSStatus(); st.API.CAs != 1 || st.RaftSerial != st.API.Serial {
			t.Errorf("%s: status %+v, want one CA and raft presenting the API certificate", s.NodeID(), st)
		}
	}
}

// TestRotationFlagsRefused: bad TLS and secret files, and bad
// combinations, fail Start as invalid_argument naming the flag, the file
// and the rule.
func TestRotationFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	expDir := filepath.Join(dir, "expired")
	if err := os.MkdirAll(expDir, 0o700); err != nil {
		t.Fatal(err)
	}
	expCert, expKey := ca.Issue(t, expDir, tlstest.Leaf{NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	cert, key := ca.Issue(t, dir, tlstest.Leaf{})
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	emptyCA := write("empty-ca.pem", "no certificate here\n")
	good := newSecret(t)
	weakSecond := write("weak2.secret", good+"\npassword-password-password-password\n")
	comments := write("comments.secret", "# only a comment\n\n")

	for _, tc := range []struct {
		name  string
		cfg   server.Config
		field string
		want  []string
	}{
		{"expired certificate", server.Config{TLSCert: expCert, TLSKey: expKey}, "tls-cert", []string{expCert, "expired at"}},
		{"key of another certificate", server.Config{TLSCert: cert, TLSKey: expKey}, "tls-cert", []string{"key must match"}},
		{"CA without a certificate", server.Config{TLSCert: cert, TLSKey: key, TLSCA: emptyCA}, "ca", []string{emptyCA, "no PEM certificate"}},
		{"missing key", server.Config{TLSCert: cert, TLSKey: filepath.Join(dir, "nope.pem")}, "tls-key", []string{"nope.pem"}},
		{"weak second secret", server.Config{ClusterSecretFile: weakSecond, Bootstrap: true, RaftAddr: "127.0.0.1:0"}, "cluster-secret-file", []string{weakSecond, "line 2", "too weak"}},
		{"no secret in the file", server.Config{ClusterSecretFile: comments, Bootstrap: true, RaftAddr: "127.0.0.1:0"}, "cluster-secret-file", []string{comments, "holds no secret"}},
		{"secret twice", server.Config{ClusterSecretFile: write("ok.secret", good), ClusterSecret: []byte(good)}, "cluster-secret-file", []string{"give one"}},
		{"negative reload interval", server.Config{ReloadInterval: -time.Second}, "reload-interval", []string{"negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DataDir = filepath.Join(t.TempDir(), "data")
			s, err := startServer(t, tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Field != tc.field {
				t.Fatalf("err %v, want invalid_argument on field %s", err, tc.field)
			}
			for _, w := range tc.want {
				if !strings.Contains(de.Message, w) {
					t.Errorf("message %q does not say %q", de.Message, w)
				}
			}
		})
	}
}
