package health

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	dt "github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/telemetry"
	"github.com/jobfabric/jobfabric/internal/topology"
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

func BenchmarkJobHealth(b *testing.B) {
	w, r := benchWorld(b)
	ix := Build(world{w}, nil)
	th := DefaultThresholds()
	ids := ix.Jobs()
	b.Logf("%d leaves, %d ports with %d series, %d jobs", len(w.Topology.Sites[0].Fabrics[0].Leaves), len(r), benchSeries, len(ids))
	sees := func(t, _ string) bool { return t == "t1" }
	var d []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, ok := ix.JobHealth(ids[i%len(ids)], r, &th, sees, dt.Now); !ok {
			b.Fatal("no path")
		}
		d = append(d, time.Since(start))
	}
	latencies(b, d)
}

func BenchmarkHotspots(b *testing.B) {
	w, r := benchWorld(b)
	ix := Build(world{w}, nil)
	th := DefaultThresholds()
	for _, c := range []struct {
		name   string
		sees   Viewer
		scoped bool
	}{{"admin", All, false}, {"tenant", func(t, _ string) bool { return t == "t1" }, true}} {
		b.Run(c.name, func(b *testing.B) {
			var d []time.Duration
			for b.Loop() {
				start := time.Now()
				h := ix.Hotspots(r, &th, c.sees, c.scoped, 50, dt.Now)
				d = append(d, time.Since(start))
				if len(h.Ports) == 0 {
					b.Fatal("no hotspots")
				}
			}
			latencies(b, d)
		})
	}
}

// BenchmarkBuild is the index's rebuild after a state change: the topology
// lookups and unchanged paths are reused (incremental), or not (full).
func BenchmarkBuild(b *testing.B) {
	w, _ := benchWorld(b)
	prev := Build(world{w}, nil)
	b.Run("incremental", func(b *testing.B) {
		for b.Loop() {
			Build(world{w}, prev)
		}
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			Build(world{w}, nil)
		}
	})
}
