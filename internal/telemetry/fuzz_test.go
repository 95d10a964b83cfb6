package telemetry

import (
	"bytes"
	"math"
	"os"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

// FuzzPush: whatever a pusher sends, Push returns (an error or a count),
// never holds more series than the limit, and every reading it keeps is on
// a device and port with a finite, non-negative rate.
func FuzzPush(f *testing.F) {
	// The recorded node_exporter's network series (the whole recording,
	// 64 KB, slows coverage-guided mutation to a crawl).
	if b, err := os.ReadFile("testdata/node_exporter_1.5.0.prom"); err == nil {
		var seed []byte
		for _, l := range bytes.SplitAfter(b, []byte("\n")) {
			if bytes.Contains(l, []byte("node_network_up")) || bytes.Contains(l, []byte("node_network_carrier")) {
				seed = append(seed, l...)
			}
		}
		f.Add(seed, "text/plain; version=0.0.4", 0)
	}
	f.Add([]byte(dcgmText), "", 1)
	f.Add([]byte("sonic_interface_receive_errs{device=\"Ethernet0\",type=\"pause\"} 5\n"), "text/plain", 2)
	f.Add([]byte("# TYPE x counter\nx_total 1\n# EOF\n"), "application/openmetrics-text; version=1.0.0", 0)
	f.Add([]byte("node_network_receive_drop_total{device=\"eth0\"} NaN\nnode_network_receive_drop_total{device=\"eth1\"} +Inf\n"), "", 0)
	cfg, err := ParseConfig([]byte(`
limits: {max_series: 64, window_samples: 3}
push:
- {name: node, device: h, rules: node-exporter}
- {name: dcgm, rules: dcgm-exporter}
- {name: leaf, device: leaf1, rules: sonic-exporter}
`))
	if err != nil {
		f.Fatal(err)
	}
	sources := []string{"node", "dcgm", "leaf"}
	f.Fuzz(func(t *testing.T, body []byte, contentType string, src int) {
		clk := tstime.NewFake(t0)
		s, err := NewStore(cfg, clk, nil)
		if err != nil {
			t.Fatal(err)
		}
		source := sources[(src%len(sources)+len(sources))%len(sources)]
		for i := 0; i < 2; i++ {
			res, err := s.PushWith(source, PushOptions{Device: "dev"}, bytes.NewReader(body), contentType)
			if err != nil {
				return
			}
			if res.Accepted < 0 || res.Accepted > 64 {
				t.Fatalf("accepted %d with a limit of 64 series", res.Accepted)
			}
			clk.Advance(time.Second)
		}
		if st := s.Stats(); st.Series > 64 {
			t.Fatalf("%d series held, limit 64", st.Series)
		}
		for _, r := range s.All() {
			if r.Key.Device == "" || r.Key.Port == "" {
				t.Fatalf("reading without an entity: %+v", r)
			}
			if math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0) || r.Rate < 0 || math.IsNaN(r.Value) {
				t.Fatalf("rate %v: %+v", r.Rate, r)
			}
		}
	})
}
