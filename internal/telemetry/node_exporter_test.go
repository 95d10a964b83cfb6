package telemetry

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Debian's prometheus-node-exporter, run for real and scraped over HTTP
// on the store's fake clock: this machine's interfaces become NIC
// readings of the target's device, their carrier as the kernel says.
func TestScrapeRealNodeExporter(t *testing.T) {
	bin, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if bin, err = exec.LookPath("node_exporter"); err != nil {
			t.Skip("prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter)")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--web.listen-address="+addr,
		"--collector.disable-defaults", "--collector.netdev", "--collector.netclass")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "Listening on") {
				close(listening)
				once = true
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(20 * time.Second): // a guard: it listens within milliseconds
		t.Fatal("node_exporter did not say it listens")
	}

	s, _ := newTestStore(t, fmt.Sprintf("targets: [{name: this-host, url: 'http://%s/metrics', interval: 1s, device: gpu-a1, rules: node-exporter}]", addr))
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitChanged(t, s)
	st := s.Stats()
	if len(st.Sources) != 1 || st.Sources[0].Error != "" || st.Series == 0 {
		t.Fatalf("after a scrape of node_exporter: %+v", st)
	}
	ifaces, _ := net.Interfaces()
	var found int
	for _, r := range s.All() {
		if r.Key.Kind != KindNIC || r.Key.Device != "gpu-a1" || r.Target != "this-host" || r.Stale {
			t.Errorf("unexpected reading %+v", r)
		}
		for _, i := range ifaces {
			if r.Key.Port == i.Name && r.Signal == LinkDown {
				found++
				if up := i.Flags&net.FlagRunning != 0; up != (r.Value == 0) && r.Metric == "node_network_carrier" {
					t.Errorf("%s: running %v, link_down %v", i.Name, up, r.Value)
				}
			}
		}
	}
	if found == 0 {
		t.Errorf("no link_down reading of this machine's interfaces %v", ifaces)
	}
}
