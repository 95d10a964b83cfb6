package devcluster_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/devcluster/membertest"
)

// TestMain makes the test binary a jobfabric binary when StartProcs runs
// it as a member.
func TestMain(m *testing.M) { membertest.Main(m) }

// TestStartProcs starts 3 members as processes: each is a process of its
// own running `server` (not this process), the three are one raft
// cluster with a leader, writes through a follower reach the leader, and
// Close reaps them all.
func TestStartProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Setenv(membertest.Env, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := devcluster.StartProcs(ctx, t.TempDir(), 3, devcluster.ProcOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close()
		}
	}()
	seen := map[int]bool{os.Getpid(): true}
	for i, pid := range p.PIDs {
		if seen[pid] {
			t.Fatalf("member %d runs in process %d, which another member or the test holds", i+1, pid)
		}
		seen[pid] = true
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatalf("member %d (pid %d): %v", i+1, pid, err)
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || args[1] != "server" {
			t.Fatalf("member %d (pid %d) runs %q, want the server", i+1, pid, args)
		}
	}
	leader, err := p.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	v, err := p.Client(follower).Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members) != 3 || v.Leader != fmt.Sprintf("node%d", leader+1) || v.PeerAuth != "secret" {
		t.Fatalf("cluster view through node%d: %+v, want 3 members led by node%d, peers authenticated by the secret", follower+1, v, leader+1)
	}
	closed = true
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for i, pid := range p.PIDs {
		// Reaped: no zombie left behind holds the PID.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("member %d (pid %d) still exists after Close", i+1, pid)
		}
	}
}

// TestStartProcsShowsAFailedStart: a member that exits before its start
// line is an error that carries what it wrote on stderr, and the context's
// end stops members that did start.
func TestStartProcsShowsAFailedStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	t.Setenv(membertest.Env, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := devcluster.StartProcs(ctx, t.TempDir(), 1, devcluster.ProcOptions{Args: []string{"--log-format", "yaml"}})
	if err == nil || !strings.Contains(err.Error(), `log-format "yaml" is not one of text, json`) {
		t.Fatalf("a member started with a bad flag: err %v, want its stderr in the error", err)
	}

	run, stop := context.WithCancel(ctx)
	p, err := devcluster.StartProcs(run, t.TempDir(), 1, devcluster.ProcOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	pid := p.PIDs[0]
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member (pid %d) still exists 20 s after its context ended", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
