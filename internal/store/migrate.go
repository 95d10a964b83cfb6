package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/migrate"

	"github.com/jobfabric/jobfabric/internal/fileutil"
)

// Migration is what MigrateLogStore did.
type Migration struct {
	From string `json:"from"`
	To   string `json:"to"`
	// First and Last are the log's index range copied (both 0 for an
	// empty log).
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	// Kept is where the old store was moved, kept until the operator
	// removes it.
	Kept string `json:"kept"`
}

// migrateBatchBytes groups copied entries into appends of about this size.
const migrateBatchBytes = 4 << 20

// MigrateLogStore moves the raft log and stable keys (term, vote) of the
// data dir to the log store to, offline: a server running on dataDir
// holds the store's lock, and the migration fails rather than wait. The
// copy is made beside the old store, its first and last entries compared
// with the original's, and put in place by rename; the old store is then
// renamed to *.migrated, so that the next start finds only the new one. Snapshots are not touched.
func MigrateLogStore(ctx context.Context, dataDir, to string, logger *slog.Logger) (Migration, error) {
	if logger == nil {
		logger = slog.Default()
	}
	dir := filepath.Join(dataDir, "raft")
	if to != LogStoreWAL && to != LogStoreBolt {
		return Migration{}, fmt.Errorf("%w: %q is not one of %s, %s", ErrLogStore, to, LogStoreWAL, LogStoreBolt)
	}
	from, err := chooseLogStore(dir, "")
	if err != nil {
		return Migration{}, err
	}
	m := Migration{From: from, To: to}
	if ok, err := exists(filepath.Join(dir, storeName(from))); err != nil {
		return m, err
	} else if !ok {
		return m, fmt.Errorf("%w: %s holds no raft log store to migrate", ErrLogStore, dir)
	}
	if from == to {
		return m, fmt.Errorf("%w: %s already runs %s", ErrLogStore, dir, to)
	}
	hl := newHCLogAdapter(logger, "migrate")
	src, err := openLogStore(from, dir, hl)
	if err != nil {
		return m, err
	}
	defer func() {
		if src != nil {
			src.Close()
		}
	}()

	// Build the new store under a temporary name: a crash leaves the old
	// store the only one, and a new attempt starts over.
	tmp := filepath.Join(dir, "migrate.tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	if err := os.Mkdir(tmp, fileutil.PrivateDir); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	dst, err := openLogStore(to, tmp, hl)
	if err != nil {
		return m, err
	}
	copyErr := copyLogStore(ctx, dst, src, &m)
	if err := errors.Join(copyErr, dst.Close()); err != nil {
		return m, fmt.Errorf("store: migrate %s to %s: %w", from, to, err)
	}
	if err := src.Close(); err != nil {
		return m, fmt.Errorf("store: migrate: close %s: %w", from, err)
	}
	src = nil

	// Swap: the copy in first, then the old store aside. A crash in between
	// leaves both, which Open refuses to choose between (never an empty
	// log): the operator names the one to run, and the copy is complete.
	m.Kept = filepath.Join(dir, storeName(from)+".migrated")
	if err := os.RemoveAll(m.Kept); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, storeName(to)), filepath.Join(dir, storeName(to))); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return m, err
	}
	if err := os.Rename(filepath.Join(dir, storeName(from)), m.Kept); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return m, fmt.Errorf("store: migrate: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return m, err
	}
	logger.Info("raft log store migrated", "from", from, "to", to, "first", m.First, "last", m.Last, "kept", m.Kept)
	return m, nil
}

// storeName is the file or directory of a store kind under DataDir/raft.
func storeName(kind string) string {
	if kind == LogStoreBolt {
		return boltFile
	}
	return walDir
}

// copyLogStore copies log and stable keys and checks the copy's ends.
func copyLogStore(ctx context.Context, dst, src logStore, m *Migration) error {
	var err error
	if m.First, err = src.FirstIndex(); err != nil {
		return err
	}
	if m.Last, err = src.LastIndex(); err != nil {
		return err
	}
	if m.Last > 0 {
		if err := migrate.CopyLogs(ctx, dst, src, migrateBatchBytes, nil); err != nil {
			return err
		}
	}
	if err := copyStable(dst, src); err != nil {
		return err
	}
	first, err := dst.FirstIndex()
	if err != nil {
		return err
	}
	last, err := dst.LastIndex()
	if err != nil {
		return err
	}
	if first != m.First || last != m.Last {
		return fmt.Errorf("the copy holds entries %d to %d, the original %d to %d", first, last, m.First, m.Last)
	}
	for _, i := range []uint64{m.First, m.Last} {
		if i == 0 {
			continue
		}
		var a, b raft.Log
		if err := src.GetLog(i, &a); err != nil {
			return err
		}
		if err := dst.GetLog(i, &b); err != nil {
			return err
		}
		if a.Index != b.Index || a.Term != b.Term || a.Type != b.Type || string(a.Data) != string(b.Data) {
			return fmt.Errorf("entry %d differs in the copy", i)
		}
	}
	return nil
}

// copyStable copies the keys hashicorp/raft keeps in the stable store.
// raft-wal's migrate.CopyStable fails on a key never set (a member that
// never voted has no LastVoteCand); raft reads a missing key as zero, and
// so does this copy, by leaving it unset.
func copyStable(dst, src raft.StableStore) error {
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		v, err := src.GetUint64([]byte(k))
		if notFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	v, err := src.Get([]byte("LastVoteCand"))
	if notFound(err) || (err == nil && v == nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read LastVoteCand: %w", err)
	}
	if err := dst.Set([]byte("LastVoteCand"), v); err != nil {
		return fmt.Errorf("write LastVoteCand: %w", err)
	}
	return nil
}

// notFound: raft-boltdb's missing key, which raft itself recognises by its
// text.
func notFound(err error) bool { return err != nil && err.Error() == "not found" }

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: migrate: sync %s: %w", dir, err)
	}
	return nil
}
