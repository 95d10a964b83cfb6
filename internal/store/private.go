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
	dir          string // DataDir/raft/snapshots
	bytesPerSync int64  // writeback.go; 0: unpaced
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
	return &privateSink{SnapshotSink: sink, dir: p.dir, pace: openWriteback(p.dir, sink.ID(), p.bytesPerSync)}, nil
}

type privateSink struct {
	raft.SnapshotSink
	dir  string
	pace *writeback // nil: written unpaced
}

// Write writes to the snapshot, handing its pages to the disk as they
// accumulate (writeback.go).
func (s *privateSink) Write(b []byte) (int, error) {
	n, err := s.SnapshotSink.Write(b)
	if s.pace != nil {
		s.pace.wrote(n)
	}
	return n, err
}

// Close finishes the snapshot (meta.json is written and the directory
// renamed now) and makes what it wrote private.
func (s *privateSink) Close() error {
	s.stopPacing()
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	return fileutil.Private(s.dir)
}

// Cancel abandons the snapshot.
func (s *privateSink) Cancel() error {
	s.stopPacing()
	return s.SnapshotSink.Cancel()
}

func (s *privateSink) stopPacing() {
	if s.pace != nil {
		s.pace.close()
		s.pace = nil
	}
}

var _ io.WriteCloser = (*privateSink)(nil)
