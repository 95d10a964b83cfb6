package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing [off, off+n) of f to the disk and does not
// wait for it.
func startWriteback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// waitWritten waits until the writeback of [off, off+n) started before
// has reached the disk.
func waitWritten(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE)
}
