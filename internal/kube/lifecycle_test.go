package kube_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/kube/kubetest"
	"github.com/jobfabric/jobfabric/internal/server"
)

// gang creates n gated pods NAME-0.. of gpus each in one pod group.
func gang(t *testing.T, e *env, ns, name string, n, gpus int) {
	t.Helper()
	for i := range n {
		gatedPod(t, e.kube, ns, fmt.Sprintf("%s-%d", name, i), name, n, gpus)
	}
}

// waitState waits until the job with ExternalID ext is in state.
func waitState(t *testing.T, e *env, ext string, state domain.JobState) domain.Job {
	t.Helper()
	return waitStateWithin(t, e, 30*time.Second, ext, state)
}

// waitStateWithin is waitState for at most d.
func waitStateWithin(t *testing.T, e *env, d time.Duration, ext string, state domain.JobState) domain.Job {
	t.Helper()
	var j domain.Job
	eventuallyWithin(t, d, ext+" "+string(state), func() (bool, string) {
		js := jobsWith(t, e.admin, ext)
		if len(js) != 1 {
			return false, fmt.Sprintf("%d jobs", len(js))
		}
		j = js[0]
		return j.State == state, fmt.Sprintf("job %d %s %+v", j.ID, j.State, j.Reason)
	})
	return j
}

// podsOf lists the pods of a pod group.
func podsOf(t *testing.T, e *env, ns, group string) []corev1.Pod {
	t.Helper()
	ps, err := e.kube.CoreV1().Pods(ns).List(ctxT(t), metav1.ListOptions{LabelSelector: kube.LabelPodGroup + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	return ps.Items
}

func allPods(t *testing.T, e *env, ns, group string, what string, ok func(p corev1.Pod) bool) {
	t.Helper()
	allPodsWithin(t, e, 30*time.Second, ns, group, what, ok)
}

// allPodsWithin is allPods for at most d.
func allPodsWithin(t *testing.T, e *env, d time.Duration, ns, group string, what string, ok func(p corev1.Pod) bool) {
	t.Helper()
	eventuallyWithin(t, d, group+": "+what, func() (bool, string) {
		ps := podsOf(t, e, ns, group)
		for _, p := range ps {
			if !ok(p) {
				return false, fmt.Sprintf("%s: phase %s node %q deleting %v", p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil)
			}
		}
		return len(ps) > 0, "no pods"
	})
}

// TestPodPhasesReportBack: the test kubelet runs the placed pods; their
// phases become the job's (running, succeeded, failed); a job cancelled in
// jobfabric deletes its pods; pods deleted while the bridge is down cancel
// their job once it is back; a bridge with an admin token serves only the
// tenants of its allowlist.
func TestPodPhasesReportBack(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	kl := kubetest.StartKubelet(t, e.kube)
	stop := e.startBridge(t)
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})

	gang(t, e, "team-a", "ok", 2, 4)
	gang(t, e, "team-a", "bad", 1, 4)
	waitState(t, e, "k8s:team-a/ok", domain.JobRunning)
	waitState(t, e, "k8s:team-a/bad", domain.JobRunning)
	allPods(t, e, "team-a", "ok", "running", func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	kl.Finish("team-a", "ok-0", corev1.PodSucceeded)
	// One pod of two done: the job runs on.
	kl.Finish("team-a", "bad-0", corev1.PodFailed)
	j := waitState(t, e, "k8s:team-a/bad", domain.JobFailed)
	if j.Message != "pod team-a/bad-0 failed" {
		t.Errorf("failed job's message %q", j.Message)
	}
	if j := jobsWith(t, e.admin, "k8s:team-a/ok"); j[0].State != domain.JobRunning {
		t.Fatalf("ok with one pod of two succeeded: %s", j[0].State)
	}
	kl.Finish("team-a", "ok-1", corev1.PodSucceeded)
	waitState(t, e, "k8s:team-a/ok", domain.JobSucceeded)
	if ps := podsOf(t, e, "team-a", "ok"); len(ps) != 2 || ps[0].DeletionTimestamp != nil {
		t.Fatalf("succeeded pods %d, deleted %v: they stay to be read", len(ps), ps[0].DeletionTimestamp)
	}

	t.Run("CancelledWhilePendingDeletesGatedPods", func(t *testing.T) {
		yes, no := true, false
		for i := 1; i <= 4; i++ {
			if err := e.admin.Do(ctx, "PATCH", fmt.Sprintf("/v1/nodes/s1-gpu%03d", i), api.NodeUpdateRequest{Cordoned: &yes}, nil); err != nil {
				t.Fatal(err)
			}
		}
		gang(t, e, "team-a", "queued", 1, 8)
		j := waitState(t, e, "k8s:team-a/queued", domain.JobPending)
		allPods(t, e, "team-a", "queued", "annotated", func(p corev1.Pod) bool { return p.Annotations[kube.AnnotationJob] == strconv.FormatUint(j.ID, 10) })
		if _, err := e.acme.CancelJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the queued pod deleted, not submitted again", func() (bool, string) {
			n := len(podsOf(t, e, "team-a", "queued"))
			return n == 0, fmt.Sprintf("%d pods", n)
		})
		if js := jobsWith(t, e.admin, "k8s:team-a/queued"); len(js) != 1 {
			t.Fatalf("jobs %+v, want the one cancelled", js)
		}
		for i := 1; i <= 4; i++ {
			if err := e.admin.Do(ctx, "PATCH", fmt.Sprintf("/v1/nodes/s1-gpu%03d", i), api.NodeUpdateRequest{Cordoned: &no}, nil); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("CancelledJobDeletesRunningPods", func(t *testing.T) {
		gang(t, e, "team-a", "cancelme", 2, 8)
		j := waitState(t, e, "k8s:team-a/cancelme", domain.JobRunning)
		if _, err := e.acme.CancelJob(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		allPods(t, e, "team-a", "cancelme", "being deleted", func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	})

	t.Run("BatchJobRetryIsANewJob", func(t *testing.T) {
		one := int32(1)
		bj, err := e.kube.BatchV1().Jobs("team-a").Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "retry", Namespace: "team-a"},
			Spec: batchv1.JobSpec{Parallelism: &one, Completions: &one, Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ext := "k8s:" + string(bj.UID)
		owned := func(name string) {
			p := podSpec("team-a", name, 8)
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(bj, batchv1.SchemeGroupVersion.WithKind("Job"))}
			create(t, e, p)
		}
		owned("retry-a")
		first := waitState(t, e, ext, domain.JobRunning)
		kl.Finish("team-a", "retry-a", corev1.PodFailed)
		eventually(t, "the first try failed", func() (bool, string) {
			j, err := e.admin.Job(ctx, first.ID)
			if err != nil {
				return false, err.Error()
			}
			return j.State == domain.JobFailed, string(j.State)
		})
		// The Job controller makes another pod (backoffLimit): a new job,
		// which the failed pod (still there, to be read) does not fail.
		owned("retry-b")
		var second domain.Job
		eventually(t, "the retry's job running", func() (bool, string) {
			all, err := e.admin.Jobs(ctx, client.JobQuery{})
			if err != nil {
				return false, err.Error()
			}
			for _, j := range all {
				if j.ExternalID == ext && j.ID != first.ID {
					second = j
				}
			}
			return second.State == domain.JobRunning, fmt.Sprintf("retry job %d %s", second.ID, second.State)
		})
		p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "retry-a", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || p.Annotations[kube.AnnotationJob] != strconv.FormatUint(first.ID, 10) {
			t.Fatalf("the failed pod: %v, annotations %v", err, p.Annotations)
		}
		kl.Finish("team-a", "retry-b", corev1.PodSucceeded)
		eventually(t, "the retry succeeded", func() (bool, string) {
			j, err := e.admin.Job(ctx, second.ID)
			if err != nil {
				return false, err.Error()
			}
			return j.State == domain.JobSucceeded, string(j.State)
		})
	})

	t.Run("PodsDeletedWhileBridgeDownCancel", func(t *testing.T) {
		gang(t, e, "team-a", "lost", 2, 8)
		j := waitState(t, e, "k8s:team-a/lost", domain.JobRunning)
		stop()
		zero := int64(0)
		for i := range 2 {
			if err := e.kube.CoreV1().Pods("team-a").Delete(ctx, fmt.Sprintf("lost-%d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
		stop = e.startBridge(t)
		eventually(t, "the lost gang's job cancelled", func() (bool, string) {
			got, err := e.admin.Job(ctx, j.ID)
			if err != nil {
				return false, err.Error()
			}
			return got.State == domain.JobCancelled, string(got.State)
		})
	})

	t.Run("AllowlistRefusesOtherTenants", func(t *testing.T) {
		stop()
		// An admin token serves every tenant; the allowlist is what keeps
		// a namespace's labels from choosing another.
		e.startBridgeWith(t, kube.Config{Jobs: e.admin, Runtime: e.admin, Tenants: []string{"acme"}})
		namespace(t, e.kube, "team-g", map[string]string{kube.LabelTenant: "globex", kube.LabelWorkspace: "infer"})
		p := gatedPod(t, e.kube, "team-g", "sneaky", "", 0, 8)
		refused(t, e, p, "names tenant globex, which this bridge does not serve")
		if js := jobsWith(t, e.admin, "k8s:"+string(p.UID)); len(js) != 0 {
			t.Fatalf("a job was submitted for globex: %+v", js)
		}
		gatedPod(t, e.kube, "team-a", "allowed", "", 0, 8)
		eventually(t, "acme's pod placed by the allowlisted bridge", func() (bool, string) {
			p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "allowed", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Spec.NodeName != "", "not bound"
		})
	})
}

// TestReclaimEvictsWithinGrace: acme's gang borrows every GPU; globex
// submits within its guarantee; jobfabric reclaims, and the bridge evicts
// the borrower's pods with the job's grace (5s here): each pod's deletion
// is due by the job's stop deadline; once the pods exit (on SIGTERM) the
// bridge reports the job stopped, it ends Preempted before its deadline,
// and globex's job is placed.
func TestReclaimEvictsWithinGrace(t *testing.T) {
	const grace = 5 * time.Second
	e := setupWith(t, func(c *server.Config) { c.PreemptionGrace = grace })
	ctx := ctxT(t)
	kl := kubetest.StartKubelet(t, e.kube)
	e.startBridge(t)
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})

	gang(t, e, "team-a", "wide", 4, 8)
	borrower := waitState(t, e, "k8s:team-a/wide", domain.JobRunning)
	lender, err := e.admin.SubmitJob(ctx, domain.JobSpec{Tenant: "globex", Workspace: "infer", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	var deadline time.Time
	eventually(t, "the borrower told to stop", func() (bool, string) {
		j, err := e.admin.Job(ctx, borrower.ID)
		if err != nil {
			return false, err.Error()
		}
		if j.StopDeadline != nil {
			deadline = *j.StopDeadline
		}
		return j.State == domain.JobPreempting || j.State.Terminal(), string(j.State)
	})
	allPods(t, e, "team-a", "wide", "evicted", func(p corev1.Pod) bool {
		if p.DeletionTimestamp == nil {
			return false
		}
		// Kubernetes keeps whole seconds: the grace was rounded up.
		if g := p.DeletionGracePeriodSeconds; g == nil || *g < 1 || *g > int64(grace/time.Second) {
			t.Fatalf("%s evicted with grace %v, want 1..%v", p.Name, g, grace)
		}
		if !deadline.IsZero() && p.DeletionTimestamp.After(deadline.Add(time.Second)) {
			t.Fatalf("%s due to go at %v, after the job's stop deadline %v", p.Name, p.DeletionTimestamp, deadline)
		}
		return true
	})
	// The workload exits on SIGTERM: the pods go before the deadline.
	kl.ExitOnDelete(true)
	// The bridge writes the event once every pod's eviction is sent: it
	// may follow the last deletion the test saw.
	eventually(t, "a Preempted event on wide-0", func() (bool, string) {
		evs, err := e.kube.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=wide-0"})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, ev := range evs.Items {
			reasons = append(reasons, ev.Reason)
		}
		return slices.Contains(reasons, "Preempted"), strings.Join(reasons, ",")
	})
	end := waitState(t, e, "k8s:team-a/wide", domain.JobPreempted)
	if len(podsOf(t, e, "team-a", "wide")) != 0 {
		t.Fatalf("the job ended Preempted with pods left")
	}
	if end.Message != "its pods are gone" || end.EndedAt == nil || !end.EndedAt.Before(deadline) {
		t.Errorf("preempted job ended at %v (deadline %v) with message %q, want the bridge's stopped report before the deadline", end.EndedAt, deadline, end.Message)
	}
	eventually(t, "globex placed", func() (bool, string) {
		j, err := e.admin.Job(ctx, lender.ID)
		if err != nil {
			return false, err.Error()
		}
		return j.State == domain.JobReady, string(j.State)
	})
}

// TestAPIServerRestart: kube-apiserver stops and starts again on the same
// etcd while the bridge runs; what happened in jobfabric meanwhile (a job
// cancelled) is acted on once it is back, a gang created just before the
// stop is placed exactly once, and one created after is placed too.
func TestAPIServerRestart(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	kubetest.StartKubelet(t, e.kube)
	e.startBridge(t)
	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})

	gang(t, e, "team-a", "before", 2, 8)
	first := waitState(t, e, "k8s:team-a/before", domain.JobRunning)
	gang(t, e, "team-a", "racing", 2, 8)
	down := time.Now()
	e.kc.StopAPIServer(t)
	if _, err := e.acme.CancelJob(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	// The outage lasts: client-go's reflectors back off from 0.8s,
	// doubling to 30s, jittered up to twice that, so after a long outage
	// their next try may come a minute after the server is back. The
	// wait is the outage's length, the condition under test, not a wait
	// for a result.
	<-time.After(outageHold)
	e.kc.StartAPIServer(t)
	back := time.Now()
	t.Logf("kube-apiserver down (stopped until ready again) %.1fs", back.Sub(down).Seconds())
	// The bridge deletes the pods its informer already holds: no list
	// needed.
	allPods(t, e, "team-a", "before", "deleted after the restart", func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	// A gang made after the restart is seen only once the bridge watches
	// pods again: its gate lifted is the bridge acting again (no kubelet
	// involved). Progress is asserted, the time only logged.
	gang(t, e, "team-a", "after", 2, 8)
	allPodsWithin(t, e, afterOutage, "team-a", "after", "released after the restart", func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == kube.Gate })
	})
	t.Logf("the bridge released a gang made after kube-apiserver was ready %.1fs later", time.Since(back).Seconds())
	// Running needs the test kubelet's informer too.
	waitStateWithin(t, e, afterOutage, "k8s:team-a/racing", domain.JobRunning)
	waitStateWithin(t, e, afterOutage, "k8s:team-a/after", domain.JobRunning)
	t.Logf("both gangs Running %.1fs after kube-apiserver was ready", time.Since(back).Seconds())
	for _, g := range []string{"before", "racing", "after"} {
		js := jobsWith(t, e.admin, "k8s:team-a/"+g)
		if len(js) != 1 {
			t.Fatalf("%s: %d jobs, want 1: %+v", g, len(js), js)
		}
		for _, p := range podsOf(t, e, "team-a", g) {
			if p.Annotations[kube.AnnotationJob] != strconv.FormatUint(js[0].ID, 10) {
				t.Errorf("%s: annotated job %q, want %d", p.Name, p.Annotations[kube.AnnotationJob], js[0].ID)
			}
		}
	}
	all, err := e.admin.Jobs(ctx, clientQueryAll())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("%d jobs after the restart, want 3: %+v", len(all), all)
	}
}

func clientQueryAll() client.JobQuery { return client.JobQuery{} }

// outageHold is how long kube-apiserver stays stopped in
// TestAPIServerRestart, besides the time it takes to stop and start.
const outageHold = 30 * time.Second

// afterOutage bounds what follows a kube-apiserver restart: generous, as
// the test asserts progress, not speed (the time is logged). The bridge
// probes /readyz within 2s of the server's return and watches anew
// (apiserver.go); before, its informers' client-go backoff (0.8s doubling
// to 30s, jittered up to twice) made it act again up to a minute later:
// 23.0, 48.9 and 48.7s after a 43s outage here (docs/benchmarks.md).
const afterOutage = 90 * time.Second
