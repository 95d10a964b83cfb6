package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// TestRaftFloodLong is the measurement behind the Raft port's admission
// figures (docs/benchmarks.md): a three-member devcluster (production
// Raft timeouts) with mutual TLS on RSA-2048 keys takes writes through the
// leader for a window while an attacker in a process of its own (niced,
// TestAdmissionFloodAttacker) replays a ClientHello at the leader's Raft
// port as fast as it can, from one source and from 64, without limits,
// with the CLI's defaults (store.DefaultAdmission), with a server-wide
// handshake rate and with members-only.
// It logs the writes each window acknowledged and the server flights
// (signatures) the attacker got. Opt-in:
//
//	JOBFABRIC_RAFT_FLOOD_WINDOW=10s go test -run TestRaftFloodLong -v ./internal/server/
func TestRaftFloodLong(t *testing.T) {
	window, err := time.ParseDuration(os.Getenv("JOBFABRIC_RAFT_FLOOD_WINDOW"))
	if err != nil {
		t.Skip("set JOBFABRIC_RAFT_FLOOD_WINDOW (e.g. 10s) to run")
	}
	dir := t.TempDir()
	cert, key, ca := tlstest.GenerateRSA(t, dir, 2048, "127.0.0.1")
	tc, err := tlsutil.ClientConfig(ca, "")
	if err != nil {
		t.Fatal(err)
	}
	hello := filepath.Join(dir, "hello")
	if err := os.WriteFile(hello, clientHello(t), 0o600); err != nil {
		t.Fatal(err)
	}
	membersOnly := store.DefaultAdmission()
	membersOnly.MembersOnly = true
	rate := store.DefaultAdmission()
	rate.HandshakeRate, rate.HandshakeBurst = 50, 100
	for i, ph := range []struct {
		name    string
		limits  store.Admission
		sources int // 0: no attack
	}{
		{"quiet", store.DefaultAdmission(), 0},
		{"no limits, 1 source", store.Admission{}, 1},
		{"defaults, 1 source", store.DefaultAdmission(), 1},
		{"no limits, 64 sources", store.Admission{}, 64},
		{"defaults, 64 sources", store.DefaultAdmission(), 64},
		{"defaults + rate 50/s, 64 sources", rate, 64},
		{"members-only, 64 sources", membersOnly, 64},
	} {
		ctx := context.Background()
		c, err := devcluster.Start(ctx, filepath.Join(dir, fmt.Sprint(i)), 3, devcluster.Options{Logger: quietLogger(), FabricDriver: "none",
			Tune: func(cfg *server.Config) {
				cfg.ClusterSecret, cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = nil, cert, key, ca
				cfg.RaftAdmission = ph.limits
			}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		admin, err := client.New(c.Servers[l].URL(), c.AdminToken, tc)
		if err != nil {
			t.Fatal(err)
		}
		admin.RetryFor = 0
		var acked, failed atomic.Int64
		wctx, stop := context.WithTimeout(ctx, window)
		var wg sync.WaitGroup
		wg.Go(func() {
			for j := 0; wctx.Err() == nil; j++ {
				rctx, cancel := context.WithTimeout(wctx, 2*time.Second)
				_, err := admin.CreateTenant(rctx, api.TenantCreateRequest{Name: fmt.Sprintf("t%d", j), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
				cancel()
				if err == nil {
					acked.Add(1)
				} else if wctx.Err() == nil {
					failed.Add(1)
					backoff(wctx)
				}
			}
		})
		report := "no attack"
		if ph.sources > 0 {
			args := []string{os.Args[0], "-test.run=^TestAdmissionFloodAttacker$"}
			if nice, err := exec.LookPath("nice"); err == nil {
				args = append([]string{nice, "-n", "19"}, args...)
			}
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(os.Environ(), fmt.Sprintf("JOBFABRIC_API_FLOOD_ATTACK=%s|%d|%s|%s", c.Servers[l].RaftAddr(), ph.sources, window, hello))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("attacker: %v\n%s", err, out)
			}
			report = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
			var flights int
			fmt.Sscanf(report, "%d", &flights)
			// What the limits promise: nothing with members-only; a
			// source's burst and then its rate.
			bound := -1.0
			switch a := ph.limits; {
			case a.MembersOnly:
				bound = 0
			case a.HandshakeRate > 0:
				bound = float64(a.HandshakeBurst) + a.HandshakeRate*window.Seconds()
			case a.ConnRate > 0:
				bound = float64(ph.sources) * (float64(a.ConnBurst) + a.ConnRate*window.Seconds())
			}
			if bound >= 0 && float64(flights) > bound*1.02+2 {
				t.Errorf("%s: the attacker got %d server flights; the limits allow %.0f", ph.name, flights, bound)
			}
		}
		wg.Wait()
		stop()
		c.Close()
		if ph.limits.ConnRate > 0 && acked.Load() == 0 {
			t.Errorf("%s: no write acknowledged", ph.name)
		}
		t.Logf("%-34s %5d writes acknowledged (%d failed) in %v; attacker: %s", ph.name, acked.Load(), failed.Load(), window, report)
	}
}
