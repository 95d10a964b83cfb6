package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func mustConfig(t testing.TB, y string) Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newTestStore(t testing.TB, y string) (*Store, *tstime.Fake) {
	t.Helper()
	clk := tstime.NewFake(t0)
	s, err := NewStore(mustConfig(t, y), clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func push(t testing.TB, s *Store, source, body string) IngestResult {
	t.Helper()
	r, err := s.PushWith(source, PushOptions{}, strings.NewReader(body), "text/plain; version=0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(rs []Reading, sig Signal, metric string) *Reading {
	for i := range rs {
		if rs[i].Signal == sig && (metric == "" || rs[i].Metric == metric) {
			return &rs[i]
		}
	}
	return nil
}

// The recorded output of Debian's node_exporter maps to the server's NICs
// by the built-in rules, in text and in protobuf alike.
func TestNodeExporterRecorded(t *testing.T) {
	s, clk := newTestStore(t, "push: [{name: node, device: gpu-a1, rules: node-exporter}]")
	for _, f := range []struct{ file, ct string }{
		{"testdata/node_exporter_1.5.0.prom", "text/plain; version=0.0.4; charset=utf-8"},
		{"testdata/node_exporter_1.5.0.pb", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"},
	} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.PushWith("node", PushOptions{}, bytes.NewReader(b), f.ct)
		if err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		// lo, eth0, ifb0, ifb1: bytes, drops, errs x2 directions, carrier
		// changes, up; carrier where the kernel has it (eth0, lo).
		if r.Accepted != 28 || r.Ignored < 300 || r.Dropped != 0 {
			t.Errorf("%s: %+v: want 28 mapped, the rest ignored", f.file, r)
		}
		clk.Advance(time.Second)
	}
	eth0 := s.Readings(Key{Kind: KindNIC, Device: "gpu-a1", Port: "eth0"})
	flaps := find(eth0, LinkFlaps, "node_network_carrier_changes_total")
	if flaps == nil || flaps.Value != 2 || !flaps.Counter || flaps.Rate != 0 {
		t.Errorf("eth0 link flaps: %+v, want value 2 (recorded), rate 0", flaps)
	}
	if up := find(eth0, LinkDown, "node_network_up"); up == nil || up.Value != 0 || up.Counter {
		t.Errorf("eth0 link_down from node_network_up=1: %+v, want 0", up)
	}
	// Two recordings a moment apart: no counter went backwards.
	for _, r := range s.All() {
		if r.Stale || r.Rate < 0 {
			t.Errorf("%+v: want fresh, rate >= 0", r)
		}
	}
	ifb0 := s.Readings(Key{Kind: KindNIC, Device: "gpu-a1", Port: "ifb0"})
	if down := find(ifb0, LinkDown, "node_network_up"); down == nil || down.Value != 1 {
		t.Errorf("ifb0 (down in the recording): %+v, want link_down 1", down)
	}
	for _, r := range s.All() {
		if r.Key.Kind != KindNIC || r.Key.Device != "gpu-a1" || r.Target != "push:node" {
			t.Errorf("unexpected reading %+v", r)
		}
	}
}

// sonicExposition renders the exporter's fixture COUNTERS_DB as
// vinted/sonic-exporter's interface and queue collectors do.
func sonicExposition(t testing.TB, scale float64) string {
	b, err := os.ReadFile("testdata/sonic-exporter_counters_db_vinted.json")
	if err != nil {
		t.Fatal(err)
	}
	var db struct {
		Data map[string]map[string]string `json:"data"`
	}
	if err := json.Unmarshal(b, &db); err != nil {
		t.Fatal(err)
	}
	var w strings.Builder
	num := func(s string) (float64, bool) {
		var v float64
		_, err := fmt.Sscan(s, &v)
		return v * scale, err == nil
	}
	ports := db.Data["COUNTERS_PORT_NAME_MAP"]
	names := make([]string, 0, len(ports))
	for p := range ports {
		names = append(names, p)
	}
	sort.Strings(names)
	errTypes := []struct{ metric, typ, key string }{
		{"receive_errs", "error", "SAI_PORT_STAT_IF_IN_ERRORS"},
		{"receive_errs", "discard", "SAI_PORT_STAT_IF_IN_DISCARDS"},
		{"receive_errs", "drop", "SAI_PORT_STAT_IN_DROPPED_PKTS"},
		{"receive_errs", "pause", "SAI_PORT_STAT_PAUSE_RX_PKTS"},
		{"transmit_errs", "error", "SAI_PORT_STAT_IF_OUT_ERRORS"},
		{"transmit_errs", "discard", "SAI_PORT_STAT_IF_OUT_DISCARDS"},
		{"transmit_errs", "pause", "SAI_PORT_STAT_PAUSE_TX_PKTS"},
	}
	w.WriteString("# TYPE sonic_interface_receive_bytes counter\n# TYPE sonic_interface_transmit_bytes counter\n")
	w.WriteString("# TYPE sonic_interface_receive_errs counter\n# TYPE sonic_interface_transmit_errs counter\n")
	for _, p := range names {
		c := db.Data["COUNTERS:"+ports[p]]
		if v, ok := num(c["SAI_PORT_STAT_IF_IN_OCTETS"]); ok {
			fmt.Fprintf(&w, "sonic_interface_receive_bytes{device=%q} %g\n", p, v)
		}
		if v, ok := num(c["SAI_PORT_STAT_IF_OUT_OCTETS"]); ok {
			fmt.Fprintf(&w, "sonic_interface_transmit_bytes{device=%q} %g\n", p, v)
		}
		for _, e := range errTypes {
			if v, ok := num(c[e.key]); ok { // "" in the fixture: no series
				fmt.Fprintf(&w, "sonic_interface_%s{device=%q,type=%q} %g\n", e.metric, p, e.typ, v)
			}
		}
	}
	w.WriteString("# TYPE sonic_queue_dropped_packets_total counter\n")
	for q, oid := range db.Data["COUNTERS_QUEUE_NAME_MAP"] {
		port, num2, _ := strings.Cut(q, ":")
		if v, ok := num(db.Data["COUNTERS:"+oid]["SAI_QUEUE_STAT_DROPPED_PACKETS"]); ok {
			fmt.Fprintf(&w, "sonic_queue_dropped_packets_total{device=%q,queue=%q} %g\n", port, num2, v)
		}
	}
	return w.String()
}

func TestSonicExporterGenerated(t *testing.T) {
	s, clk := newTestStore(t, "push: [{name: leaf1, device: leaf1, rules: sonic-exporter}]")
	push(t, s, "leaf1", sonicExposition(t, 1))
	clk.Advance(10 * time.Second)
	r := push(t, s, "leaf1", sonicExposition(t, 2)) // every counter doubled in 10 s
	if r.Ignored != 0 || r.Dropped != 0 {
		t.Errorf("%+v: every series the exporter writes should map", r)
	}
	e0 := s.Readings(Key{Kind: KindPort, Device: "leaf1", Port: "Ethernet0"})
	pause := find(e0, PFCPauseRx, "")
	if pause == nil || pause.Value != 2 || pause.Rate != 0.1 || pause.Priority != -1 {
		t.Errorf("Ethernet0 pause rx: %+v, want 1 -> 2 in 10s (0.1/s), no priority", pause)
	}
	if p := find(e0, PFCPauseTx, ""); p == nil || p.Value != 4 {
		t.Errorf("Ethernet0 pause tx: %+v, want 4", p)
	}
	var drops []Reading
	for _, x := range e0 {
		if x.Signal == Drops {
			drops = append(drops, x)
		}
	}
	// rx discard 3, rx drop 2, tx discard 612, tx error 5, queue 0 and 1.
	if len(drops) != 6 {
		t.Errorf("Ethernet0 drops: %d readings %+v, want 6", len(drops), drops)
	}
	var q0 *Reading
	for i := range drops {
		if drops[i].Metric == "sonic_queue_dropped_packets_total" && drops[i].Priority == 0 {
			q0 = &drops[i]
		}
	}
	if q0 == nil || q0.Value != 46 || q0.Rate != 2.3 {
		t.Errorf("queue 0 drops: %+v, want value 46, rate 2.3/s", q0)
	}
	if crc := find(e0, CRCErrors, ""); crc != nil {
		t.Errorf("IF_IN_ERRORS is empty in the fixture, yet %+v", crc)
	}
	if got := s.Readings(Key{Kind: KindPort, Device: "leaf1", Port: "Ethernet1"}); len(got) != 2 {
		t.Errorf("Ethernet1 (queues 13, 15 only): %+v", got)
	}
}

const dcgmText = `# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-a1"} 79
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbb",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-a1"} 0
# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-aaa",device="nvidia0",Hostname="gpu-a1"} %d
# TYPE DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL counter
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{gpu="0",UUID="GPU-aaa",device="nvidia0",Hostname="gpu-a1"} 0
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="1",UUID="GPU-bbb",device="nvidia1",Hostname="gpu-a1"} 3
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0",UUID="GPU-aaa",device="nvidia0",Hostname="gpu-a1"} 64
# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="1",UUID="GPU-bbb",device="nvidia1"} 4
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaa",device="nvidia0",Hostname="gpu-a1"} 61
`

func TestDCGMExporterGenerated(t *testing.T) {
	s, clk := newTestStore(t, "push: [{name: dcgm, device: gpu-host, rules: dcgm-exporter}]")
	push(t, s, "dcgm", fmt.Sprintf(dcgmText, 10))
	clk.Advance(2 * time.Second)
	r := push(t, s, "dcgm", fmt.Sprintf(dcgmText, 30))
	if r.Accepted != 7 || r.Ignored != 1 {
		t.Errorf("%+v: want 7 mapped, GPU_TEMP ignored", r)
	}
	a := s.Readings(Key{Kind: KindGPU, Device: "gpu-a1", Port: "GPU-aaa"})
	if x := find(a, GPUXid, ""); x == nil || x.Value != 79 || x.Counter {
		t.Errorf("GPU-aaa xid: %+v, want gauge 79", x)
	}
	if x := find(a, GPUNVLinkErr, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"); x == nil || x.Rate != 10 {
		t.Errorf("GPU-aaa NVLink CRC: %+v, want 10/s", x)
	}
	if x := find(a, GPUThrottle, ""); x == nil || x.Value != 64 {
		t.Errorf("GPU-aaa throttle (CLOCK_THROTTLE_REASONS): %+v", x)
	}
	b := s.Readings(Key{Kind: KindGPU, Device: "gpu-a1", Port: "GPU-bbb"})
	if x := find(b, GPUECCErr, ""); x == nil || x.Value != 3 {
		t.Errorf("GPU-bbb ECC DBE: %+v", x)
	}
	// No Hostname label: the push source's device.
	if x := find(s.Readings(Key{Kind: KindGPU, Device: "gpu-host", Port: "GPU-bbb"}), GPUThrottle, ""); x == nil || x.Value != 4 {
		t.Errorf("GPU-bbb CLOCKS_EVENT_REASONS without Hostname: %+v", x)
	}
}

// A counter that goes down was reset: the new value is the increase, not
// a negative rate nor a jump by the old total.
func TestCounterResetIsNotASpike(t *testing.T) {
	s, clk := newTestStore(t, "push: [{name: n, device: h, rules: node-exporter}]\nlimits: {window_samples: 5}")
	for _, v := range []float64{1e12, 1e12 + 100, 1e12 + 200, 5, 105} {
		push(t, s, "n", fmt.Sprintf("node_network_receive_drop_total{device=\"eth0\"} %g\n", v))
		clk.Advance(time.Second)
	}
	r := find(s.Readings(Key{Kind: KindNIC, Device: "h", Port: "eth0"}), Drops, "")
	// 100 + 100 + 5 (after the reset) + 100 over 4 s.
	if r == nil || r.Rate != 76.25 || r.Value != 105 {
		t.Fatalf("after a reset: %+v, want rate 76.25/s, value 105", r)
	}
	// Once the window holds only post-reset samples the rate is exact.
	for _, v := range []float64{205, 305, 405, 505} {
		push(t, s, "n", fmt.Sprintf("node_network_receive_drop_total{device=\"eth0\"} %g\n", v))
		clk.Advance(time.Second)
	}
	if r := find(s.Readings(Key{Kind: KindNIC, Device: "h", Port: "eth0"}), Drops, ""); r.Rate != 100 {
		t.Errorf("steady after reset: %+v, want 100/s", r)
	}
}

// A series a successful answer lacks is stale at once and gone after a
// window of answers without it; the others are not touched.
func TestMissingSeries(t *testing.T) {
	s, clk := newTestStore(t, "push: [{name: n, device: h, rules: node-exporter}]\nlimits: {window_samples: 3}")
	both := "node_network_receive_drop_total{device=\"eth0\"} 1\nnode_network_receive_drop_total{device=\"eth1\"} 1\n"
	one := "node_network_receive_drop_total{device=\"eth0\"} 2\n"
	push(t, s, "n", both)
	clk.Advance(time.Second)
	push(t, s, "n", one)
	eth1 := Key{Kind: KindNIC, Device: "h", Port: "eth1"}
	if r := s.Readings(eth1); len(r) != 1 || !r[0].Stale {
		t.Fatalf("eth1 missing from one answer: %+v, want stale", r)
	}
	if r := s.Readings(Key{Kind: KindNIC, Device: "h", Port: "eth0"}); len(r) != 1 || r[0].Stale {
		t.Fatalf("eth0 present: %+v, want fresh", r)
	}
	push(t, s, "n", one)
	if len(s.Readings(eth1)) != 1 {
		t.Fatal("eth1 dropped before a window of answers without it")
	}
	push(t, s, "n", one)
	if r := s.Readings(eth1); len(r) != 0 {
		t.Fatalf("eth1 after 3 answers without it: %+v, want dropped", r)
	}
	if st := s.Stats(); st.Series != 1 {
		t.Errorf("series held: %d, want 1", st.Series)
	}
	// It may come back.
	push(t, s, "n", both)
	if r := s.Readings(eth1); len(r) != 1 || r[0].Stale {
		t.Errorf("eth1 back: %+v", r)
	}
}

// logSink collects the store's log lines (written under its lock).
type logSink struct {
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) { return l.buf.Write(p) }

func TestCardinalityLimitDropsAndLogs(t *testing.T) {
	var sink logSink
	clk := tstime.NewFake(t0)
	cfg := mustConfig(t, "push: [{name: n, device: h, rules: node-exporter}]\nlimits: {max_series: 3}")
	s, err := NewStore(cfg, clk, slog.New(slog.NewTextHandler(&sink, nil)))
	if err != nil {
		t.Fatal(err)
	}
	body := func(ports ...string) string {
		var b strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&b, "node_network_receive_drop_total{device=%q} 1\n", p)
		}
		return b.String()
	}
	r := push(t, s, "n", body("eth0", "eth1", "eth2", "eth3", "eth4"))
	if r.Accepted != 3 || r.Dropped != 2 {
		t.Fatalf("%+v: want 3 accepted, 2 dropped", r)
	}
	if st := s.Stats(); st.Series != 3 || st.Dropped != 2 {
		t.Errorf("stats %+v", st)
	}
	log := sink.buf.String()
	if strings.Count(log, "series dropped") != 1 || !strings.Contains(log, "node_network_receive_drop_total") ||
		!strings.Contains(log, "cardinality limit") || !strings.Contains(log, "device=eth3") {
		t.Errorf("log: want one line naming the metric, the series and the limit:\n%s", log)
	}
	// Held series keep updating; the log stays quiet within the minute.
	clk.Advance(10 * time.Second)
	r = push(t, s, "n", body("eth0", "eth1", "eth2", "eth5"))
	if r.Accepted != 3 || r.Dropped != 1 || strings.Count(sink.buf.String(), "series dropped") != 1 {
		t.Errorf("%+v; log:\n%s", r, sink.buf.String())
	}
	clk.Advance(time.Minute)
	push(t, s, "n", body("eth0", "eth1", "eth2", "eth6"))
	if log := sink.buf.String(); strings.Count(log, "series dropped") != 2 || !strings.Contains(log, "unlogged_since_last_line=2") {
		t.Errorf("a minute later, one more line counting what it did not log:\n%s", log)
	}
}

// waitChanged waits for the store's next ingest or failure.
func waitChanged(t *testing.T, s *Store) {
	t.Helper()
	select {
	case <-s.Changed():
	case <-time.After(10 * time.Second): // a guard, not a wait: the scrape is local
		t.Fatal("no scrape within 10s")
	}
}

// A real scrape over HTTP on the fake clock: protobuf negotiated, rates
// over the store's time, a stale target when it stops answering, and a
// timeout on the store's clock.
func TestScrapeOverHTTP(t *testing.T) {
	var drops atomic.Int64
	var fail, hang atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if hang.Load() {
			<-r.Context().Done()
			return
		}
		if fail.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "encoding=delimited") {
			http.Error(w, "expected a protobuf Accept", http.StatusNotAcceptable)
			return
		}
		fmt.Fprintf(w, "node_network_receive_drop_total{device=\"eth0\"} %d\n", drops.Load())
	}))
	defer srv.Close()
	tok := t.TempDir() + "/token"
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	s, clk := newTestStore(t, fmt.Sprintf(`
targets:
- {name: h1, url: %q, interval: 5s, timeout: 2s, device: gpu-a1, rules: node-exporter, bearer_token_file: %q}
`, srv.URL+"/metrics", tok))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	key := Key{Kind: KindNIC, Device: "gpu-a1", Port: "eth0"}
	waitChanged(t, s)
	for i := 1; i <= 2; i++ {
		drops.Store(int64(i) * 50)
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(5 * time.Second)
		waitChanged(t, s)
	}
	r := s.Readings(key)
	if len(r) != 1 || r[0].Rate != 10 || r[0].Stale || r[0].Target != "h1" {
		t.Fatalf("after three scrapes 5s apart (0, 50, 100): %+v, want 10/s fresh", r)
	}

	// It stops answering: stale once 3 intervals (the default bound) pass.
	fail.Store(true)
	for i := 0; i < 3; i++ {
		clk.BlockUntil(ctx, 1)
		clk.Advance(5 * time.Second)
		waitChanged(t, s)
		if i < 2 && s.Readings(key)[0].Stale {
			t.Fatalf("stale after %d failed scrapes, within the bound", i+1)
		}
	}
	clk.Advance(time.Second)
	if r := s.Readings(key); !r[0].Stale || r[0].Rate != 10 {
		t.Errorf("after 16s without an answer: %+v, want stale, last rate kept", r)
	}
	st := s.Stats()
	if len(st.Sources) != 1 || !st.Sources[0].Stale || !strings.Contains(st.Sources[0].Error, "500") {
		t.Errorf("stats %+v", st)
	}

	// A scrape that hangs ends at the timeout, on the store's clock.
	hang.Store(true)
	clk.BlockUntil(ctx, 1)
	clk.Advance(5 * time.Second) // the scrape starts and arms its timeout
	clk.BlockUntil(ctx, 1)
	clk.Advance(2 * time.Second)
	waitChanged(t, s)
	if e := s.Stats().Sources[0].Error; !strings.Contains(e, "timeout (2s)") {
		t.Errorf("hanging target: %q, want a timeout", e)
	}

	// Back: fresh again.
	hang.Store(false)
	fail.Store(false)
	clk.BlockUntil(ctx, 1)
	clk.Advance(5 * time.Second)
	waitChanged(t, s)
	if r := s.Readings(key); r[0].Stale {
		t.Errorf("answering again: %+v, want fresh", r)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown field", "targets: [{name: a, url: 'http://x/m', rules: node-exporter, bogus: 1}]", "field bogus not found"},
		{"bad url", "targets: [{name: a, url: 'ftp://x', rules: node-exporter}]", `targets[0].url: "ftp://x" must be an http or https URL`},
		{"no rules", "targets: [{name: a, url: 'http://x/m'}]", "targets[0].rules: \"\" is required"},
		{"unknown rules", "targets: [{name: a, url: 'http://x/m', rules: junos}]", `targets[0].rules: "junos" names no rule set`},
		{"bad interval", "targets: [{name: a, url: 'http://x/m', rules: dcgm-exporter, interval: 5x}]", `targets[0].interval: "5x" is not a duration`},
		{"timeout above interval", "targets: [{name: a, url: 'http://x/m', rules: dcgm-exporter, interval: 1s, timeout: 2s}]", `targets[0].timeout: "2s" must be positive and at most the interval`},
		{"duplicate name", "targets: [{name: a, url: 'http://x/m', rules: dcgm-exporter}]\npush: [{name: a, rules: dcgm-exporter}]", `push[0].name: "a" is already the name of targets[0]`},
		{"window", "limits: {window_samples: 1}", `limits.window_samples: "1" must be 2 to 1024`},
		{"max series", "limits: {max_series: 0}", `limits.max_series: "0" must be 1`},
		{"bad metric regexp", "rules: {mine: [{metric: 'a(', signal: drops, type: counter, kind: port, port_label: p}]}", `rules.mine[0].metric: "a(" is not a regular expression`},
		{"bad signal", "rules: {mine: [{metric: a, signal: dropz, type: counter, kind: port, port_label: p}]}", `rules.mine[0].signal: "dropz" is not a signal`},
		{"bad type", "rules: {mine: [{metric: a, signal: drops, type: summary, kind: port, port_label: p}]}", `rules.mine[0].type: "summary" must be counter or gauge`},
		{"bad kind", "rules: {mine: [{metric: a, signal: drops, type: counter, kind: switch, port_label: p}]}", `rules.mine[0].kind: "switch" must be port, nic or gpu`},
		{"no port", "rules: {mine: [{metric: a, signal: drops, type: counter, kind: port}]}", `rules.mine[0].port_label: "" is required`},
		{"zero scale", "rules: {mine: [{metric: a, signal: drops, type: counter, kind: port, port_label: p, scale: 0}]}", `rules.mine[0].scale: "0" must be a finite, non-zero number`},
		{"bad match", "rules: {mine: [{metric: a, signal: drops, type: counter, kind: port, port_label: p, match: {q: '['}}]}", `rules.mine[0].match.q: "[" is not a regular expression`},
		{"builtin redefined", "rules: {node-exporter: [{metric: a, signal: drops, type: counter, kind: port, port_label: p}]}", `rules.node-exporter: "node-exporter" is a built-in rule set`},
		{"invert counter", "rules: {mine: [{metric: a, signal: drops, type: counter, kind: port, port_label: p, invert: true}]}", `rules.mine[0].invert: "true" applies to gauges only`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

// A custom rule set: a regexp with a priority group, label matchers, a
// device label and a scale.
func TestCustomRules(t *testing.T) {
	s, clk := newTestStore(t, `
rules:
  eos:
  - {metric: 'eos_pfc_rx_prio(?P<priority>[0-7])_total', signal: pfc_pause_rx, type: counter, kind: port, device_label: switch, port_label: [intf, port]}
  - {metric: eos_optics_rx_mw, signal: optics_rx_dbm, type: gauge, kind: port, port_label: intf, match: {lane: "1"}, scale: 2}
push: [{name: eos, device: leaf9, rules: [eos, sonic-exporter]}]
`)
	push(t, s, "eos", "eos_pfc_rx_prio3_total{switch=\"leaf2\",intf=\"Ethernet1/1\"} 10\neos_optics_rx_mw{intf=\"Ethernet1/1\",lane=\"1\"} 1.5\neos_optics_rx_mw{intf=\"Ethernet1/1\",lane=\"2\"} 9\n")
	clk.Advance(time.Second)
	push(t, s, "eos", "eos_pfc_rx_prio3_total{switch=\"leaf2\",intf=\"Ethernet1/1\"} 30\neos_optics_rx_mw{intf=\"Ethernet1/1\",lane=\"1\"} 1.5\n")
	if r := s.Readings(Key{Kind: KindPort, Device: "leaf2", Port: "Ethernet1/1"}); len(r) != 1 || r[0].Priority != 3 || r[0].Rate != 20 {
		t.Errorf("pfc on leaf2: %+v", r)
	}
	if r := s.Readings(Key{Kind: KindPort, Device: "leaf9", Port: "Ethernet1/1"}); len(r) != 1 || r[0].Value != 3 {
		t.Errorf("optics lane 1 scaled by 2 on leaf9: %+v", r)
	}
}

// A node agent's push speaks for its own server only.
func TestPushPinnedDevice(t *testing.T) {
	s, _ := newTestStore(t, "push: [{name: dcgm, rules: dcgm-exporter}, {name: fixed, device: gpu-b1, rules: dcgm-exporter}]")
	body := "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"gpu-a1\"} 1\nDCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-b\",Hostname=\"gpu-b1\"} 2\nDCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"GPU-c\"} 3\n"
	r, err := s.PushWith("dcgm", PushOptions{Device: "gpu-a1", PinDevice: true}, strings.NewReader(body), "")
	if err != nil || r.Accepted != 2 || r.Dropped != 1 {
		t.Fatalf("%+v %v: want gpu-a1's two GPUs, gpu-b1's refused", r, err)
	}
	if got := s.Readings(Key{Kind: KindGPU, Device: "gpu-b1", Port: "GPU-b"}); len(got) != 0 {
		t.Errorf("another server's GPU written by gpu-a1's agent: %+v", got)
	}
	if _, err := s.PushWith("fixed", PushOptions{Device: "gpu-a1", PinDevice: true}, strings.NewReader(body), ""); err == nil {
		t.Error("gpu-a1's agent pushed to gpu-b1's source")
	}
	if _, err := s.Push("nosuch", strings.NewReader(body), ""); err == nil {
		t.Error("push to an unknown source accepted")
	}
	if _, err := s.Push("dcgm", strings.NewReader("not { exposition"), ""); err == nil {
		t.Error("garbage accepted")
	}
	if _, err := s.Push("dcgm", strings.NewReader(body), "application/json"); err == nil {
		t.Error("JSON content type accepted")
	}
}

func TestBuiltinRuleSets(t *testing.T) {
	want := []string{"dcgm-exporter", "node-exporter", "node-exporter-switch", "sonic-exporter"}
	if got := BuiltinRuleSets(); !slices.Equal(got, want) {
		t.Errorf("%v", got)
	}
	for _, n := range want {
		if _, err := compileRules(n, BuiltinRules(n)); err != nil {
			t.Error(err)
		}
	}
	// node-exporter-switch reads the same series as leaf ports.
	for _, r := range BuiltinRules("node-exporter-switch") {
		if r.Kind != KindPort {
			t.Errorf("node-exporter-switch rule %s reads %s, want port", r.Metric, r.Kind)
		}
	}
	if len(BuiltinRules("node-exporter-switch")) != len(BuiltinRules("node-exporter")) {
		t.Error("node-exporter-switch and node-exporter read different series")
	}
}

func TestChangedCoalesces(t *testing.T) {
	s, _ := newTestStore(t, "push: [{name: n, device: h, rules: node-exporter}]")
	for i := 0; i < 3; i++ {
		push(t, s, "n", "node_network_up{device=\"eth0\"} 1\n")
	}
	<-s.Changed()
	select {
	case <-s.Changed():
		t.Error("three ingests signalled more than once")
	default:
	}
	if r := s.All(); len(r) != 1 || math.IsNaN(r[0].Value) {
		t.Errorf("%+v", r)
	}
}

// OpenMetrics and protobuf bodies are decoded by expfmt as the text is.
func TestPushFormats(t *testing.T) {
	s, _ := newTestStore(t, "push: [{name: n, device: h, rules: node-exporter}]")
	om := "# TYPE node_network_carrier_changes counter\nnode_network_carrier_changes_total{device=\"eth0\"} 4\n# EOF\n"
	r, err := s.PushWith("n", PushOptions{}, strings.NewReader(om), "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if err != nil || r.Accepted != 1 {
		t.Fatalf("OpenMetrics: %+v %v", r, err)
	}
	if x := find(s.Readings(Key{Kind: KindNIC, Device: "h", Port: "eth0"}), LinkFlaps, ""); x == nil || x.Value != 4 {
		t.Errorf("OpenMetrics counter: %+v", x)
	}
	if _, err := s.Push("n", strings.NewReader(om), "application/openmetrics-text; version=9.9.9"); err == nil {
		t.Error("an OpenMetrics version expfmt does not know was accepted")
	}
}

// TestRunClosesItsConnections: a member that stops scraping (it lost
// leadership) keeps no connection to the exporters it scraped; with the
// process-wide default client the idle connection stayed open.
func TestRunClosesItsConnections(t *testing.T) {
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `node_network_receive_drop_total{device="eth0"} 1`)
	}))
	closed := make(chan struct{}, 16)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	s, _ := newTestStore(t, fmt.Sprintf(`
targets:
- {name: h1, url: %q, interval: 5s, timeout: 2s, device: gpu-a1, rules: node-exporter}
`, srv.URL+"/metrics"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	waitChanged(t, s)
	if open.Load() != 1 {
		t.Fatalf("%d connections open while scraping, want 1", open.Load())
	}
	cancel()
	<-done
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a guard: the close is immediate
		t.Fatalf("Run ended with %d connections to the exporter still open", open.Load())
	}
}
