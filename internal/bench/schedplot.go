package bench

import (
	"math"
	"slices"

	"github.com/jobfabric/jobfabric/internal/sim"
)

// SchedScaleSVG plots how the scheduler benchmark's figures grow with the
// cluster (docs/scale/sched-scale.svg): one point per result, by GPUs. The
// later cycles' p50 and p99 in CPU time and their p99 in wall time, in
// milliseconds, read against the 100 ms target; placements per CPU second
// in thousands (target 5); peak RSS in units of 10 MiB (target 4 GiB, far
// off the chart), all on one axis as bench fabric-plot draws its own.
func SchedScaleSVG(results []SchedResult) string {
	rs := slices.Clone(results)
	slices.SortFunc(rs, func(a, b SchedResult) int { return a.GPUs - b.GPUs })
	series := []sim.Series{
		{Name: "cycle p50, CPU (ms)"}, {Name: "cycle p99, CPU (ms)"}, {Name: "cycle p99, wall (ms)"},
		{Name: "placed/CPU s, 1000s"}, {Name: "RSS (10 MiB)"},
	}
	for _, r := range rs {
		x := float64(r.GPUs) / 1000
		for i, y := range []float64{r.CycleCPUP50ms, r.CycleCPUP99ms, r.CycleP99ms, r.PlacementsPerCPUSecond / 1000, r.PeakRSSMiB / 10} {
			series[i].X = append(series[i].X, x)
			series[i].Y = append(series[i].Y, y)
		}
	}
	return sim.LineChart("bench sched: the cycles after the fill, by cluster size", "GPUs (thousands)", "ms, thousands or 10 MiB (see legend)", series, 0, math.NaN())
}
