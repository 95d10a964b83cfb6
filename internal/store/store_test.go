package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestSingleNodeRestart(t *testing.T) { forEachLogStore(t, testSingleNodeRestart) }

func testSingleNodeRestart(t *testing.T, kind string) {
	for _, tc := range []struct {
		name         string
		snapshotAt   int // force a snapshot after this many commands; 0: never
		wantRestores int
	}{
		{name: "log replay"},
		{name: "snapshot and replay", snapshotAt: 60, wantRestores: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := testLogger(t)
			n := newNode(t, logger, "n1", true, withLogStore(kind, nil))
			if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			if !n.s.IsLeader() {
				t.Fatal("single bootstrapped node is not leader")
			}
			select {
			case v := <-n.s.LeaderCh():
				if !v {
					t.Fatal("LeaderCh delivered false")
				}
			case <-time.After(time.Second):
				t.Fatal("LeaderCh delivered nothing")
			}

			var want []string
			for i := range 100 {
				cmd := fmt.Sprintf("cmd-%03d", i)
				want = append(want, cmd)
				if got := mustApply(t, n.s, cmd); got != i+1 {
					t.Fatalf("apply %d: response %v, want %d", i, got, i+1)
				}
				if tc.snapshotAt > 0 && i+1 == tc.snapshotAt {
					if err := n.s.Snapshot(ctxT(t, 5*time.Second)); err != nil {
						t.Fatalf("snapshot: %v", err)
					}
				}
			}
			if got := n.fsm.Items(); !slices.Equal(got, want) {
				t.Fatalf("before restart: %d items", len(got))
			}

			n.stop(t)
			n.start(t) // Bootstrap is still set: must be skipped over existing state
			if tc.snapshotAt > 0 {
				// Restored synchronously by Open, before any election.
				if got := len(n.fsm.Items()); got != tc.snapshotAt {
					t.Errorf("after open: %d items restored from snapshot, want %d", got, tc.snapshotAt)
				}
			}
			if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader after restart" })
			if err := n.s.Barrier(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("barrier: %v", err)
			}
			if got := n.fsm.Items(); !slices.Equal(got, want) {
				t.Fatalf("after restart: %d items, want %d: %v", len(got), len(want), got)
			}
			if got := n.fsm.Restores(); got != tc.wantRestores {
				t.Errorf("FSM restored %d times, want %d", got, tc.wantRestores)
			}
			members, err := n.s.Members()
			if err != nil {
				t.Fatal(err)
			}
			wantMembers := []Member{{ID: "n1", Addr: n.s.Addr(), Suffrage: SuffrageVoter, Leader: true}}
			if !slices.Equal(members, wantMembers) {
				t.Errorf("members = %+v, want %+v", members, wantMembers)
			}
			// Writes continue after the restart, numbered after the replayed ones.
			if got := mustApply(t, n.s, "after-restart"); got != 101 {
				t.Errorf("response after restart = %v, want 101", got)
			}
		})
	}
}

func TestSnapshotThreshold(t *testing.T) { forEachLogStore(t, testSnapshotThreshold) }

func testSnapshotThreshold(t *testing.T, kind string) {
	logger := testLogger(t)
	n := &node{cfg: fastTimings(Config{
		NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: logger, LogStore: kind,
		SnapshotThreshold: 20, SnapshotInterval: 50 * time.Millisecond,
	})}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		mustApply(t, n.s, fmt.Sprint(i))
	}
	// raft checks the threshold every SnapshotInterval (with jitter).
	snapDir := filepath.Join(n.cfg.DataDir, "raft", "snapshots")
	waitFor(t, 5*time.Second, func() (bool, string) {
		entries, err := os.ReadDir(snapDir)
		return err == nil && len(entries) > 0, fmt.Sprintf("no automatic snapshot in %s (%v)", snapDir, err)
	})
}

// TestRestartSnapshotsLongLog: a server restarted before raft's snapshot
// timer fires (here an hour) still snapshots, once it has replayed a log of
// SnapshotThreshold entries or more; with less it leaves the log alone.
// Before, every restart reset the timer, and a server restarted more often
// than SnapshotInterval replayed its whole history at each start.
func TestRestartSnapshotsLongLog(t *testing.T) { forEachLogStore(t, testRestartSnapshotsLongLog) }

func testRestartSnapshotsLongLog(t *testing.T, kind string) {
	for _, tc := range []struct {
		entries  int
		snapshot bool
	}{{entries: 50, snapshot: true}, {entries: 10, snapshot: false}} {
		t.Run(fmt.Sprint(tc.entries), func(t *testing.T) {
			logger := testLogger(t)
			n := &node{cfg: fastTimings(Config{
				NodeID: "n1", DataDir: t.TempDir(), Bootstrap: true, Logger: logger, LogStore: kind,
				SnapshotThreshold: 20, SnapshotInterval: time.Hour,
			})}
			n.start(t)
			t.Cleanup(func() { n.stop(t) })
			if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			want := make([]string, tc.entries)
			for i := range want {
				want[i] = fmt.Sprint(i)
				mustApply(t, n.s, want[i])
			}
			snapDir := filepath.Join(n.cfg.DataDir, "raft", "snapshots")
			snapshots := func() int {
				entries, err := os.ReadDir(snapDir)
				if err != nil {
					t.Fatal(err)
				}
				return len(entries)
			}
			if got := snapshots(); got != 0 {
				t.Fatalf("%d snapshots before the restart: the timer fired", got)
			}
			n.stop(t)
			n.start(t)
			logged := n.s.raft.LastIndex()
			waitFor(t, 5*time.Second, func() (bool, string) {
				return slices.Equal(n.fsm.Items(), want), fmt.Sprintf("replayed %d of %d entries", len(n.fsm.Items()), len(want))
			})
			if !tc.snapshot {
				n.stop(t) // waits for the check after the replay
				if got := snapshots(); got != 0 {
					t.Fatalf("%d snapshots after replaying %d entries, under the threshold", got, tc.entries)
				}
				return
			}
			// A snapshot that covers the whole log replayed, not what the
			// FSM had applied when raft handed it the last entries.
			waitFor(t, 5*time.Second, func() (bool, string) {
				got, _ := strconv.ParseUint(n.s.raft.Stats()["last_snapshot_index"], 10, 64)
				return got >= logged, fmt.Sprintf("after replaying %d entries (threshold 20): newest snapshot at index %d, the log replayed ends at %d", tc.entries, got, logged)
			})
			// The next start restores it and replays nothing.
			n.stop(t)
			n.start(t)
			waitFor(t, 5*time.Second, func() (bool, string) {
				return slices.Equal(n.fsm.Items(), want) && n.fsm.Restores() == 1, fmt.Sprintf("items %v, %d restores", n.fsm.Items(), n.fsm.Restores())
			})
		})
	}
}

func TestNotLeader(t *testing.T) {
	logger := testLogger(t)
	// Not bootstrapped and alone: never elects anyone.
	n := newNode(t, logger, "lonely", false, withSecret(testSecret))

	if err := n.s.WaitForLeader(ctxT(t, 200*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForLeader = %v, want deadline exceeded", err)
	}
	ctx := ctxT(t, 5*time.Second)
	checks := map[string]error{}
	_, checks["Apply"] = n.s.Apply(ctx, []byte("x"))
	checks["Barrier"] = n.s.Barrier(ctx)
	checks["AddVoter"] = n.s.AddVoter(ctx, "other", "127.0.0.1:1")
	checks["RemoveServer"] = n.s.RemoveServer(ctx, "other")
	for op, err := range checks {
		var nle *NotLeaderError
		if !errors.As(err, &nle) {
			t.Errorf("%s: err = %v, want *NotLeaderError", op, err)
			continue
		}
		if nle.LeaderID != "" || nle.LeaderAddr != "" {
			t.Errorf("%s: leader %q/%q, want none known", op, nle.LeaderID, nle.LeaderAddr)
		}
		if !errors.Is(err, raft.ErrNotLeader) {
			t.Errorf("%s: does not match raft.ErrNotLeader", op)
		}
	}
	if members, err := n.s.Members(); err != nil || len(members) != 0 {
		t.Errorf("Members = %v, %v; want none", members, err)
	}
	if err := n.s.Snapshot(ctx); err != nil {
		t.Errorf("Snapshot with nothing to snapshot = %v, want nil", err)
	}
}

func TestApplyContext(t *testing.T) {
	logger := testLogger(t)
	n := newNode(t, logger, "n1", true, nil)
	if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.s.Apply(canceled, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply(canceled) = %v, want context.Canceled", err)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := n.s.Apply(expired, []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Apply(expired) = %v, want context.DeadlineExceeded", err)
	}
	if got := n.fsm.Items(); len(got) != 0 {
		t.Errorf("commands with a dead context were applied: %v", got)
	}
	// A context without deadline or cancellation takes the direct path.
	if got, err := n.s.Apply(context.Background(), []byte("y")); err != nil || got != 1 {
		t.Errorf("Apply(Background) = %v, %v", got, err)
	}
}

func TestShutdown(t *testing.T) { forEachLogStore(t, testShutdown) }

func testShutdown(t *testing.T, kind string) {
	logger := testLogger(t)
	n := newNode(t, logger, "n1", true, withLogStore(kind, nil))
	if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	s := n.s
	if err := s.Shutdown(); err != nil {
		t.Fatalf("first Shutdown: %v", err)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	n.s = nil

	_, err := s.Apply(ctxT(t, time.Second), []byte("x"))
	if !errors.Is(err, raft.ErrRaftShutdown) {
		t.Errorf("Apply after Shutdown = %v, want raft.ErrRaftShutdown", err)
	}
	if err := s.WaitForLeader(ctxT(t, time.Second)); !errors.Is(err, raft.ErrRaftShutdown) {
		t.Errorf("WaitForLeader after Shutdown = %v, want raft.ErrRaftShutdown", err)
	}
	// LeaderCh holds the newest value (false: leadership lost), then closes.
	var got []bool
	for v := range s.LeaderCh() {
		got = append(got, v)
	}
	if !slices.Equal(got, []bool{false}) {
		t.Errorf("LeaderCh after Shutdown delivered %v, want [false]", got)
	}
	// The port is free again: the listener and the log store's file lock are released.
	n.start(t)
	if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	fsm := &listFSM{}
	base := Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Listen: true, ClusterSecret: testSecret, FSM: fsm}
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
		before bool // refused before the data dir is touched
	}{
		"no node id":      {func(c *Config) { c.NodeID = "" }, "NodeID", false},
		"no data dir":     {func(c *Config) { c.DataDir = "" }, "DataDir", false},
		"no raft addr":    {func(c *Config) { c.RaftAddr = "" }, "RaftAddr", false},
		"no fsm":          {func(c *Config) { c.FSM = nil }, "FSM", false},
		"unspecified":     {func(c *Config) { c.RaftAddr = "0.0.0.0:0" }, "unspecified", false},
		"bad advertise":   {func(c *Config) { c.AdvertiseAddr = "example.com" }, "advertise", false},
		"advertise port0": {func(c *Config) { c.AdvertiseAddr = "example.com:0" }, "port", false},
		"peer tls alone":  {func(c *Config) { c.PeerTLS = &tls.Config{} }, "PeerTLS", false},
		"no peer auth":    {func(c *Config) { c.DataDir = t.TempDir(); c.ClusterSecret = nil }, "not be authenticated", true},
		"tls without ca":  {func(c *Config) { c.DataDir = t.TempDir(); c.ClusterSecret, c.TLS = nil, &tls.Config{} }, "no client CA", true},
		"secret and tls":  {func(c *Config) { c.TLS = &tls.Config{} }, "give one", false},
		"short secret":    {func(c *Config) { c.DataDir = t.TempDir(); c.ClusterSecret = []byte("hunter2") }, "7 bytes", true},
		"weak secret":     {func(c *Config) { c.DataDir = t.TempDir(); c.ClusterSecret = []byte(strings.Repeat("password", 5)) }, "entropy", true},
		"bad timeouts":    {func(c *Config) { c.HeartbeatTimeout = time.Second; c.ElectionTimeout = time.Millisecond }, "raft config", false},
		"bind in use":     {func(c *Config) { c.RaftAddr = busyAddr(t) }, "listen", false},
		"admission rate":  {func(c *Config) { c.DataDir = t.TempDir(); c.Admission.ConnRate = -1 }, "connection rate -1 is negative", true},
		"admission burst": {func(c *Config) { c.DataDir = t.TempDir(); c.Admission.ConnRate = 5 }, "connection burst 0", true},
		"log store":       {func(c *Config) { c.DataDir = t.TempDir(); c.LogStore = "rocksdb" }, `log store: "rocksdb" is not one of wal, bolt`, true},
		"handshake burst": {func(c *Config) { c.DataDir = t.TempDir(); c.Admission.HandshakeRate = 5 }, "handshake burst 0", true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Logger = testLogger(t)
			tc.mutate(&cfg)
			s, err := Open(context.Background(), cfg)
			if err == nil {
				s.Shutdown()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
			if tc.before && cfg.DataDir != "" {
				if _, err := os.Stat(filepath.Join(cfg.DataDir, "raft")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("refused configuration created the raft dir (%v)", err)
				}
			}
		})
	}
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cfg := base
		cfg.Logger = testLogger(t)
		if _, err := Open(ctx, cfg); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("advertise override", func(t *testing.T) {
		cfg := base
		cfg.Logger = testLogger(t)
		cfg.DataDir = t.TempDir()
		cfg.AdvertiseAddr = "raft-0.example.internal:7000"
		cfg.RaftAddr = "0.0.0.0:0" // fine once the advertised address is given
		s, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Shutdown()
		if s.Addr() != cfg.AdvertiseAddr {
			t.Errorf("Addr = %q, want %q", s.Addr(), cfg.AdvertiseAddr)
		}
	})
}

func TestDataDirLocked(t *testing.T) { forEachLogStore(t, testDataDirLocked) }

func testDataDirLocked(t *testing.T, kind string) {
	logger := testLogger(t)
	n := newNode(t, logger, "n1", true, withLogStore(kind, nil))
	cfg := n.cfg
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.FSM = &listFSM{}
	start := time.Now()
	s, err := Open(context.Background(), cfg)
	if err == nil {
		s.Shutdown()
		t.Fatal("second Open on a data dir in use succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second Open took %v to fail", d)
	}
}

// busyAddr returns an address something is already listening on.
func busyAddr(t *testing.T) string {
	t.Helper()
	n := newNode(t, testLogger(t), "busy", false, withSecret(testSecret))
	return n.s.Addr()
}
