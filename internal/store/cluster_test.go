package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// startCluster bootstraps n1 and adds n2 and n3 through the leader.
func startCluster(t *testing.T, logger *slog.Logger, p peers) []*node {
	t.Helper()
	n1 := newNode(t, logger, "n1", true, p)
	if err := n1.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() (bool, string) { return n1.s.IsLeader(), "n1 not leader" })
	n2 := newNode(t, logger, "n2", false, p)
	n3 := newNode(t, logger, "n3", false, p)
	for _, n := range []*node{n2, n3} {
		if err := n1.s.AddVoter(ctxT(t, 10*time.Second), n.cfg.NodeID, n.s.Addr()); err != nil {
			t.Fatalf("add voter %s: %v", n.cfg.NodeID, err)
		}
	}
	for _, n := range []*node{n2, n3} {
		if err := n.s.WaitForLeader(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("%s: %v", n.cfg.NodeID, err)
		}
	}
	return []*node{n1, n2, n3}
}

func TestCluster(t *testing.T) { forEachLogStore(t, testCluster) }

func testCluster(t *testing.T, kind string) {
	logger := testLogger(t)
	nodes := startCluster(t, logger, withLogStore(kind, withSecret(testSecret)))
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// Joining twice is a no-op; a second ID at a known address is refused.
	if err := n1.s.AddVoter(ctxT(t, 5*time.Second), "n2", n2.s.Addr()); err != nil {
		t.Errorf("repeated AddVoter: %v", err)
	}
	if err := n1.s.AddVoter(ctxT(t, 5*time.Second), "impostor", n2.s.Addr()); err == nil {
		t.Error("AddVoter of a second ID at n2's address succeeded")
	}
	members, err := n1.s.Members()
	if err != nil {
		t.Fatal(err)
	}
	wantMembers := []Member{
		{ID: "n1", Addr: n1.s.Addr(), Suffrage: SuffrageVoter, Leader: true},
		{ID: "n2", Addr: n2.s.Addr(), Suffrage: SuffrageVoter},
		{ID: "n3", Addr: n3.s.Addr(), Suffrage: SuffrageVoter},
	}
	if !slices.Equal(members, wantMembers) {
		t.Errorf("members = %+v\nwant %+v", members, wantMembers)
	}

	var want []string
	for i := range 50 {
		cmd := fmt.Sprintf("a-%02d", i)
		mustApply(t, n1.s, cmd)
		want = append(want, cmd)
	}
	waitConverged(t, want, nodes...)

	// A follower refuses writes and names the leader.
	_, err = n2.s.Apply(ctxT(t, time.Second), []byte("on-follower"))
	var nle *NotLeaderError
	if !errors.As(err, &nle) {
		t.Fatalf("Apply on follower = %v, want *NotLeaderError", err)
	}
	if nle.LeaderID != "n1" || nle.LeaderAddr != n1.s.Addr() {
		t.Errorf("NotLeaderError names %q at %q, want n1 at %s", nle.LeaderID, nle.LeaderAddr, n1.s.Addr())
	}

	// Write continuously through whichever node leads, across the failover.
	// Every attempt has a fresh value, so an acknowledged value appearing
	// twice or not at all is a bug, never a retry artefact.
	var (
		mu    sync.Mutex
		acked []string
	)
	writerCtx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 0; writerCtx.Err() == nil; i++ {
			l := leaderOf(n1, n2, n3)
			if l == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			cmd := fmt.Sprintf("bg-%04d", i)
			ctx, cancel := context.WithTimeout(writerCtx, 2*time.Second)
			_, err := l.s.Apply(ctx, []byte(cmd))
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, cmd)
				mu.Unlock()
			}
		}
	}()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 5*time.Second, func() (bool, string) { return ackedCount() >= 20, "writer made no progress" })

	// Kill the leader. nodes[0] must stay the same *node for the restart.
	// n1.s is read by the writer goroutine, so stop it through a copy.
	stopped := time.Now()
	old := n1.s
	if err := old.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var newLeader *node
	waitFor(t, 5*time.Second, func() (bool, string) {
		newLeader = leaderOf(n2, n3)
		return newLeader != nil, "no new leader among n2, n3"
	})
	failover := time.Since(stopped)
	t.Logf("new leader %s elected %v after the old leader stopped", newLeader.cfg.NodeID, failover.Round(time.Millisecond))
	before := ackedCount()
	waitFor(t, 5*time.Second, func() (bool, string) {
		return ackedCount() >= before+20, "writes do not continue on the new leader"
	})
	stopWriter()
	<-writerDone

	if err := newLeader.s.Barrier(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	got := newLeader.fsm.Items()
	counts := map[string]int{}
	for _, v := range got {
		counts[v]++
	}
	mu.Lock()
	for _, v := range acked {
		if counts[v] != 1 {
			t.Errorf("acknowledged write %s appears %d times on the new leader", v, counts[v])
		}
	}
	t.Logf("%d writes acknowledged across the failover, %d entries in the log", len(acked), len(got))
	mu.Unlock()

	// The remaining follower names the new leader.
	follower := n2
	if newLeader == n2 {
		follower = n3
	}
	_, err = follower.s.Apply(ctxT(t, time.Second), []byte("on-follower"))
	if !errors.As(err, &nle) || nle.LeaderID != newLeader.cfg.NodeID || nle.LeaderAddr != newLeader.s.Addr() {
		t.Errorf("Apply on follower after failover = %v, want NotLeaderError naming %s", err, newLeader.cfg.NodeID)
	}

	// More writes while n1 is down, then restart n1 from its directory with
	// the same ID and address (and Bootstrap still set): it must rejoin as a
	// follower and catch up, not found a cluster of its own.
	for i := range 10 {
		mustApply(t, newLeader.s, fmt.Sprintf("while-down-%d", i))
	}
	n1.s = nil
	n1.start(t)
	if err := n1.s.WaitForLeader(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustApply(t, newLeader.s, "after-rejoin")
	want = newLeader.fsm.Items()
	if want[len(want)-1] != "after-rejoin" {
		t.Fatalf("last entry on the leader is %q", want[len(want)-1])
	}
	waitConverged(t, want, nodes...)
	if id, _ := n1.s.Leader(); id != newLeader.cfg.NodeID {
		t.Errorf("restarted n1 follows %q, want %q", id, newLeader.cfg.NodeID)
	}
	members, err = newLeader.s.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Errorf("members after rejoin = %+v", members)
	}

	// Removing a member works and is idempotent.
	if err := newLeader.s.RemoveServer(ctxT(t, 5*time.Second), follower.cfg.NodeID); err != nil {
		t.Fatalf("remove %s: %v", follower.cfg.NodeID, err)
	}
	if err := newLeader.s.RemoveServer(ctxT(t, 5*time.Second), follower.cfg.NodeID); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if members, _ := newLeader.s.Members(); len(members) != 2 {
		t.Errorf("members after remove = %+v", members)
	}
}
