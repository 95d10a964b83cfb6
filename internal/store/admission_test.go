package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/srclimit"
	"github.com/jobfabric/jobfabric/internal/store/raftinject"
)

// from dials from ip: Linux accepts any 127/8 address as a source, so one
// test plays the members (127.0.0.1) and attackers.
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// flood replays TLS handshakes (no client certificate: an outsider) at
// each target from src until it is stopped, and counts per target the
// server flights it got (the server's certificate and signature reached
// it) and the connections reset before the server sent a byte.
type flood struct {
	stop            context.CancelFunc
	done            sync.WaitGroup
	served, refused map[string]*atomic.Int64
}

// tryHandshake is raftinject.Hello with an error for neither outcome.
func tryHandshake(ctx context.Context, src, target string) (served bool, err error) {
	served, reset := raftinject.Hello(ctx, src, target)
	if !served && !reset {
		return false, errors.New("neither served nor reset (nothing listening, or a deadline)")
	}
	return served, nil
}

func startFlood(t *testing.T, src string, targets []string) *flood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flood{stop: cancel, served: map[string]*atomic.Int64{}, refused: map[string]*atomic.Int64{}}
	for _, target := range targets {
		f.served[target], f.refused[target] = new(atomic.Int64), new(atomic.Int64)
	}
	for _, target := range targets {
		for range 2 {
			f.done.Go(func() {
				// Paced (at most 500 a second a goroutine), so that the
				// attacker does not take the two cores for itself: the
				// subject is what the server does for it.
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for ctx.Err() == nil {
					served, err := tryHandshake(ctx, src, target)
					switch {
					case err != nil && ctx.Err() == nil:
						// A member restarting: nothing listens for a moment.
					case served:
						f.served[target].Add(1)
					case err == nil:
						f.refused[target].Add(1)
					}
					select {
					case <-ctx.Done():
					case <-tick.C:
					}
				}
			})
		}
	}
	t.Cleanup(f.end)
	return f
}

func (f *flood) end() {
	f.stop()
	f.done.Wait()
}

// refusedAtLeast waits until every target refused n of the flood's
// connections (it is past its burst there).
func (f *flood) refusedAtLeast(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, 60*time.Second, func() (bool, string) {
		for target, r := range f.refused {
			if r.Load() < n {
				return false, fmt.Sprintf("%s refused %d of the flood's connections, %d served", target, r.Load(), f.served[target].Load())
			}
		}
		return true, ""
	})
}

// ackedSince waits until the writer has n acknowledgements after mark.
func (w *writer) ackedSince(t *testing.T, mark time.Time, n int, what string) {
	t.Helper()
	waitFor(t, 60*time.Second, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		got := 0
		for _, a := range w.acks {
			if a.After(mark) {
				got++
			}
		}
		return got >= n, fmt.Sprintf("%s: %d writes acknowledged, want %d", what, got, n)
	})
}

// TestRaftAdmissionFlood: a host (127.0.0.2) flooding TLS handshakes at
// every member's Raft port gets each member's burst of server flights and
// no more: every other connection is reset before the server sends a byte.
// Meanwhile writes keep committing, a follower restarted under the flood
// rejoins, and the leader stopped under it is replaced (the members, on
// 127.0.0.1, are trusted). Without the limits the same flood is served
// every handshake, which shows the count can fail.
func TestRaftAdmissionFlood(t *testing.T) {
	const burst = 20
	lim := Admission{Admission: srclimit.Admission{ConnRate: 0.01, ConnBurst: burst, ConnsPerSource: 64, Handshakes: 64, SourceHandshakes: 16}}

	t.Run("no limits: the flood is served", func(t *testing.T) {
		nodes := startCluster(t, testLogger(t), withSecret(testSecret))
		target := nodes[0].s.Addr()
		served := 0
		for range 3 * burst {
			ok, err := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.2", target)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				served++
			}
		}
		if served <= burst+1 {
			t.Fatalf("without limits the attacker got %d of %d server flights; the test could not tell the limits work", served, 3*burst)
		}
	})

	t.Run("limits", func(t *testing.T) {
		logger := testLogger(t)
		var refusedMu sync.Mutex
		refused := map[string]int{}
		nodes := startCluster(t, logger, func(c *Config) {
			withSecret(testSecret)(c)
			c.Admission = lim
			c.Admission.Refused = func(why string) {
				refusedMu.Lock()
				refused[why]++
				refusedMu.Unlock()
			}
			// Room for elections on two busy cores (the flood's resets
			// are cheap, not free).
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		})
		starts := map[string]int{}
		var targets []string
		for _, n := range nodes {
			targets = append(targets, n.s.Addr())
			starts[n.s.Addr()] = 1
		}
		// The writer picks the leader under mu; restarts swap a node's
		// store under it.
		var mu sync.Mutex
		leader := func() *node {
			mu.Lock()
			defer mu.Unlock()
			return leaderOf(nodes...)
		}
		restart := func(n *node, down func()) {
			mu.Lock()
			n.stop(t)
			mu.Unlock()
			down()
			mu.Lock()
			n.start(t)
			mu.Unlock()
			starts[n.cfg.RaftAddr]++
		}
		w := startWriterTo(func() *Store {
			if l := leader(); l != nil {
				return l.s
			}
			return nil
		})
		defer w.stop()
		w.ackedSince(t, time.Time{}, 1, "before the flood")

		f := startFlood(t, "127.0.0.2", targets)
		f.refusedAtLeast(t, 50)
		w.ackedSince(t, time.Now(), 20, "under the flood")

		// A follower restarted under the flood: the others dial it and it
		// dials them again, from a member's address; it catches up.
		waitFor(t, 30*time.Second, func() (bool, string) { return leader() != nil, "no leader under the flood" })
		l := leader()
		follower := nodes[0]
		if follower == l {
			follower = nodes[1]
		}
		restart(follower, func() {})
		w.ackedSince(t, time.Now(), 20, "after a follower's restart")
		want := len(l.fsm.Items())
		waitFor(t, 60*time.Second, func() (bool, string) {
			return len(follower.fsm.Items()) >= want, follower.cfg.NodeID + " has not caught up after its restart"
		})

		// The leader stopped under the flood: the others elect one of
		// themselves (RequestVote on new connections) and writes go on;
		// restarted, it follows and catches up.
		waitFor(t, 30*time.Second, func() (bool, string) { return leader() != nil, "no leader under the flood" })
		l = leader()
		restart(l, func() { w.ackedSince(t, time.Now(), 20, "after the leader stopped") })
		w.ackedSince(t, time.Now(), 20, "after the old leader came back")
		waitFor(t, 30*time.Second, func() (bool, string) { return leader() != nil, "no leader under the flood" })
		want = len(leader().fsm.Items())
		waitFor(t, 60*time.Second, func() (bool, string) {
			return len(l.fsm.Items()) >= want, l.cfg.NodeID + " has not caught up after its restart"
		})
		f.refusedAtLeast(t, 100)
		f.end()

		for _, target := range targets {
			served, reset := f.served[target].Load(), f.refused[target].Load()
			t.Logf("%s (started %d times): %d server flights, %d connections reset before a byte", target, starts[target], served, reset)
			// Each start has a new table: a burst per start, and a token
			// every 100 s at most.
			if bound := int64(burst*starts[target] + 1); served > bound {
				t.Errorf("%s: the attacker got %d server flights; the limits allow %d", target, served, bound)
			}
		}
		refusedMu.Lock()
		t.Logf("refusals counted by reason: %v", refused)
		if refused["rate"] == 0 {
			t.Errorf("no refusal counted for rate: %v", refused)
		}
		refusedMu.Unlock()
	})
}

// TestRaftAdmissionHandshakes: connections that stall their handshake hold
// a slot each from their accept: one source holds SourceHandshakes at
// most, all untrusted sources Handshakes; past them a connection is reset
// before the server sends a byte. A stalled client leaving frees its slot;
// the members (trusted) are never counted.
func TestRaftAdmissionHandshakes(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("limits %v", on), func(t *testing.T) {
			var hsRefused atomic.Int64
			nodes := startCluster(t, testLogger(t), func(c *Config) {
				withSecret(testSecret)(c)
				if on {
					c.Admission = Admission{Admission: srclimit.Admission{SourceHandshakes: 3, Handshakes: 5}, Refused: func(why string) {
						if why == ReasonHandshakes || why == "source_handshakes" {
							hsRefused.Add(1)
						}
					}}
				}
			})
			n1 := nodes[0]
			target := n1.s.Addr()
			// stall opens a connection from ip that sends nothing: its
			// handshake stays in progress until the server's timeout.
			stall := func(ip string) net.Conn {
				c, err := from(ip).DialContext(ctxT(t, 5*time.Second), "tcp", target)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			var held []net.Conn
			for range 3 {
				held = append(held, stall("127.0.0.3"))
			}
			held = append(held, stall("127.0.0.4"), stall("127.0.0.4"))
			// The server has accepted them (the count is taken at accept).
			waitFor(t, 10*time.Second, func() (bool, string) {
				return !on || n1.s.HandshakesInProgress() == 5, fmt.Sprintf("%d handshakes in progress, want 5", n1.s.HandshakesInProgress())
			})
			sourceFull, _ := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.3", target)
			serverFull, _ := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.5", target)
			if on && (sourceFull || serverFull) {
				t.Fatalf("with 5 handshakes stalled (3 from one source) the server sent its flight: to the source %v, to a new source %v", sourceFull, serverFull)
			}
			if !on && !(sourceFull && serverFull) {
				t.Fatalf("without limits a handshake was not served: %v %v", sourceFull, serverFull)
			}
			if !on {
				return
			}
			// The client can see its connection closed before the server's
			// count of the refusal is taken: wait for it.
			waitFor(t, 10*time.Second, func() (bool, string) {
				return hsRefused.Load() == 2, fmt.Sprintf("%d handshake refusals counted, want 2", hsRefused.Load())
			})
			// The members still replicate: their connections are not counted.
			mustApply(t, leaderOf(nodes...).s, "during the stall")
			waitConverged(t, []string{"during the stall"}, nodes...)
			held[0].Close()
			waitFor(t, 10*time.Second, func() (bool, string) {
				ok, _ := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.5", target)
				return ok, "a stalled client left, yet handshakes are still refused"
			})
		})
	}
}

// TestRaftAdmissionMembersOnly: with MembersOnly a source outside the
// configuration is reset at accept, however few connections it opens;
// a joiner (no configuration yet, reached first by the leader) is added,
// and the cluster replicates and survives a member's restart.
func TestRaftAdmissionMembersOnly(t *testing.T) {
	var notMember atomic.Int64
	nodes := startCluster(t, testLogger(t), func(c *Config) {
		withSecret(testSecret)(c)
		c.Admission = Admission{MembersOnly: true, Refused: func(why string) {
			if why == ReasonNotMember {
				notMember.Add(1)
			}
		}}
	})
	mustApply(t, leaderOf(nodes...).s, "a")
	waitConverged(t, []string{"a"}, nodes...)
	for _, n := range nodes {
		waitFor(t, 10*time.Second, func() (bool, string) {
			ok, err := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.2", n.s.Addr())
			return !ok && err == nil, n.cfg.NodeID + " served a handshake to a source outside the configuration"
		})
	}
	if notMember.Load() < 3 {
		t.Fatalf("%d not_member refusals counted, want 3 at least", notMember.Load())
	}
	nodes[1].stop(t)
	nodes[1].start(t)
	mustApply(t, leaderOf(nodes...).s, "b")
	waitConverged(t, []string{"a", "b"}, nodes...)
}

// TestRaftAdmissionTrustFollowsConfiguration: with MembersOnly, an address
// becomes trusted when a member at it is added (within trustRefresh) and
// stops being trusted when it is removed. The joiner (at 127.0.0.5, members
// only too) is reached by the leader before it has a configuration.
func TestRaftAdmissionTrustFollowsConfiguration(t *testing.T) {
	logger := testLogger(t)
	membersOnly := func(addr string) peers {
		return func(c *Config) {
			withSecret(testSecret)(c)
			c.RaftAddr = addr
			c.Admission = Admission{MembersOnly: true}
		}
	}
	nodes := startCluster(t, logger, membersOnly("127.0.0.1:0"))
	n1 := nodes[0]
	served := func(want bool, what string) {
		t.Helper()
		waitFor(t, 10*time.Second, func() (bool, string) {
			ok, err := tryHandshake(ctxT(t, 10*time.Second), "127.0.0.5", n1.s.Addr())
			return err == nil && ok == want, fmt.Sprintf("%s: a handshake from 127.0.0.5 served %v (%v), want %v", what, ok, err, want)
		})
	}
	served(false, "before a member is at 127.0.0.5")

	n4 := newNode(t, logger, "n4", false, membersOnly("127.0.0.5:0"))
	if err := n1.s.AddVoter(ctxT(t, 10*time.Second), "n4", n4.s.Addr()); err != nil {
		t.Fatalf("add a members-only joiner: %v", err)
	}
	mustApply(t, n1.s, "with n4")
	waitConverged(t, []string{"with n4"}, append(nodes, n4)...)
	served(true, "once n4 (127.0.0.5) is a member")

	if err := n1.s.RemoveServer(ctxT(t, 10*time.Second), "n4"); err != nil {
		t.Fatal(err)
	}
	served(false, "once n4 is removed")
}

// TestRaftAdmissionHandshakeRate: past the server-wide handshake rate a
// connection from any new source is reset before the server sends a byte,
// however few each source opened; the members (trusted) still replicate.
// Without it the same 20 sources are each served.
func TestRaftAdmissionHandshakeRate(t *testing.T) {
	// The burst leaves room for the leader's first connections to a joiner
	// (no configuration yet: nobody trusted), which take its tokens too.
	const burst, sources = 10, 30
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("limits %v", on), func(t *testing.T) {
			var rateRefused atomic.Int64
			nodes := startCluster(t, testLogger(t), func(c *Config) {
				withSecret(testSecret)(c)
				if on {
					c.Admission = Admission{Admission: srclimit.Admission{HandshakeRate: 0.01, HandshakeBurst: burst}, Refused: func(why string) {
						if why == ReasonHandshakeRate {
							rateRefused.Add(1)
						}
					}}
				}
			})
			target := nodes[0].s.Addr()
			served := 0
			for i := range sources {
				ok, err := tryHandshake(ctxT(t, 10*time.Second), fmt.Sprintf("127.0.1.%d", i+1), target)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					served++
				}
			}
			t.Logf("%d sources, one connection each: %d served", sources, served)
			if !on {
				if served != sources {
					t.Fatalf("without limits %d of %d served", served, sources)
				}
				return
			}
			if served > burst+1 || rateRefused.Load() < sources-burst-1 {
				t.Fatalf("%d sources past a burst of %d: %d served, %d refused for handshake_rate", sources, burst, served, rateRefused.Load())
			}
			mustApply(t, leaderOf(nodes...).s, "after the flood")
			waitConverged(t, []string{"after the flood"}, nodes...)
		})
	}
}

// TestRaftAdmissionDefaultsUnderChurn: the defaults are never hit by the
// members' own traffic, even when no member is recognised. Five members
// advertise 127.0.0.11-15 but dial from 127.0.0.1 (the loopback route's
// source: a multi-homed host), so every Raft connection between them goes
// through the limits; through joins, two leader changes and two restarts
// nothing is refused.
func TestRaftAdmissionDefaultsUnderChurn(t *testing.T) {
	logger := testLogger(t)
	var mu sync.Mutex
	refused := map[string]int{}
	at := func(i int) peers {
		return func(c *Config) {
			withSecret(testSecret)(c)
			c.RaftAddr = fmt.Sprintf("127.0.0.%d:0", 10+i)
			c.Admission = DefaultAdmission()
			c.Admission.Refused = func(why string) {
				mu.Lock()
				refused[why]++
				mu.Unlock()
			}
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		}
	}
	nodes := []*node{newNode(t, logger, "n1", true, at(1))}
	if err := nodes[0].s.WaitForLeader(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 5; i++ {
		n := newNode(t, logger, fmt.Sprintf("n%d", i), false, at(i))
		if err := nodes[0].s.AddVoter(ctxT(t, 10*time.Second), n.cfg.NodeID, n.s.Addr()); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	var nmu sync.Mutex
	leader := func() *node {
		nmu.Lock()
		defer nmu.Unlock()
		return leaderOf(nodes...)
	}
	w := startWriterTo(func() *Store {
		if l := leader(); l != nil {
			return l.s
		}
		return nil
	})
	defer w.stop()
	w.ackedSince(t, time.Time{}, 20, "five members")
	restart := func(n *node) {
		nmu.Lock()
		n.stop(t)
		nmu.Unlock()
		w.ackedSince(t, time.Now(), 20, n.cfg.NodeID+" down")
		nmu.Lock()
		n.start(t)
		nmu.Unlock()
		w.ackedSince(t, time.Now(), 20, n.cfg.NodeID+" back")
	}
	for range 2 { // leader changes
		waitFor(t, 30*time.Second, func() (bool, string) { return leader() != nil, "no leader" })
		restart(leader())
	}
	for range 2 { // followers
		l := leader()
		for _, n := range nodes {
			if n != l {
				restart(n)
				break
			}
		}
	}
	seen := 0
	for _, n := range nodes {
		seen += n.s.Sources()
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("refusals %v; sources remembered across the members %d", refused, seen)
	if seen == 0 {
		t.Fatal("no member's admission table saw a source: the members' connections did not go through the limits, the test proves nothing")
	}
	if len(refused) != 0 {
		t.Fatalf("the defaults refused the members' own connections: %v", refused)
	}
}

// TestRefusalCountedBeforeTheReset: the refused connection is counted
// before it is reset, so an attacker's test (or an operator) that sees the
// reset and then reads jobfabric_raft_connections_refused_total finds it
// (TestRaftPortMembersOnly failed under load when the count came after).
func TestRefusalCountedBeforeTheReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	resetSeen := true
	g := newGuard(Admission{MembersOnly: true, Refused: func(string) {
		// Still open: a read waits out its deadline instead of ending.
		client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := client.Read(make([]byte, 1))
		resetSeen = !errors.Is(err, os.ErrDeadlineExceeded)
	}}, false, slog.New(slog.DiscardHandler))
	g.configured.Store(true)
	if g.admit(server) != nil {
		t.Fatal("a source outside the configuration was admitted")
	}
	if resetSeen {
		t.Error("the connection was reset before its refusal was counted")
	}
}
