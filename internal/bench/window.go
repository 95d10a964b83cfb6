package bench

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MemberFigures is one member in the measured window, from its /metrics at
// both ends and its data directory: what the slow 1 % of submits may have
// waited for on a member other than the leader (issue 18). In-process every
// member reports the one process's collector and raft's process-wide
// figures, the same for each.
type MemberFigures struct {
	Member   int     `json:"member"` // 1-based, as its node id (node1...)
	Leader   bool    `json:"leader"`
	PID      int     `json:"pid"`
	GCs      int     `json:"gcs"`
	CPUSec   float64 `json:"cpuSeconds"`
	AllocMiB float64 `json:"allocMiB"`
	HeapMiB  float64 `json:"heapMiB"`
	// Snapshots is how many raft snapshots the member persisted in the
	// window, SnapshotsAtMs when each began, in ms after the window's
	// start (from the snapshot's directory name, term-index-unixms).
	Snapshots     int     `json:"snapshots"`
	SnapshotsAtMs []int64 `json:"snapshotsAtMs,omitempty"`
	// The p99 of raft's timers at the window's end (raft's summaries keep
	// the last 10 s): the leader's commit and its own log write; a
	// follower's log write and its whole AppendEntries. Zero: none.
	CommitP99ms      float64 `json:"commitP99ms,omitempty"`
	DispatchP99ms    float64 `json:"dispatchLogP99ms,omitempty"`
	AppendStoreP99ms float64 `json:"appendStoreP99ms,omitempty"`
	AppendP99ms      float64 `json:"appendEntriesP99ms,omitempty"`
}

// SlowBurst is a run of slow submits (at or over the p99) whose due times
// are less than burstGap apart: one stall shows as one burst, slow
// submits spread over the window as many.
type SlowBurst struct {
	FromMs  float64 `json:"fromMs"` // due time of the first, after the window's start
	ToMs    float64 `json:"toMs"`
	Submits int     `json:"submits"`
	MaxMs   float64 `json:"maxMs"`
}

const burstGap = 50 * time.Millisecond

// timed is one measured submit: when it was due, after the window's
// start, and how long it took.
type timed struct{ at, took time.Duration }

// slowBursts groups the submits that took at least p99 into bursts.
func slowBursts(subs []timed, p99 time.Duration) []SlowBurst {
	var slow []timed
	for _, s := range subs {
		if s.took >= p99 {
			slow = append(slow, s)
		}
	}
	sort.Slice(slow, func(a, b int) bool { return slow[a].at < slow[b].at })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var out []SlowBurst
	for i, s := range slow {
		if i == 0 || s.at-slow[i-1].at >= burstGap {
			out = append(out, SlowBurst{FromMs: ms(s.at)})
		}
		b := &out[len(out)-1]
		b.ToMs, b.Submits, b.MaxMs = ms(s.at), b.Submits+1, max(b.MaxMs, ms(s.took))
	}
	return out
}

// memberStats is one scrape of a member: its window (memberFigures) and,
// the leader's, the run's own figures (cycles, GCs, CPU, heap, RSS).
type memberStats struct {
	gcs, cpu, alloc, heap, rss, snaps       float64
	commit99, dispatch99, store99, append99 float64
	// count and sum are the scheduling cycles' histogram (the leader's
	// counts; a follower's stay still).
	count, sum float64
}

// scrapeMember reads a member's /metrics; a failed scrape reads zero (the
// figures are then missing, not the run).
func scrapeMember(ctx context.Context, url, token string) memberStats {
	var st memberStats
	scrapeMetrics(ctx, url, token, func(name string, v float64) {
		switch name {
		case "jobfabric_scheduler_cycle_duration_seconds_count":
			st.count = v
		case "jobfabric_scheduler_cycle_duration_seconds_sum":
			st.sum = v
		case "process_resident_memory_bytes":
			st.rss = v
		case "go_gc_duration_seconds_count":
			st.gcs = v
		case "process_cpu_seconds_total":
			st.cpu = v
		case "go_memstats_alloc_bytes_total":
			st.alloc = v
		case "go_memstats_heap_inuse_bytes":
			st.heap = v
		case "jobfabric_raft_snapshot_persist_seconds_count":
			st.snaps = v
		case `jobfabric_raft_commit_time_seconds{quantile="0.99"}`:
			st.commit99 = v * 1000
		case `jobfabric_raft_leader_dispatch_log_seconds{quantile="0.99"}`:
			st.dispatch99 = v * 1000
		case `jobfabric_raft_append_entries_store_seconds{quantile="0.99"}`:
			st.store99 = v * 1000
		case `jobfabric_raft_append_entries_seconds{quantile="0.99"}`:
			st.append99 = v * 1000
		}
	})
	return st
}

// memberFigures is each member's window from the scrapes at both ends and
// the snapshots under dir (node<i>/raft/snapshots) begun in [from, to).
func memberFigures(dir string, pids []int, leaderAt int, before, after []memberStats, from, to time.Time) []MemberFigures {
	const mib = 1 << 20
	nan0 := func(v float64) float64 {
		if v != v { // a summary with no sample in its window reads NaN
			return 0
		}
		return v
	}
	out := make([]MemberFigures, len(after))
	for i := range after {
		b, a := before[i], after[i]
		out[i] = MemberFigures{Member: i + 1, Leader: i == leaderAt, PID: pids[i], GCs: int(a.gcs - b.gcs), CPUSec: a.cpu - b.cpu,
			AllocMiB: (a.alloc - b.alloc) / mib, HeapMiB: a.heap / mib, Snapshots: int(a.snaps - b.snaps),
			CommitP99ms: nan0(a.commit99), DispatchP99ms: nan0(a.dispatch99), AppendStoreP99ms: nan0(a.store99), AppendP99ms: nan0(a.append99),
			SnapshotsAtMs: snapshotsIn(filepath.Join(dir, "node"+strconv.Itoa(i+1), "raft", "snapshots"), from, to)}
	}
	return out
}

// snapshotsIn lists the snapshots in dir (raft's file store: one directory
// each, named term-index-unixms) begun in [from, to), in ms after from.
func snapshotsIn(dir string, from, to time.Time) []int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var at []int64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 {
			continue
		}
		ms, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		if t := time.UnixMilli(ms); !t.Before(from) && t.Before(to) {
			at = append(at, t.Sub(from).Milliseconds())
		}
	}
	sort.Slice(at, func(a, b int) bool { return at[a] < at[b] })
	return at
}
