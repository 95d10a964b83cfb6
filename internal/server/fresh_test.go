package server_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/server"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCloseCutsUnusedConnections: a connection a client dialed and never
// used does not hold a shutdown to its 5 s deadline (net/http counts it
// idle only after 5 s): Close closes it once a short grace has passed,
// with no "closing connections still open" fallback.
func TestCloseCutsUnusedConnections(t *testing.T) {
	var logs syncBuf
	c := startTuned(t, func(cfg *server.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	srv := c.Servers[0]
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server has accepted it once a request on another connection
	// is answered (accepts are in order on one listener).
	if _, err := c.Client(0).Health(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard, not a wait
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the unused connection read %v, want EOF from the server closing it", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "closing connections still open") {
		t.Fatalf("Close fell back to cutting connections at the 5 s deadline:\n%s", logs.String())
	}
}
