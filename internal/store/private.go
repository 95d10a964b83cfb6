package store

import (
	"errors"
	"io"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/fileutil"
)

// privateSnapshots keeps snapshot files owner-only. hashicorp's
// FileSnapshotStore makes its directories 0755 and its files with the
// process umask (0644 under the usual 022), and a snapshot is the whole
// state: token hashes, tenants, the topology. Every snapshot, taken here
// or installed from the leader, goes through Create and Close.
type privateSnapshots struct {
	raft.SnapshotStore
	dir string // DataDir/raft/snapshots
}

func (p privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, cfg raft.Configuration, cfgIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := p.SnapshotStore.Create(version, index, term, cfg, cfgIndex, trans)
	if err != nil {
		return nil, err
	}
	// The temporary directory and its state file exist now: close them
	// before the state is written into them.
	if err := fileutil.Private(p.dir); err != nil {
		return nil, errors.Join(err, sink.Cancel())
	}
	return privateSink{SnapshotSink: sink, dir: p.dir}, nil
}

type privateSink struct {
	raft.SnapshotSink
	dir string
}

// Close finishes the snapshot (meta.json is written and the directory
// renamed now) and makes what it wrote private.
func (s privateSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	return fileutil.Private(s.dir)
}

var _ io.WriteCloser = privateSink{}
