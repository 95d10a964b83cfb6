package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/srclimit"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/store/raftinject"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// raftFlood replays handshakes from src at every target until stopped,
// paced (at most 250 a second a target) so that the attacker does not take
// the two cores for itself.
type raftFlood struct {
	stop          context.CancelFunc
	wg            sync.WaitGroup
	served, reset map[string]*atomic.Int64
}

func startRaftFlood(t *testing.T, src string, targets []string) *raftFlood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &raftFlood{stop: cancel, served: map[string]*atomic.Int64{}, reset: map[string]*atomic.Int64{}}
	for _, tg := range targets {
		f.served[tg], f.reset[tg] = new(atomic.Int64), new(atomic.Int64)
	}
	for _, tg := range targets {
		f.wg.Go(func() {
			tick := time.NewTicker(4 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				served, reset := raftinject.Hello(ctx, src, tg)
				if served {
					f.served[tg].Add(1)
				}
				if reset {
					f.reset[tg].Add(1)
				}
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	t.Cleanup(f.end)
	return f
}

func (f *raftFlood) end() { f.stop(); f.wg.Wait() }

func (f *raftFlood) resetAtLeast(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for tg, r := range f.reset {
		for r.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s reset %d of the flood's connections (%d served), want %d", tg, r.Load(), f.served[tg].Load(), n)
			}
			backoff(ctxT(t))
		}
	}
}

// TestRaftPortFlood: a host (127.0.0.2) flooding TLS handshakes at every
// member's Raft port, with a cluster secret and with mutual TLS on RSA-2048
// keys (a signature of about a millisecond each), gets each member's burst
// of server flights and no more: every further connection is reset before
// the server sends a byte, and counted in
// jobfabric_raft_connections_refused_total{reason="rate"}. Meanwhile writes
// keep being acknowledged, and a follower's restart and the leader's stop
// and restart under the flood still work: the members are trusted. With no
// limits the same flood is served every handshake.
func TestRaftPortFlood(t *testing.T) {
	const burst = 20
	limits := store.Admission{Admission: srclimit.Admission{ConnRate: 0.01, ConnBurst: burst, ConnsPerSource: 64, Handshakes: 64, SourceHandshakes: 16}}
	rsa := func(t *testing.T) (func(*server.Config), *tls.Config) {
		dir := t.TempDir()
		cert, key, ca := tlstest.GenerateRSA(t, dir, 2048, "127.0.0.1")
		tc, err := tlsutil.ClientConfig(ca, "")
		if err != nil {
			t.Fatal(err)
		}
		return func(cfg *server.Config) { cfg.ClusterSecret, cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = nil, cert, key, ca }, tc
	}

	t.Run("no limits: the flood is served", func(t *testing.T) {
		c := startAttackCluster(t, 3, nil)
		served := 0
		for range 3 * burst {
			if ok, _ := raftinject.Hello(ctxT(t), "127.0.0.2", c.Servers[0].RaftAddr()); ok {
				served++
			}
		}
		if served <= burst+1 {
			t.Fatalf("without limits the attacker got %d of %d server flights: the test could not tell the limits work", served, 3*burst)
		}
	})

	for _, mode := range []string{"secret", "mtls rsa"} {
		t.Run(mode, func(t *testing.T) {
			tune := func(cfg *server.Config) { cfg.RaftAdmission = limits }
			var tc *tls.Config
			if mode == "mtls rsa" {
				var auth func(*server.Config)
				auth, tc = rsa(t)
				tune = func(cfg *server.Config) { auth(cfg); cfg.RaftAdmission = limits }
			}
			c := startAttackCluster(t, 3, tune)
			c.tls = tc
			targets := raftTargets(c)
			starts := map[string]int{}
			for _, tg := range targets {
				starts[tg] = 1
			}

			// The writer asks whichever member leads; mu orders it with
			// the restarts, which swap c.Servers[i].
			var mu sync.Mutex
			var acked atomic.Int64
			wctx, stopWriter := context.WithCancel(context.Background())
			var writes sync.WaitGroup
			writes.Go(func() {
				for i := 0; wctx.Err() == nil; i++ {
					mu.Lock()
					l := c.Leader()
					var url string
					if l >= 0 {
						url = c.Servers[l].URL()
					}
					mu.Unlock()
					if l < 0 {
						backoff(wctx)
						continue
					}
					cl, err := client.New(url, c.AdminToken, tc)
					if err != nil {
						t.Error(err)
						return
					}
					cl.RetryFor = 0
					rctx, cancel := context.WithTimeout(wctx, 2*time.Second)
					_, err = cl.CreateTenant(rctx, api.TenantCreateRequest{Name: fmt.Sprintf("w%d", i), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
					cancel()
					if err == nil {
						acked.Add(1)
					} else {
						backoff(wctx)
					}
				}
			})
			defer func() { stopWriter(); writes.Wait() }()
			flowing := func(what string) {
				t.Helper()
				from := acked.Load()
				deadline := time.Now().Add(60 * time.Second)
				for acked.Load() < from+10 {
					if time.Now().After(deadline) {
						t.Fatalf("%s: %d writes acknowledged in 60 s, want 10", what, acked.Load()-from)
					}
					backoff(ctxT(t))
				}
			}
			flowing("before the flood")

			f := startRaftFlood(t, "127.0.0.2", targets)
			f.resetAtLeast(t, 50)
			flowing("under the flood")

			restart := func(i int, down func()) {
				t.Helper()
				mu.Lock()
				err := c.Stop(i)
				mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				down()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				mu.Lock()
				err = c.Restart(ctx, i)
				mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				starts[targets[i]]++
			}
			l, err := c.WaitLeader(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			follower := (l + 1) % 3
			restart(follower, func() {})
			flowing("after a follower's restart")
			mu.Lock()
			l = c.Leader()
			mu.Unlock()
			if l < 0 {
				if l, err = c.WaitLeader(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			restart(l, func() { flowing("after the leader stopped") })
			flowing("after the old leader came back")
			f.resetAtLeast(t, 100)
			f.end()

			for _, tg := range targets {
				t.Logf("%s (started %d times): %d server flights, %d connections reset before a byte", tg, starts[tg], f.served[tg].Load(), f.reset[tg].Load())
				if bound := int64(burst*starts[tg] + 1); f.served[tg].Load() > bound {
					t.Errorf("%s: the attacker got %d server flights; the limits allow %d", tg, f.served[tg].Load(), bound)
				}
			}
			// A member never restarted counted every reset the attacker saw
			// (and perhaps the one in flight as the flood stopped).
			for i, tg := range targets {
				if starts[tg] != 1 {
					continue
				}
				mu.Lock()
				url := c.Servers[i].URL()
				mu.Unlock()
				hc := httpFrom("127.0.0.1", tc)
				want := float64(f.reset[tg].Load())
				deadline := time.Now().Add(20 * time.Second)
				for {
					got, err := metric(hc, url, c.AdminToken, "jobfabric_raft_connections_refused_total", map[string]string{"reason": "rate"})
					if err == nil && got >= want && got <= want+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("member %d: jobfabric_raft_connections_refused_total{reason=\"rate\"} = %v (%v), want the attacker's %v resets (+1)", i+1, got, err, want)
					}
					backoff(ctxT(t))
				}
				break
			}
		})
	}
}

// TestRaftPortMembersOnly: with --raft-members-only a source outside the
// Raft configuration is reset at accept from its first connection, while
// joiners are added (the leader reaches each before it has a
// configuration) and the cluster takes writes.
func TestRaftPortMembersOnly(t *testing.T) {
	c := startAttackCluster(t, 3, func(cfg *server.Config) { cfg.RaftAdmission = store.Admission{MembersOnly: true} })
	cl := leaderClient(t, c)
	if _, err := cl.CreateTenant(ctxT(t), api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		t.Fatal(err)
	}
	for i, tg := range raftTargets(c) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			served, reset := raftinject.Hello(ctxT(t), "127.0.0.2", tg)
			if !served && reset {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d served a handshake to a source outside the configuration (served %v)", i+1, served)
			}
			backoff(ctxT(t))
		}
		got, err := metric(httpFrom("127.0.0.1", nil), c.Servers[i].URL(), c.AdminToken, "jobfabric_raft_connections_refused_total", map[string]string{"reason": "not_member"})
		if err != nil || got < 1 {
			t.Errorf("member %d: not_member refusals %v (%v), want 1 at least", i+1, got, err)
		}
	}
	view, err := cl.Cluster(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if ids := len(view.Members); ids != 3 || !slices.ContainsFunc(view.Members, func(m api.ClusterMember) bool { return m.Leader }) {
		t.Fatalf("cluster view: %+v", view)
	}
}
