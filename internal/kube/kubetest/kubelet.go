package kubetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kubelet plays the kubelets of every node, as KWOK does: a pod bound to
// a node (spec.nodeName set) goes Pending -> Running; Finish ends it
// Succeeded or Failed; a pod being deleted is removed once its grace
// period (its deletionTimestamp) has passed, as a kubelet does after the
// container stopped. It runs no container.
type Kubelet struct {
	t      testing.TB
	client kubernetes.Interface
	kick   chan struct{}
	lister func() []*corev1.Pod

	mu sync.Mutex
	// finish holds the phase a test asked a pod (namespace/name) to end in.
	finish map[string]corev1.PodPhase
	// exitOnDelete: a pod being deleted goes at once (its process exits
	// on SIGTERM) instead of at the end of its grace.
	exitOnDelete bool
	// succeedOnRun: a running pod succeeds at once (a workload of no
	// length, for benchmarks of the control plane's turnaround).
	succeedOnRun bool
}

// StartKubelet runs a test kubelet until the test ends.
func StartKubelet(t testing.TB, c kubernetes.Interface) *Kubelet {
	t.Helper()
	k := &Kubelet{t: t, client: c, kick: make(chan struct{}, 1), finish: map[string]corev1.PodPhase{}}
	ctx, cancel := context.WithCancel(context.Background())
	// A reflector rather than an informer: its backoff can be bounded, so
	// after kube-apiserver restarts (TestAPIServerRestart) the test
	// kubelet lists again within a second, as the bridge does, instead of
	// client-go's default of up to a minute.
	store := &pokeStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), poke: k.poke, listed: make(chan struct{})}
	lw := cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	r := cache.NewReflectorWithOptions(lw, &corev1.Pod{}, store, cache.ReflectorOptions{Name: "test kubelet",
		Backoff: &wait.Backoff{Duration: 100 * time.Millisecond, Cap: time.Second, Factor: 2, Jitter: 0.5, Steps: 100}})
	k.lister = func() []*corev1.Pod {
		var ps []*corev1.Pod
		for _, o := range store.List() {
			ps = append(ps, o.(*corev1.Pod))
		}
		return ps
	}
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		r.RunWithContext(ctx)
	}()
	select {
	case <-store.listed:
	case <-time.After(time.Minute):
		t.Fatal("test kubelet: pods not listed within a minute")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		<-listed
	})
	return k
}

// ExitOnDelete makes pods being deleted go at once rather than at the end
// of their grace period (a workload that exits on SIGTERM).
func (k *Kubelet) ExitOnDelete(yes bool) {
	k.mu.Lock()
	k.exitOnDelete = yes
	k.mu.Unlock()
	k.poke()
}

// SucceedOnRun makes every pod succeed as soon as it runs.
func (k *Kubelet) SucceedOnRun(yes bool) {
	k.mu.Lock()
	k.succeedOnRun = yes
	k.mu.Unlock()
	k.poke()
}

// Finish ends the pod's containers: phase is Succeeded or Failed. A pod
// not yet running ends as soon as it runs.
func (k *Kubelet) Finish(namespace, name string, phase corev1.PodPhase) {
	k.mu.Lock()
	k.finish[namespace+"/"+name] = phase
	k.mu.Unlock()
	k.poke()
}

func (k *Kubelet) poke() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *Kubelet) run(ctx context.Context) {
	// A pod's grace ends with no event: look again each 100ms while one
	// is being deleted.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		for _, p := range k.lister() {
			if err := k.sync(ctx, p); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				k.t.Logf("test kubelet: pod %s/%s: %v", p.Namespace, p.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		case <-t.C:
		}
	}
}

func (k *Kubelet) sync(ctx context.Context, p *corev1.Pod) error {
	if p.Spec.NodeName == "" {
		return nil
	}
	pods := k.client.CoreV1().Pods(p.Namespace)
	k.mu.Lock()
	phase, finish := k.finish[p.Namespace+"/"+p.Name]
	exit := k.exitOnDelete
	if k.succeedOnRun && !finish {
		phase, finish = corev1.PodSucceeded, true
	}
	k.mu.Unlock()
	if p.DeletionTimestamp != nil {
		if !exit && time.Now().Before(p.DeletionTimestamp.Time) {
			return nil
		}
		zero := int64(0)
		return pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	}
	now := metav1.Now()
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return nil
	case p.Status.Phase != corev1.PodRunning:
		p = p.DeepCopy()
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	case finish:
		p = p.DeepCopy()
		p.Status.Phase = phase
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}
		code := int32(0)
		if phase == corev1.PodFailed {
			code = 1
		}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			cs.Ready = false
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: fmt.Sprint(phase), FinishedAt: now}}
		}
		_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// pokeStore wakes the kubelet on every change and says when the first
// list is in.
type pokeStore struct {
	cache.Store
	poke   func()
	listed chan struct{}
	once   sync.Once
}

func (s *pokeStore) Add(o any) error    { defer s.poke(); return s.Store.Add(o) }
func (s *pokeStore) Update(o any) error { defer s.poke(); return s.Store.Update(o) }
func (s *pokeStore) Delete(o any) error { defer s.poke(); return s.Store.Delete(o) }
func (s *pokeStore) Replace(list []any, rv string) error {
	defer s.poke()
	defer s.once.Do(func() { close(s.listed) })
	return s.Store.Replace(list, rv)
}
