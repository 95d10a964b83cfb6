package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/store/raftinject"
)

// attackWindow is how long each attack runs at this level; the server
// tests run longer ones through the API.
const attackWindow = 2 * time.Second

// TestPeerAuthAttack points the injector at a three-node cluster. With a
// cluster secret every attacker is refused, writes keep flowing and the
// entry is nowhere; with insecure peers the same attack must stall writes
// and land the entry, which shows the injector finds the hole when there is
// one. Mutual TLS is attacked the same way in internal/server's
// TestRaftPortAttack (and its handshake refusals are TestClusterTLS's).
func TestPeerAuthAttack(t *testing.T) {
	_, wrongSecretTLS, err := SecretTLS([]byte("W2r0ngS3cr3t+fr0m/an0ther-clusterQ9xZ7vKpL4="))
	if err != nil {
		t.Fatal(err)
	}
	wrongSecretTLS.InsecureSkipVerify = true // so that it gets to present its certificate
	// An attacker that skips verifying the server (trusting it is not the
	// point) and holds no certificate.
	noCert := &tls.Config{InsecureSkipVerify: true}

	for _, tc := range []struct {
		name      string
		peers     peers
		attackers map[string]*tls.Config
		wantHole  bool
	}{
		{name: "insecure", peers: insecurePeers, attackers: map[string]*tls.Config{"plain": nil}, wantHole: true},
		{name: "secret", peers: withSecret(testSecret), attackers: map[string]*tls.Config{"plain": nil, "no secret": noCert, "wrong secret": wrongSecretTLS}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := testLogger(t)
			// Timeouts with room for the attackers' TLS handshakes on two
			// busy cores under -race: the point is the protocol, and a
			// leader that misses its lease for want of CPU is another test.
			nodes := startCluster(t, logger, func(c *Config) {
				tc.peers(c)
				c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
			})
			var targets []string
			for _, n := range nodes {
				targets = append(targets, n.s.Addr())
			}
			entry := []byte("injected-" + tc.name)

			w := startWriter(nodes)
			time.Sleep(200 * time.Millisecond) // the writer is under way
			ctx, cancel := context.WithTimeout(context.Background(), attackWindow)
			start := time.Now()
			reports := raftinject.AttackEach(ctx, tc.attackers, raftinject.Options{Timeout: 500 * time.Millisecond, Interval: 100 * time.Millisecond}, targets, entry)
			end := time.Now()
			cancel()
			acks := w.stop()
			gap, n := longestGap(acks, start, end)
			t.Logf("%d writes acknowledged during the %v attack, longest gap %v", n, end.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
			for name, r := range reports {
				t.Logf("attacker %q: %v", name, r)
			}

			if tc.wantHole {
				r := reports["plain"]
				if len(r.Appended) != len(targets) {
					t.Fatalf("the injector did not append on every member of an unauthenticated cluster: %v", r)
				}
				if !stalled(gap, end.Sub(start)) {
					t.Errorf("writes were not stalled by the attack: longest gap %v in %v", gap, end.Sub(start))
				}
				// Once the attacker is gone the members elect a leader
				// among themselves, and the forged entry is in every log.
				waitFor(t, 10*time.Second, func() (bool, string) {
					for _, n := range nodes {
						if !slices.Contains(n.fsm.Items(), string(entry)) {
							return false, n.cfg.NodeID + " has not applied the injected entry"
						}
					}
					return leaderOf(nodes...) != nil, "no leader after the attack"
				})
				return
			}
			for name, r := range reports {
				if r.Accepted != 0 || len(r.Appended) != 0 {
					t.Errorf("attacker %q was answered: %v", name, r)
				}
				if r.Errors == 0 {
					t.Errorf("attacker %q never tried: %v", name, r)
				}
			}
			if stalled(gap, end.Sub(start)) {
				t.Errorf("writes stalled for %v during the attack", gap)
			}
			for _, n := range nodes {
				if slices.Contains(n.fsm.Items(), string(entry)) {
					t.Errorf("%s applied the injected entry", n.cfg.NodeID)
				}
			}
		})
	}
}

// writer applies fresh values through whichever node leads and records
// when each was acknowledged.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acks   []time.Time
}

func startWriter(nodes []*node) *writer {
	return startWriterTo(func() *Store {
		if l := leaderOf(nodes...); l != nil {
			return l.s
		}
		return nil
	})
}

// startWriterTo writes through whichever store leader returns (nil: none
// now).
func startWriterTo(leader func() *Store) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			l := leader()
			if l == nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := l.Apply(actx, fmt.Appendf(nil, "w-%05d", i))
			acancel()
			if err == nil {
				w.mu.Lock()
				w.acks = append(w.acks, time.Now())
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *writer) stop() []time.Time {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

// stalled says whether writes stopped for most of an attack window.
func stalled(gap, window time.Duration) bool { return gap >= window*7/10 }

// longestGap is the longest time between start, the acknowledgements in
// [start, end] and end, and how many acknowledgements fell in between.
func longestGap(acks []time.Time, start, end time.Time) (time.Duration, int) {
	prev, gap, n := start, time.Duration(0), 0
	for _, a := range acks {
		if a.Before(start) || a.After(end) {
			continue
		}
		n++
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return max(gap, end.Sub(prev)), n
}
