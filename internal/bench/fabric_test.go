package bench

import (
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric"
)

// TestFabricSmall runs the fabric benchmark on a small cluster so the code
// behind docs/benchmarks.md is exercised by `make test`; it asserts the
// figures are consistent and the compiles correct, never speed.
func TestFabricSmall(t *testing.T) {
	r, err := Fabric(FabricOptions{Stripes: 2, ServersPerStripe: 16, Spines: 2, Tenants: 12, Jobs: 120, Runs: 3, Starts: 9})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaves != 16 || r.Spines != 2 || r.Servers != 32 || r.Tenants != 12 || r.Jobs != 120 || r.Ports != 256 || r.VRFs != 16*12 {
		t.Errorf("sizes %+v", r)
	}
	if !r.VerifyOK || !r.IncrementalOK {
		t.Errorf("verify ok %v, incremental ok %v: want both", r.VerifyOK, r.IncrementalOK)
	}
	for name, s := range map[string]Spread{"compile": r.CompileMs, "verify": r.VerifyMs, "full": r.FullMs, "start": r.StartMs, "stop": r.StopMs} {
		if !(0 < s.Min && s.Min <= s.Median && s.Median <= s.Max) {
			t.Errorf("%s: %+v out of order", name, s)
		}
	}
	if r.Devices < 1 || r.Devices > 8 || r.PeakRSSMiB <= 0 {
		t.Errorf("devices per start %d, RSS %.0f MiB", r.Devices, r.PeakRSSMiB)
	}
	// The fabric loop: 5 starts and their stops, each rendered, verified
	// and deployed; a start changes its server's leaves (and no spine).
	if l := r.Loop; l == nil || l.Revisions != 10 || l.Devices < 1 || l.Devices > 8 || !(0 < l.TotalMs.Min && l.TotalMs.Median <= l.TotalMs.Max) {
		t.Errorf("loop %+v", r.Loop)
	}
	if _, err := Fabric(FabricOptions{Placement: "nowhere"}); domain.CodeOf(err) != domain.CodeInvalidArgument {
		t.Errorf("a bad placement: %v", err)
	}
}

// TestFabricThreeTier runs the benchmark on a small three-tier fabric with
// VRFs where used (per-leaf L3 VLANs follow the jobs to their leaves).
func TestFabricThreeTier(t *testing.T) {
	r, err := Fabric(FabricOptions{Stripes: 2, Pods: 2, SuperSpines: 2, ServersPerStripe: 16, Spines: 2, Tenants: 40, Jobs: 120, Runs: 1, Starts: 9,
		Placement: fabric.VRFsWhereUsed})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaves != 16 || r.Spines != 4 || r.SuperSpines != 2 || !r.VerifyOK || !r.IncrementalOK || r.Loop == nil {
		t.Errorf("%+v", r)
	}
}

// BenchmarkFabric runs the fabric benchmark at issue #4's scale once per
// iteration, for each VRF placement, and reports its medians
// (docs/benchmarks.md):
//
//	go test -run '^$' -bench Fabric -benchtime 1x ./internal/bench/
func BenchmarkFabric(b *testing.B) {
	for _, placement := range []fabric.VRFPlacement{fabric.VRFsOnAllLeaves, fabric.VRFsWhereUsed} {
		b.Run("vrfs="+string(placement), func(b *testing.B) {
			for b.Loop() {
				r, err := Fabric(FabricOptions{Placement: placement})
				if err != nil {
					b.Fatal(err)
				}
				if !r.VerifyOK || !r.IncrementalOK {
					b.Fatalf("verify ok %v, incremental ok %v", r.VerifyOK, r.IncrementalOK)
				}
				b.ReportMetric(r.CompileMs.Median, "compile-ms")
				b.ReportMetric(r.VerifyMs.Median, "verify-ms")
				b.ReportMetric(r.FullMs.Median, "full-ms")
				b.ReportMetric(r.StartMs.Median, "start-ms")
				b.ReportMetric(r.StartP90Ms, "start-p90-ms")
				b.ReportMetric(r.StopMs.Median, "stop-ms")
				b.ReportMetric(float64(r.Devices), "devices/start")
				b.ReportMetric(r.PeakRSSMiB, "rss-MiB")
				b.Logf("%+v", *r)
			}
		})
	}
}

func TestFabricScaleSVG(t *testing.T) {
	small := FabricResult{GPUs: 16384, CompileMs: Spread{Median: 1000}, VerifyMs: Spread{Median: 1500}, StartMs: Spread{Median: 2}, StartP90Ms: 4, PeakRSSMiB: 512}
	big := FabricResult{GPUs: 100352, CompileMs: Spread{Median: 3000}, VerifyMs: Spread{Median: 4000}, StartMs: Spread{Median: 3}, StartP90Ms: 6, PeakRSSMiB: 1024,
		Loop: &LoopResult{TotalMs: Spread{Median: 2500}}}
	svg := FabricScaleSVG([]FabricResult{big, small})
	for _, want := range []string{"<svg", "full compile (s)", "peak RSS (GiB)", "job start (ms)", "GPUs (thousands)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	// The compile line goes from 1 s at 16k GPUs to 3 s at 100k: two
	// points, left to right.
	if strings.Count(svg, "<polyline") != 6 {
		t.Errorf("want 6 lines:\n%s", svg)
	}
}

func TestSchedScaleSVG(t *testing.T) {
	small := SchedResult{GPUs: 16384, CycleCPUP50ms: 10, CycleCPUP99ms: 20, CycleP99ms: 25, PlacementsPerCPUSecond: 40000, PeakRSSMiB: 90}
	big := SchedResult{GPUs: 100000, CycleCPUP50ms: 40, CycleCPUP99ms: 90, CycleP99ms: 110, PlacementsPerCPUSecond: 30000, PeakRSSMiB: 400}
	svg := SchedScaleSVG([]SchedResult{big, small})
	for _, want := range []string{"<svg", "cycle p99, CPU (ms)", "cycle p99, wall (ms)", "placed/CPU s, 1000s", "RSS (10 MiB)", "GPUs (thousands)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	if strings.Count(svg, "<polyline") != 5 {
		t.Errorf("want 5 lines:\n%s", svg)
	}
}
