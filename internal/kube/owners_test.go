package kube_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
)

// podSpec is a gated pod asking for gpus nvidia.com/gpu (none when 0).
func podSpec(ns, name string, gpus int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
			Containers:      []corev1.Container{{Name: "c", Image: "trainer:1"}},
		},
	}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{kube.ResourceGPU: resource.MustParse(strconv.Itoa(gpus))}
	}
	return p
}

func create(t *testing.T, e *env, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := e.kube.CoreV1().Pods(p.Namespace).Create(ctxT(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oneJob waits for the one job with ExternalID ext.
func oneJob(t *testing.T, e *env, ext string) domain.Job {
	t.Helper()
	var j domain.Job
	eventually(t, "one job "+ext, func() (bool, string) {
		js := jobsWith(t, e.admin, ext)
		if len(js) != 1 {
			return false, fmt.Sprintf("%d jobs", len(js))
		}
		j = js[0]
		return true, ""
	})
	return j
}

// refused waits for a Refused event on p saying want.
func refused(t *testing.T, e *env, p *corev1.Pod, want string) {
	t.Helper()
	eventOn(t, e, p, "Refused", want)
}

// eventOn waits for an event of reason on p saying want.
func eventOn(t *testing.T, e *env, p *corev1.Pod, reason, want string) {
	t.Helper()
	eventually(t, p.Name+": "+reason, func() (bool, string) {
		evs, err := e.kube.CoreV1().Events(p.Namespace).List(ctxT(t), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, ev := range evs.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, want) {
				return true, ""
			}
			got = append(got, ev.Reason+": "+ev.Message)
		}
		return false, fmt.Sprintf("events %q, none says %q", got, want)
	})
}

// TestGangsFromOwners: a batch Job's, a JobSet's and a LeaderWorkerSet
// group's pods are each one job, sized by the owner and named by its UID;
// GPUs come from nvidia.com/gpu, DRA claims, or the MIG and share
// annotations. No controller runs: the tests make the objects those
// controllers would.
func TestGangsFromOwners(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	e.startBridge(t)
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})

	t.Run("BatchJob", func(t *testing.T) {
		two := int32(2)
		bj, err := e.kube.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a"},
			Spec: batchv1.JobSpec{Parallelism: &two, Completions: &two, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := metav1.NewControllerRef(bj, batchv1.SchemeGroupVersion.WithKind("Job"))
		p0 := podSpec("team-a", "train-0", 4)
		p0.OwnerReferences = []metav1.OwnerReference{*owner}
		create(t, e, p0)
		// One pod of two: nothing is submitted yet.
		if js := jobsWith(t, e.admin, "k8s:"+string(bj.UID)); len(js) != 0 {
			t.Fatalf("submitted before the gang was complete: %+v", js)
		}
		p1 := podSpec("team-a", "train-1", 4)
		p1.OwnerReferences = []metav1.OwnerReference{*owner}
		create(t, e, p1)
		j := oneJob(t, e, "k8s:"+string(bj.UID))
		if j.GPUs != 8 || j.GPUsPerNode != 4 || j.Name != "job-train" {
			t.Fatalf("job %+v, want 8 GPUs, 4 per node, named job-train", j.JobSpec)
		}
		eventually(t, "both pods ungated on the job's servers", func() (bool, string) {
			for _, n := range []string{"train-0", "train-1"} {
				p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if p.Spec.NodeName == "" || gatedNow(p) || p.Annotations[kube.AnnotationJob] != strconv.FormatUint(j.ID, 10) {
					return false, fmt.Sprintf("%s on %q gated %v annotations %v", n, p.Spec.NodeName, gatedNow(p), p.Annotations)
				}
			}
			return true, ""
		})
	})

	t.Run("BatchJobInWavesRefused", func(t *testing.T) {
		one, four := int32(1), int32(4)
		bj, err := e.kube.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "waves", Namespace: "team-a"},
			Spec: batchv1.JobSpec{Parallelism: &one, Completions: &four, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := podSpec("team-a", "waves-0", 1)
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(bj, batchv1.SchemeGroupVersion.WithKind("Job"))}
		refused(t, e, create(t, e, p), "completions 4 differs from parallelism 1")
	})

	t.Run("JobSet", func(t *testing.T) {
		// The JobSet controller's child Job, labelled as it labels them.
		uid := types.UID("0f8e0c2a-1111-4c44-9a1d-jobset000001")
		lbl := map[string]string{kube.LabelJobSetName: "pretrain", kube.LabelJobSetUID: string(uid),
			kube.LabelJobSetReplicatedJob: "workers", kube.LabelJobSetReplicas: "1"}
		two := int32(2)
		if _, err := e.kube.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "pretrain-workers-0", Namespace: "team-a", Labels: lbl},
			Spec: batchv1.JobSpec{Parallelism: &two, Completions: &two, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			p := podSpec("team-a", fmt.Sprintf("pretrain-workers-0-%d", i), 4)
			for k, v := range lbl {
				p.Labels[k] = v
			}
			create(t, e, p)
		}
		j := oneJob(t, e, "k8s:"+string(uid))
		if j.GPUs != 8 || j.GPUsPerNode != 4 || j.Name != "jobset-pretrain" {
			t.Fatalf("job %+v, want 8 GPUs, 4 per node, named jobset-pretrain", j.JobSpec)
		}
	})

	t.Run("LeaderWorkerSetGroup", func(t *testing.T) {
		for i, role := range []string{"leader", "worker"} {
			p := podSpec("team-a", "serve-0-"+role, 2)
			p.Labels[kube.LabelLWSName] = "serve"
			p.Labels[kube.LabelLWSGroupIndex] = "0"
			p.Labels[kube.LabelLWSGroupKey] = "689ce1b5"
			p.Labels["leaderworkerset.sigs.k8s.io/worker-index"] = strconv.Itoa(i)
			p.Annotations[kube.AnnotationLWSSize] = "2"
			create(t, e, p)
		}
		j := oneJob(t, e, "k8s:lws-689ce1b5")
		if j.GPUs != 4 || j.GPUsPerNode != 2 {
			t.Fatalf("job %+v, want 4 GPUs, 2 per node", j.JobSpec)
		}
		// A leader asking for fewer GPUs than its worker: a JobSpec has
		// no shape for it (GPUs spread evenly), so it is refused, saying so.
		var last *corev1.Pod
		for i, gpus := range []int{1, 2} {
			p := podSpec("team-a", "mixed-0-"+strconv.Itoa(i), gpus)
			p.Labels[kube.LabelLWSName] = "mixed"
			p.Labels[kube.LabelLWSGroupIndex] = "0"
			p.Labels[kube.LabelLWSGroupKey] = "5e1f00aa"
			p.Annotations[kube.AnnotationLWSSize] = "2"
			last = create(t, e, p)
		}
		refused(t, e, last, "a LeaderWorkerSet's leader asks for as many GPUs as each worker")
		if js := jobsWith(t, e.admin, "k8s:lws-5e1f00aa"); len(js) != 0 {
			t.Fatalf("mixed gang submitted: %+v", js)
		}
	})

	t.Run("DRAClaim", func(t *testing.T) {
		claim, err := e.kube.ResourceV1().ResourceClaims("team-a").Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "two-gpus", Namespace: "team-a"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: kube.DefaultGPUDeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}},
				{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.example.com"}},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := podSpec("team-a", "dra", 0)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &claim.Name}}
		p = create(t, e, p)
		j := oneJob(t, e, "k8s:"+string(p.UID))
		if j.GPUs != 2 {
			t.Fatalf("job %+v, want the claim's 2 GPUs (the NIC request is not a GPU)", j.JobSpec)
		}
		// A pod with claims is left to the scheduler to bind (it allocates
		// them), on the one node its affinity allows.
		eventually(t, "the claim's pod ungated with node affinity, not bound", func() (bool, string) {
			p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "dra", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if gatedNow(p) || p.Spec.Affinity == nil {
				jj, _ := e.admin.Job(ctx, j.ID)
				return false, fmt.Sprintf("gated %v affinity %v; job %s %+v", gatedNow(p), p.Spec.Affinity, jj.State, jj.Reason)
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("bound to %s by the bridge", p.Spec.NodeName)
			}
			terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			return slices.Equal(terms[0].MatchFields[0].Values, []string{p.Annotations[kube.AnnotationNode]}), fmt.Sprintf("terms %+v", terms)
		})
		all := podSpec("team-a", "dra-all", 0)
		tmpl, err := e.kube.ResourceV1().ResourceClaimTemplates("team-a").Create(ctx, &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "every-gpu", Namespace: "team-a"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: kube.DefaultGPUDeviceClass, AllocationMode: resourcev1.DeviceAllocationModeAll}},
			}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: &tmpl.Name}}
		refused(t, e, create(t, e, all), "allocationMode All is not a GPU count")
	})

	t.Run("JobOptionsAndLongNames", func(t *testing.T) {
		ns := "team-" + strings.Repeat("n", 58) // 63: the longest namespace
		group := strings.Repeat("g", 63)
		namespace(t, e.kube, ns, map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})
		for i := range 2 {
			p := podSpec(ns, fmt.Sprintf("opt-%d", i), 1)
			p.Labels[kube.LabelPodGroup], p.Labels[kube.KeyPodGroupSize] = group, "2"
			p.Annotations[kube.AnnotationPriority] = "5"
			p.Annotations[kube.AnnotationPreemptible] = "true"
			p.Annotations[kube.AnnotationTimeLimit] = "2h"
			p.Annotations[kube.AnnotationMinRuntime] = "10m"
			p.Annotations[kube.AnnotationExpectedDuration] = "90m"
			p.Annotations[kube.AnnotationTopology] = "leaf:required"
			p.Annotations[kube.AnnotationGPUModel] = "H100-80GB"
			p.Annotations[kube.AnnotationMinDriver] = "535.104"
			create(t, e, p)
		}
		var j domain.Job
		eventually(t, "the long-named gang's one job", func() (bool, string) {
			all, err := e.admin.Jobs(ctx, client.JobQuery{})
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, x := range all {
				if strings.HasPrefix(x.ExternalID, "k8s:"+ns+"/ggg") {
					j, n = x, n+1
				}
			}
			return n == 1, fmt.Sprintf("%d jobs", n)
		})
		if len(j.ExternalID) > 128 || j.Priority != 5 || !j.Preemptible || j.TimeLimitSeconds != 7200 {
			t.Fatalf("job %+v: want ExternalID within 128 characters, priority 5, preemptible, 2h limit", j.JobSpec)
		}
		if j.MinRuntimeSeconds != 600 || j.ExpectedDurationSeconds != 5400 || j.Topology == nil || *j.Topology != (domain.TopologyRequirement{Level: domain.TopologyLeaf, Required: true}) ||
			j.GPUModel != "H100-80GB" || j.MinDriver != "535.104" {
			t.Fatalf("job %+v: want min runtime 10m, expected 90m, leaf required, H100-80GB, driver 535.104 or newer", j.JobSpec)
		}
		for _, tc := range []struct{ name, key, val, want string }{
			{"bad-topology", kube.AnnotationTopology, "rack:required", `jobfabric.io/topology "rack:required": topology level "rack" is not one of`},
			{"bad-model", kube.AnnotationGPUModel, "H100", `jobfabric.io/gpu-model "H100": gpuModel "H100" is unknown`},
		} {
			p := podSpec("team-a", tc.name, 1)
			p.Annotations[tc.key] = tc.val
			p = create(t, e, p)
			refused(t, e, p, tc.want)
			if js := jobsWith(t, e.admin, "k8s:"+string(p.UID)); len(js) != 0 {
				t.Fatalf("%s: submitted %+v", tc.name, js)
			}
		}
		for i, v := range []string{"true", "false"} {
			p := podSpec("team-a", fmt.Sprintf("disagree-%d", i), 1)
			p.Labels[kube.LabelPodGroup], p.Labels[kube.KeyPodGroupSize] = "disagree", "2"
			p.Annotations[kube.AnnotationPreemptible] = v
			p = create(t, e, p)
			if i == 1 {
				refused(t, e, p, `disagree on jobfabric.io/preemptible ("true" and "false")`)
			}
		}
	})

	t.Run("PreferredNodeAffinitySaidIgnored", func(t *testing.T) {
		// Before: placed with no word that the preference was not weighed.
		p := podSpec("team-a", "prefers", 1)
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
		}}}}
		p = create(t, e, p)
		eventOn(t, e, p, kube.ReasonPreferenceIgnored, "does not weigh preferredDuringSchedulingIgnoredDuringExecution node affinity")
		oneJob(t, e, "k8s:"+string(p.UID)) // placed all the same
		plain := create(t, e, podSpec("team-a", "no-preference", 1))
		oneJob(t, e, "k8s:"+string(plain.UID))
		evs, err := e.kube.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(plain.UID)})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Items {
			if ev.Reason == kube.ReasonPreferenceIgnored {
				t.Fatalf("a pod without preferences told: %s", ev.Message)
			}
		}
	})

	t.Run("MIGAndShare", func(t *testing.T) {
		mig := podSpec("team-a", "mig", 0)
		mig.Annotations[kube.AnnotationMIGProfile] = "3g.40gb"
		mig.Annotations[kube.AnnotationMIGCount] = "2"
		mig = create(t, e, mig)
		if j := oneJob(t, e, "k8s:"+string(mig.UID)); j.MIGProfile != "3g.40gb" || j.MIGCount != 2 || j.GPUs != 0 {
			t.Fatalf("job %+v, want 2 x MIG 3g.40gb", j.JobSpec)
		}
		share := podSpec("team-a", "share", 0)
		share.Annotations[kube.AnnotationShare] = "0.25"
		share = create(t, e, share)
		if j := oneJob(t, e, "k8s:"+string(share.UID)); j.Share != 0.25 || j.GPUs != 0 {
			t.Fatalf("job %+v, want a 0.25 share", j.JobSpec)
		}
		for _, tc := range []struct {
			name, key, val, want string
			gpus                 int
		}{
			{"bad-share", kube.AnnotationShare, "1.5", "must be a fraction of one GPU", 0},
			{"both", kube.AnnotationShare, "0.5", "exactly one of them", 2},
			{"bad-mig-count", kube.AnnotationMIGCount, "2", "needs jobfabric.io/mig-profile", 0},
		} {
			p := podSpec("team-a", tc.name, tc.gpus)
			p.Annotations[tc.key] = tc.val
			p = create(t, e, p)
			refused(t, e, p, tc.want)
			if js := jobsWith(t, e.admin, "k8s:"+string(p.UID)); len(js) != 0 {
				t.Fatalf("%s: submitted %+v", tc.name, js)
			}
		}
	})
}

func gatedNow(p *corev1.Pod) bool {
	return slices.Contains(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: kube.Gate})
}
