package tlsutil_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// handshakeResult is what the server side saw for one connection.
type handshakeResult struct {
	peerCerts int
	err       error
}

// serveOnce accepts one connection with cfg, completes the handshake and
// writes one byte so the client can observe a server-side rejection.
func serveOnce(t *testing.T, cfg *tls.Config) (string, <-chan handshakeResult) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	res := make(chan handshakeResult, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- handshakeResult{err: err}
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tc := c.(*tls.Conn)
		if err := tc.HandshakeContext(ctx); err != nil {
			res <- handshakeResult{err: err}
			return
		}
		_, err = tc.Write([]byte{1})
		res <- handshakeResult{peerCerts: len(tc.ConnectionState().PeerCertificates), err: err}
	}()
	return ln.Addr().String(), res
}

// dial connects and reads the server's byte; TLS 1.3 reports a rejected
// client certificate only on the first read.
func dial(addr string, cfg *tls.Config) error {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	buf := make([]byte, 1)
	_, err = io.ReadFull(c, buf)
	return err
}

func TestServerAndClientConfig(t *testing.T) {
	cert, key, ca := tlstest.Generate(t, t.TempDir())
	srv, err := tlsutil.ServerConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	if srv.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want TLS 1.2", srv.MinVersion)
	}
	if srv.ClientAuth != tls.VerifyClientCertIfGiven || srv.ClientCAs == nil {
		t.Errorf("CA given but client verification not configured: %v", srv.ClientAuth)
	}

	for _, name := range []string{"", "localhost"} {
		t.Run("serverName="+name, func(t *testing.T) {
			addr, res := serveOnce(t, srv)
			cli, err := tlsutil.ClientConfig(ca, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := dial(addr, cli); err != nil {
				t.Fatalf("dial: %v", err)
			}
			if r := <-res; r.err != nil || r.peerCerts != 0 {
				t.Fatalf("server: %+v", r)
			}
		})
	}
}

func TestClientRejectsUnknownCA(t *testing.T) {
	cert, key, _ := tlstest.Generate(t, t.TempDir())
	_, _, otherCA := tlstest.Generate(t, t.TempDir())
	srv, err := tlsutil.ServerConfig(cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	if srv.ClientCAs != nil || srv.ClientAuth != tls.NoClientCert {
		t.Fatalf("no CA given but client verification configured")
	}
	addr, _ := serveOnce(t, srv)
	cli, err := tlsutil.ClientConfig(otherCA, "")
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if err := dial(addr, cli); err == nil || !errors.As(err, &unknown) {
		t.Fatalf("dial with foreign CA: err = %v, want unknown authority", err)
	}
}

func TestClientCertificates(t *testing.T) {
	cert, key, ca := tlstest.Generate(t, t.TempDir())
	srv, err := tlsutil.ServerConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	// ServerConfig doubles as the dialing config of a peer: same CA, own cert.
	t.Run("trusted", func(t *testing.T) {
		addr, res := serveOnce(t, srv)
		if err := dial(addr, srv); err != nil {
			t.Fatalf("dial: %v", err)
		}
		if r := <-res; r.err != nil || r.peerCerts != 1 {
			t.Fatalf("server: %+v, want one verified peer certificate", r)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		oc, ok, _ := tlstest.Generate(t, t.TempDir())
		pair, err := tls.LoadX509KeyPair(oc, ok)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := tlsutil.ClientConfig(ca, "")
		if err != nil {
			t.Fatal(err)
		}
		cli.Certificates = []tls.Certificate{pair}
		addr, res := serveOnce(t, srv)
		if err := dial(addr, cli); err == nil {
			t.Fatal("client certificate from a foreign CA was accepted")
		}
		if r := <-res; r.err == nil {
			t.Fatal("server accepted a client certificate from a foreign CA")
		}
	})
}

func TestOldTLSVersionRejected(t *testing.T) {
	cert, key, ca := tlstest.Generate(t, t.TempDir())
	srv, err := tlsutil.ServerConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveOnce(t, srv)
	cli, err := tlsutil.ClientConfig(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	cli.MinVersion = tls.VersionTLS10
	cli.MaxVersion = tls.VersionTLS11
	if err := dial(addr, cli); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := tlstest.Generate(t, dir)
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	cases := []struct {
		name string
		fn   func() (*tls.Config, error)
	}{
		{"server no key", func() (*tls.Config, error) { return tlsutil.ServerConfig(cert, "", "") }},
		{"server missing cert", func() (*tls.Config, error) { return tlsutil.ServerConfig(missing, key, "") }},
		{"server key mismatch", func() (*tls.Config, error) { return tlsutil.ServerConfig(ca, key, "") }},
		{"server missing CA", func() (*tls.Config, error) { return tlsutil.ServerConfig(cert, key, missing) }},
		{"server empty CA", func() (*tls.Config, error) { return tlsutil.ServerConfig(cert, key, empty) }},
		{"client missing CA", func() (*tls.Config, error) { return tlsutil.ClientConfig(missing, "") }},
		{"client empty CA", func() (*tls.Config, error) { return tlsutil.ClientConfig(empty, "") }},
	}
	for _, c := range cases {
		if cfg, err := c.fn(); err == nil {
			t.Errorf("%s: got config %v, want error", c.name, cfg)
		}
	}
	if _, err := tlsutil.ClientConfig(missing, ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing CA error does not wrap os.ErrNotExist: %v", err)
	}

	sys, err := tlsutil.ClientConfig("", "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if sys.RootCAs != nil || sys.ServerName != "example.com" || sys.MinVersion != tls.VersionTLS12 {
		t.Errorf("system-pool client config = %+v", sys)
	}
}
