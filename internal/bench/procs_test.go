package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/bench"
	"github.com/jobfabric/jobfabric/internal/devcluster/membertest"
)

// TestMain makes the test binary a jobfabric binary when the benchmark
// runs it as a member (SubmitOptions.Processes).
func TestMain(m *testing.M) { membertest.Main(m) }

// TestSubmitProcesses runs the benchmark against 3 member processes: every
// submit is answered, the figures come from the leader's process (not this
// one, which only generates the load), and its CPU profile,
// allocations and live heap are read.
func TestSubmitProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Setenv(membertest.Env, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prof, allocs, heap := &countingWriter{}, &countingWriter{}, &countingWriter{}
	r, err := bench.Submit(ctx, bench.SubmitOptions{Servers: 3, Concurrency: 8, Rate: 300, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Processes: true, Dir: t.TempDir(), LeaderCPUProfile: prof, LeaderAllocs: allocs, LeaderHeap: heap})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Processes || r.LeaderPID == os.Getpid() || r.LeaderPID <= 0 {
		t.Fatalf("processes %v, leader's pid %d (this process: %d): want the leader in a process of its own", r.Processes, r.LeaderPID, os.Getpid())
	}
	if r.Submits < 250 || r.Submits > 350 || r.Errors != 0 {
		t.Fatalf("%d submits, %d errors at 300/s for 1 s: want about 300, none failed", r.Submits, r.Errors)
	}
	if r.LeaderRSSMiB <= 0 || r.LeaderHeapMiB <= 0 || r.LeaderPeakRSSMiB < r.LeaderRSSMiB/2 || r.LeaderAllocMiB <= 0 || r.LeaderCPUSec <= 0 {
		t.Fatalf("leader's figures not read: rss %.1f MiB, heap %.1f MiB, peak %.1f MiB, allocated %.1f MiB, CPU %.2f s",
			r.LeaderRSSMiB, r.LeaderHeapMiB, r.LeaderPeakRSSMiB, r.LeaderAllocMiB, r.LeaderCPUSec)
	}
	// Every member is read, each from its own process: the leader commits
	// (its raft commit timer has samples), the followers append.
	if len(r.Members) != 3 {
		t.Fatalf("%d members' figures, want 3", len(r.Members))
	}
	leaders := 0
	for _, m := range r.Members {
		if m.PID <= 0 || m.PID == os.Getpid() || m.CPUSec <= 0 || m.AllocMiB <= 0 {
			t.Fatalf("member %d: pid %d, CPU %.2f s, allocated %.1f MiB: want its own process, read", m.Member, m.PID, m.CPUSec, m.AllocMiB)
		}
		if m.Leader {
			leaders++
			if m.PID != r.LeaderPID || m.CommitP99ms <= 0 || m.DispatchP99ms <= 0 {
				t.Fatalf("leader %d (pid %d, the run's %d): commit p99 %.2f ms, own log p99 %.2f ms: want raft's timers read", m.Member, m.PID, r.LeaderPID, m.CommitP99ms, m.DispatchP99ms)
			}
		} else if m.AppendStoreP99ms <= 0 || m.AppendP99ms <= 0 {
			t.Fatalf("follower %d: append store p99 %.2f ms, append p99 %.2f ms: want raft's timers read", m.Member, m.AppendStoreP99ms, m.AppendP99ms)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members marked leader, want 1", leaders)
	}
	if len(r.SlowBursts) == 0 {
		t.Fatal("no burst of slow submits: the p99's submits are at least one")
	}
	if prof.n == 0 || allocs.n == 0 || heap.n == 0 {
		t.Fatalf("the leader's CPU profile (%d bytes), allocations (%d bytes) or live heap (%d bytes) are empty", prof.n, allocs.n, heap.n)
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
