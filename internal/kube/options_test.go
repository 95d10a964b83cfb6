package kube_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/domain/domaintest"
	"github.com/jobfabric/jobfabric/internal/kube"
)

// annotated is a gang of pods p-0.. with the annotations of each.
func annotated(each ...map[string]string) []*corev1.Pod {
	var out []*corev1.Pod
	for i, a := range each {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Annotations: a}})
	}
	return out
}

// TestJobOptions: (no server) each JobSpec field a pod annotation sets,
// and each refusal naming the annotation, its value and the rule broken.
// The bridge before these annotations submitted every such gang without
// them (a topology, model or driver requirement silently dropped).
func TestJobOptions(t *testing.T) {
	base := func() *domaintest.JobBuilder[domain.JobSpec] {
		return domaintest.MakeJob("acme/research", 16).PerNode(8)
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want domain.JobSpec // when refuse is ""
		// refuse is a part of the refusal; each refusal also names the
		// annotation and its value.
		refuse string
	}{
		{name: "none", pods: annotated(nil, nil), want: base().Spec()},
		{name: "all", pods: annotated(map[string]string{
			kube.AnnotationPriority: "5", kube.AnnotationPreemptible: "true", kube.AnnotationTimeLimit: "2h",
			kube.AnnotationMinRuntime: "10m", kube.AnnotationExpectedDuration: "90m", kube.AnnotationTopology: "leaf:required",
			kube.AnnotationGPUModel: "H100-80GB", kube.AnnotationMinDriver: "535.104", kube.AnnotationDriver: "550.54.15",
		}), want: base().Priority(5).Preemptible().MinRuntime(600).Expect(5400, 7200).Topology(domain.TopologyLeaf, true).
			Model("H100-80GB").MinDriver("535.104").Driver("550.54.15").Spec()},
		{name: "preferred topology, models by preference", pods: annotated(
			map[string]string{kube.AnnotationTopology: "stripe", kube.AnnotationGPUModel: "H200-141GB, H100-80GB"},
			map[string]string{kube.AnnotationTopology: "stripe", kube.AnnotationGPUModel: "H200-141GB, H100-80GB"},
		), want: base().Topology(domain.TopologyStripe, false).Models("H200-141GB", "H100-80GB").Spec()},
		{name: "explicitly preferred", pods: annotated(map[string]string{kube.AnnotationTopology: "nvlink-domain:preferred"}),
			want: base().Topology(domain.TopologyNVLinkDomain, false).Spec()},

		{name: "pods disagree on the topology", pods: annotated(
			map[string]string{kube.AnnotationTopology: "leaf:required"}, map[string]string{kube.AnnotationTopology: "leaf"}),
			refuse: `pods p-0 and p-1 disagree on jobfabric.io/topology ("leaf:required" and "leaf")`},
		{name: "pods disagree on the model", pods: annotated(
			map[string]string{kube.AnnotationGPUModel: "H100-80GB"}, nil),
			refuse: `pods p-0 and p-1 disagree on jobfabric.io/gpu-model ("H100-80GB" and "")`},
		{name: "unknown level", pods: annotated(map[string]string{kube.AnnotationTopology: "rack"}),
			refuse: `jobfabric.io/topology "rack": topology level "rack" is not one of nvlink-domain, leaf, stripe, any`},
		{name: "unknown mode", pods: annotated(map[string]string{kube.AnnotationTopology: "leaf:strict"}),
			refuse: `jobfabric.io/topology "leaf:strict": the mode after ':' is required or preferred`},
		{name: "unknown model", pods: annotated(map[string]string{kube.AnnotationGPUModel: "H100"}),
			refuse: `jobfabric.io/gpu-model "H100": gpuModel "H100" is unknown; known models:`},
		{name: "model twice", pods: annotated(map[string]string{kube.AnnotationGPUModel: "H100-80GB,H100-80GB"}),
			refuse: `jobfabric.io/gpu-model "H100-80GB,H100-80GB": GPU model H100-80GB is listed twice`},
		{name: "driver not a version", pods: annotated(map[string]string{kube.AnnotationMinDriver: "latest"}),
			refuse: `jobfabric.io/min-driver "latest": minDriver "latest" is not a dotted numeric version`},
		{name: "driver older than the minimum", pods: annotated(map[string]string{kube.AnnotationMinDriver: "550", kube.AnnotationDriver: "535.104"}),
			refuse: `jobfabric.io/driver "535.104": driver 535.104 is older than minDriver 550`},
		{name: "expected beyond the limit", pods: annotated(map[string]string{kube.AnnotationTimeLimit: "1h", kube.AnnotationExpectedDuration: "2h"}),
			refuse: `jobfabric.io/expected-duration "2h": expectedDurationSeconds 7200 exceeds timeLimitSeconds 3600`},
		{name: "not a duration", pods: annotated(map[string]string{kube.AnnotationMinRuntime: "ten minutes"}),
			refuse: `jobfabric.io/min-runtime "ten minutes": not a duration such as 90m or 12h`},
		{name: "part of a second", pods: annotated(map[string]string{kube.AnnotationExpectedDuration: "1.5s"}),
			refuse: `jobfabric.io/expected-duration "1.5s": not a whole number of seconds`},
		{name: "beyond a year", pods: annotated(map[string]string{kube.AnnotationMinRuntime: "9000h"}),
			refuse: `jobfabric.io/min-runtime "9000h": minRuntimeSeconds is 32400000; it must be between 0 and 31622400`},
		{name: "priority out of range", pods: annotated(map[string]string{kube.AnnotationPriority: "2000000"}),
			refuse: `jobfabric.io/priority "2000000": priority is 2000000; it must be between -1000000 and 1000000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := base().Spec()
			why := kube.JobOptions(&got, "g", tc.pods)
			if tc.refuse != "" {
				if !strings.Contains(why, tc.refuse) {
					t.Fatalf("refusal %q, want it to say %q", why, tc.refuse)
				}
				return
			}
			if why != "" {
				t.Fatalf("refused: %s", why)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spec\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}
