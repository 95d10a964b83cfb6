package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/kube/kubetest"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// BenchmarkPodGateRemoved measures, for a burst of 1,000 gated 8-GPU pods
// (each a job of its own) on the demo-sized cluster (2 stripes x 4
// servers x 8 GPUs: 8 pods fit at once), the time from each pod's create
// call to the bridge lifting its gate, p50 and p99. The pods queue: the
// test kubelet succeeds each as soon as it runs, the bridge reports it,
// jobfabric frees the GPUs and places the next. So the figure is queueing
// through the whole control plane (API server, bridge at its default 2s
// interval, jobfabric scheduler), not the bridge's latency alone;
// first-wave-p50 is the pods that found free GPUs. Run with -benchtime=1x.
func BenchmarkPodGateRemoved(b *testing.B) {
	const pods, gpus = 1000, 8
	for range b.N {
		b.StopTimer()
		kc := kubetest.Start(b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		jf, err := devcluster.Start(ctx, b.TempDir(), 1, devcluster.Options{Logger: logger(),
			Tune: func(c *server.Config) { c.FabricDriver = "none" }})
		if err != nil {
			b.Fatal(err)
		}
		admin := jf.Client(0)
		topo, err := topology.Generate(topology.GenerateOptions{Stripes: 2, ServersPerStripe: 4, GPUsPerServer: 8})
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := json.Marshal(topo)
		if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateTenant(ctx, api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 64}); err != nil {
			b.Fatal(err)
		}
		if _, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
			Labels: map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		kl := kubetest.StartKubelet(b, kc.Client)
		kl.SucceedOnRun(true)

		var mu sync.Mutex
		created := map[types.UID]time.Time{}
		released := map[types.UID]time.Time{}
		all := make(chan struct{})
		br := kube.New(kube.Config{Kube: kc.Client, Jobs: admin, Runtime: admin, Inventory: admin, Logger: logger(),
			OnRelease: func(p *corev1.Pod, at time.Time) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := released[p.UID]; !ok {
					released[p.UID] = at
					if len(released) == pods {
						close(all)
					}
				}
			}})
		bctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- br.Run(bctx) }()

		b.StartTimer()
		start := time.Now()
		// The burst: 8 clients creating pods as fast as the API server takes them.
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					p := &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%04d", i), Namespace: "team-a"},
						Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
							Containers: []corev1.Container{{Name: "c", Image: "trainer:1",
								Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse(fmt.Sprint(gpus))}}}}},
					}
					at := time.Now()
					out, err := kc.Client.CoreV1().Pods("team-a").Create(ctx, p, metav1.CreateOptions{})
					if err != nil {
						b.Error(err)
						continue
					}
					mu.Lock()
					created[out.UID] = at
					mu.Unlock()
				}
			})
		}
		for i := range pods {
			next <- i
		}
		close(next)
		wg.Wait()
		burst := time.Since(start)
		select {
		case <-all:
		case <-ctx.Done():
			b.Fatalf("%d of %d gates removed before the timeout", len(released), pods)
		}
		total := time.Since(start)
		b.StopTimer()
		stop()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		var lat []time.Duration
		for uid, at := range released {
			lat = append(lat, at.Sub(created[uid]))
		}
		mu.Unlock()
		slices.Sort(lat)
		pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		// The first wave: the 8 earliest releases found free GPUs.
		var first []time.Duration
		mu.Lock()
		var rel []time.Time
		for _, at := range released {
			rel = append(rel, at)
		}
		slices.SortFunc(rel, func(a, b time.Time) int { return a.Compare(b) })
		for uid, at := range released {
			if !at.After(rel[7]) {
				first = append(first, at.Sub(created[uid]))
			}
		}
		mu.Unlock()
		slices.Sort(first)
		b.ReportMetric(pct(0.5).Seconds(), "p50-s")
		b.ReportMetric(pct(0.99).Seconds(), "p99-s")
		b.ReportMetric(first[len(first)/2].Seconds(), "first-wave-p50-s")
		b.ReportMetric(burst.Seconds(), "burst-s")
		b.ReportMetric(total.Seconds(), "total-s")
		b.ReportMetric(float64(pods)/total.Seconds(), "pods/s")
		cancel()
		jf.Close()
	}
}
