package store

import (
	"os"
	"path/filepath"
)

// snapshotBytesPerSync is how much of a snapshot's state file may be
// written before its pages are handed to the disk. A member's snapshot
// (60 MB with 100,000 jobs) was written to the page cache whole and
// flushed at once by the fsync in the sink's Close: for that flush every
// member's log fsync on the same disk waited behind it (the worst 4 KB
// fsync beside a 60 MB snapshot was 15 ms, 8 ms paced so:
// BenchmarkSnapshotBesideLogFsync, docs/benchmarks.md).
// Handed over every 4 MiB, at most two such pieces are in flight, so a
// log fsync waits for a few MB, not the whole snapshot. RocksDB's
// bytes_per_sync and Pebble's BytesPerSync do the same for their files.
const snapshotBytesPerSync = 4 << 20

// writeback hands a file's pages to the disk as the file grows: writeback
// starts on each new piece at once, and before more is handed over the
// pieces before it must be on the disk (so the writer goes at the disk's
// pace, with no more than two pieces in flight). Not a durability
// promise: the sink's Close still fsyncs the file.
type writeback struct {
	f       *os.File // the state file, opened again read-only
	every   int64
	written int64 // bytes written so far
	started int64 // writeback started on [0, started)
	syncs   int   // ranges handed over (a test reads it)
	err     error // the first failure: pacing stops, the snapshot does not
}

// openWriteback opens the state file hashicorp's FileSnapshotStore is
// writing for snapshot id under dir (DataDir/raft/snapshots), or is nil
// when every is not positive or the file is not there: then the snapshot
// is written unpaced, as before. (TestSnapshotWritesArePaced fails should
// raft move the file.)
func openWriteback(dir, id string, every int64) *writeback {
	if every <= 0 {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, id+".tmp", "state.bin"))
	if err != nil {
		return nil
	}
	return &writeback{f: f, every: every}
}

// wrote counts n more bytes written to the file, and hands a piece over
// when a whole one is written since the last.
func (w *writeback) wrote(n int) {
	w.written += int64(n)
	if w.err != nil || w.written-w.started < w.every {
		return
	}
	// Wait for the pieces already handed over, then start the new one.
	if w.started > 0 {
		if w.err = waitWritten(w.f, 0, w.started); w.err != nil {
			return
		}
	}
	if w.err = startWriteback(w.f, w.started, w.written-w.started); w.err != nil {
		return
	}
	w.started = w.written
	w.syncs++
}

func (w *writeback) close() {
	w.f.Close()
}
