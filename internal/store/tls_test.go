package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

func TestClusterTLS(t *testing.T) {
	logger := testLogger(t)
	cert, key, ca := tlstest.Generate(t, t.TempDir(), "127.0.0.1")
	serverTLS, err := tlsutil.ServerConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	// PeerTLS is left nil: derived from TLS (same CA, same certificate).
	nodes := startCluster(t, logger, withTLS(serverTLS))

	var want []string
	for i := range 20 {
		cmd := fmt.Sprintf("tls-%02d", i)
		mustApply(t, nodes[0].s, cmd)
		want = append(want, cmd)
	}
	waitConverged(t, want, nodes...)
	if serverTLS.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Error("Open modified the caller's tls.Config")
	}

	addr := nodes[0].s.Addr()
	t.Run("client without certificate rejected", func(t *testing.T) {
		cli, err := tlsutil.ClientConfig(ca, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := tlsExchange(addr, cli); err == nil {
			t.Fatal("raft port accepted a TLS client without certificate")
		}
	})
	t.Run("certificate from another CA rejected", func(t *testing.T) {
		oc, ok, _ := tlstest.Generate(t, t.TempDir(), "127.0.0.1")
		pair, err := tls.LoadX509KeyPair(oc, ok)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := tlsutil.ClientConfig(ca, "")
		if err != nil {
			t.Fatal(err)
		}
		cli.Certificates = []tls.Certificate{pair}
		if err := tlsExchange(addr, cli); err == nil {
			t.Fatal("raft port accepted a certificate from a foreign CA")
		}
	})
	t.Run("plain TCP gets no raft service", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A raft RPC type byte followed by garbage: the TLS server treats it
		// as a bad handshake and hangs up instead of decoding it.
		if _, err := c.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7}); err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 64)
		n, _ := io.ReadFull(c, buf)
		if n > 0 && buf[0] != 0x15 { // 0x15: a TLS alert record is fine
			t.Fatalf("plain TCP client got a non-TLS reply: %x", buf[:n])
		}
	})
}

// tlsExchange dials and then reads: with TLS 1.3 the server's verdict on
// the client certificate arrives after the client's handshake completes.
func tlsExchange(addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// An unknown RPC type: an authenticated peer would get a decode error
	// and a closed connection too, but only after the handshake succeeded,
	// so write first and expect the failure from the read.
	if _, err := c.Write([]byte{0xff}); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

// TestHandshakeTimeout: a client that connects to the TLS raft port and
// says nothing is dropped once the handshake deadline passes.
func TestHandshakeTimeout(t *testing.T) {
	serverTLS, dialTLS, err := SecretTLS(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	layer := newStreamLayer(ln, ln.Addr(), serverTLS, dialTLS)
	layer.handshakeTimeout = 200 * time.Millisecond
	defer layer.Close()

	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	c, err := layer.Accept()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Read(make([]byte, 1))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("read from a silent client: %v after %v, want a handshake timeout", err, time.Since(start))
	}
	c.Close()

	// A member's connection is unaffected by the deadline once past it.
	errc := make(chan error, 1)
	go func() {
		c, err := layer.Dial(raft.ServerAddress(ln.Addr().String()), time.Second)
		if err == nil {
			time.Sleep(400 * time.Millisecond) // past the handshake deadline
			_, err = c.Write([]byte{42})
			c.Close()
		}
		errc <- err
	}()
	c, err = layer.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 42 {
		t.Fatalf("member connection: read %v, %v", b, err)
	}
	c.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
