package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
)

// TestNodeSelectorIsAPool: three one-pod gangs of 8 GPUs select the nodes
// labelled partition=b (s1-gpu003 and s1-gpu004): jobfabric places two,
// on those nodes only, through the pool of their nodeSelector; the third
// waits though two other servers are free (before pools it was bound to
// one of them, where a kubelet refuses a pod off its selector). Labelled
// b too, s1-gpu001 takes the waiting pod. A selector every Node matches
// needs no pool.
func TestNodeSelectorIsAPool(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	e.startBridgeWith(t, kube.Config{Jobs: e.acme, Runtime: e.runtime, Inventory: e.admin, Pools: e.admin})
	eventually(t, "4 Nodes", func() (bool, string) {
		ns, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(ns.Items) == 4, fmt.Sprintf("%d nodes", len(ns.Items))
	})
	label := func(node string, lbl map[string]string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := e.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for k, v := range lbl {
				n.Labels[k] = v
			}
			_, err = e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"s1-gpu003", "s1-gpu004"} {
		label(n, map[string]string{"example.com/partition": "b"})
	}
	for _, n := range []string{"s1-gpu001", "s1-gpu002", "s1-gpu003", "s1-gpu004"} {
		label(n, map[string]string{"example.com/site": "dc1"})
		if _, err := e.admin.ReportFacts(ctx, n, api.HostReportRequest{Facts: recordedFacts(t)}); err != nil {
			t.Fatal(err)
		}
	}
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})
	pod := func(name string, sel map[string]string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{kube.LabelPodGroup: name, kube.KeyPodGroupSize: "1"}},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
				NodeSelector:    sel,
				Containers: []corev1.Container{{Name: "train", Image: "trainer:1",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("8")}}}},
			},
		}
		if _, err := e.kube.CoreV1().Pods("team-a").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeOf := func(name string) string {
		p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	names := []string{"b-0", "b-1", "b-2"}
	for _, n := range names {
		pod(n, map[string]string{"example.com/partition": "b"})
	}
	var bound []string
	eventually(t, "two of the three pods bound", func() (bool, string) {
		bound = nil
		for _, n := range names {
			if node := nodeOf(n); node != "" {
				bound = append(bound, node)
			}
		}
		return len(bound) == 2, fmt.Sprintf("bound on %v", bound)
	})
	for _, node := range bound {
		if node != "s1-gpu003" && node != "s1-gpu004" {
			t.Errorf("a pod selecting partition=b bound on %s", node)
		}
	}
	var waiting domain.Job
	for _, n := range names {
		js := jobsWith(t, e.admin, "k8s:team-a/"+n)
		if len(js) != 1 || !strings.HasPrefix(js[0].Pool, "k8s:sel-") {
			t.Fatalf("pod %s's job %+v: want one job with the selector's pool", n, js)
		}
		if nodeOf(n) == "" {
			waiting = js[0]
		}
	}
	if waiting.State != domain.JobPending {
		t.Fatalf("the third pod's job is %s, want Pending", waiting.State)
	}
	ps, err := e.admin.Pools(ctx)
	if err != nil || len(ps) != 1 || ps[0].Name != waiting.Pool || !slices.Equal(ps[0].Servers, []string{"s1-gpu003", "s1-gpu004"}) {
		t.Fatalf("pools %+v, %v: want %s of s1-gpu003 and s1-gpu004", ps, err, waiting.Pool)
	}

	// s1-gpu001 joins partition b: the waiting pod follows its selector.
	label("s1-gpu001", map[string]string{"example.com/partition": "b"})
	eventually(t, "the waiting pod bound on the node labelled b", func() (bool, string) {
		for _, n := range names {
			if js := jobsWith(t, e.admin, "k8s:team-a/"+n); len(js) == 1 && js[0].ID == waiting.ID {
				node := nodeOf(n)
				return node == "s1-gpu001", fmt.Sprintf("bound on %q", node)
			}
		}
		return false, "job gone"
	})

	// Every Node matches: no pool.
	pod("anywhere", map[string]string{"example.com/site": "dc1"})
	eventually(t, "the pod selecting every node submitted", func() (bool, string) {
		js := jobsWith(t, e.admin, "k8s:team-a/anywhere")
		return len(js) == 1, fmt.Sprintf("%+v", js)
	})
	if js := jobsWith(t, e.admin, "k8s:team-a/anywhere"); js[0].Pool != "" {
		t.Errorf("a selector every node matches gave the job pool %s", js[0].Pool)
	}
}
