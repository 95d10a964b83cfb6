package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
)

// syncBuffer collects logs written from several goroutines.
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

var testSecret = []byte("q7Lm2Vx9Pz4Rk8Wn3Tb6Yc1Hd5Jf0Gs+Ae/Ui2Oo4E=")

func startServer(t testing.TB, cfg server.Config) (*server.Server, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	cfg.Listen, cfg.RaftTimeout = "127.0.0.1:0", 300*time.Millisecond
	s, err := server.Start(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// TestPeerAuthRequired: a server that would listen for raft peers without
// a way to authenticate them does not start, and says which flags fix it;
// --insecure-peers starts it and shows in /v1/cluster.
func TestPeerAuthRequired(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  server.Config
		want string
	}{
		"bootstrap":          {server.Config{Bootstrap: true}, "--cluster-secret-file"},
		"raft addr":          {server.Config{RaftAddr: "127.0.0.1:0"}, "--insecure-peers"},
		"join":               {server.Config{Join: "http://127.0.0.1:1", JoinToken: "jf_x_y", RaftAddr: "127.0.0.1:0"}, "--cluster-secret-file"},
		"short secret":       {server.Config{Bootstrap: true, RaftAddr: "127.0.0.1:0", ClusterSecret: []byte("hunter2")}, "7 bytes"},
		"predictable secret": {server.Config{Bootstrap: true, RaftAddr: "127.0.0.1:0", ClusterSecret: []byte(strings.Repeat("secret", 8))}, "entropy"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.cfg.DataDir = t.TempDir()
			_, err := startServer(t, tc.cfg)
			if domain.CodeOf(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want invalid_argument mentioning %q", err, tc.want)
			}
			var de *domain.Error
			if !errors.As(err, &de) || de.Field != "cluster-secret-file" {
				t.Errorf("err %v does not name the field cluster-secret-file", err)
			}
		})
	}
	t.Run("insecure peers", func(t *testing.T) {
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		dir := t.TempDir()
		for range 2 { // the warning comes at every start
			s, err := startServer(t, server.Config{DataDir: dir, Bootstrap: true, RaftAddr: "127.0.0.1:0", InsecurePeers: true, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		if n := strings.Count(logs.String(), "raft peers are NOT authenticated"); n != 2 {
			t.Errorf("%d warnings in two starts with insecure peers:\n%s", n, logs.String())
		}
		s, err := startServer(t, server.Config{DataDir: dir, Bootstrap: true, RaftAddr: "127.0.0.1:0", InsecurePeers: true})
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
		v, err := as(t, s.URL(), strings.TrimSpace(string(tok))).Cluster(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if v.PeerAuth != "insecure" || !s.RaftListening() {
			t.Fatalf("peerAuth %q, listening %v", v.PeerAuth, s.RaftListening())
		}
	})
}

// TestGrowSingleServerThroughAPI: joining a single server (raft in memory)
// is refused at once with a reason; restarted with --bootstrap and a
// secret it listens, and a second server joins with the same secret.
func TestGrowSingleServerThroughAPI(t *testing.T) {
	dir := t.TempDir()
	s1, err := startServer(t, server.Config{DataDir: dir + "/n1", NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	admin := s1.AdminToken()
	if s1.RaftListening() {
		t.Fatal("a single server listens for raft")
	}
	start := time.Now()
	_, err = startServer(t, server.Config{DataDir: dir + "/n2", NodeID: "n2", Join: s1.URL(), JoinToken: admin, RaftAddr: "127.0.0.1:0", ClusterSecret: testSecret})
	if domain.CodeOf(err) != domain.CodeFailedPrecondition || !strings.Contains(err.Error(), "no raft listener") {
		t.Fatalf("joining a single server = %v, want failed_precondition naming the missing listener", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the refusal took %v", d)
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s1, err = startServer(t, server.Config{DataDir: dir + "/n1", Bootstrap: true, RaftAddr: "127.0.0.1:0", ClusterSecret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	s3, err := startServer(t, server.Config{DataDir: dir + "/n3", NodeID: "n3", Join: s1.URL(), JoinToken: admin, RaftAddr: "127.0.0.1:0", ClusterSecret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	v, err := as(t, s3.URL(), admin).Cluster(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if v.PeerAuth != "secret" || len(v.Members) != 2 {
		t.Fatalf("cluster view %+v", v)
	}
	want := map[string]string{"n1": s1.RaftAddr(), "n3": s3.RaftAddr()}
	for _, m := range v.Members {
		if want[m.ID] != m.RaftAddr {
			t.Errorf("member %s at %q, want %q", m.ID, m.RaftAddr, want[m.ID])
		}
	}
}
