package server_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestDataDirIsPrivate: after jobs, a fabric deploy (file driver, inside
// the data dir) and a raft snapshot, every directory of a running server's
// data dir is 0700 and every file 0600; a data dir loosened by an older
// version is tightened at the next start.
func TestDataDirIsPrivate(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	waitJob(t, admin, submit(t, admin, "acme", "research", 8).ID, "Ready", isReady)
	if err := c.Servers[0].Snapshot(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.Dir, "node1")
	checkPrivate(t, dir, "snapshots", "fabric", "admin.token", "node-id", "wal-meta.db", "00000000000000000001-0000000000000000.wal", "state.bin", "meta.json")

	// An older version's modes: tightened when the server starts again.
	for _, p := range []string{"raft/snapshots", "fabric"} {
		if err := os.Chmod(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "node-id"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctxT(t), 0); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir)
}

// checkPrivate walks dir: directories 0700, files 0600 (symbolic links,
// the file driver's current-version pointers, have no mode of their own);
// every name in want must have been seen.
func checkPrivate(t *testing.T, dir string, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		seen[d.Name()] = true
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		perm := info.Mode().Perm()
		switch {
		case d.IsDir() && perm != 0o700:
			t.Errorf("directory %s is %o, want 700", path, perm)
		case !d.IsDir() && perm != 0o600:
			t.Errorf("file %s is %o, want 600", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		if !seen[n] {
			t.Errorf("no %s under %s: the test did not see what it means to check", n, dir)
		}
	}
}
