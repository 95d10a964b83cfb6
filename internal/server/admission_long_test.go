package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/tlsutil"
	"github.com/jobfabric/jobfabric/internal/tlsutil/tlstest"
)

// TestAdmissionFloodLong is the measurement behind the handshake limit's
// figures (docs/benchmarks.md): a TLS server with an RSA-2048 key takes
// writes from a client on 127.0.0.1 for a window quiet, then for a window
// while an attacker replays a ClientHello as fast as it can (the server
// pays the key exchange and the signature, the attacker nothing), from one
// source and from 64, without and with the default limits
// (server.DefaultAdmission). It logs the writes each window acknowledged
// and the handshakes the attacker got. Opt-in:
//
//	JOBFABRIC_API_FLOOD_WINDOW=20s go test -run TestAdmissionFloodLong -v ./internal/server/
func TestAdmissionFloodLong(t *testing.T) {
	rig := newFloodRig(t, "JOBFABRIC_API_FLOOD_WINDOW", "20s")
	for i, ph := range []struct {
		name    string
		limits  server.Admission
		sources int  // 0: no attack
		closed  bool // attack a port nothing listens on: the attacker's own cost
	}{
		{"quiet", server.Admission{}, 0, false},
		{"attacker alone (closed port)", server.Admission{}, 1, true},
		{"no limits, 1 source", server.Admission{}, 1, false},
		{"defaults, 1 source", server.DefaultAdmission(), 1, false},
		{"no limits, 64 sources", server.Admission{}, 64, false},
		{"defaults, 64 sources", server.DefaultAdmission(), 64, false},
		{"defaults + handshake rate 100/s, 64 sources", withRate(100), 64, false},
	} {
		ctx := context.Background()
		s, err := server.Start(ctx, server.Config{DataDir: fmt.Sprintf("%s/n%d", rig.dir, i), TLSCert: rig.cert, TLSKey: rig.key, TLSCA: rig.ca,
			Logger: quietLogger(), Listen: "127.0.0.1:0", FabricDriver: "none", Admission: ph.limits})
		if err != nil {
			t.Fatal(err)
		}
		load := rig.writeLoad(t, ctx, s.URL(), s.AdminToken(), nil)
		report := "no attack"
		if ph.sources > 0 {
			target := s.ListenAddr()
			if ph.closed {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				target = ln.Addr().String()
				ln.Close()
			}
			var flights int
			report, flights = rig.attack(t, ctx, target, ph.sources)
			// The bound the limits promise: the burst, then the rate
			// (whichever of the source's and the server's binds first).
			var bound float64
			switch a := ph.limits; {
			case a.HandshakeRate > 0:
				bound = float64(a.HandshakeBurst) + a.HandshakeRate*rig.window.Seconds()
			case a.ConnRate > 0 && ph.sources == 1:
				bound = float64(a.ConnBurst) + a.ConnRate*rig.window.Seconds()
			}
			if bound > 0 && float64(flights) > bound*1.02+2 {
				t.Errorf("%s: the attacker got %d handshakes; the limits allow %.0f", ph.name, flights, bound)
			}
		}
		acked, failed := load()
		s.Close()
		if failed > 0 {
			t.Errorf("%s: %d legitimate writes failed", ph.name, failed)
		}
		t.Logf("%-44s %5d writes acknowledged (%d failed) in %v; attacker: %s", ph.name, acked, failed, rig.window, report)
	}
}

// floodRig is what the flood measurements (TestAdmissionFloodLong,
// TestRaftFloodLong) share: a window, an RSA-2048 certificate (the key
// whose signatures the attacker makes the server pay for), a client
// configuration trusting it, and a recorded ClientHello to replay.
type floodRig struct {
	window             time.Duration
	dir, cert, key, ca string
	hello              string // the ClientHello's file
	tc                 *tls.Config
}

// newFloodRig reads the window from env, and skips the test when it is
// not set: the measurements are opt-in.
func newFloodRig(t *testing.T, env, example string) floodRig {
	window, err := time.ParseDuration(os.Getenv(env))
	if err != nil {
		t.Skipf("set %s (e.g. %s) to run", env, example)
	}
	r := floodRig{window: window, dir: t.TempDir()}
	r.cert, r.key, r.ca = tlstest.GenerateRSA(t, r.dir, 2048, "127.0.0.1")
	if r.tc, err = tlsutil.ClientConfig(r.ca, ""); err != nil {
		t.Fatal(err)
	}
	r.hello = filepath.Join(r.dir, "hello")
	if err := os.WriteFile(r.hello, clientHello(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// writeLoad creates tenants through the API at url, one after the other,
// for the window; pause, when set, runs after a failed write (an election
// in progress). wait returns when the window ends, with the writes
// acknowledged and failed in it.
func (r floodRig) writeLoad(t *testing.T, ctx context.Context, url, token string, pause func(context.Context)) (wait func() (acked, failed int64)) {
	admin, err := client.New(url, token, r.tc)
	if err != nil {
		t.Fatal(err)
	}
	admin.RetryFor = 0
	var ack, fail atomic.Int64
	wctx, stop := context.WithTimeout(ctx, r.window)
	var wg sync.WaitGroup
	wg.Go(func() {
		for j := 0; wctx.Err() == nil; j++ {
			rctx, cancel := context.WithTimeout(wctx, 2*time.Second)
			_, err := admin.CreateTenant(rctx, api.TenantCreateRequest{Name: fmt.Sprintf("t%d", j), Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5})
			cancel()
			if err == nil {
				ack.Add(1)
			} else if wctx.Err() == nil {
				fail.Add(1)
				if pause != nil {
					pause(wctx)
				}
			}
		}
	})
	return func() (int64, int64) {
		wg.Wait()
		stop()
		return ack.Load(), fail.Load()
	}
}

// attack runs TestAdmissionFloodAttacker at target from sources for the
// window, and returns its report line and the server flights it got.
// Its own process, niced: an attacker elsewhere does not take the
// server's CPU for itself; here it gets what the server leaves (its
// replays are cheap, the server's answers are not).
func (r floodRig) attack(t *testing.T, ctx context.Context, target string, sources int) (report string, flights int) {
	args := []string{os.Args[0], "-test.run=^TestAdmissionFloodAttacker$"}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "19"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOBFABRIC_API_FLOOD_ATTACK=%s|%d|%s|%s", target, sources, r.window, r.hello))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("attacker: %v\n%s", err, out)
	}
	report = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	fmt.Sscanf(report, "%d", &flights)
	return report, flights
}

// TestAdmissionFloodAttacker is TestAdmissionFloodLong's attacker, run in
// a process of its own: it replays a ClientHello from sources at an
// address for a window, and prints what it got.
func TestAdmissionFloodAttacker(t *testing.T) {
	spec := os.Getenv("JOBFABRIC_API_FLOOD_ATTACK")
	if spec == "" {
		t.Skip("run by TestAdmissionFloodLong")
	}
	f := strings.Split(spec, "|")
	sources, _ := strconv.Atoi(f[1])
	window, _ := time.ParseDuration(f[2])
	hello, err := os.ReadFile(f[3])
	if err != nil {
		t.Fatal(err)
	}
	var served, refusedN atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	for k := range 8 {
		src := fmt.Sprintf("127.0.2.%d", k%sources+1)
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				if sources > 8 {
					src = fmt.Sprintf("127.0.2.%d", (k+8*n)%sources+1)
				}
				if replayHello(ctx, src, f[0], hello) {
					served.Add(1)
				} else {
					refusedN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("%d server flights (signatures), %d connections refused\n", served.Load(), refusedN.Load())
}

func withRate(r float64) server.Admission {
	a := server.DefaultAdmission()
	a.HandshakeRate, a.HandshakeBurst = r, 1000
	return a
}

// clientHello records the first flight of a Go TLS client.
func clientHello(t *testing.T) []byte {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"}).Handshake()
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// replayHello sends hello from src and reads the server's answer: the
// server has then done its key exchange and signed. It reports whether the
// server answered with its flight (false: the connection was refused, or
// the ClientHello answered with an alert).
func replayHello(ctx context.Context, src, addr string, hello []byte) bool {
	c, err := from(src).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	// A reset: thousands of closes a second must not leave the attacker's
	// ports in TIME_WAIT.
	defer func() { c.(*net.TCPConn).SetLinger(0); c.Close() }()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(hello); err != nil {
		return false
	}
	n, _ := io.ReadAtLeast(c, make([]byte, 16<<10), 100)
	return n >= 100 // an alert is 7 bytes; a flight carries the certificate
}
