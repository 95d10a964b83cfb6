package server_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/store/raftinject"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// attackWindow is how long each attack runs while a client writes.
const attackWindow = 5 * time.Second

// forgedToken is the admin token the attacker tries to create: a real
// state command, so that an FSM that applies it would authenticate it.
type forgedToken struct {
	id, secret string
	entry      []byte
}

func newForgedToken(t *testing.T) forgedToken {
	t.Helper()
	var idb [6]byte
	var sb [32]byte
	rand.Read(idb[:])
	rand.Read(sb[:])
	id := hex.EncodeToString(idb[:])
	secret := "jf_" + id + "_" + hex.EncodeToString(sb[:])
	entry, err := state.Encode(state.CmdTokenCreate, time.Now(), "system", state.TokenCreate{
		Token: domain.Token{ID: id, Role: domain.RoleAdmin, Description: "injected over raft"},
		Hash:  state.HashSecret(secret),
	})
	if err != nil {
		t.Fatal(err)
	}
	return forgedToken{id: id, secret: secret, entry: entry}
}

// attackServers runs every attacker against targets for attackWindow while
// a client creates tenants through server 0, and returns the attackers'
// reports with the longest time no write was acknowledged.
func attackServers(t *testing.T, cl *client.Client, targets []string, attackers map[string]*tls.Config, entry []byte) (map[string]raftinject.Report, time.Duration, int) {
	t.Helper()
	wctx, stopWriter := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		acks []time.Time
	)
	writerDone := make(chan struct{})
	flowing := make(chan struct{}) // closed at the writer's first ack
	go func() {
		defer close(writerDone)
		for i := 0; wctx.Err() == nil; i++ {
			ctx, cancel := context.WithTimeout(wctx, time.Second)
			_, err := cl.CreateTenant(ctx, api.TenantCreateRequest{Name: fmt.Sprintf("w%d", i), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
			cancel()
			if err == nil {
				mu.Lock()
				if len(acks) == 0 {
					close(flowing)
				}
				acks = append(acks, time.Now())
				mu.Unlock()
			} else {
				backoff(wctx) // no leader: do not spin
			}
		}
	}()
	select { // the writer is under way
	case <-flowing:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer got no write acknowledged before the attack")
	}

	ctx, cancel := context.WithTimeout(context.Background(), attackWindow)
	defer cancel()
	start := time.Now()
	reports := raftinject.AttackEach(ctx, attackers, raftinject.Options{Timeout: 500 * time.Millisecond, Interval: 100 * time.Millisecond}, targets, entry)
	end := time.Now()
	stopWriter()
	<-writerDone

	mu.Lock()
	defer mu.Unlock()
	prev, gap, n := start, time.Duration(0), 0
	for _, a := range acks {
		if a.Before(start) || a.After(end) {
			continue
		}
		n++
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	gap = max(gap, end.Sub(prev))
	t.Logf("%d writes acknowledged during the %v attack; longest gap %v", n, end.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
	for name, r := range reports {
		t.Logf("attacker %q: %v", name, r)
	}
	return reports, gap, n
}

// stalled: no write acknowledged for most of the attack.
func stalled(gap time.Duration) bool { return gap >= attackWindow*7/10 }

// startAttackCluster starts n servers with timeouts that leave room for the
// attackers' handshakes on two busy cores (the subject is the protocol, not
// CPU starvation).
func startAttackCluster(t *testing.T, n int, tune func(*server.Config)) *attackCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), n, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second, Tune: tune})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return &attackCluster{Cluster: c}
}

// attackCluster is a devcluster whose API may be HTTPS (tls verifies it).
type attackCluster struct {
	*devcluster.Cluster
	tls *tls.Config
}

// client talks to server i with token, without retries.
func (c *attackCluster) client(t *testing.T, i int, token string) *client.Client {
	t.Helper()
	cl, err := client.New(c.Servers[i].URL(), token, c.tls)
	if err != nil {
		t.Fatal(err)
	}
	cl.RetryFor = 0
	return cl
}

func raftTargets(c *attackCluster) []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.RaftAddr())
	}
	return out
}

// TestRaftPortAttack aims the raft injector at every supported mode: a
// single server (there is nothing to aim at), a cluster authenticated by a
// cluster secret and one by mutual TLS (every attacker refused, writes keep
// flowing, the forged admin token never exists) and, to show the test can
// fail, a cluster started with InsecurePeers, where the same attack stalls
// writes and the forged token authenticates as admin.
func TestRaftPortAttack(t *testing.T) {
	noCert := &tls.Config{InsecureSkipVerify: true}

	t.Run("single server", func(t *testing.T) {
		before := listeningPorts(t)
		c := startAttackCluster(t, 1, nil)
		s := c.Servers[0]
		if s.RaftListening() || s.PeerAuth() != "none" {
			t.Fatalf("single server: raft listening %v, peer auth %q", s.RaftListening(), s.PeerAuth())
		}
		var opened []int
		for p := range listeningPorts(t) {
			if !before[p] {
				opened = append(opened, p)
			}
		}
		_, apiPort, _ := net.SplitHostPort(s.ListenAddr())
		if want, _ := strconv.Atoi(apiPort); !slices.Equal(opened, []int{want}) {
			t.Fatalf("the server opened ports %v; want only the API's, %d", opened, want)
		}
		view, err := c.client(t, 0, c.AdminToken).Cluster(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if view.PeerAuth != "none" {
			t.Errorf("/v1/cluster peerAuth = %q, want none", view.PeerAuth)
		}
		// The attacker tries the old raft port (API + 1000) and the API
		// port itself: neither speaks raft.
		p, _ := strconv.Atoi(apiPort)
		tok := newForgedToken(t)
		targets := []string{s.ListenAddr(), net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1000))}
		reports, gap, n := attackServers(t, c.client(t, 0, c.AdminToken), targets, map[string]*tls.Config{"plain": nil}, tok.entry)
		checkRefused(t, c, reports, gap, n, tok)
	})

	t.Run("cluster secret", func(t *testing.T) {
		c := startAttackCluster(t, 3, nil)
		checkPeerAuth(t, c, "secret")
		wrong := make([]byte, 32)
		rand.Read(wrong)
		wrongSecret := secretClient(t, []byte(base64.StdEncoding.EncodeToString(wrong)))
		tok := newForgedToken(t)
		reports, gap, n := attackServers(t, leaderClient(t, c), raftTargets(c), map[string]*tls.Config{
			"plain": nil, "no secret": noCert, "wrong secret": wrongSecret,
		}, tok.entry)
		checkRefused(t, c, reports, gap, n, tok)
	})

	t.Run("mutual TLS", func(t *testing.T) {
		dir := t.TempDir()
		cert, key, ca := tlstest.Generate(t, dir, "127.0.0.1", "localhost")
		c := startAttackCluster(t, 3, func(cfg *server.Config) {
			cfg.ClusterSecret, cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = nil, cert, key, ca
		})
		var err error
		if c.tls, err = tlsutil.ClientConfig(ca, ""); err != nil {
			t.Fatal(err)
		}
		checkPeerAuth(t, c, "mtls")
		fc, fk, _ := tlstest.Generate(t, t.TempDir(), "127.0.0.1")
		foreign, err := tls.LoadX509KeyPair(fc, fk)
		if err != nil {
			t.Fatal(err)
		}
		tok := newForgedToken(t)
		reports, gap, n := attackServers(t, leaderClient(t, c), raftTargets(c), map[string]*tls.Config{
			"plain": nil, "no certificate": noCert,
			"foreign CA": {InsecureSkipVerify: true, Certificates: []tls.Certificate{foreign}},
		}, tok.entry)
		checkRefused(t, c, reports, gap, n, tok)
	})

	t.Run("insecure peers: the attack must succeed", func(t *testing.T) {
		c := startAttackCluster(t, 3, func(cfg *server.Config) {
			cfg.ClusterSecret, cfg.InsecurePeers = nil, true
		})
		checkPeerAuth(t, c, "insecure")
		tok := newForgedToken(t)
		reports, gap, _ := attackServers(t, leaderClient(t, c), raftTargets(c), map[string]*tls.Config{"plain": nil}, tok.entry)
		if r := reports["plain"]; len(r.Appended) != 3 {
			t.Fatalf("the injector did not append its entry on every member of an unauthenticated cluster: %v", r)
		}
		if !stalled(gap) {
			t.Errorf("writes were not stalled by the attack (longest gap %v)", gap)
		}
		// With the attacker gone the members elect one of themselves, and
		// the forged token is an admin.
		ctx := ctxT(t)
		if _, err := c.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		forged := c.client(t, 0, tok.secret)
		forged.RetryFor = 10 * time.Second
		who, err := forged.WhoAmI(ctx)
		if err != nil {
			t.Fatalf("the forged token does not authenticate after an attack on insecure peers: %v", err)
		}
		if who.Role != domain.RoleAdmin || who.ID != tok.id {
			t.Fatalf("forged token is %+v", who)
		}
	})
}

func checkPeerAuth(t *testing.T, c *attackCluster, want string) {
	t.Helper()
	for i, s := range c.Servers {
		if !s.RaftListening() || s.PeerAuth() != want {
			t.Fatalf("server %d: raft listening %v, peer auth %q; want %q", i+1, s.RaftListening(), s.PeerAuth(), want)
		}
	}
	view, err := c.client(t, 0, c.AdminToken).Cluster(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if view.PeerAuth != want || len(view.Members) != len(c.Servers) {
		t.Fatalf("/v1/cluster: peerAuth %q with %d members; want %q with %d", view.PeerAuth, len(view.Members), want, len(c.Servers))
	}
}

// checkRefused: no attacker got an answer, writes kept flowing, and the
// forged token is in no server's state and does not authenticate.
func checkRefused(t *testing.T, c *attackCluster, reports map[string]raftinject.Report, gap time.Duration, n int, tok forgedToken) {
	t.Helper()
	for name, r := range reports {
		if r.Accepted != 0 || len(r.Appended) != 0 {
			t.Errorf("attacker %q was answered: %v", name, r)
		}
		if r.Errors == 0 {
			t.Errorf("attacker %q never tried: %v", name, r)
		}
	}
	if stalled(gap) || n == 0 {
		t.Errorf("writes stalled during the attack: %d acknowledged, longest gap %v", n, gap)
	}
	for i, s := range c.Servers {
		if _, ok := s.State().Token(tok.id); ok {
			t.Errorf("server %d holds the forged token", i+1)
		}
	}
	// An election on a loaded machine answers unavailable for a moment:
	// the client asks again until a leader answers (what it answers is the
	// check).
	forged := c.client(t, 0, tok.secret)
	forged.RetryFor = 20 * time.Second
	_, err := forged.WhoAmI(ctxT(t))
	if domain.CodeOf(err) != domain.CodeUnauthenticated {
		t.Errorf("whoami with the forged token = %v, want unauthenticated", err)
	}
}

func leaderClient(t *testing.T, c *attackCluster) *client.Client {
	t.Helper()
	l, err := c.WaitLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return c.client(t, l, c.AdminToken)
}

// secretClient is what a member with secret would present; it skips
// verifying the server so that it gets to present its certificate.
func secretClient(t *testing.T, secret []byte) *tls.Config {
	t.Helper()
	_, cfg, err := store.SecretTLS(secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InsecureSkipVerify = true
	return cfg
}

// listeningPorts lists the TCP ports this process listens on.
func listeningPorts(t *testing.T) map[int]bool {
	t.Helper()
	ports, err := raftinject.ListeningPorts()
	if err != nil {
		t.Skipf("cannot list listening ports: %v", err)
	}
	return ports
}
