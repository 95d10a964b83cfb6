package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestMigrateLogStore: a data dir moved from one log store to the other
// offline restarts into the other with the same state, term and vote, its
// compacted log and snapshots included; the old store is kept aside. A
// running server's data dir, or one already on the target, is refused
// without change.
func TestMigrateLogStore(t *testing.T) {
	for _, tc := range []struct{ from, to string }{{LogStoreBolt, LogStoreWAL}, {LogStoreWAL, LogStoreBolt}} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			logger := testLogger(t)
			n := &node{cfg: fastTimings(Config{
				NodeID: "n1", DataDir: t.TempDir(), Bootstrap: true, Logger: logger, LogStore: tc.from,
				SnapshotInterval: time.Hour, TrailingLogs: 5,
			})}
			n.start(t)
			t.Cleanup(func() { n.stop(t) })
			waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })
			var want []string
			for i := range 30 {
				want = append(want, fmt.Sprint(i))
				mustApply(t, n.s, want[i])
				if i == 19 {
					if err := n.s.Snapshot(ctxT(t, 5*time.Second)); err != nil {
						t.Fatal(err)
					}
				}
			}
			first, _ := n.s.durable.FirstIndex()
			last := n.s.raft.LastIndex()
			term, _ := strconv.ParseUint(n.s.raft.Stats()["term"], 10, 64)

			// Refused while the server runs: its lock is held.
			if _, err := MigrateLogStore(ctxT(t, 10*time.Second), n.cfg.DataDir, tc.to, logger); err == nil {
				t.Fatal("migrated the data dir of a running server")
			}
			n.stop(t)
			if _, err := MigrateLogStore(ctxT(t, 10*time.Second), n.cfg.DataDir, tc.from, logger); !errors.Is(err, ErrLogStore) {
				t.Errorf("migrate to the store it runs = %v, want ErrLogStore", err)
			}

			m, err := MigrateLogStore(ctxT(t, 10*time.Second), n.cfg.DataDir, tc.to, logger)
			if err != nil {
				t.Fatal(err)
			}
			if m.From != tc.from || m.To != tc.to || m.First != first || m.Last != last || m.First <= 1 {
				t.Errorf("migration %+v, want %s to %s of entries %d to %d (compacted: first > 1)", m, tc.from, tc.to, first, last)
			}
			raftDir := filepath.Join(n.cfg.DataDir, "raft")
			if _, err := os.Stat(filepath.Join(raftDir, storeName(tc.from))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the old store is still in place (%v)", err)
			}
			if _, err := os.Stat(m.Kept); err != nil {
				t.Errorf("the old store was not kept aside: %v", err)
			}

			info, err := InspectLog(n.cfg.DataDir)
			if err != nil || info.Kind != tc.to || info.First != first || info.Last != last || info.Bytes == 0 {
				t.Errorf("InspectLog = %+v, %v; want %s holding %d to %d", info, err, tc.to, first, last)
			}

			n.cfg.LogStore = "" // the data dir says which
			n.start(t)
			if n.s.LogStore() != tc.to {
				t.Fatalf("restarted on %s, want %s", n.s.LogStore(), tc.to)
			}
			waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader after the migration" })
			if err := n.s.Barrier(ctxT(t, 5*time.Second)); err != nil {
				t.Fatal(err)
			}
			if got := n.fsm.Items(); !slices.Equal(got, want) {
				t.Errorf("after the migration: %v\nwant %v", got, want)
			}
			if got, _ := strconv.ParseUint(n.s.raft.Stats()["term"], 10, 64); got <= term {
				t.Errorf("term %d after the restart, want above %d: the term was lost", got, term)
			}
			mustApply(t, n.s, "after")
		})
	}
}
