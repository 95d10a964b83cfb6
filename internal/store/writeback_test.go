package store

import (
	"bytes"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// snapshotStoreAt is the snapshot store Open makes, under dir, handing
// pages to the disk every bytesPerSync (0: unpaced).
func snapshotStoreAt(t testing.TB, dir string, bytesPerSync int64) privateSnapshots {
	t.Helper()
	fs, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotsRetained, newHCLogAdapter(slog.New(slog.DiscardHandler), "snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	return privateSnapshots{SnapshotStore: fs, dir: filepath.Join(dir, "snapshots"), bytesPerSync: bytesPerSync}
}

func createSnapshot(t testing.TB, s privateSnapshots) *privateSink {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	sink, err := s.Create(1, 10, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	return sink.(*privateSink)
}

// A snapshot's state file is handed to the disk a piece at a time as it is
// written (writeback.go), and reads back as written. Fails if the store
// wrote it whole (no pacing) or if hashicorp's store moved the state file
// (then openWriteback finds nothing and the snapshot goes unpaced).
func TestSnapshotWritesArePaced(t *testing.T) {
	s := snapshotStoreAt(t, t.TempDir(), 64<<10)
	sink := createSnapshot(t, s)
	if sink.pace == nil {
		t.Fatal("the state file being written was not found: snapshots are written unpaced")
	}
	data := make([]byte, 1<<20+123)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	for b := data; len(b) > 0; {
		n := min(len(b), 4096) // a whole number of them to a piece
		if _, err := sink.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	pace := sink.pace
	if pace.err != nil {
		t.Fatalf("pacing failed: %v", pace.err)
	}
	if want := len(data) / (64 << 10); runtime.GOOS == "linux" && pace.syncs != want {
		t.Errorf("%d ranges handed to the disk for %d bytes in pieces of 64 KiB, want %d", pace.syncs, len(data), want)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if sink.pace != nil {
		t.Error("the state file's second handle is left open after Close")
	}
	_, rc, err := s.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the snapshot reads back %d bytes, not the %d written", len(got), len(data))
	}

	// A store without a size to pace by writes unpaced.
	if u := createSnapshot(t, snapshotStoreAt(t, t.TempDir(), 0)); u.pace != nil {
		t.Error("a snapshot is paced with bytesPerSync 0")
	} else if err := u.Cancel(); err != nil {
		t.Fatal(err)
	}

	// A cancelled snapshot closes its second handle too.
	c := createSnapshot(t, s)
	if _, err := c.Write(data[:100]); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(); err != nil {
		t.Fatal(err)
	}
	if c.pace != nil {
		t.Error("the state file's second handle is left open after Cancel")
	}
}

// BenchmarkSnapshotBesideLogFsync is what a member's 60 MB snapshot does to
// the log's fsyncs on the same disk: a writer appends 4 KB and fsyncs, as
// a log store does per batch, while the snapshot is written and closed;
// reported are the worst and the 99th percentile of those fsyncs, with the
// snapshot unpaced (as before) and handed to the disk every 4 MiB. The
// disk is the temporary directory's (TMPDIR).
func BenchmarkSnapshotBesideLogFsync(b *testing.B) {
	for _, c := range []struct {
		name  string
		every int64
	}{{"unpaced", 0}, {"paced", snapshotBytesPerSync}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			s := snapshotStoreAt(b, dir, c.every)
			log, err := os.Create(filepath.Join(dir, "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close()
			chunk := make([]byte, 1<<20)
			for i := range chunk {
				chunk[i] = byte(rand.IntN(256))
			}
			var worst, p99 []float64
			for range b.N {
				stop, lat := make(chan struct{}), make(chan []time.Duration)
				go func() {
					var ds []time.Duration
					page := make([]byte, 4096)
					for {
						select {
						case <-stop:
							lat <- ds
							return
						default:
						}
						log.Write(page)
						t := time.Now()
						log.Sync()
						ds = append(ds, time.Since(t))
					}
				}()
				sink := createSnapshot(b, s)
				for range 60 {
					if _, err := sink.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				if err := sink.Close(); err != nil {
					b.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // fsyncs after the Close's
				close(stop)
				ds := <-lat
				slices.Sort(ds)
				worst = append(worst, float64(ds[len(ds)-1].Microseconds())/1000)
				p99 = append(p99, float64(ds[len(ds)*99/100].Microseconds())/1000)
			}
			slices.Sort(worst)
			slices.Sort(p99)
			b.ReportMetric(worst[len(worst)/2], "fsync-max-ms")
			b.ReportMetric(p99[len(p99)/2], "fsync-p99-ms")
		})
	}
}
