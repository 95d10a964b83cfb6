package health

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	dt "github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/telemetry"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// Scale of issue 16: 256 leaves x 64 ports x 20 series. 32 stripes of 8
// rails are 256 leaves; 56 servers and 8 spines use the 64 ports of each.
const (
	benchStripes = 32
	benchServers = 56
	benchSpines  = 8
	benchSeries  = 20
)

// benchWorld fills the cluster with 8-server jobs (64 GPUs) of four
// tenants; every fourth job spans two stripes so uplinks are shared.
func benchWorld(b *testing.B) (*dt.World, readings) {
	w := dt.NewWorld(b, topology.GenerateOptions{Stripes: benchStripes, ServersPerStripe: benchServers, GPUsPerServer: 8, Spines: benchSpines})
	f := &w.Topology.Sites[0].Fabrics[0]
	var servers []string
	for _, s := range f.Servers {
		servers = append(servers, s.Name)
	}
	all := dt.Seq(0, 8)
	n := 0
	for i := 0; i+8 <= len(servers); i += 8 {
		pick := servers[i : i+8]
		if n%4 == 3 && i+benchServers+4 <= len(servers) {
			// Half in this stripe, half in the next: crosses uplinks.
			pick = append(slices.Clone(servers[i:i+4]), servers[i+benchServers:i+benchServers+4]...)
		}
		var pl []domain.Placement
		for _, s := range pick {
			pl = append(pl, dt.On(s, all...))
		}
		w.Running(dt.MakeJob(fmt.Sprintf("t%d/w", n%4), 0).Name(fmt.Sprintf("job%d", n)), pl...)
		n++
	}
	r := readings{}
	sigs := []telemetry.Signal{telemetry.ECNMarked, telemetry.Drops, telemetry.CRCErrors, telemetry.RxBytes}
	add := func(k telemetry.Key, hot bool) {
		for p := 0; p < 8; p++ {
			for _, s := range []telemetry.Signal{telemetry.PFCPauseRx, telemetry.PFCPauseTx} {
				rate := 0.0
				if hot && p == 3 {
					rate = 20000
				}
				r[k] = append(r[k], telemetry.Reading{Key: k, Signal: s, Priority: p, Counter: true, Rate: rate, At: dt.Now})
			}
		}
		for _, s := range sigs {
			rate := 0.0 // quiet: the hot ports are the PFC ones
			if s == telemetry.RxBytes {
				rate = 4e10
			}
			r[k] = append(r[k], telemetry.Reading{Key: k, Signal: s, Priority: -1, Counter: true, Rate: rate, At: dt.Now})
		}
	}
	i := 0
	for _, l := range f.Leaves {
		for p := 1; p <= 64; p++ {
			add(portKey(l.Name, fmt.Sprintf("swp%d", p)), i%97 == 0) // about 1% of ports hot
			i++
		}
	}
	for _, s := range f.Spines {
		for p := 1; p <= len(f.Leaves); p++ {
			add(portKey(s.Name, fmt.Sprintf("swp%d", p)), false)
		}
	}
	return w, r
}

// latencies reports the median and p99 of per-call durations.
func latencies(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	if len(d) == 0 {
		return
	}
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
}

// storeOf loads the readings into a real telemetry.Store, pushed as
// exposition text per switch twice a second apart (rates need two
// samples), so the benchmarks also measure the store's reads.
func storeOf(b *testing.B, r readings) telemetry.Reader {
	cfg, err := telemetry.ParseConfig([]byte(`
rules:
  switch:
  - {metric: pfc_rx, signal: pfc_pause_rx, type: counter, kind: port, port_label: port, priority_label: prio}
  - {metric: pfc_tx, signal: pfc_pause_tx, type: counter, kind: port, port_label: port, priority_label: prio}
  - {metric: ecn, signal: ecn_marked, type: counter, kind: port, port_label: port}
  - {metric: drops, signal: drops, type: counter, kind: port, port_label: port}
  - {metric: crc, signal: crc_errors, type: counter, kind: port, port_label: port}
  - {metric: rx_bytes, signal: rx_bytes, type: counter, kind: port, port_label: port}
push:
- {name: switches, rules: switch, staleness: 1h}
limits: {max_series: 1000000}
`))
	if err != nil {
		b.Fatal(err)
	}
	clock := tstime.NewFake(dt.Now)
	st, err := telemetry.NewStore(cfg, clock, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	names := map[telemetry.Signal]string{telemetry.PFCPauseRx: "pfc_rx", telemetry.PFCPauseTx: "pfc_tx", telemetry.ECNMarked: "ecn",
		telemetry.Drops: "drops", telemetry.CRCErrors: "crc", telemetry.RxBytes: "rx_bytes"}
	byDev := map[string][]telemetry.Reading{}
	for _, rs := range r {
		byDev[rs[0].Key.Device] = append(byDev[rs[0].Key.Device], rs...)
	}
	for round := 0; round < 2; round++ {
		for dev, rs := range byDev {
			var body strings.Builder
			for _, rd := range rs {
				v := float64(round) * rd.Rate
				if rd.Priority >= 0 {
					fmt.Fprintf(&body, "%s{port=%q,prio=\"%d\"} %g\n", names[rd.Signal], rd.Key.Port, rd.Priority, v)
				} else {
					fmt.Fprintf(&body, "%s{port=%q} %g\n", names[rd.Signal], rd.Key.Port, v)
				}
			}
			if _, err := st.PushWith("switches", telemetry.PushOptions{Device: dev}, strings.NewReader(body.String()), "text/plain; version=0.0.4"); err != nil {
				b.Fatal(err)
			}
		}
		clock.Advance(time.Second)
	}
	return st
}

// readers are the two readers the benchmarks run on: the readings as a
// map (the correlator alone) and a real telemetry.Store holding them.
func readers(b *testing.B, r readings) []struct {
	name string
	rd   telemetry.Reader
} {
	st := storeOf(b, r)
	return []struct {
		name string
		rd   telemetry.Reader
	}{{"map", r}, {"store", st}, {"store-copied", copiedReader{st}}}
}

// copiedReader hides the store's Visit: the judge then reads each entity
// through Readings (copied, sorted), as it did before Visit, for the
// comparison in one run.
type copiedReader struct{ telemetry.Reader }

// BenchmarkJobHealth is GET /v1/jobs/{id}/health's work: live (judging
// every hop against the reader) and from the leader's latest Round (what
// the server answers from while telemetry flows).
func BenchmarkJobHealth(b *testing.B) {
	w, r := benchWorld(b)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	ids := ix.Jobs()
	b.Logf("%d leaves, %d ports with %d series, %d jobs", len(w.Topology.Sites[0].Fabrics[0].Leaves), len(r), benchSeries, len(ids))
	sees := func(t, _ string) bool { return t == "t1" }
	for _, rc := range readers(b, r) {
		round := ix.JudgeAll(rc.rd, &th, dt.Now)
		for _, mode := range []string{"live", "round"} {
			b.Run(rc.name+"/"+mode, func(b *testing.B) {
				var d []time.Duration
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					var h api.JobHealth
					var ok bool
					if mode == "live" {
						h, ok = ix.JobHealth(ids[i%len(ids)], rc.rd, &th, sees, dt.Now)
					} else {
						h, ok = round.JobHealth(ids[i%len(ids)], sees)
					}
					d = append(d, time.Since(start))
					if !ok || h.Verdict == domain.PathUnknown {
						b.Fatalf("job health %s %s", h.Verdict, h.Message)
					}
				}
				latencies(b, d)
			})
		}
	}
}

// BenchmarkJudgeAll is the leader loop's work per ingest: every job's
// path judged (each hop once).
func BenchmarkJudgeAll(b *testing.B) {
	w, r := benchWorld(b)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	for _, rc := range readers(b, r) {
		b.Run(rc.name, func(b *testing.B) {
			for b.Loop() {
				ix.JudgeAll(rc.rd, &th, dt.Now)
			}
		})
	}
}

// BenchmarkHotspots is GET /v1/fabric/hotspots' work from the latest
// Round: an admin's ranks every port of the fabric (those no job holds
// are judged then), a tenant's only the ports on its jobs' paths.
func BenchmarkHotspots(b *testing.B) {
	w, r := benchWorld(b)
	ix := Build(world{World: w}, nil)
	th := DefaultThresholds()
	for _, rc := range readers(b, r) {
		round := ix.JudgeAll(rc.rd, &th, dt.Now)
		for _, c := range []struct {
			name   string
			sees   Viewer
			scoped bool
		}{{"admin", All, false}, {"tenant", func(t, _ string) bool { return t == "t1" }, true}} {
			b.Run(rc.name+"/"+c.name, func(b *testing.B) {
				var d []time.Duration
				for b.Loop() {
					start := time.Now()
					h := round.Hotspots(rc.rd, c.sees, c.scoped, 50)
					d = append(d, time.Since(start))
					if len(h.Ports) == 0 {
						b.Fatal("no hotspots")
					}
				}
				latencies(b, d)
			})
		}
	}
}

// BenchmarkBuild is the index's rebuild after a state change: the topology
// lookups and unchanged paths are reused (incremental), or not (full).
func BenchmarkBuild(b *testing.B) {
	w, _ := benchWorld(b)
	prev := Build(world{World: w}, nil)
	b.Run("incremental", func(b *testing.B) {
		for b.Loop() {
			Build(world{World: w}, prev)
		}
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			Build(world{World: w}, nil)
		}
	})
}
