package lab_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/lab"
)

// exporter is Debian's prometheus-node-exporter running inside one
// switch's namespace, and a relay that makes it reachable from the test's
// namespace: the lab has no management network (nothing routes out of
// it), so the relay stands in for one. The exporter reads the switch
// namespace's own interface counters (netdev, and netclass through the
// /sys that `ip netns exec` mounts for it).
type exporter struct {
	device string
	url    string // the relay's /metrics
	cmd    *exec.Cmd
	ln     net.Listener
	wg     sync.WaitGroup
}

// exporterPort is where every exporter listens inside its own namespace.
const exporterPort = "127.0.0.1:9100"

// startExporter starts node_exporter in dev's namespace, or skips the
// test where the binary is missing.
func startExporter(t *testing.T, ctx context.Context, dev *lab.Device) *exporter {
	t.Helper()
	bin, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if bin, err = exec.LookPath("node_exporter"); err != nil {
			t.Skip("skipping: Debian's prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter)")
		}
	}
	x := &exporter{device: dev.Name}
	x.cmd = exec.CommandContext(ctx, "ip", "netns", "exec", dev.Netns, bin,
		"--collector.disable-defaults", "--collector.netdev", "--collector.netclass",
		"--web.listen-address="+exporterPort)
	if err := x.cmd.Start(); err != nil {
		t.Fatalf("start node_exporter in %s: %v", dev.Netns, err)
	}
	if x.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	x.url = "http://" + x.ln.Addr().String() + "/metrics"
	x.wg.Add(1)
	go func() { defer x.wg.Done(); x.relay(dev.Netns) }()
	t.Cleanup(x.stop)
	// Wait until it answers through the relay.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(x.url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter in %s does not answer through the relay: %v", dev.Netns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relay accepts on the test's side and dials the exporter from inside the
// switch's namespace (lab.InNetns: the socket stays there).
func (x *exporter) relay(netns string) {
	for {
		c, err := x.ln.Accept()
		if err != nil {
			return
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			defer c.Close()
			var up net.Conn
			if err := lab.InNetns(netns, func() error {
				var err error
				up, err = net.DialTimeout("tcp", exporterPort, 2*time.Second)
				return err
			}); err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); done <- struct{}{} }()
			go func() { io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

func (x *exporter) stop() {
	x.ln.Close()
	if x.cmd.Process != nil {
		x.cmd.Process.Kill()
		x.cmd.Wait()
	}
	x.wg.Wait()
}

// String names the exporter for logs.
func (x *exporter) String() string { return fmt.Sprintf("node_exporter of %s at %s", x.device, x.url) }
