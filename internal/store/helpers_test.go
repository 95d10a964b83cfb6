package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// listFSM is the test state machine: an append-only list of strings.
type listFSM struct {
	mu       sync.Mutex
	items    []string
	restores int
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append(f.items, string(l.Data))
	return len(f.items)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return listSnapshot(slices.Clone(f.items)), nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var items []string
	if err := json.NewDecoder(rc).Decode(&items); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = items
	f.restores++
	return nil
}

func (f *listFSM) Items() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.items)
}

func (f *listFSM) Restores() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

type listSnapshot []string

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		sink.Cancel()
		return fmt.Errorf("encode snapshot: %w", err)
	}
	return sink.Close()
}

func (listSnapshot) Release() {}

// lockedBuffer collects a test's logs; they are printed only if it fails.
// Raft goroutines may still log after the test ends, which t.Log forbids.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testLogger keeps Info and up (STORE_TEST_DEBUG=1: Debug) and prints it
// when the test fails. Register it before any store so that its cleanup
// runs after the stores' shutdown.
func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	buf := &lockedBuffer{}
	level := slog.LevelInfo
	if os.Getenv("STORE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("store logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level}))
}

// node is one server of a test cluster, restartable from its directory.
type node struct {
	cfg Config
	fsm *listFSM
	s   *Store
}

// fastTimings keep elections well under a second while leaving headroom
// for -race on two cores, where shorter timeouts cause spurious elections.
func fastTimings(cfg Config) Config {
	cfg.HeartbeatTimeout = 400 * time.Millisecond
	cfg.ElectionTimeout = 400 * time.Millisecond
	cfg.LeaderLeaseTimeout = 200 * time.Millisecond
	cfg.CommitTimeout = 10 * time.Millisecond
	return cfg
}

// peers sets how a test node's transport listens and authenticates
// peers; nil keeps a single server on the in-memory transport.
type peers func(*Config)

// testSecret is a cluster secret (base64 of 32 random bytes).
var testSecret = []byte("m4V0pQx8Jt2c9KzRw1LhY6sNbE3uGfTa7DqXoZiC5vA=")

func withSecret(secret []byte) peers {
	return func(c *Config) { c.Listen, c.RaftAddr, c.ClusterSecret = true, "127.0.0.1:0", secret }
}

func withTLS(serverTLS *tls.Config) peers {
	return func(c *Config) { c.Listen, c.RaftAddr, c.TLS = true, "127.0.0.1:0", serverTLS }
}

func insecurePeers(c *Config) { c.Listen, c.RaftAddr, c.InsecurePeers = true, "127.0.0.1:0", true }

func newNode(t testing.TB, logger *slog.Logger, id string, bootstrap bool, p peers) *node {
	t.Helper()
	n := &node{cfg: fastTimings(Config{
		NodeID:    id,
		DataDir:   t.TempDir(),
		Bootstrap: bootstrap,
		Logger:    logger,
	})}
	if p != nil {
		p(&n.cfg)
	}
	n.start(t)
	if n.s.Listening() {
		// Pin the port the kernel chose so that a restart keeps the
		// address recorded in the cluster configuration.
		n.cfg.RaftAddr = n.s.Addr()
	}
	t.Cleanup(func() { n.stop(t) })
	return n
}

// start opens the store over the node's directory with a fresh FSM, as a
// restarted process would.
func (n *node) start(t testing.TB) {
	t.Helper()
	n.fsm = &listFSM{}
	cfg := n.cfg
	cfg.FSM = n.fsm
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.NodeID, err)
	}
	n.s = s
}

func (n *node) stop(t testing.TB) {
	t.Helper()
	if n.s == nil {
		return
	}
	if err := n.s.Shutdown(); err != nil {
		t.Errorf("shutdown %s: %v", n.cfg.NodeID, err)
	}
	n.s = nil
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or timeout passes; cond explains itself
// for the failure message.
func waitFor(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderOf returns the running node that is leader, if any.
func leaderOf(nodes ...*node) *node {
	for _, n := range nodes {
		if n.s != nil && n.s.IsLeader() {
			return n
		}
	}
	return nil
}

// waitConverged waits until every running node's FSM holds exactly want.
func waitConverged(t testing.TB, want []string, nodes ...*node) {
	t.Helper()
	waitFor(t, 10*time.Second, func() (bool, string) {
		for _, n := range nodes {
			if n.s == nil {
				continue
			}
			if got := n.fsm.Items(); !slices.Equal(got, want) {
				return false, fmt.Sprintf("%s has %d items, want %d", n.cfg.NodeID, len(got), len(want))
			}
		}
		return true, ""
	})
}

func mustApply(t testing.TB, s *Store, cmd string) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.Apply(ctx, []byte(cmd))
	if err != nil {
		t.Fatalf("apply %q: %v", cmd, err)
	}
	return resp
}

// logStores are the log stores every test about the log runs over.
var logStores = []string{LogStoreWAL, LogStoreBolt}

// forEachLogStore runs test once per log store, as a subtest named after it.
func forEachLogStore(t *testing.T, test func(t *testing.T, kind string)) {
	t.Helper()
	for _, kind := range logStores {
		t.Run(kind, func(t *testing.T) { test(t, kind) })
	}
}

// withLogStore sets the log store, then applies p (nil: none).
func withLogStore(kind string, p peers) peers {
	return func(c *Config) {
		c.LogStore = kind
		if p != nil {
			p(c)
		}
	}
}
