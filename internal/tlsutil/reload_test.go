package tlsutil_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

func TestLoadRefusals(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	caFile := ca.Write(t, filepath.Join(dir, "ca.pem"))
	now := time.Now()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodCert, goodKey := ca.IssuePEM(t, tlstest.Leaf{})
	otherCert, _ := ca.IssuePEM(t, tlstest.Leaf{})
	expCert, expKey := ca.IssuePEM(t, tlstest.Leaf{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	newCert, newKey := ca.IssuePEM(t, tlstest.Leaf{NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)})
	cert, key := write("cert.pem", goodCert), write("key.pem", goodKey)

	for _, c := range []struct {
		name  string
		files tlsutil.Files
		want  []string // in the error: the file and the rule
	}{
		{"key does not match", tlsutil.Files{Cert: write("other.pem", otherCert), Key: key}, []string{"other.pem", "key must match"}},
		{"expired", tlsutil.Files{Cert: write("exp.pem", expCert), Key: write("exp.key", expKey)}, []string{"exp.pem", "expired at"}},
		{"not yet valid", tlsutil.Files{Cert: write("new.pem", newCert), Key: write("new.key", newKey)}, []string{"new.pem", "not yet valid"}},
		{"CA without certificate", tlsutil.Files{Cert: cert, Key: key, CA: write("empty-ca.pem", []byte("nothing\n"))}, []string{"empty-ca.pem", "no PEM certificate"}},
		{"CA unreadable", tlsutil.Files{Cert: cert, Key: key, CA: filepath.Join(dir, "gone.pem")}, []string{"gone.pem", "no such file"}},
		{"certificate unreadable", tlsutil.Files{Cert: filepath.Join(dir, "gone.pem"), Key: key}, []string{"gone.pem", "no such file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := tlsutil.Load(c.files, now)
			if err == nil {
				t.Fatalf("loaded %+v, want a refusal", b.Info)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	b, err := tlsutil.Load(tlsutil.Files{Cert: cert, Key: key, CA: caFile}, now)
	if err != nil {
		t.Fatal(err)
	}
	if b.Info.Serial != fmt.Sprintf("%x", b.Cert.Leaf.SerialNumber) || b.Info.CAs != 1 || !b.Info.NotAfter.Equal(b.Cert.Leaf.NotAfter) {
		t.Errorf("info %+v does not describe the certificate", b.Info)
	}
}

// peerSerial dials addr and returns the serial the server presented.
func peerSerial(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	c, err := d.DialContext(ctxT(t), "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber), nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoServer serves cfg and answers each connection with one byte, then
// echoes: a connection opened before a reload shows it goes on.
func echoServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := c.Write([]byte{1}); err != nil {
					return
				}
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestReloaderRotates(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	caFile := ca.Write(t, filepath.Join(dir, "ca.pem"))
	certFile, keyFile := ca.Issue(t, dir, tlstest.Leaf{})
	clock := tstime.NewFake(time.Now())
	var logs bytes.Buffer
	r, err := tlsutil.NewReloader(tlsutil.Files{Cert: certFile, Key: keyFile, CA: caFile}, clock, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, r.ServerConfig())
	client, err := tlsutil.ClientConfig(caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	first := r.Current().Info.Serial
	if got, err := peerSerial(t, addr, client); err != nil || got != first {
		t.Fatalf("served %s (%v), want %s", got, err, first)
	}
	// A connection opened before the rotation, to check it goes on.
	open, err := tls.Dial("tcp", addr, client)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := io.ReadFull(open, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	if changed, err := r.Reload(); changed || err != nil {
		t.Fatalf("reload of unchanged files: changed %v, err %v", changed, err)
	}

	t.Run("renewed certificate is served to the next client", func(t *testing.T) {
		ca.Issue(t, dir, tlstest.Leaf{})
		if changed, err := r.Reload(); !changed || err != nil {
			t.Fatalf("reload: changed %v, err %v", changed, err)
		}
		second := r.Current().Info.Serial
		if second == first {
			t.Fatal("serial unchanged after a new certificate")
		}
		if got, err := peerSerial(t, addr, client); err != nil || got != second {
			t.Fatalf("served %s (%v), want the new %s", got, err, second)
		}
		if _, err := open.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(open, make([]byte, 1)); err != nil {
			t.Fatalf("connection opened before the reload: %v", err)
		}
	})

	t.Run("bad file refused and old kept", func(t *testing.T) {
		inUse := r.Current().Info.Serial
		before := r.Status().Errors
		// Expired, and then a key of another certificate: each refused.
		ca.Issue(t, dir, tlstest.Leaf{NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
		if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("expired certificate: err %v", err)
		}
		st := r.Status()
		if st.Info.Serial != inUse || !strings.Contains(st.LastError, certFile) || st.Errors != before+1 {
			t.Fatalf("status after a refusal: %+v", st)
		}
		if !strings.Contains(logs.String(), "TLS reload refused") {
			t.Errorf("refusal not logged: %s", logs.String())
		}
		// The same bad files are not tried, logged or counted again, but
		// their refusal is still the answer (a SIGHUP must not read as a
		// success).
		if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), "expired") || r.Status().Errors != before+1 {
			t.Fatalf("same bad files: err %v, status %+v", err, r.Status())
		}
		if n := strings.Count(logs.String(), "TLS reload refused"); n != 1 {
			t.Fatalf("the same refusal logged %d times", n)
		}
		if got, err := peerSerial(t, addr, client); err != nil || got != inUse {
			t.Fatalf("served %s (%v) after a refusal, want %s", got, err, inUse)
		}
		good, _ := ca.IssuePEM(t, tlstest.Leaf{})
		if err := os.WriteFile(certFile, good, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), "key must match") {
			t.Fatalf("certificate without its key: err %v", err)
		}
		ca.Issue(t, dir, tlstest.Leaf{})
		if changed, err := r.Reload(); !changed || err != nil {
			t.Fatalf("good files after bad ones: changed %v err %v", changed, err)
		}
		if st := r.Status(); st.LastError != "" || st.Info.Serial == inUse {
			t.Fatalf("status after a good reload: %+v", st)
		}
	})

	t.Run("CA rotation changes the client certificates accepted", func(t *testing.T) {
		oldDir, newDir := t.TempDir(), t.TempDir()
		oldClient := clientWithCert(t, ca, oldDir, caFile)
		if _, err := peerSerial(t, addr, oldClient); err != nil {
			t.Fatalf("client certificate of the CA in use: %v", err)
		}
		ca2 := tlstest.NewCA(t)
		ca2.Write(t, caFile)
		ca2.Issue(t, dir, tlstest.Leaf{})
		if changed, err := r.Reload(); !changed || err != nil {
			t.Fatalf("reload: changed %v err %v", changed, err)
		}
		if _, err := peerSerial(t, addr, oldClient); err == nil {
			t.Fatal("a client certificate of the dropped CA was accepted")
		}
		if _, err := peerSerial(t, addr, clientWithCert(t, ca2, newDir, caFile)); err != nil {
			t.Fatalf("client certificate of the new CA: %v", err)
		}
	})
}

func clientWithCert(t *testing.T, ca *tlstest.CA, dir, caFile string) *tls.Config {
	t.Helper()
	cf, kf := ca.Issue(t, dir, tlstest.Leaf{})
	pair, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tlsutil.ClientConfig(caFile, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.InsecureSkipVerify = true // the server's trust is not what this checks
	cfg.Certificates = []tls.Certificate{pair}
	return cfg
}

func TestReloaderRunPolls(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	certFile, keyFile := ca.Issue(t, dir, tlstest.Leaf{})
	clock := tstime.NewFake(time.Now())
	r, err := tlsutil.NewReloader(tlsutil.Files{Cert: certFile, Key: keyFile}, clock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan string, 1)
	r.OnChange(func(b *tlsutil.Bundle) { changed <- b.Info.Serial })
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, 5*time.Second) }()
	defer func() { cancel(); <-done }()
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ca.Issue(t, dir, tlstest.Leaf{})
	clock.Advance(5 * time.Second)
	select {
	case s := <-changed:
		if s != r.Current().Info.Serial {
			t.Fatalf("OnChange saw %s, current is %s", s, r.Current().Info.Serial)
		}
	case <-ctx.Done():
		t.Fatal("the poll did not load the changed files")
	}
}

// TestReloaderFileGoneAndBack: a file missing for a moment (a rewrite that
// is not a rename) is refused once and logged once; the same content back
// is no new certificate, and clears the error.
func TestReloaderFileGoneAndBack(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	certFile, keyFile := ca.Issue(t, dir, tlstest.Leaf{})
	var logs bytes.Buffer
	r, err := tlsutil.NewReloader(tlsutil.Files{Cert: certFile, Key: keyFile}, tstime.NewFake(time.Now()), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), certFile) {
			t.Fatalf("missing certificate: err %v", err)
		}
	}
	if n := strings.Count(logs.String(), "TLS reload refused"); n != 1 || r.Status().Errors != 1 {
		t.Fatalf("the same refusal logged %d times, counted %d", n, r.Status().Errors)
	}
	if err := os.WriteFile(certFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(); changed || err != nil {
		t.Fatalf("same files back: changed %v err %v", changed, err)
	}
	if st := r.Status(); st.LastError != "" || st.Reloads != 0 {
		t.Fatalf("status with the files in use back: %+v", st)
	}
}

// TestReloaderWarnsBeforeExpiry: the certificate in use is logged as
// expiring from ExpiryWarning before its end, once a day, and as expired
// after it.
func TestReloaderWarnsBeforeExpiry(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t)
	start := time.Now()
	certFile, keyFile := ca.Issue(t, dir, tlstest.Leaf{NotBefore: start.Add(-time.Hour), NotAfter: start.Add(20 * 24 * time.Hour)})
	clock := tstime.NewFake(start)
	var logs bytes.Buffer
	r, err := tlsutil.NewReloader(tlsutil.Files{Cert: certFile, Key: keyFile}, clock, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	count := func() (soon, expired int) {
		return strings.Count(logs.String(), "expires soon"), strings.Count(logs.String(), "has expired")
	}
	steps := []struct {
		advance       time.Duration
		soon, expired int
	}{
		{0, 0, 0},
		{5 * 24 * time.Hour, 0, 0},  // 15 days left
		{2 * 24 * time.Hour, 1, 0},  // 13 days left
		{time.Hour, 1, 0},           // the same day
		{24 * time.Hour, 2, 0},      // a day later
		{13 * 24 * time.Hour, 2, 1}, // past its end
		{time.Hour, 2, 1},           // the same day
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		r.Reload()
		if soon, expired := count(); soon != st.soon || expired != st.expired {
			t.Fatalf("step %d: %d warnings, %d expired lines; want %d, %d\n%s", i, soon, expired, st.soon, st.expired, logs.String())
		}
	}
}
