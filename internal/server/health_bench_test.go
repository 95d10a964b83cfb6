package server_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// switchExporter is a real HTTP exporter of PFC pause counters for a
// set of switch ports: bump raises one port's counter at once, as a
// switch's would under a pause storm.
type switchExporter struct {
	mu    sync.Mutex
	ports [][2]string
	count map[[2]string]float64
}

func (e *switchExporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# TYPE port_pfc_pause_rx_total counter")
	for _, p := range e.ports {
		fmt.Fprintf(w, "port_pfc_pause_rx_total{switch=%q,port=%q,priority=\"3\"} %g\n", p[0], p[1], e.count[p])
	}
}

func (e *switchExporter) bump(p [2]string, by float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count[p] += by
}

// BenchmarkPathHealthDetection measures the detection latency of issue 16:
// from a counter change at a real HTTP exporter, scraped every second by a
// real server, to the job.path_unhealthy event committed through Raft.
// Each iteration bumps a port of the job's path at a random phase of the
// scrape interval and waits for the event, then for the recovery (the
// window is two samples, so the rate falls back one scrape later).
//
//	go test ./internal/server -run '^$' -bench PathHealthDetection -benchtime 40x -cpu 2
func BenchmarkPathHealthDetection(b *testing.B) {
	exp := &switchExporter{count: map[[2]string]float64{}}
	srv := httptest.NewServer(exp)
	defer srv.Close()
	cfg, err := telemetry.ParseConfig([]byte(fmt.Sprintf(`
rules:
  switch:
  - {metric: port_pfc_pause_rx_total, signal: pfc_pause_rx, type: counter, kind: port, device_label: switch, port_label: port, priority_label: priority}
targets:
- {name: leaves, url: %q, interval: 1s, rules: switch}
limits: {window_samples: 2}
`, srv.URL+"/metrics")))
	if err != nil {
		b.Fatal(err)
	}
	hc := health.DefaultConfig()
	hc.Debounce.Settle = 0 // recoveries at once: the benchmark measures raising
	s, err := startServer(b, server.Config{DataDir: b.TempDir(), Telemetry: cfg, Health: &hc})
	if err != nil {
		b.Fatal(err)
	}
	admin := as(b, s.URL(), s.AdminToken())
	seed(b, admin)
	j, err := admin.SubmitJob(ctxT(b), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	if err != nil {
		b.Fatal(err)
	}
	verdict := func(want domain.PathVerdict) func(*state.FSM) bool {
		return func(f *state.FSM) bool {
			x, _ := f.Job(j.ID)
			return x.PathHealth != nil && x.PathHealth.Verdict == want
		}
	}
	waitB(b, s, 60*time.Second, func(f *state.FSM) bool { x, _ := f.Job(j.ID); return x.State.HoldsGPUs() })
	placed, _ := s.State().Job(j.ID)
	f := s.State().Topology().Topology.Sites[0].Fabrics[0]
	for _, c := range f.Cables {
		if c.Server == placed.Placement[0].Server {
			exp.ports = append(exp.ports, [2]string{c.Leaf, c.Port})
		}
	}
	exp.mu.Lock()
	exp.ports = slices.Clip(exp.ports)
	exp.mu.Unlock()
	waitB(b, s, 60*time.Second, verdict(domain.PathHealthy))

	var lat []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; b.Loop(); i++ {
		// A random phase of the scrape interval.
		<-time.After(time.Duration(rng.Int64N(int64(time.Second))))
		after := lastSeq(s)
		start := time.Now()
		exp.bump(exp.ports[i%len(exp.ports)], 1e6)
		waitB(b, s, 30*time.Second, func(f *state.FSM) bool {
			for _, e := range f.Events(state.EventFilter{AfterSeq: after}) {
				if e.Action == state.EventPathUnhealthy && e.Object == fmt.Sprintf("job/%d", j.ID) {
					return true
				}
			}
			return false
		})
		lat = append(lat, time.Since(start))
		waitB(b, s, 30*time.Second, verdict(domain.PathHealthy))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99+99)/100-1].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.Logf("detection latency over %d changes: p50 %s, p99 %s, max %s", len(lat), lat[len(lat)/2], lat[(len(lat)*99+99)/100-1], lat[len(lat)-1])
}

func lastSeq(s *server.Server) uint64 {
	es := s.State().Events(state.EventFilter{})
	if len(es) == 0 {
		return 0
	}
	return es[len(es)-1].Seq
}

// waitB waits until cond holds, looking again after every apply.
func waitB(b *testing.B, s *server.Server, d time.Duration, cond func(*state.FSM) bool) {
	b.Helper()
	deadline := time.After(d)
	for {
		ch := s.State().Changed()
		if cond(s.State()) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			b.Fatalf("not within %s", d)
		}
	}
}
