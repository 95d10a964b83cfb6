package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/jobfabric/jobfabric/internal/bench"
	"github.com/jobfabric/jobfabric/internal/sim"
)

func main() {
	var rs []bench.SchedResult
	for _, g := range []int{16384, 32768, 65536, 100000} {
		b, err := os.ReadFile(fmt.Sprintf("%s/sched-%d.json", os.Args[1], g))
		if err != nil {
			panic(err)
		}
		var r bench.SchedResult
		if err := json.Unmarshal(b, &r); err != nil {
			panic(err)
		}
		rs = append(rs, r)
		fmt.Printf("| %d | %d | %d | %d | %.0f ms | %.0f ms | %.0f ms | %.0f | %.0f MiB |\n", r.GPUs, r.Servers, r.Tenants, r.Jobs, r.FirstCyclems, r.CycleP50ms, r.CycleP99ms, r.PlacementsPerSecond, r.PeakRSSMiB)
	}
	ser := func(name string, f func(bench.SchedResult) float64) sim.Series {
		s := sim.Series{Name: name}
		for _, r := range rs {
			s.X = append(s.X, float64(r.GPUs)/1000)
			s.Y = append(s.Y, f(r))
		}
		return s
	}
	svg := sim.LineChart("Scheduler: jobs = GPUs, tenants = GPUs/20, 40 cycles", "GPUs (thousands)", "ms / placements per s / MiB", []sim.Series{
		ser("cycle p50 (ms)", func(r bench.SchedResult) float64 { return r.CycleP50ms }),
		ser("cycle p99 (ms)", func(r bench.SchedResult) float64 { return r.CycleP99ms }),
		ser("placements/s", func(r bench.SchedResult) float64 { return r.PlacementsPerSecond }),
		ser("peak RSS (MiB)", func(r bench.SchedResult) float64 { return r.PeakRSSMiB }),
	}, 0, math.NaN())
	if err := os.WriteFile(os.Args[2], []byte(svg), 0o644); err != nil {
		panic(err)
	}
}
