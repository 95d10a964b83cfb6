package raftinject

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Hello makes one TLS handshake to a raft port from src (an address of
// this host: Linux accepts any 127/8 address as a source, so one test
// plays several hosts) as an outsider, with no client certificate, and
// says whether the server answered with its first flight (a key exchange
// and a signature done for the attacker) or reset the connection before
// sending a byte. Other failures (nothing listening, a deadline) are
// neither.
func Hello(ctx context.Context, src, target string) (served, reset bool) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", target)
	if errors.Is(err, syscall.ECONNRESET) {
		return false, true // reset before connect returned
	}
	if err != nil {
		return false, false
	}
	cc := &countingConn{Conn: raw}
	tc := tls.Client(cc, &tls.Config{InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(5 * time.Second))
	err = tc.HandshakeContext(ctx)
	tc.Close()
	switch {
	case err == nil || cc.read.Load() > 0:
		return true, false
	case errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil:
		return false, false
	}
	return false, true
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
