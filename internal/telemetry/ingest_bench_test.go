package telemetry

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/jobfabric/jobfabric/internal/tstime"
)

// The scale: 256 leaves x 64 ports x 20 series, each leaf one
// exposition a second.
const (
	benchLeaves = 256
	benchPorts  = 64
)

// benchLeaf renders one leaf's exposition as vinted/sonic-exporter writes
// it (17 series per port) plus 3 PFC series of a custom rule: 20 a port.
func benchLeaf(round int) []byte {
	var b bytes.Buffer
	v := func(i int) string { return strconv.Itoa(1_000_000 + round*1000 + i) }
	b.WriteString("# TYPE sonic_interface_receive_bytes counter\n")
	for p := 0; p < benchPorts; p++ {
		fmt.Fprintf(&b, "sonic_interface_receive_bytes{device=\"Ethernet%d\"} %s\n", p*4, v(p))
	}
	b.WriteString("# TYPE sonic_interface_transmit_bytes counter\n")
	for p := 0; p < benchPorts; p++ {
		fmt.Fprintf(&b, "sonic_interface_transmit_bytes{device=\"Ethernet%d\"} %s\n", p*4, v(p))
	}
	b.WriteString("# TYPE sonic_interface_receive_errs counter\n")
	for p := 0; p < benchPorts; p++ {
		for _, t := range []string{"error", "discard", "drop", "pause"} {
			fmt.Fprintf(&b, "sonic_interface_receive_errs{device=\"Ethernet%d\",type=%q} %s\n", p*4, t, v(p))
		}
	}
	b.WriteString("# TYPE sonic_interface_transmit_errs counter\n")
	for p := 0; p < benchPorts; p++ {
		for _, t := range []string{"error", "discard", "pause"} {
			fmt.Fprintf(&b, "sonic_interface_transmit_errs{device=\"Ethernet%d\",type=%q} %s\n", p*4, t, v(p))
		}
	}
	b.WriteString("# TYPE sonic_queue_dropped_packets_total counter\n")
	for p := 0; p < benchPorts; p++ {
		for q := 0; q < 8; q++ {
			fmt.Fprintf(&b, "sonic_queue_dropped_packets_total{device=\"Ethernet%d\",queue=\"%d\"} %s\n", p*4, q, v(q))
		}
	}
	b.WriteString("# TYPE leaf_pfc_packets_total counter\n")
	for p := 0; p < benchPorts; p++ {
		for _, d := range []struct{ dir, prio string }{{"rx", "3"}, {"tx", "3"}, {"rx", "4"}} {
			fmt.Fprintf(&b, "leaf_pfc_packets_total{device=\"Ethernet%d\",dir=%q,priority=%q} %s\n", p*4, d.dir, d.prio, v(p))
		}
	}
	return b.Bytes()
}

const benchConfig = `
rules:
  leaf-pfc:
  - {metric: leaf_pfc_packets_total, signal: pfc_pause_rx, type: counter, kind: port, port_label: device, priority_label: priority, match: {dir: rx}}
  - {metric: leaf_pfc_packets_total, signal: pfc_pause_tx, type: counter, kind: port, port_label: device, priority_label: priority, match: {dir: tx}}
push: [{name: leaves, rules: [sonic-exporter, leaf-pfc]}]
`

// BenchmarkIngest: one op is a full round, every leaf's exposition parsed
// with expfmt, mapped and stored, leaves in parallel over GOMAXPROCS
// workers (as Run's per-target loops are). It reports samples/s and,
// after the rounds, the Go heap in use and the process RSS.
func BenchmarkIngest(b *testing.B) {
	b.Run("format=text", func(b *testing.B) { benchIngest(b, false) })
	b.Run("format=protobuf", func(b *testing.B) { benchIngest(b, true) })
}

// protoOf re-encodes an exposition as delimited protobuf, as an exporter
// answers a scrape that asks for it.
func protoOf(b testing.TB, text []byte) []byte {
	fams, err := decode(bytes.NewReader(text), "")
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	enc := expfmt.NewEncoder(&out, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range fams {
		if err := enc.Encode(mf); err != nil {
			b.Fatal(err)
		}
	}
	return out.Bytes()
}

func benchIngest(b *testing.B, proto bool) {
	ctype := "text/plain; version=0.0.4"
	if proto {
		ctype = string(expfmt.NewFormat(expfmt.TypeProtoDelim))
	}
	bodies := [2][][]byte{}
	for r := range bodies {
		body := benchLeaf(r)
		if proto {
			body = protoOf(b, body)
		}
		for l := 0; l < benchLeaves; l++ {
			bodies[r] = append(bodies[r], body)
		}
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	clk := tstime.NewFake(t0)
	s, err := NewStore(mustConfig(b, benchConfig), clk, nil)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, benchLeaves)
	for l := range names {
		names[l] = fmt.Sprintf("leaf%03d", l)
	}
	round := func(r int) int {
		var total int64
		var mu sync.Mutex
		next := make(chan int, benchLeaves)
		for l := 0; l < benchLeaves; l++ {
			next <- l
		}
		close(next)
		var wg sync.WaitGroup
		for w := 0; w < runtime.GOMAXPROCS(0); w++ {
			wg.Go(func() {
				n := 0
				for l := range next {
					res, err := s.PushWith("leaves", PushOptions{Device: names[l]}, bytes.NewReader(bodies[r%2][l]), ctype)
					if err != nil || res.Dropped+res.Ignored != 0 {
						panic(fmt.Sprintf("leaf %d: %+v %v", l, res, err))
					}
					n += res.Accepted
				}
				mu.Lock()
				total += int64(n)
				mu.Unlock()
			})
		}
		wg.Wait()
		clk.Advance(time.Second)
		return int(total)
	}
	want := benchLeaves * benchPorts * 20
	if n := round(0); n != want { // the series exist before timing: steady state
		b.Fatalf("a round accepted %d samples, want %d", n, want)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(i + 1)
	}
	b.StopTimer()
	// CPU seconds the process spent per round (GC included): at one round
	// a second, the share of a core the ingest takes.
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/round")
	}
	b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/round")
	if st := s.Stats(); st.Series != want {
		b.Fatalf("%d series held, want %d", st.Series, want)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	// The store's share: the heap beyond the expositions held for the
	// benchmark.
	b.ReportMetric(float64(ms.HeapInuse-before.HeapInuse)/(1<<20), "store-MB")
	if rss := rssMB(); rss > 0 {
		b.ReportMetric(rss, "rss-MB")
	}
	runtime.KeepAlive(s)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssMB is the process's resident set (Linux), 0 elsewhere.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
