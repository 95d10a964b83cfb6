package store

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSingleServerHasNoListener: without Listen and without peers in the
// stored configuration nothing listens, and adding a member is refused
// with ErrNoListener instead of committing a voter nobody can reach.
func TestSingleServerHasNoListener(t *testing.T) {
	n := newNode(t, testLogger(t), "n1", true, nil)
	if n.s.Listening() || n.s.PeerAuth() != PeerAuthNone {
		t.Fatalf("single server: listening %v, peer auth %q", n.s.Listening(), n.s.PeerAuth())
	}
	if !strings.HasPrefix(n.s.Addr(), localAddrPrefix) {
		t.Fatalf("single server address %q", n.s.Addr())
	}
	if _, _, err := net.SplitHostPort(n.s.Addr()); err == nil {
		if c, err := net.DialTimeout("tcp", n.s.Addr(), time.Second); err == nil {
			c.Close()
			t.Fatalf("something answers at %s", n.s.Addr())
		}
	}
	waitFor(t, 5*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })
	mustApply(t, n.s, "x")
	err := n.s.AddVoter(ctxT(t, 5*time.Second), "n2", "127.0.0.1:1")
	if !errors.Is(err, ErrNoListener) {
		t.Fatalf("AddVoter on a single server = %v, want ErrNoListener", err)
	}
	if m, _ := n.s.Members(); len(m) != 1 {
		t.Fatalf("members = %+v", m)
	}
}

// TestGrowSingleServer: a server that ran alone (in memory) restarts
// listening, records its network address as leader, and grows into a
// three-member cluster whose members can reach it: after it stops and
// restarts (listening because its configuration has peers, without being
// told), the new leader replicates to it.
func TestGrowSingleServer(t *testing.T) { forEachLogStore(t, testGrowSingleServer) }

func testGrowSingleServer(t *testing.T, kind string) {
	logger := testLogger(t)
	n1 := newNode(t, logger, "n1", true, withLogStore(kind, nil))
	waitFor(t, 5*time.Second, func() (bool, string) { return n1.s.IsLeader(), "not leader" })
	mustApply(t, n1.s, "alone")
	n1.stop(t)

	withSecret(testSecret)(&n1.cfg)
	n1.start(t)
	n1.cfg.RaftAddr = n1.s.Addr()
	if !n1.s.Listening() || n1.s.PeerAuth() != PeerAuthSecret {
		t.Fatalf("restarted with a secret: listening %v, peer auth %q", n1.s.Listening(), n1.s.PeerAuth())
	}
	waitFor(t, 5*time.Second, func() (bool, string) {
		m, err := n1.s.Members()
		return err == nil && len(m) == 1 && m[0].Addr == n1.s.Addr(), "configuration still names n1 at its in-memory address"
	})

	// A member with another secret is refused before it enters the
	// configuration, where it would take the quorum with it.
	stranger := newNode(t, logger, "stranger", false, withSecret([]byte("c0mpletely/d1fferent+Secret9xQ2vLr7TkPz4WmJ8=")))
	err := n1.s.AddVoter(ctxT(t, 5*time.Second), "stranger", stranger.s.Addr())
	if !errors.Is(err, ErrPeerUnreachable) {
		t.Fatalf("AddVoter of a member with another secret = %v, want ErrPeerUnreachable", err)
	}

	n2 := newNode(t, logger, "n2", false, withLogStore(kind, withSecret(testSecret)))
	n3 := newNode(t, logger, "n3", false, withLogStore(kind, withSecret(testSecret)))
	for _, n := range []*node{n2, n3} {
		if err := n1.s.AddVoter(ctxT(t, 10*time.Second), n.cfg.NodeID, n.s.Addr()); err != nil {
			t.Fatalf("add %s: %v", n.cfg.NodeID, err)
		}
	}
	nodes := []*node{n1, n2, n3}
	mustApply(t, n1.s, "grown")
	waitConverged(t, []string{"alone", "grown"}, nodes...)

	n1.stop(t)
	var leader *node
	waitFor(t, 10*time.Second, func() (bool, string) {
		leader = leaderOf(n2, n3)
		return leader != nil, "no leader among n2, n3"
	})
	mustApply(t, leader.s, "while-n1-down")

	// Restarted without Listen or a secret it must refuse: it has peers.
	n1.cfg.Listen, n1.cfg.ClusterSecret = false, nil
	n1.fsm = &listFSM{}
	cfg := n1.cfg
	cfg.FSM = n1.fsm
	if s, err := Open(ctxT(t, 5*time.Second), cfg); !errors.Is(err, ErrUnauthenticatedPeers) {
		if s != nil {
			s.Shutdown()
		}
		t.Fatalf("restart of a member without peer authentication = %v, want ErrUnauthenticatedPeers", err)
	}
	n1.cfg.ClusterSecret = testSecret // still not Listen: the configuration says so
	n1.start(t)
	if !n1.s.Listening() {
		t.Fatal("restarted member does not listen")
	}
	want := []string{"alone", "grown", "while-n1-down"}
	waitConverged(t, want, nodes...)
	if got := n1.fsm.Items(); !slices.Equal(got, want) {
		t.Fatalf("n1 has %v", got)
	}
}
