package slurm_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/slurm"
)

// BenchmarkBridgeFill queues held jobs in slurmctld and measures, from
// the bridge's first pass, how fast jobs are released with their
// placement (released/s, until a pass releases nothing more) and how fast
// slurmctld then allocates them on those nodes (allocated/s, same clock).
// fill: one 1x8-GPU job per server; mix: the 10,000 jobs (70 %
// 1x8, 20 % 1 GPU, 10 % 4x8) on 2,048 x 8 GPUs, more than fit. Run it with
// -benchtime=1x: each iteration is a fresh cluster.
func BenchmarkBridgeFill(b *testing.B) {
	b.Run("fill/servers=256", func(b *testing.B) {
		benchFill(b, 256, 256, func(int) []string { return []string{"-N", "1", "--gres=gpu:8"} })
	})
	b.Run("mix/servers=2048/jobs=10000", func(b *testing.B) {
		benchFill(b, 2048, 10000, func(i int) []string {
			switch i % 10 {
			case 7, 8:
				return []string{"-N", "1", "--gres=gpu:1"}
			case 9:
				return []string{"-N", "4", "--gres=gpu:8"}
			}
			return []string{"-N", "1", "--gres=gpu:8"}
		})
	})
}

func benchFill(b *testing.B, servers, jobs int, shape func(i int) []string) {
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		p := startPair(b, ctx, servers/64, 64, "gpu", 8*servers,
			"MaxJobCount=200000\nSchedulerParameters=sched_interval=2,default_queue_depth=10000,max_sched_time=10,bf_continue,bf_interval=2,bf_max_job_test=10000,bf_resolution=600")
		sc, admin := p.sc, p.admin
		if err := p.sbatchHeld(ctx, jobs, shape); err != nil {
			b.Fatal(err)
		}
		br, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: admin, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		released := 0
		var releasedAt, firstPass time.Duration
		for {
			st, err := br.Sync(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if firstPass == 0 {
				firstPass = time.Since(start)
			}
			if st.Released > 0 {
				released += st.Released
				releasedAt = time.Since(start)
			} else if released > 0 && st.Submitted == 0 {
				break
			}
		}
		sc.Poll(b, "slurmctld did not allocate every released job", func() (bool, string) {
			out, _ := sc.Run("squeue", "-h", "-t", "CONFIGURING,RUNNING", "-o", "%i")
			n := len(strings.Fields(out))
			return n == released, fmt.Sprint(n)
		})
		allocatedAt := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(released), "released")
		b.ReportMetric(firstPass.Seconds(), "first-pass-s")
		b.ReportMetric(float64(released)/releasedAt.Seconds(), "released/s")
		b.ReportMetric(float64(released)/allocatedAt.Seconds(), "allocated/s")
		cancel()
	}
}
