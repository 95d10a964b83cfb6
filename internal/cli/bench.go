package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobfabric/jobfabric/internal/bench"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure the control plane (figures of docs/benchmarks.md)"}
	var o bench.SubmitOptions
	var runs int
	var cpuprofile string
	submit := &cobra.Command{
		Use:   "submit",
		Short: "Job submits over the API against fresh in-process servers (Raft + bbolt with fsync, HTTP on loopback)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.checkOutput(); err != nil {
				return err
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return domain.Invalid("cpuprofile", "cannot create %s: %v", cpuprofile, err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("start CPU profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			var results []*bench.SubmitResult
			for i := 0; i < runs; i++ {
				r, err := bench.Submit(cmd.Context(), o)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			return g.emit(results, func(w io.Writer) {
				row(w, "RUN", "SERVERS", "VIA", "CONCURRENCY", "RATE", "SUBMITS", "SUBMITS/S", "P50-MS", "P90-MS", "P99-MS", "MAX-MS")
				for i, r := range results {
					via := "leader"
					if r.ViaFollower {
						via = "follower"
					}
					row(w, i+1, r.Servers, via, r.Concurrency, rate(r.Rate), r.Submits, fmt.Sprintf("%.0f", r.PerSecond),
						fmt.Sprintf("%.2f", r.P50ms), fmt.Sprintf("%.2f", r.P90ms), fmt.Sprintf("%.2f", r.P99ms), fmt.Sprintf("%.2f", r.Maxms))
				}
			})
		},
	}
	f := submit.Flags()
	f.IntVar(&o.Servers, "servers", 1, "servers in the cluster (1, 3, 5)")
	f.IntVar(&o.Concurrency, "concurrency", 16, "concurrent clients")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per run")
	f.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured time before each run")
	f.Float64Var(&o.Rate, "rate", 0, "open loop: submits per second, latency counted from each one's due time (0: closed loop, as fast as answered)")
	f.BoolVar(&o.ViaFollower, "via-follower", false, "send to a follower (forwarded to the leader)")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run (server and load) to this file")
	f.IntVar(&runs, "runs", 1, "repeat the run (fresh cluster each time); quote the median")
	cmd.AddCommand(submit)
	return cmd
}

func rate(r float64) string {
	if r == 0 {
		return "closed"
	}
	return fmt.Sprintf("%.0f/s", r)
}
