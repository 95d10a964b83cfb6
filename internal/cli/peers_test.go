package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/store"
)

func TestClusterSecret(t *testing.T) {
	a := strings.TrimSpace(mustRun(t, nil, "cluster", "secret"))
	b := strings.TrimSpace(mustRun(t, nil, "cluster", "secret"))
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) != 32 {
		t.Fatalf("cluster secret printed %q (%d bytes, %v), want base64 of 32 bytes", a, len(raw), err)
	}
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if err := store.ValidateSecret([]byte(a)); err != nil {
		t.Fatalf("a generated secret is refused: %v", err)
	}
}

func TestServerPeerFlags(t *testing.T) {
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak")
	os.WriteFile(weak, []byte("changeme\n"), 0o600)
	runErrCases(t, map[string]errCase{
		"bootstrap without auth": {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--bootstrap"}, want: "--cluster-secret-file"},
		"join without auth":      {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--join", "http://127.0.0.1:1", "--token", "jf_a_b"}, want: "--insecure-peers"},
		"weak secret":            {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--bootstrap", "--cluster-secret-file", weak}, want: "--cluster-secret-file " + weak},
		"missing secret file":    {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--bootstrap", "--cluster-secret-file", filepath.Join(dir, "nope")}, want: "no such file"},
	})
}

// TestServerBootstrapWithSecret: `server --bootstrap --cluster-secret-file`
// starts, listening for raft peers authenticated by the secret; without
// --bootstrap the same server says raft runs in memory.
func TestServerBootstrapWithSecret(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secretFile, []byte(mustRun(t, nil, "cluster", "secret")), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bootstrap", "--raft-addr", "127.0.0.1:0", "--cluster-secret-file", secretFile}, `raft 127\.0\.0\.1:\d+ \(peers: secret\)`},
		{nil, `raft in memory \(single server: no raft listener\)`},
	} {
		out := serveBriefly(t, append([]string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error"}, tc.args...))
		if !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("server %v printed:\n%s\nwant a line matching %s", tc.args, out, tc.want)
		}
	}
}

// serveBriefly runs a server command until it has printed its banner.
func serveBriefly(t *testing.T, args []string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	var errb bytes.Buffer
	done := make(chan int)
	go func() { done <- Run(ctx, args, out, &errb) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "jobfabric server") {
		select {
		case code := <-done:
			t.Fatalf("server exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("server printed nothing")
		}
	}
	cancel()
	<-done
	return out.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
