package kube_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
)

// TestBridgeNeverTakesAnotherTenantsJob, with a real API server and a
// platform-wide bridge: a pod group's external id is its namespace and
// name (k8s:team-a/victim), which another tenant can guess and submit
// first, and a user can annotate a pod with any job's id. Neither makes
// the bridge put one tenant's pods on another tenant's job: acme's gang
// gets acme's own job, and acme's pod that names globex's job is never
// bound to globex's server.
func TestBridgeNeverTakesAnotherTenantsJob(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	tok, err := e.admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleMember, Tenant: "globex", Workspace: "infer"})
	if err != nil {
		t.Fatal(err)
	}
	globex, err := client.New(e.url, tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	squat, err := globex.SubmitJob(ctx, domain.JobSpec{GPUs: 8, GPUsPerNode: 8, ExternalID: "k8s:team-a/victim"})
	if err != nil {
		t.Fatal(err)
	}
	var theirs string
	eventually(t, "globex's job Ready", func() (bool, string) {
		j, err := e.admin.Job(ctx, squat.ID)
		if err != nil || j.State != domain.JobReady {
			return false, fmt.Sprint(j.State, err)
		}
		theirs = j.Placement[0].Server
		return true, ""
	})
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})
	e.startBridgeWith(t, kube.Config{Jobs: e.admin, Runtime: e.admin, Inventory: e.admin})

	gatedPod(t, e.kube, "team-a", "victim-0", "victim", 1, 8)
	intruder := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: "team-a",
			Annotations: map[string]string{kube.AnnotationJob: strconv.FormatUint(squat.ID, 10)}},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
			Containers: []corev1.Container{{Name: "x", Image: "x:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("8")}}}},
		},
	}
	if _, err := e.kube.CoreV1().Pods("team-a").Create(ctx, intruder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mine domain.Job
	eventually(t, "acme's own job for the gang, and the pod bound to it", func() (bool, string) {
		for _, j := range jobsWith(t, e.admin, "k8s:team-a/victim") {
			if j.Tenant == "acme" && j.State == domain.JobReady {
				mine = j
			}
		}
		if mine.ID == 0 {
			return false, "no Ready job of acme with the gang's id"
		}
		p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "victim-0", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" {
			return false, fmt.Sprint("victim-0 not bound ", err)
		}
		if p.Spec.NodeName != mine.Placement[0].Server || p.Annotations[kube.AnnotationJob] != strconv.FormatUint(mine.ID, 10) {
			return false, fmt.Sprintf("victim-0 on %s for job %s; acme's job %d is on %s", p.Spec.NodeName, p.Annotations[kube.AnnotationJob], mine.ID, mine.Placement[0].Server)
		}
		return true, ""
	})
	// The bridge has had passes enough to bind the intruder, had it
	// believed the annotation: it must not be on globex's server.
	time.Sleep(time.Second)
	p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "intruder", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName == theirs || p.Annotations[kube.AnnotationNode] == theirs {
		t.Fatalf("acme's pod naming globex's job %d was bound to globex's server %s", squat.ID, theirs)
	}
	if j, err := e.admin.Job(ctx, squat.ID); err != nil || j.State != domain.JobReady {
		t.Fatalf("globex's job after the bridge's passes: %v %v", j.State, err)
	}
}
