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
	window, err := time.ParseDuration(os.Getenv("JOBFABRIC_API_FLOOD_WINDOW"))
	if err != nil {
		t.Skip("set JOBFABRIC_API_FLOOD_WINDOW (e.g. 20s) to run")
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
		s, err := server.Start(ctx, server.Config{DataDir: fmt.Sprintf("%s/n%d", dir, i), TLSCert: cert, TLSKey: key, TLSCA: ca,
			Logger: quietLogger(), Listen: "127.0.0.1:0", FabricDriver: "none", Admission: ph.limits})
		if err != nil {
			t.Fatal(err)
		}
		admin, err := client.New(s.URL(), s.AdminToken(), tc)
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
				}
			}
		})
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
			// Its own process, niced: an attacker elsewhere does not
			// take the server's CPU for itself; here it gets what the
			// server leaves (its replays are cheap, the server's answers
			// are not).
			args := []string{os.Args[0], "-test.run=^TestAdmissionFloodAttacker$"}
			if nice, err := exec.LookPath("nice"); err == nil {
				args = append([]string{nice, "-n", "19"}, args...)
			}
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(os.Environ(), fmt.Sprintf("JOBFABRIC_API_FLOOD_ATTACK=%s|%d|%s|%s", target, ph.sources, window, hello))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("attacker: %v\n%s", err, out)
			}
			report = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
			var flights int
			fmt.Sscanf(report, "%d", &flights)
			// The bound the limits promise: the burst, then the rate
			// (whichever of the source's and the server's binds first).
			var bound float64
			switch a := ph.limits; {
			case a.HandshakeRate > 0:
				bound = float64(a.HandshakeBurst) + a.HandshakeRate*window.Seconds()
			case a.ConnRate > 0 && ph.sources == 1:
				bound = float64(a.ConnBurst) + a.ConnRate*window.Seconds()
			}
			if bound > 0 && float64(flights) > bound*1.02+2 {
				t.Errorf("%s: the attacker got %d handshakes; the limits allow %.0f", ph.name, flights, bound)
			}
		}
		wg.Wait()
		stop()
		s.Close()
		if failed.Load() > 0 {
			t.Errorf("%s: %d legitimate writes failed", ph.name, failed.Load())
		}
		t.Logf("%-44s %5d writes acknowledged (%d failed) in %v; attacker: %s", ph.name, acked.Load(), failed.Load(), window, report)
	}
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
