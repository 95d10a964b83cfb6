package bench

import (
	"math"
	"slices"

	"github.com/jobfabric/jobfabric/internal/sim"
)

// FabricScaleSVG plots how the fabric benchmark's figures grow with the
// cluster (docs/bench/fabric-scale.svg): one point per result, by GPUs.
// Full compile, verify and a fabric-loop revision in seconds, peak RSS in
// GiB, one incremental job start in milliseconds, on one axis: each is
// read against its own target (5 s, 4 GiB, 10 ms).
func FabricScaleSVG(results []FabricResult) string {
	rs := slices.Clone(results)
	slices.SortFunc(rs, func(a, b FabricResult) int { return a.GPUs - b.GPUs })
	series := []sim.Series{
		{Name: "full compile (s)"}, {Name: "verify (s)"}, {Name: "loop revision (s)"},
		{Name: "peak RSS (GiB)"}, {Name: "job start (ms)"}, {Name: "job start p90 (ms)"},
	}
	for _, r := range rs {
		x := float64(r.GPUs) / 1000
		loop := math.NaN()
		if r.Loop != nil {
			loop = r.Loop.TotalMs.Median / 1000
		}
		for i, y := range []float64{r.CompileMs.Median / 1000, r.VerifyMs.Median / 1000, loop, r.PeakRSSMiB / 1024, r.StartMs.Median, r.StartP90Ms} {
			series[i].X = append(series[i].X, x)
			series[i].Y = append(series[i].Y, y)
		}
	}
	return sim.LineChart("bench fabric: three-tier, 5,000 tenants, VRFs where used (medians)", "GPUs (thousands)", "s, GiB or ms (see legend)", series, 0, math.NaN())
}
