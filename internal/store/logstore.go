package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/jobfabric/jobfabric/internal/fileutil"
)

// Log store kinds: Config.LogStore and Store.LogStore.
const (
	// LogStoreWAL is hashicorp/raft-wal: segment files appended with one
	// fsync per batch, the stable keys in a small bbolt file beside them.
	// The default for a new data directory.
	LogStoreWAL = "wal"
	// LogStoreBolt is hashicorp/raft-boltdb v2: log and stable keys in one
	// bbolt file, two fsyncs per batch (data pages, then the meta page).
	// What a data directory made before raft-wal holds.
	LogStoreBolt = "bolt"
)

// On-disk names under DataDir/raft.
const (
	boltFile = "raft.db"
	walDir   = "wal"
	walLock  = "LOCK"
)

// ErrLogStore is wrapped by Open when Config.LogStore is not a kind, or
// names one the data directory does not hold while it holds the other: the
// server would start with an empty log and forget its state.
var ErrLogStore = errors.New("store: log store")

// logStore is what raft needs of the durable log: the log, the stable keys
// (term, vote), and a way to close the files.
type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// chooseLogStore picks the kind for dir (DataDir/raft): the one the
// directory already holds, else want, else the WAL. A wanted kind that
// contradicts what is there is refused rather than started empty.
func chooseLogStore(dir, want string) (string, error) {
	switch want {
	case "", LogStoreWAL, LogStoreBolt:
	default:
		return "", fmt.Errorf("%w: %q is not one of %s, %s", ErrLogStore, want, LogStoreWAL, LogStoreBolt)
	}
	hasBolt, err := exists(filepath.Join(dir, boltFile))
	if err != nil {
		return "", err
	}
	hasWAL, err := exists(filepath.Join(dir, walDir))
	if err != nil {
		return "", err
	}
	switch {
	case hasBolt && hasWAL && want == "":
		return "", fmt.Errorf("%w: %s holds both %s and %s/; name the one to run", ErrLogStore, dir, boltFile, walDir)
	case hasBolt && !hasWAL && want == LogStoreWAL:
		return "", fmt.Errorf("%w: %q asked for, but %s holds a %s log store (%s) and no WAL; it would start with an empty log: run it as %s, or move it (docs/operations.md)", ErrLogStore, want, dir, LogStoreBolt, boltFile, LogStoreBolt)
	case hasWAL && !hasBolt && want == LogStoreBolt:
		return "", fmt.Errorf("%w: %q asked for, but %s holds a %s log store (%s/) and no %s; it would start with an empty log: run it as %s", ErrLogStore, want, dir, LogStoreWAL, walDir, boltFile, LogStoreWAL)
	case want != "":
		return want, nil
	case hasBolt:
		return LogStoreBolt, nil
	default:
		return LogStoreWAL, nil
	}
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("store: %w", err)
	}
}

// openLogStore opens (creating if need be) the log store of kind in dir.
// Both fsync every batch before raft acknowledges it.
func openLogStore(kind, dir string, hl hclog.Logger) (logStore, error) {
	if kind == LogStoreBolt {
		opts := *bbolt.DefaultOptions
		opts.Timeout = boltOpenTimeout
		bolt, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, boltFile),
			BoltOptions: &opts,
			NoSync:      false, // durability of acknowledged writes depends on it
		})
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", boltFile, err)
		}
		return bolt, nil
	}
	wd := filepath.Join(dir, walDir)
	if err := os.MkdirAll(wd, 0o700); err != nil {
		return nil, fmt.Errorf("store: create wal dir: %w", err)
	}
	// raft-wal opens its meta DB without a lock timeout: a second process
	// on the same data dir would hang at start-up. Our own lock fails it.
	lock, err := lockDir(wd)
	if err != nil {
		return nil, err
	}
	// WAL.Close leaves the meta DB open (and locked): pass our own to
	// close it, or a restart in the same process would wait for ever.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(wd, wal.WithLogger(hl), wal.WithMetaStore(meta),
		wal.WithSegmentFiler(segment.NewFiler(wd, privateFS{walfs.New()})))
	if err != nil {
		meta.Close()
		lock.Close()
		return nil, fmt.Errorf("store: open wal: %w", err)
	}
	ws := &walStore{WAL: w, meta: meta, lock: lock}
	// The meta DB is created 0644 by raft-wal; the log holds the state.
	if err := fileutil.Private(wd); err != nil {
		ws.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	return ws, nil
}

// privateFS creates the WAL's segment files owner-only: raft-wal's own
// file system makes them 0644, and they hold every command.
type privateFS struct{ *walfs.FS }

func (p privateFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := p.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(dir, name), fileutil.PrivateFile); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// walStore is the WAL with its meta DB and the directory lock it holds
// while open.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
	lock *os.File
}

func (w *walStore) Close() error {
	// WAL.Close waits for writes in flight; closing the lock file releases
	// the flock.
	err := w.WAL.Close()
	return errors.Join(err, w.meta.Close(), w.lock.Close())
}

// lockDir takes an exclusive lock on dir/LOCK, without waiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, walLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: wal lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("store: open wal: %s is in use by another process", dir)
		}
		return nil, fmt.Errorf("store: wal lock: %w", err)
	}
	return f, nil
}

// LogInfo describes a stopped server's raft log: see InspectLog.
type LogInfo struct {
	Kind        string // LogStoreWAL or LogStoreBolt
	First, Last uint64 // index range held; both 0 for an empty log
	Bytes       int64  // size of the store's files (the WAL's segments are preallocated)
}

// InspectLog opens the log store of a stopped server's data directory,
// reads its range and size, and closes it. A running server holds the
// store's lock: it fails rather than wait.
func InspectLog(dataDir string) (LogInfo, error) {
	dir := filepath.Join(dataDir, "raft")
	kind, err := chooseLogStore(dir, "")
	if err != nil {
		return LogInfo{}, err
	}
	path := filepath.Join(dir, storeName(kind))
	if ok, err := exists(path); err != nil || !ok {
		return LogInfo{}, errors.Join(err, fmt.Errorf("%w: %s holds no raft log store", ErrLogStore, dir))
	}
	info := LogInfo{Kind: kind}
	err = filepath.WalkDir(path, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			info.Bytes += fi.Size()
		}
		return err
	})
	if err != nil {
		return info, fmt.Errorf("store: %w", err)
	}
	s, err := openLogStore(kind, dir, hclog.NewNullLogger())
	if err != nil {
		return info, err
	}
	defer s.Close()
	if info.First, err = s.FirstIndex(); err != nil {
		return info, fmt.Errorf("store: %w", err)
	}
	if info.Last, err = s.LastIndex(); err != nil {
		return info, fmt.Errorf("store: %w", err)
	}
	return info, nil
}
