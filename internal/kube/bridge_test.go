package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/kube/kubetest"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

func logger() *slog.Logger {
	if os.Getenv("JOBFABRIC_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// env is a real API server, a real jobfabric server (1 stripe x 4 servers
// x 8 GPUs, no fabric driver: placed jobs are Ready at once), tenants acme
// (workspace research) and globex (workspace infer), and the bridge's
// clients: jobs with acme's tenant-admin token (in pages of 1), inventory
// as admin.
type env struct {
	kc      *kubetest.Cluster
	kube    kubernetes.Interface
	admin   *client.Client
	acme    *client.Client
	runtime *client.Client // acme's runtime: the bridge's phase reports
	url     string         // the jobfabric server's API
}

func setup(t *testing.T) *env {
	return setupWith(t, nil)
}

func setupWith(t *testing.T, tune func(*server.Config)) *env {
	t.Helper()
	kc := kubetest.Start(t)
	ctx := ctxT(t)
	jf, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: logger(),
		Tune: func(c *server.Config) {
			c.FabricDriver = "none"
			if tune != nil {
				tune(c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jf.Close() })
	admin := jf.Client(0)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []api.TenantCreateRequest{
		{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5},
		{Name: "globex", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5},
	} {
		if _, err := admin.CreateTenant(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 16, BorrowLimit: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "globex", api.WorkspaceCreateRequest{Name: "infer", Guaranteed: 8, BorrowLimit: 8, LendLimit: 8}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	acme, err := client.New(jf.Servers[0].URL(), tok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	rtok, err := admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleRuntime, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := client.New(jf.Servers[0].URL(), rtok.Secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The bridge reads its jobs one at a time: every test with more live
	// jobs sees it follow the pages (GET /v1/jobs answers one, issue 18).
	acme.PageSize = 1
	return &env{kc: kc, kube: kc.Client, admin: admin, acme: acme, runtime: rt, url: jf.Servers[0].URL()}
}

// startBridge runs a bridge until the returned stop is called (or the
// test ends).
func (e *env) startBridge(t *testing.T) (stop func()) {
	return e.startBridgeWith(t, kube.Config{Jobs: e.acme, Runtime: e.runtime, Inventory: e.admin})
}

// startBridgeWith runs a bridge with cfg (its Kube, Interval and Logger
// filled in) until the returned stop is called or the test ends.
func (e *env) startBridgeWith(t *testing.T, cfg kube.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Kube, cfg.Interval, cfg.Logger = e.kube, 100*time.Millisecond, logger()
	b := kube.New(cfg)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bridge: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// recordedFacts are a real H100 host's facts, as its agent reports them
// (they match the generated topology's servers).
func recordedFacts(t *testing.T) domain.HostFacts {
	t.Helper()
	dir := os.DirFS("../hostfacts/testdata/hosts/h100-roce")
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir}
	f, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return *f
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond (it reads two APIs that have no common watch)
// until it holds, for at most 30s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	eventuallyWithin(t, 30*time.Second, what, cond)
}

// eventuallyWithin is eventually for at most d.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, d, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func namespace(t *testing.T, k kubernetes.Interface, name string, lbl map[string]string) {
	t.Helper()
	if _, err := k.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gatedPod is a pod asking for gpus, in group (of size) unless group is "".
func gatedPod(t *testing.T, k kubernetes.Interface, ns, name, group string, size, gpus int) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulingGates: []corev1.PodSchedulingGate{{Name: kube.Gate}},
			Containers: []corev1.Container{{Name: "train", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse(strconv.Itoa(gpus))}}}},
		},
	}
	if group != "" {
		p.Labels[kube.LabelPodGroup] = group
		p.Labels[kube.KeyPodGroupSize] = strconv.Itoa(size)
	}
	out, err := k.CoreV1().Pods(ns).Create(ctxT(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func jobsWith(t *testing.T, c *client.Client, ext string) []domain.Job {
	t.Helper()
	all, err := c.Jobs(ctxT(t), client.JobQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(j domain.Job) bool { return j.ExternalID != ext })
}

func TestBridge(t *testing.T) {
	e := setup(t)
	ctx := ctxT(t)
	stop := e.startBridge(t)
	top := t // the restarted bridge runs to the end of the test, not of a subtest

	t.Run("InventoryIsNodes", func(t *testing.T) {
		eventually(t, "4 Nodes with topology labels", func() (bool, string) {
			ns, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			n := 0
			for _, node := range ns.Items {
				if node.Labels[export.LabelFabric] != "" && node.Labels[export.LabelLeafGroup] != "" && node.Labels[fmt.Sprintf(export.LabelRailLeafFormat, 7)] != "" {
					n++
				}
			}
			return n == 4, fmt.Sprintf("%d of %d nodes labelled", n, len(ns.Items))
		})
	})

	namespace(t, e.kube, "team-a", map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"})
	// globex's namespace names acme's workspace; the bridge's token is acme's.
	namespace(t, e.kube, "team-b", map[string]string{kube.LabelTenant: "globex", kube.LabelWorkspace: "research"})
	namespace(t, e.kube, "unlabelled", nil)

	// The servers' agents' facts (a recorded H100 host): GPU UUIDs, so
	// bindings name CDI devices.
	for i := 1; i <= 4; i++ {
		if _, err := e.admin.ReportFacts(ctx, fmt.Sprintf("s1-gpu%03d", i), api.HostReportRequest{Facts: recordedFacts(t)}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("GangLandsWhereJobfabricPlacedIt", func(t *testing.T) {
		for _, n := range []string{"trainer-0", "trainer-1"} {
			gatedPod(t, e.kube, "team-a", n, "trainer", 2, 8)
		}
		var job domain.Job
		eventually(t, "the gang's job Ready", func() (bool, string) {
			js := jobsWith(t, e.admin, "k8s:team-a/trainer")
			if len(js) != 1 || js[0].State != domain.JobReady {
				return false, fmt.Sprintf("jobs %+v", js)
			}
			job = js[0]
			return true, ""
		})
		if job.Tenant != "acme" || job.Workspace != "research" || job.GPUs != 16 || len(job.Placement) != 2 {
			t.Fatalf("job %d: %s/%s %d GPUs on %d servers, want acme/research 16 on 2", job.ID, job.Tenant, job.Workspace, job.GPUs, len(job.Placement))
		}
		eventually(t, "both pods bound and ungated", func() (bool, string) {
			for _, n := range []string{"trainer-0", "trainer-1"} {
				p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if p.Spec.NodeName == "" || len(p.Spec.SchedulingGates) > 0 {
					return false, fmt.Sprintf("%s: node %q gates %v", n, p.Spec.NodeName, p.Spec.SchedulingGates)
				}
			}
			return true, ""
		})
		var got []string
		for _, n := range []string{"trainer-0", "trainer-1"} {
			p, _ := e.kube.CoreV1().Pods("team-a").Get(ctx, n, metav1.GetOptions{})
			node := p.Spec.NodeName
			got = append(got, node)
			if p.Annotations[kube.AnnotationJob] != strconv.FormatUint(job.ID, 10) || p.Annotations[kube.AnnotationNode] != node {
				t.Errorf("%s: annotations %v, want job %d on %s", n, p.Annotations, job.ID, node)
			}
			terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchFields) != 1 || !slices.Equal(terms[0].MatchFields[0].Values, []string{node}) {
				t.Errorf("%s: node affinity %+v, want metadata.name in [%s]", n, terms, node)
			}
			bd, err := e.admin.Binding(ctx, job.ID, node)
			if err != nil {
				t.Fatal(err)
			}
			if len(bd.CDIDevices) != 8 || p.Annotations[kube.AnnotationCDI] != strings.Join(bd.CDIDevices, ",") {
				t.Errorf("%s: CDI annotation %q, want the binding's 8 devices %v", n, p.Annotations[kube.AnnotationCDI], bd.CDIDevices)
			}
			if p.Annotations[kube.AnnotationTenant] != "acme" || p.Annotations[kube.AnnotationWorkspace] != "research" || p.Annotations[kube.AnnotationExternalID] != "k8s:team-a/trainer" {
				t.Errorf("%s: identity annotations %v", n, p.Annotations)
			}
			if len(bd.Env) == 0 || p.Annotations[kube.AnnotationEnv] != bd.Shell() {
				t.Errorf("%s: env annotation %q, want the binding on %s:\n%s", n, p.Annotations[kube.AnnotationEnv], node, bd.Shell())
			}
			for _, v := range bd.Env {
				if p.Annotations[kube.EnvAnnotationPrefix+v.Name] != v.Value {
					t.Errorf("%s: %s = %q, want %q", n, kube.EnvAnnotationPrefix+v.Name, p.Annotations[kube.EnvAnnotationPrefix+v.Name], v.Value)
				}
			}
		}
		var want []string
		for _, pl := range job.Placement {
			want = append(want, pl.Server)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("pods on %v, jobfabric placed the job on %v", got, want)
		}
	})

	t.Run("ForeignOrUnlabelledNamespaceRefused", func(t *testing.T) {
		for _, ns := range []string{"team-b", "unlabelled"} {
			p := gatedPod(t, e.kube, ns, "sneaky", "", 0, 8)
			eventually(t, ns+": a Refused event on the pod", func() (bool, string) {
				evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
				if err != nil {
					return false, err.Error()
				}
				for _, ev := range evs.Items {
					if ev.Reason == "Refused" && ev.Type == corev1.EventTypeWarning {
						t.Logf("%s: %s", ns, ev.Message)
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events", len(evs.Items))
			})
			p, err := e.kube.CoreV1().Pods(ns).Get(ctx, "sneaky", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: kube.Gate}) || p.Spec.NodeName != "" || p.Annotations[kube.AnnotationJob] != "" {
				t.Fatalf("%s: refused pod was touched: gates %v node %q annotations %v", ns, p.Spec.SchedulingGates, p.Spec.NodeName, p.Annotations)
			}
			if js := jobsWith(t, e.admin, "k8s:"+string(p.UID)); len(js) != 0 {
				t.Fatalf("%s: a job was submitted: %+v", ns, js)
			}
		}
	})

	t.Run("MalformedGangRefused", func(t *testing.T) {
		for _, tc := range []struct {
			group string
			pods  []int // GPUs of each pod
			size  int
			want  string
		}{
			{"mixed", []int{8, 4}, 2, "different GPUs (8 GPUs and 4 GPUs)"},
			{"nogpu", []int{0}, 1, "must request nvidia.com/gpu"},
			{"toomany", []int{8, 8}, 1, "has 2 pods, but its size is 1"},
		} {
			var last *corev1.Pod
			for i, g := range tc.pods {
				last = gatedPod(t, e.kube, "team-a", fmt.Sprintf("%s-%d", tc.group, i), tc.group, tc.size, g)
			}
			eventually(t, tc.group+": refused", func() (bool, string) {
				evs, err := e.kube.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(last.UID)})
				if err != nil {
					return false, err.Error()
				}
				for _, ev := range evs.Items {
					if ev.Reason == "Refused" && strings.Contains(ev.Message, tc.want) {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events, none says %q", len(evs.Items), tc.want)
			})
			// (toomany's first pod made a complete gang of one: its job
			// may be submitted before the second pod exists.)
			if js := jobsWith(t, e.admin, "k8s:team-a/"+tc.group); len(js) != 0 && tc.group != "toomany" {
				t.Fatalf("%s: jobs submitted: %+v", tc.group, js)
			}
			for i := range tc.pods {
				if err := e.kube.CoreV1().Pods("team-a").Delete(ctx, fmt.Sprintf("%s-%d", tc.group, i), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	t.Run("CordonSyncs", func(t *testing.T) {
		yes, no := true, false
		for _, cordon := range []*bool{&yes, &no} {
			var cond domain.NodeCondition
			if err := e.admin.Do(ctx, "PATCH", "/v1/nodes/s1-gpu004", api.NodeUpdateRequest{Cordoned: cordon}, &cond); err != nil {
				t.Fatal(err)
			}
			eventually(t, fmt.Sprintf("s1-gpu004 unschedulable=%v and tainted=%v", *cordon, *cordon), func() (bool, string) {
				n, err := e.kube.CoreV1().Nodes().Get(ctx, "s1-gpu004", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
					return t.Key == kube.TaintUnschedulable && t.Effect == corev1.TaintEffectNoSchedule
				})
				return n.Spec.Unschedulable == *cordon && tainted == *cordon, fmt.Sprintf("unschedulable=%v taints %v", n.Spec.Unschedulable, n.Spec.Taints)
			})
		}
	})

	t.Run("UnhealthyAndDriftAreNodeConditions", func(t *testing.T) {
		condition := func(typ corev1.NodeConditionType, want string) {
			t.Helper()
			eventually(t, fmt.Sprintf("s1-gpu003 %s %q", typ, want), func() (bool, string) {
				n, err := e.kube.CoreV1().Nodes().Get(ctx, "s1-gpu003", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == typ })
				if want == "" {
					return i < 0, fmt.Sprintf("conditions %+v", n.Status.Conditions)
				}
				return i >= 0 && n.Status.Conditions[i].Status == corev1.ConditionTrue && strings.Contains(n.Status.Conditions[i].Message, want),
					fmt.Sprintf("conditions %+v", n.Status.Conditions)
			})
		}
		yes, no := true, false
		if err := e.admin.Do(ctx, "PATCH", "/v1/nodes/s1-gpu003", api.NodeUpdateRequest{Unhealthy: &yes, Reason: "PSU alarm"}, nil); err != nil {
			t.Fatal(err)
		}
		condition(kube.ConditionUnhealthy, "PSU alarm")
		if err := e.admin.Do(ctx, "PATCH", "/v1/nodes/s1-gpu003", api.NodeUpdateRequest{Unhealthy: &no}, nil); err != nil {
			t.Fatal(err)
		}
		condition(kube.ConditionUnhealthy, "")
		drifted := recordedFacts(t)
		drifted.Driver = "550.54.15"
		if _, err := e.admin.ReportFacts(ctx, "s1-gpu003", api.HostReportRequest{Facts: drifted}); err != nil {
			t.Fatal(err)
		}
		condition(kube.ConditionDrift, "550.54.15")
		if _, err := e.admin.ReportFacts(ctx, "s1-gpu003", api.HostReportRequest{Facts: recordedFacts(t)}); err != nil {
			t.Fatal(err)
		}
		condition(kube.ConditionDrift, "")
		// The drift cordoned the server (the host policy): an admin lifts it.
		if err := e.admin.Do(ctx, "PATCH", "/v1/nodes/s1-gpu003", api.NodeUpdateRequest{Cordoned: &no}, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RestartDoesNotDuplicate", func(t *testing.T) {
		// 3 x 8 GPUs do not fit beside the trainer: the job stays Pending
		// and its pods gated across the restart.
		for i := range 3 {
			gatedPod(t, e.kube, "team-a", fmt.Sprintf("big-%d", i), "big", 3, 8)
		}
		var first domain.Job
		eventually(t, "the big gang submitted and annotated", func() (bool, string) {
			js := jobsWith(t, e.admin, "k8s:team-a/big")
			if len(js) != 1 {
				return false, fmt.Sprintf("%d jobs", len(js))
			}
			first = js[0]
			p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, "big-2", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Annotations[kube.AnnotationJob] == strconv.FormatUint(first.ID, 10), "annotation " + p.Annotations[kube.AnnotationJob]
		})
		eventually(t, "a Waiting event on big-0", func() (bool, string) {
			evs, err := e.kube.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=big-0"})
			if err != nil {
				return false, err.Error()
			}
			return slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool {
				return ev.Reason == "Waiting" && strings.Contains(ev.Message, fmt.Sprintf("job %d is Pending", first.ID))
			}), fmt.Sprintf("%d events", len(evs.Items))
		})
		stop()
		// A bridge that crashed between submitting and annotating: the
		// pods do not say their job, only jobfabric's ExternalID does.
		for i := range 3 {
			p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, fmt.Sprintf("big-%d", i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			delete(p.Annotations, kube.AnnotationJob)
			if _, err := e.kube.CoreV1().Pods("team-a").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.startBridge(top)
		eventually(t, "the restarted bridge re-annotates the same job", func() (bool, string) {
			for i := range 3 {
				p, err := e.kube.CoreV1().Pods("team-a").Get(ctx, fmt.Sprintf("big-%d", i), metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if p.Annotations[kube.AnnotationJob] != strconv.FormatUint(first.ID, 10) {
					return false, fmt.Sprintf("big-%d annotated %q, want %d", i, p.Annotations[kube.AnnotationJob], first.ID)
				}
			}
			return true, ""
		})
		if js := jobsWith(t, e.admin, "k8s:team-a/big"); len(js) != 1 {
			t.Fatalf("after the restart %d jobs have externalId k8s:team-a/big: %+v", len(js), js)
		}
		if js := jobsWith(t, e.admin, "k8s:team-a/trainer"); len(js) != 1 || js[0].State != domain.JobReady {
			t.Fatalf("after the restart the trainer has jobs %+v, want its one Ready job", js)
		}
	})

	t.Run("DeletingPodsCancelsTheJob", func(t *testing.T) {
		js := jobsWith(t, e.admin, "k8s:team-a/big")
		if len(js) != 1 {
			t.Fatalf("jobs of the big gang: %+v", js)
		}
		for i := range 3 {
			// (The first deletion cancels the job, whose cancel may delete
			// the others first.)
			if err := e.kube.CoreV1().Pods("team-a").Delete(ctx, fmt.Sprintf("big-%d", i), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		eventually(t, "the big job cancelled", func() (bool, string) {
			j, err := e.admin.Job(ctx, js[0].ID)
			if err != nil {
				return false, err.Error()
			}
			return j.State == domain.JobCancelled, string(j.State)
		})
	})

	t.Run("CancelledJobDeletesItsPods", func(t *testing.T) {
		js := jobsWith(t, e.admin, "k8s:team-a/trainer")
		if len(js) != 1 {
			t.Fatalf("jobs of the trainer: %+v", js)
		}
		if _, err := e.acme.CancelJob(ctx, js[0].ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the trainer's pods deleted", func() (bool, string) {
			ps, err := e.kube.CoreV1().Pods("team-a").List(ctx, metav1.ListOptions{LabelSelector: kube.LabelPodGroup + "=trainer"})
			if err != nil {
				return false, err.Error()
			}
			// Bound pods linger, deleted, until a kubelet lets go: there is none.
			live := slices.DeleteFunc(ps.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
			return len(live) == 0, fmt.Sprintf("%d pods not deleted", len(live))
		})
	})
}
