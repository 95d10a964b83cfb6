package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchCmd is about the size of a job submission command.
var benchCmd = []byte(`{"type":"job.submit","at":"2026-01-01T00:00:00Z","actor":"tenant-a/alice","payload":{"job":{"name":"train-llm-0001","gpus":8}}}`)

// BenchmarkApply measures committed-and-applied writes on a single node with
// fsync on, from many concurrent callers (RunParallel runs parallelism ×
// GOMAXPROCS goroutines), and reports latency percentiles next to ns/op.
func BenchmarkApply(b *testing.B) {
	for _, kind := range logStores {
		for _, par := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("store=%s/callers=%dxGOMAXPROCS", kind, par), func(b *testing.B) {
				n := newNode(b, testLogger(b), "bench", true, withLogStore(kind, nil))
				waitLeader(b, n)
				runApplyBench(b, n.s, par)
			})
		}
	}
}

// BenchmarkApplyCluster3 is the same over a three-node cluster on
// loopback: every commit waits for a follower's fsync as well.
func BenchmarkApplyCluster3(b *testing.B) {
	for _, kind := range logStores {
		for _, par := range []int{8, 32} {
			b.Run(fmt.Sprintf("store=%s/callers=%dxGOMAXPROCS", kind, par), func(b *testing.B) {
				benchCluster3(b, kind, par)
			})
		}
	}
}

func benchCluster3(b *testing.B, kind string, par int) {
	logger := testLogger(b)
	n1 := newNode(b, logger, "n1", true, withLogStore(kind, withSecret(testSecret)))
	waitLeader(b, n1)
	for _, id := range []string{"n2", "n3"} {
		n := newNode(b, logger, id, false, withLogStore(kind, withSecret(testSecret)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := n1.s.AddVoter(ctx, id, n.s.Addr())
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	runApplyBench(b, n1.s, par)
}

func waitLeader(b *testing.B, n *node) {
	b.Helper()
	waitFor(b, 10*time.Second, func() (bool, string) { return n.s.IsLeader(), "not leader" })
}

func runApplyBench(b *testing.B, s *Store, parallelism int) {
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		var local []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if _, err := s.Apply(ctx, benchCmd); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "applies/s")
}
