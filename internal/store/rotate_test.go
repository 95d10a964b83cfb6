package store

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/store/raftinject"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// otherSecret is the secret a rotation moves to.
var otherSecret = []byte("Zt7pK2qW9xLm4RvB8nYc3HsJ6dFgA1eUoQ5iTwXy0kE=")

// answered reports whether the raft port at addr answers a heartbeat of
// term 0 (harmless: it only learns the target's term) from in.
func answered(in *raftinject.Injector, addr string) error {
	_, err := in.Heartbeat(addr, 0)
	return err
}

// injector is an attacker (or a member-to-be) holding cfg.
func injector(t *testing.T, cfg *tls.Config) *raftinject.Injector {
	t.Helper()
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true // to present its certificate whatever the server's
	in := raftinject.New(raftinject.Options{TLS: cfg, Timeout: time.Second})
	t.Cleanup(func() { in.Close() })
	return in
}

// rotationStep applies one step of a rotation to every member in turn
// while w writes, and checks writes went on.
func rotationStep(t *testing.T, nodes []*node, name string, apply func(*Store) error) {
	t.Helper()
	for _, n := range nodes {
		if err := apply(n.s); err != nil {
			t.Fatalf("%s on %s: %v", name, n.cfg.NodeID, err)
		}
		// A write through the leader after each member: the quorum holds
		// between members too, not only at the end of a step.
		waitFor(t, 5*time.Second, func() (bool, string) { return leaderOf(nodes...) != nil, "no leader" })
		mustApply(t, leaderOf(nodes...).s, fmt.Sprintf("%s-%s", name, n.cfg.NodeID))
	}
}

// TestSecretRotation rotates a 3-member cluster's secret in the documented
// steps (accept the new, issue under the new, drop the old) while a writer
// writes: writes never stop for long, and the members hold the same log.
// From the attacker's side: before the rotation a peer holding only the new
// secret is refused; during the overlap peers of either secret are
// answered; after, a peer holding only the old secret is refused, and its
// connection opened during the overlap is cut.
func TestSecretRotation(t *testing.T) {
	logger := testLogger(t)
	nodes := startCluster(t, logger, func(c *Config) {
		withSecret(testSecret)(c)
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	})
	addr := nodes[1].s.Addr()
	_, oldTLS, err := SecretTLS(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	_, newTLS, err := SecretTLS(otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := answered(injector(t, newTLS), addr); err == nil {
		t.Fatal("a peer holding only the new secret was answered before the rotation")
	}
	before := nodes[1].s.PeerCertificate()

	w := startWriter(nodes)
	start := time.Now()
	rotationStep(t, nodes, "accept-new", func(s *Store) error { return s.SetClusterSecrets(testSecret, [][]byte{otherSecret}) })
	oldPeer := injector(t, oldTLS)
	for name, in := range map[string]*raftinject.Injector{"old": oldPeer, "new": injector(t, newTLS)} {
		if err := answered(in, addr); err != nil {
			t.Fatalf("during the overlap, a peer of the %s secret was refused: %v", name, err)
		}
	}
	rotationStep(t, nodes, "issue-new", func(s *Store) error { return s.SetClusterSecrets(otherSecret, [][]byte{testSecret}) })
	rotationStep(t, nodes, "drop-old", func(s *Store) error { return s.SetClusterSecrets(otherSecret, nil) })
	end := time.Now()
	acks := w.stop()
	gap, n := longestGap(acks, start, end)
	t.Logf("%d writes acknowledged during the %v rotation, longest gap %v", n, end.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap > 2*time.Second {
		t.Errorf("writes stopped for %v during the rotation", gap)
	}

	if err := answered(oldPeer, addr); err == nil {
		t.Error("the connection of a peer of the dropped secret, opened during the overlap, still answered")
	}
	if err := answered(injector(t, oldTLS), addr); err == nil {
		t.Error("a peer holding only the dropped secret was answered")
	}
	if err := answered(injector(t, newTLS), addr); err != nil {
		t.Errorf("a peer of the new secret was refused: %v", err)
	}
	if after := nodes[1].s.PeerCertificate(); after == nil || after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Error("the member's certificate did not change with its secret")
	}
	// Every member still replicates: a write reaches all three.
	mustApply(t, leaderOf(nodes...).s, "after-rotation")
	waitFor(t, 10*time.Second, func() (bool, string) {
		for _, n := range nodes {
			items := n.fsm.Items()
			if len(items) == 0 || items[len(items)-1] != "after-rotation" {
				return false, n.cfg.NodeID + " has not applied the write after the rotation"
			}
		}
		return true, ""
	})
}

// TestTLSRotation rotates a mutual-TLS cluster from one CA to another
// (bundle both, reissue under the new, drop the old) without a restart;
// afterwards a client certificate of the dropped CA is refused on the raft
// port, and one that connected during the overlap is cut.
func TestTLSRotation(t *testing.T) {
	logger := testLogger(t)
	dir := t.TempDir()
	ca1, ca2 := tlstest.NewCA(t), tlstest.NewCA(t)
	load := func(ca *tlstest.CA, bundle ...*tlstest.CA) *tls.Config {
		t.Helper()
		cf, kf := ca.Issue(t, dir, tlstest.Leaf{Hosts: []string{"127.0.0.1"}})
		var pem []byte
		for _, b := range bundle {
			pem = append(pem, b.PEM()...)
		}
		caf := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(caf, pem, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := tlsutil.Load(tlsutil.Files{Cert: cf, Key: kf, CA: caf}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return b.ServerTLS()
	}
	peerOf := func(ca *tlstest.CA) *tls.Config {
		cfg := load(ca, ca)
		return &tls.Config{Certificates: cfg.Certificates}
	}
	nodes := startCluster(t, logger, withTLS(load(ca1, ca1)))
	addr := nodes[2].s.Addr()
	oldPeer := peerOf(ca1)
	if err := answered(injector(t, peerOf(ca2)), addr); err == nil {
		t.Fatal("a certificate of the new CA was answered before the rotation")
	}

	w := startWriter(nodes)
	start := time.Now()
	both := load(ca1, ca1, ca2)
	rotationStep(t, nodes, "bundle", func(s *Store) error { return s.SetTLS(both, nil) })
	overlap := injector(t, oldPeer)
	if err := answered(overlap, addr); err != nil {
		t.Fatalf("during the overlap, a certificate of the old CA was refused: %v", err)
	}
	reissued := load(ca2, ca1, ca2)
	rotationStep(t, nodes, "reissue", func(s *Store) error { return s.SetTLS(reissued, nil) })
	only := load(ca2, ca2)
	rotationStep(t, nodes, "drop", func(s *Store) error { return s.SetTLS(only, nil) })
	end := time.Now()
	gap, n := longestGap(w.stop(), start, end)
	t.Logf("%d writes acknowledged during the %v rotation, longest gap %v", n, end.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap > 2*time.Second {
		t.Errorf("writes stopped for %v during the rotation", gap)
	}

	if err := answered(overlap, addr); err == nil {
		t.Error("a connection with a certificate of the dropped CA, opened during the overlap, still answered")
	}
	if err := answered(injector(t, oldPeer), addr); err == nil {
		t.Error("a client certificate of the dropped CA was answered on the raft port")
	}
	if err := answered(injector(t, peerOf(ca2)), addr); err != nil {
		t.Errorf("a certificate of the new CA was refused: %v", err)
	}
	if err := nodes[0].s.SetClusterSecrets(testSecret, nil); err == nil {
		t.Error("a mutual-TLS member took a cluster secret")
	}
	if err := nodes[0].s.SetTLS(&tls.Config{Certificates: only.Certificates}, nil); err == nil {
		t.Error("a rotation to a configuration without a client CA was taken")
	}
}

// TestSetTLSKeepsTrustedConnections: a renewed certificate under the same
// secret leaves open connections alone; dropping the secret their peer
// presented closes them, and only them.
func TestSetTLSKeepsTrustedConnections(t *testing.T) {
	srv, _, err := SecretsTLS(testSecret, otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	layer := newStreamLayer(ln, ln.Addr(), srv, nil)
	defer layer.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			go func() {
				b := make([]byte, 1)
				if _, err := c.Read(b); err == nil { // the handshake, then one byte
					accepted <- c
				}
			}()
		}
	}()
	dial := func(secret []byte) *tls.Conn {
		t.Helper()
		_, cfg, err := SecretTLS(secret)
		if err != nil {
			t.Fatal(err)
		}
		cfg.InsecureSkipVerify = true // the server's trust is not what this checks
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		<-accepted
		return c
	}
	oldPeer, newPeer := dial(testSecret), dial(otherSecret)

	renewed, _, err := SecretsTLS(testSecret, otherSecret) // a fresh leaf, the same secrets
	if err != nil {
		t.Fatal(err)
	}
	if n := layer.setTLS(renewed, nil, time.Now()); n != 0 {
		t.Fatalf("a renewal closed %d connections", n)
	}
	onlyNew, _, err := SecretTLS(otherSecret)
	if err != nil {
		t.Fatal(err)
	}
	if n := layer.setTLS(onlyNew, nil, time.Now()); n != 1 {
		t.Fatalf("dropping a secret closed %d connections, want the one of its peer", n)
	}
	oldPeer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := oldPeer.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the peer of the dropped secret: read %v, want its connection closed", err)
	}
	newPeer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := newPeer.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the peer of the kept secret: read %v, want its connection open", err)
	}
}
