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
	"github.com/jobfabric/jobfabric/internal/slurm/slurmtest"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
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
	b.Run("mix/servers=2048/jobs=10000", func(b *testing.B) { benchFill(b, 2048, 10000, mix) })
	// Slurm alone on the same cluster and mix: the jobs queue in a DOWN
	// partition, which is then set UP (shared/reference/slurm-facts.md).
	b.Run("slurm-alone/servers=2048/jobs=10000", func(b *testing.B) { benchSlurmAlone(b, 2048, 10000, mix) })
}

// mix is the mix: 70 % 1x8 GPUs, 20 % 1 GPU, 10 % 4x8 GPUs.
func mix(i int) []string {
	switch i % 10 {
	case 7, 8:
		return []string{"-N", "1", "--gres=gpu:1"}
	case 9:
		return []string{"-N", "4", "--gres=gpu:8"}
	}
	return []string{"-N", "1", "--gres=gpu:8"}
}

// tunedScheduler is slurm-facts.md's tuned SchedulerParameters.
const tunedScheduler = "MaxJobCount=200000\nSchedulerParameters=sched_interval=2,default_queue_depth=10000,max_sched_time=10,bf_continue,bf_interval=2,bf_max_job_test=10000,bf_resolution=600"

// benchSlurmAlone measures slurmctld's own allocation rate: from the
// partition going UP until the last allocation, once nothing more is
// allocated for 15 s.
func benchSlurmAlone(b *testing.B, servers, jobs int, shape func(i int) []string) {
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: servers / 64, ServersPerStripe: 64, GPUsPerServer: 8})
		if err != nil {
			b.Fatal(err)
		}
		var names []string
		for _, s := range topo.Servers() {
			names = append(names, s.Name)
		}
		sc := slurmtest.Start(b, slurmtest.Options{Nodes: export.Hostlist(names), GPUsPerNode: 8, Extra: tunedScheduler})
		if _, err := sc.Command(ctx, "scontrol", "update", "PartitionName=gpu", "State=DOWN"); err != nil {
			b.Fatal(err)
		}
		if err := sbatchMany(ctx, sc, jobs, nil, shape); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := sc.Command(ctx, "scontrol", "update", "PartitionName=gpu", "State=UP"); err != nil {
			b.Fatal(err)
		}
		allocated, lastAt, changed := 0, time.Duration(0), time.Now()
		for time.Since(changed) < 15*time.Second {
			out, err := sc.Command(ctx, "squeue", "-h", "-t", "CONFIGURING,RUNNING", "-o", "%i")
			if err != nil {
				b.Fatal(err)
			}
			if n := len(strings.Fields(string(out))); n != allocated {
				allocated, lastAt, changed = n, time.Since(start), time.Now()
			}
			select {
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(allocated), "allocated")
		b.ReportMetric(float64(allocated)/lastAt.Seconds(), "allocated/s")
		cancel()
	}
}

func benchFill(b *testing.B, servers, jobs int, shape func(i int) []string) {
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		p := startPair(b, ctx, servers/64, 64, "gpu", 8*servers, tunedScheduler)
		sc := p.sc
		if err := p.sbatchHeld(ctx, jobs, shape); err != nil {
			b.Fatal(err)
		}
		br, err := slurm.New(slurm.Config{Cluster: sc.Name, Slurm: sc, API: p.runtime, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		released := 0
		var releasedAt, firstPass time.Duration
		idleSince := time.Now()
		for {
			passStart := time.Now()
			st, err := br.Sync(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("pass at %.1fs took %.2fs: %+v", passStart.Sub(start).Seconds(), time.Since(passStart).Seconds(), st)
			if firstPass == 0 {
				firstPass = time.Since(start)
			}
			// Done once passes do nothing for 3 s: the last slice
			// submitted may still be waiting for its placement.
			if st.Released > 0 || st.Submitted > 0 {
				idleSince = time.Now()
			}
			if st.Released > 0 {
				released += st.Released
				releasedAt = time.Since(start)
			} else if released > 0 && time.Since(idleSince) > 3*time.Second {
				break
			}
		}
		// slurmctld may take minutes on a loaded machine: wait up to 10.
		allocated := 0
		for deadline := time.Now().Add(10 * time.Minute); allocated < released && time.Now().Before(deadline); {
			out, err := sc.Command(ctx, "squeue", "-h", "-t", "CONFIGURING,RUNNING", "-o", "%i")
			if err != nil {
				b.Fatal(err)
			}
			if allocated = len(strings.Fields(string(out))); allocated < released {
				<-time.After(250 * time.Millisecond) // slurmctld runs on real time
			}
		}
		if allocated < released {
			b.Fatalf("slurmctld allocated %d of the %d released jobs in 10 minutes", allocated, released)
		}
		allocatedAt := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(released), "released")
		b.ReportMetric(firstPass.Seconds(), "first-pass-s")
		b.ReportMetric(float64(released)/releasedAt.Seconds(), "released/s")
		b.ReportMetric(float64(released)/allocatedAt.Seconds(), "allocated/s")
		cancel()
	}
}

// BenchmarkReadNodes is what the node check adds to each bridge pass:
// sinfo over 2,048 nodes (16 of them down, with reasons; grouped, as the
// bridge asks, and a line per node, its fallback) and parsing its output,
// against slurmctld with no jobs; then grouped again with 8 more
// partitions of 256 nodes each (every node in two partitions: what the
// pools read); with -a (the bridge's: hidden partitions too) on one
// partition and on the 8 and a hidden ninth.
func BenchmarkReadNodes(b *testing.B) {
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 32, ServersPerStripe: 64, GPUsPerServer: 8})
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, s := range topo.Servers() {
		names = append(names, s.Name)
	}
	sc := slurmtest.Start(b, slurmtest.Options{Nodes: export.Hostlist(names), GPUsPerNode: 8, Extra: tunedScheduler})
	for _, n := range names[:16] {
		if _, err := sc.Command(b.Context(), "scontrol", "update", "nodename="+n, "state=down", "reason=bench"); err != nil {
			b.Fatal(err)
		}
	}
	// -ha is what the bridge runs (every partition, hidden ones too): on
	// one partition, then with the 8 and a hidden ninth.
	for _, tc := range []struct{ name, flag string }{{"grouped", "-h"}, {"grouped-a", "-ha"}, {"per-node", "-hN"}, {"grouped-8-partitions", "-h"}, {"grouped-8-partitions-hidden-a", "-ha"}} {
		switch tc.name {
		case "grouped-8-partitions":
			for i := range 8 {
				if _, err := sc.Command(b.Context(), "scontrol", "create", fmt.Sprintf("PartitionName=p%d", i), "Nodes="+export.Hostlist(names[i*256:(i+1)*256])); err != nil {
					b.Fatal(err)
				}
			}
		case "grouped-8-partitions-hidden-a":
			if _, err := sc.Command(b.Context(), "scontrol", "create", "PartitionName=hidden", "Hidden=YES", "Nodes="+export.Hostlist(names[:256])); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				out, err := sc.Command(b.Context(), "sinfo", tc.flag, "-o", "%R|%N|%T|%E")
				if err != nil {
					b.Fatal(err)
				}
				nodes, err := slurm.ParseSinfo(string(out))
				if err != nil || len(nodes) != len(names) {
					b.Fatalf("%d nodes, %v", len(nodes), err)
				}
			}
		})
	}
}
