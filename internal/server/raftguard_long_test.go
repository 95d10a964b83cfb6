package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/store"
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
	rig := newFloodRig(t, "JOBFABRIC_RAFT_FLOOD_WINDOW", "10s")
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
		c, err := devcluster.Start(ctx, filepath.Join(rig.dir, fmt.Sprint(i)), 3, devcluster.Options{Logger: quietLogger(), FabricDriver: "none",
			Tune: func(cfg *server.Config) {
				cfg.ClusterSecret, cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = nil, rig.cert, rig.key, rig.ca
				cfg.RaftAdmission = ph.limits
			}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		load := rig.writeLoad(t, ctx, c.Servers[l].URL(), c.AdminToken, backoff)
		report := "no attack"
		if ph.sources > 0 {
			var flights int
			report, flights = rig.attack(t, ctx, c.Servers[l].RaftAddr(), ph.sources)
			// What the limits promise: nothing with members-only; a
			// source's burst and then its rate.
			bound := -1.0
			switch a := ph.limits; {
			case a.MembersOnly:
				bound = 0
			case a.HandshakeRate > 0:
				bound = float64(a.HandshakeBurst) + a.HandshakeRate*rig.window.Seconds()
			case a.ConnRate > 0:
				bound = float64(ph.sources) * (float64(a.ConnBurst) + a.ConnRate*rig.window.Seconds())
			}
			if bound >= 0 && float64(flights) > bound*1.02+2 {
				t.Errorf("%s: the attacker got %d server flights; the limits allow %.0f", ph.name, flights, bound)
			}
		}
		acked, failed := load()
		c.Close()
		if ph.limits.ConnRate > 0 && acked == 0 {
			t.Errorf("%s: no write acknowledged", ph.name)
		}
		t.Logf("%-34s %5d writes acknowledged (%d failed) in %v; attacker: %s", ph.name, acked, failed, rig.window, report)
	}
}
