package tlsutil_test

import (
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// BenchmarkServerHandshake is the cost of a full TLS handshake (ECDSA
// P-256, no resumption) served by a fixed configuration and by a
// Reloader's, which looks the bundle in use up at each handshake: what a
// certificate that can be rotated costs each new connection.
func BenchmarkServerHandshake(b *testing.B) {
	dir := b.TempDir()
	ca := tlstest.NewCA(b)
	caFile := ca.Write(b, filepath.Join(dir, "ca.pem"))
	certFile, keyFile := ca.Issue(b, dir, tlstest.Leaf{})
	static, err := tlsutil.ServerConfig(certFile, keyFile, caFile)
	if err != nil {
		b.Fatal(err)
	}
	r, err := tlsutil.NewReloader(tlsutil.Files{Cert: certFile, Key: keyFile, CA: caFile}, tstime.Std{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	client, err := tlsutil.ClientConfig(caFile, "localhost")
	if err != nil {
		b.Fatal(err)
	}
	client.ClientSessionCache = nil
	for name, srv := range map[string]*tls.Config{"static": static, "reloader": r.ServerConfig()} {
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						s := tls.Server(c, srv)
						s.SetDeadline(time.Now().Add(5 * time.Second))
						if s.Handshake() == nil {
							s.Write([]byte{1}) // the client reads it: the server's half is done
						}
						s.Close()
					}()
				}
			}()
			buf := make([]byte, 1)
			for b.Loop() {
				c, err := tls.Dial("tcp", ln.Addr().String(), client)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
