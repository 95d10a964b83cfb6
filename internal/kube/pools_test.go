package kube_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestNodeAffinityAndTaintsArePools: the pool of a gang is the Nodes its
// pods' required node affinity admits and whose NoSchedule and NoExecute
// taints they tolerate. Labels ib on s1-gpu001..003 and spot=true on
// s1-gpu001, taints NoExecute on s1-gpu001 and NoSchedule on s1-gpu004: a
// gang of two tolerating every taint and asking for ib Exists and spot
// NotIn [true] is placed on s1-gpu002 and s1-gpu003 (before, jobfabric
// chose any two). Then a pod tolerating no taint waits in the pool of
// those two though s1-gpu001 and s1-gpu004 are free (before, it was bound
// on one, where the kubelet evicts it or the admins said no); one
// tolerating s1-gpu004's taint runs there. The waiting job's pool, deleted
// by someone else, is set again. When the gang's pods are deleted its pool
// is collected, while the pool a waiting job names, an admin's pool and
// another cluster's stay.
func TestNodeAffinityAndTaintsArePools(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	e.startBridgeWith(t, kube.Config{Jobs: e.acme, Runtime: e.runtime, Inventory: e.admin, Pools: e.admin, PoolGrace: time.Second})
	servers := []string{"s1-gpu001", "s1-gpu002", "s1-gpu003", "s1-gpu004"}
	eventually(t, "4 Nodes", func() (bool, string) {
		ns, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(ns.Items) == 4, fmt.Sprintf("%d nodes", len(ns.Items))
	})
	edit := func(node string, f func(n *corev1.Node)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := e.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			f(n)
			_, err = e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range servers {
		if _, err := e.admin.ReportFacts(ctx, n, api.HostReportRequest{Facts: recordedFacts(t)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range servers[:3] {
		edit(n, func(n *corev1.Node) { n.Labels["example.com/ib"] = "hdr" })
	}
	edit("s1-gpu001", func(n *corev1.Node) {
		n.Labels["example.com/spot"] = "true"
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute})
	})
	edit("s1-gpu004", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/dedicated", Value: "infer", Effect: corev1.TaintEffectNoSchedule})
	})
	// Pools the bridge must never collect: an admin's, another cluster's
	// bridge's.
	keep := []string{"gpu-a", "k8s:east:sel-0123456789abcdef"}
	for _, name := range keep {
		if _, err := e.admin.SetPool(ctx, name, []string{"s1-gpu004"}); err != nil {
			t.Fatal(err)
		}
	}
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})
	pod := func(name, group string, size int, affinity *corev1.Affinity, tolerations []corev1.Toleration) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{kube.LabelPodGroup: group, kube.KeyPodGroupSize: strconv.Itoa(size)}},
			Spec: corev1.PodSpec{
				SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
				Affinity:        affinity,
				Tolerations:     tolerations,
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
	onlyJob := func(ext string) domain.Job {
		t.Helper()
		js := jobsWith(t, e.admin, ext)
		if len(js) != 1 {
			t.Fatalf("jobs of %s: %+v, want one", ext, js)
		}
		return js[0]
	}

	// Required node affinity: ib Exists AND spot NotIn [true]; every taint
	// tolerated, so the affinity alone narrows the pool.
	all := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod("aff-0", "aff", 2, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "example.com/ib", Operator: corev1.NodeSelectorOpExists},
			{Key: "example.com/spot", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}},
		}}}}}}, all)
	pod("aff-1", "aff", 2, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "example.com/spot", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}, // the same, reordered
			{Key: "example.com/ib", Operator: corev1.NodeSelectorOpExists},
		}}}}}}, all)
	eventually(t, "the affinity gang bound", func() (bool, string) {
		a, b := nodeOf("aff-0"), nodeOf("aff-1")
		return a != "" && b != "", fmt.Sprintf("bound on %q and %q", a, b)
	})
	if got := []string{nodeOf("aff-0"), nodeOf("aff-1")}; !slices.Equal(slices.Sorted(slices.Values(got)), []string{"s1-gpu002", "s1-gpu003"}) {
		t.Fatalf("the gang asking for ib and no spot bound on %v, want s1-gpu002 and s1-gpu003", got)
	}
	affPool := onlyJob("k8s:team-a/aff").Pool
	if !strings.HasPrefix(affPool, "k8s:sel-") {
		t.Fatalf("the affinity gang's job has pool %q, want the bridge's", affPool)
	}

	// Taints, s1-gpu001 NoExecute and s1-gpu004 NoSchedule, set before
	// the affinity gang (which tolerates them) so the bridge has seen them
	// by the time it is placed.
	pod("tol", "tol", 1, nil, nil)
	pod("tol-infer", "tol-infer", 1, nil, []corev1.Toleration{{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}})
	eventually(t, "the pod tolerating s1-gpu004's taint bound there", func() (bool, string) {
		n := nodeOf("tol-infer")
		return n == "s1-gpu004", fmt.Sprintf("bound on %q", n)
	})
	eventually(t, "the pod tolerating nothing submitted", func() (bool, string) {
		js := jobsWith(t, e.admin, "k8s:team-a/tol")
		return len(js) == 1, fmt.Sprintf("%+v", js)
	})
	// The bridge passes every 100 ms: by the time tol-infer ran, tol's
	// job was placed if it could be.
	tol := onlyJob("k8s:team-a/tol")
	if n := nodeOf("tol"); n != "" || tol.State != domain.JobPending || tol.Pool == "" || tol.Pool == affPool {
		t.Fatalf("the pod tolerating no taint: bound on %q, job %s in pool %q; want it waiting in its own pool", n, tol.State, tol.Pool)
	}
	ps, err := e.admin.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Name == tol.Pool && !slices.Equal(p.Servers, []string{"s1-gpu002", "s1-gpu003"}) {
			t.Fatalf("pool %s of the pod tolerating nothing: %v, want the untainted s1-gpu002 and s1-gpu003", p.Name, p.Servers)
		}
	}

	// Someone deletes the waiting job's pool: the bridge sets it again.
	if _, err := e.admin.DeletePool(ctx, tol.Pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the waiting job's pool set again", func() (bool, string) {
		ps, err := e.admin.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.Name == tol.Pool {
				return slices.Equal(p.Servers, []string{"s1-gpu002", "s1-gpu003"}), fmt.Sprintf("%v", p.Servers)
			}
		}
		return false, "no pool " + tol.Pool
	})

	// The affinity gang ends: its pool is collected; tol takes its GPUs.
	zero := int64(0)
	for _, n := range []string{"aff-0", "aff-1"} {
		if err := e.kube.CoreV1().Pods("team-a").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the waiting pod bound on an untainted node", func() (bool, string) {
		n := nodeOf("tol")
		return n == "s1-gpu002" || n == "s1-gpu003", fmt.Sprintf("bound on %q", n)
	})
	eventually(t, "the ended gang's pool collected", func() (bool, string) {
		ps, err := e.admin.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		return !slices.Contains(names, affPool), fmt.Sprintf("pools %v", names)
	})
	ps, err = e.admin.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	for _, name := range append(keep, tol.Pool, onlyJob("k8s:team-a/tol-infer").Pool) {
		if !slices.Contains(names, name) {
			t.Errorf("pool %s collected (pools left: %v)", name, names)
		}
	}
}
