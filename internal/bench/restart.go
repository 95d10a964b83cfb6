package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/store"
)

// RestartPhases splits one restart's wall time (ms from the stop's start)
// and gives its CPU time: which part of a restart grows is what tells a
// server that replays more (log, snapshot) from a machine that gives it
// less CPU.
type RestartPhases struct {
	StopMs float64 `json:"stopMs"` // Close: HTTP drained, loops and raft stopped
	// RestoreMs is the snapshot's decode and index rebuild (raft's
	// "starting restore" to "restored from snapshot"); 0 without a snapshot.
	RestoreMs float64 `json:"restoreMs"`
	OpenMs    float64 `json:"openMs"`   // the store opened (bolt, snapshot restored, log scanned): from the start
	LeaderMs  float64 `json:"leaderMs"` // raft entered the leader state: from the start
	// StartedMs is server.Start returning, from the start: after the
	// barrier, so the log written since the snapshot is applied.
	StartedMs float64 `json:"startedMs"`
	AnswerMs  float64 `json:"answerMs"` // the first answer to a job list: the restart's end
	// CPUMs is the process's CPU time (user and system) during the restart:
	// the load is paused, so it is the restart's own work.
	CPUMs float64 `json:"cpuMs"`
	// LogEntries is what raft.db held at the stop; ReplayEntries those after
	// the newest snapshot, which the restart applies again.
	LogEntries    uint64 `json:"logEntries"`
	ReplayEntries uint64 `json:"replayEntries"`
	// Load1 is the machine's one-minute load average at the restart.
	Load1 float64 `json:"load1"`
}

// phaseLog is a slog.Handler that notes when the server logs the messages
// that end a restart's phases; while not armed it passes errors on only.
type phaseLog struct {
	next  slog.Handler
	armed *atomic.Bool
	mu    *sync.Mutex
	seen  map[string]time.Time
}

// restartMarks are the messages phaseLog times (raft's and the server's).
var restartMarks = []string{"starting restore from snapshot", "restored from snapshot", "raft store opened", "entering leader state", "jobfabric server started"}

func newPhaseLog(next slog.Handler) *phaseLog {
	return &phaseLog{next: next, armed: new(atomic.Bool), mu: new(sync.Mutex), seen: map[string]time.Time{}}
}

func (h *phaseLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.armed.Load() || h.next.Enabled(ctx, l)
}

func (h *phaseLog) Handle(ctx context.Context, r slog.Record) error {
	for _, m := range restartMarks {
		if r.Message == m {
			h.mu.Lock()
			if _, ok := h.seen[m]; !ok {
				h.seen[m] = r.Time
			}
			h.mu.Unlock()
			break
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *phaseLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *phaseLog) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// arm forgets the marks seen and starts noting them.
func (h *phaseLog) arm() {
	h.mu.Lock()
	clear(h.seen)
	h.mu.Unlock()
	h.armed.Store(true)
}

// marks stops noting and returns the marks seen since arm.
func (h *phaseLog) marks() map[string]time.Time {
	h.armed.Store(false)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]time.Time, len(h.seen))
	for k, v := range h.seen {
		m[k] = v
	}
	return m
}

// restart stops the server and starts it again on its data: the time
// until it leads and answers is what an operator waits after a crash.
// log, when set, times the phases.
func restart(ctx context.Context, c *devcluster.Cluster, raftDir string, log *phaseLog) (RestartPhases, error) {
	var p RestartPhases
	p.Load1 = load1()
	if log != nil {
		log.arm()
	}
	cpu0, t0 := cpuMs(), time.Now()
	if err := c.Stop(0); err != nil {
		return p, fmt.Errorf("stop: %w", err)
	}
	p.StopMs = msSince(t0)
	cpuStop := cpuMs() - cpu0
	// Read between the timed phases: the stop's time is taken, and the
	// start's has not begun.
	p.LogEntries, p.ReplayEntries = logExtent(raftDir)
	t2, cpu2 := time.Now(), cpuMs()
	if err := c.Restart(ctx, 0); err != nil {
		return p, fmt.Errorf("start: %w", err)
	}
	p.StartedMs = msSince(t2)
	if _, err := c.WaitLeader(ctx); err != nil {
		return p, fmt.Errorf("wait for a leader: %w", err)
	}
	if _, err := c.Client(0).Jobs(ctx, client.JobQuery{Limit: 1, PageSize: 1}); err != nil {
		return p, fmt.Errorf("list jobs: %w", err)
	}
	p.AnswerMs = p.StopMs + msSince(t2)
	p.CPUMs = cpuStop + cpuMs() - cpu2
	if log != nil {
		m := log.marks()
		at := func(k string) float64 {
			if t, ok := m[k]; ok {
				return float64(t.Sub(t2).Nanoseconds()) / 1e6
			}
			return 0
		}
		p.OpenMs, p.LeaderMs = at("raft store opened"), at("entering leader state")
		if a, b := at("starting restore from snapshot"), at("restored from snapshot"); b > 0 {
			p.RestoreMs = b - a
		}
	}
	return p, nil
}

// logExtent reads, from a stopped server's raft directory, how many entries
// its log holds and how many of them follow the newest snapshot. Zeros
// when it cannot tell.
func logExtent(raftDir string) (entries, replay uint64) {
	info, err := store.InspectLog(filepath.Dir(raftDir))
	first, last := info.First, info.Last
	if err != nil || last == 0 {
		return 0, 0
	}
	entries = last - first + 1
	snaps, err := raft.NewFileSnapshotStore(raftDir, 2, discard{})
	if err != nil {
		return entries, 0
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return entries, entries
	}
	if metas[0].Index >= last {
		return entries, 0
	}
	return entries, last - max(metas[0].Index, first-1)
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// load1 is the one-minute load average (Linux; 0 elsewhere).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(strings.Fields(string(b))[0], &l)
	return l
}
