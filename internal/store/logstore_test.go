package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	walfs "github.com/hashicorp/raft-wal/fs"
)

// TestLogStoreChoice: a new data directory gets the WAL unless told
// otherwise; one that holds a log store keeps it, and naming the other is
// refused before anything is created (raft would start with an empty log
// and forget every committed entry).
func TestLogStoreChoice(t *testing.T) {
	open := func(t *testing.T, dir, kind string) (*Store, error) {
		t.Helper()
		cfg := fastTimings(Config{NodeID: "n1", DataDir: dir, Bootstrap: true, Logger: testLogger(t), FSM: &listFSM{}, LogStore: kind})
		return Open(ctxT(t, 10*time.Second), cfg)
	}
	// made returns a data dir holding one entry in a store of kind.
	made := func(t *testing.T, kind string) string {
		t.Helper()
		dir := t.TempDir()
		s, err := open(t, dir, kind)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, func() (bool, string) { return s.IsLeader(), "not leader" })
		mustApply(t, s, "kept")
		if err := s.Shutdown(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, on, want string // on: what the dir holds ("" empty, "both")
		got            string
		err            string
	}{
		{name: "new dir defaults to the WAL", want: "", got: LogStoreWAL},
		{name: "new dir as asked: bolt", want: LogStoreBolt, got: LogStoreBolt},
		{name: "new dir as asked: wal", want: LogStoreWAL, got: LogStoreWAL},
		{name: "bolt dir keeps bolt", on: LogStoreBolt, got: LogStoreBolt},
		{name: "wal dir keeps the WAL", on: LogStoreWAL, got: LogStoreWAL},
		{name: "bolt dir asked for the WAL", on: LogStoreBolt, want: LogStoreWAL, err: `"wal" asked for, but`},
		{name: "wal dir asked for bolt", on: LogStoreWAL, want: LogStoreBolt, err: `"bolt" asked for, but`},
		{name: "both, none named", on: "both", err: "holds both raft.db and wal/"},
		{name: "both, bolt named", on: "both", want: LogStoreBolt, got: LogStoreBolt},
		{name: "not a kind", want: "rocks", err: `"rocks" is not one of wal, bolt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir string
			switch tc.on {
			case "":
				dir = t.TempDir()
			case "both":
				dir = made(t, LogStoreBolt)
				if err := os.Mkdir(filepath.Join(dir, "raft", walDir), 0o700); err != nil {
					t.Fatal(err)
				}
			default:
				dir = made(t, tc.on)
			}
			before := listTree(t, dir)
			s, err := open(t, dir, tc.want)
			if tc.err != "" {
				if err == nil {
					s.Shutdown()
					t.Fatalf("Open succeeded with %s", s.LogStore())
				}
				if !errors.Is(err, ErrLogStore) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err = %v, want ErrLogStore saying %q", err, tc.err)
				}
				if after := listTree(t, dir); after != before {
					t.Errorf("a refused Open changed the data dir:\nbefore %s\nafter  %s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			if s.LogStore() != tc.got {
				t.Errorf("LogStore = %q, want %q", s.LogStore(), tc.got)
			}
			if tc.on == "" {
				return
			}
			// The entry written before is there: the store reopened is the
			// one that was written.
			waitFor(t, 5*time.Second, func() (bool, string) { return s.IsLeader(), "not leader" })
			if err := s.Barrier(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			var l raft.Log
			if err := s.durable.GetLog(3, &l); err != nil || string(l.Data) != "kept" {
				t.Errorf("entry 3 = %q, %v; want the one written before", l.Data, err)
			}
		})
	}
}

// listTree names every file under dir, to see that nothing changed.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, " ")
}

// TestLogCompaction: a snapshot deletes the log behind it but for
// TrailingLogs entries, and a restart restores the snapshot and replays
// what is left.
func TestLogCompaction(t *testing.T) { forEachLogStore(t, testLogCompaction) }

func testLogCompaction(t *testing.T, kind string) {
	n := &node{cfg: fastTimings(Config{
		NodeID: "n1", DataDir: t.TempDir(), Bootstrap: true, Logger: testLogger(t), LogStore: kind,
		SnapshotInterval: time.Hour, TrailingLogs: 5,
	})}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprint(i))
		mustApply(t, n.s, want[i])
	}
	if err := n.s.Snapshot(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	last := n.s.raft.LastIndex()
	first, err := n.s.durable.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first != last-5+1 {
		t.Errorf("after the snapshot the log starts at %d, want %d (last %d less 5 trailing)", first, last-4, last)
	}
	for i := range 10 {
		want = append(want, fmt.Sprint("after-", i))
		mustApply(t, n.s, want[len(want)-1])
	}
	n.stop(t)
	n.start(t)
	waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader after restart" })
	if err := n.s.Barrier(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := n.fsm.Items(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after restart: %v\nwant %v", got, want)
	}
	// The truncation is durable. (The WAL frees disk a whole segment at a
	// time and may still read entries before FirstIndex out of the segment
	// it writes; raft never asks for them.)
	if got, err := n.s.durable.FirstIndex(); err != nil || got != first {
		t.Errorf("after restart the log starts at %d (%v), want %d", got, err, first)
	}
	if n.fsm.Restores() != 1 {
		t.Errorf("restored %d times, want 1", n.fsm.Restores())
	}
}

// crashChildEnv names the data dir and log store of the child process of
// TestCrashKeepsAcknowledged.
const crashChildEnv = "JOBFABRIC_TEST_CRASH_CHILD"

// TestCrashKeepsAcknowledged: a process writing from many goroutines is
// killed (SIGKILL) mid-load; every write it acknowledged (printed after
// Apply returned) is in the log it left. The kill loses what the process
// held, not what the kernel did: a power cut is not simulated here.
func TestCrashKeepsAcknowledged(t *testing.T) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		kind, dir, _ := strings.Cut(spec, ":")
		crashChild(t, kind, dir)
		return
	}
	forEachLogStore(t, testCrashKeepsAcknowledged)
}

func crashChild(t *testing.T, kind, dir string) {
	n := &node{cfg: fastTimings(Config{NodeID: "n1", DataDir: dir, Bootstrap: true, Logger: testLogger(t), LogStore: kind})}
	n.start(t)
	waitFor(t, 10*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				v := fmt.Sprintf("w-%02d-%06d", g, i)
				if _, err := n.s.Apply(context.Background(), []byte(v)); err != nil {
					fmt.Fprintln(os.Stderr, "apply:", err)
					return
				}
				mu.Lock()
				fmt.Fprintln(out, v)
				out.Flush() // acknowledged only once the parent can read it
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	os.Exit(3) // the parent kills before any write fails
}

func testCrashKeepsAcknowledged(t *testing.T, kind string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKeepsAcknowledged$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+kind+":"+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill after 2,000 acknowledgements, mid-stream: more are in flight.
	const killAfter = 2000
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		v := sc.Text()
		if !strings.HasPrefix(v, "w-") {
			continue // the test binary's own output
		}
		acked[v] = true
		if len(acked) == killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// Lines the child flushed before it died were acknowledged too.
	for sc.Scan() {
		if v := sc.Text(); strings.HasPrefix(v, "w-") {
			acked[v] = true
		}
	}
	err = cmd.Wait()
	if len(acked) < killAfter {
		t.Fatalf("the child acknowledged %d writes and ended (%v):\n%s", len(acked), err, stderr.String())
	}

	n := &node{cfg: fastTimings(Config{NodeID: "n1", DataDir: dir, Bootstrap: true, Logger: testLogger(t), LogStore: kind})}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	waitFor(t, 10*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader after the crash" })
	if err := n.s.Barrier(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, v := range n.fsm.Items() {
		got[v]++
	}
	missing := 0
	for v := range acked {
		if got[v] != 1 {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged %s is in the log %d times", v, got[v])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged writes lost or doubled", missing, len(acked))
	}
	t.Logf("%s: %d acknowledged before the kill, %d in the log after the restart", kind, len(acked), len(got))
}

// TestWALSegmentsPrivate: segment files the WAL creates later (a rotation)
// are owner-only like everything in the data dir; raft-wal's own file
// system creates them 0644.
func TestWALSegmentsPrivate(t *testing.T) {
	dir := t.TempDir()
	f, err := privateFS{walfs.New()}.Create(dir, "00000000000000000002-0000000000000001.wal", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := os.Stat(filepath.Join(dir, "00000000000000000002-0000000000000001.wal"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("segment created %o, want 600", fi.Mode().Perm())
	}
}

// TestMixedLogStores: members on different log stores replicate one log,
// as in a cluster migrated one member at a time: a bolt leader, two WAL
// followers, a failover to a WAL member, and the bolt member catching up
// after its restart.
func TestMixedLogStores(t *testing.T) {
	logger := testLogger(t)
	n1 := newNode(t, logger, "n1", true, withLogStore(LogStoreBolt, withSecret(testSecret)))
	waitFor(t, 5*time.Second, func() (bool, string) { return n1.s.IsLeader(), "n1 not leader" })
	n2 := newNode(t, logger, "n2", false, withLogStore(LogStoreWAL, withSecret(testSecret)))
	n3 := newNode(t, logger, "n3", false, withLogStore(LogStoreWAL, withSecret(testSecret)))
	for _, n := range []*node{n2, n3} {
		if err := n1.s.AddVoter(ctxT(t, 10*time.Second), n.cfg.NodeID, n.s.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint("a", i))
		mustApply(t, n1.s, want[i])
	}
	waitConverged(t, want, n1, n2, n3)

	n1.stop(t)
	var leader *node
	waitFor(t, 10*time.Second, func() (bool, string) {
		leader = leaderOf(n2, n3)
		return leader != nil, "no leader among the WAL members"
	})
	for i := range 20 {
		want = append(want, fmt.Sprint("b", i))
		mustApply(t, leader.s, want[len(want)-1])
	}
	n1.start(t)
	if n1.s.LogStore() != LogStoreBolt || leader.s.LogStore() != LogStoreWAL {
		t.Fatalf("stores: n1 %s, leader %s", n1.s.LogStore(), leader.s.LogStore())
	}
	waitConverged(t, want, n1, n2, n3)
}
