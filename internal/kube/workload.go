package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// group is a gang: the pods of one pod-group label value in a namespace,
// or one pod without the label.
type group struct {
	namespace, name string
	single          bool
	pods            []*corev1.Pod // sorted by name
}

// externalID names the gang in jobfabric: namespace/group, or the pod's
// UID for a pod of its own (a pod re-created under the same name is
// another workload).
func (g *group) externalID() string {
	if g.single {
		return ExternalSystem + ":" + string(g.pods[0].UID)
	}
	return ExternalSystem + ":" + g.namespace + "/" + g.name
}

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == Gate })
}

func jobOf(p *corev1.Pod) (uint64, bool) {
	id, err := strconv.ParseUint(p.Annotations[AnnotationJob], 10, 64)
	return id, err == nil && id > 0
}

// groups lists the gangs the bridge is concerned with: pods still gated,
// and pods it placed (their job may be cancelled).
func (b *Bridge) groups() ([]*group, error) {
	pods, err := b.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byKey := map[[2]string]*group{}
	var out []*group
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, ok := jobOf(p); !ok && !gated(p) {
			continue
		}
		name, single := p.Labels[LabelPodGroup], false
		if name == "" {
			name, single = "pod/"+p.Name, true
		}
		k := [2]string{p.Namespace, name}
		g := byKey[k]
		if g == nil {
			g = &group{namespace: p.Namespace, name: name, single: single}
			byKey[k] = g
			out = append(out, g)
		}
		g.pods = append(g.pods, p)
	}
	for _, g := range out {
		slices.SortFunc(g.pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(out, func(a, b *group) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	return out, nil
}

// syncGroup moves one gang on: submit its job, then once the job is Ready
// bind each pod to its server and lift the gate; a job cancelled in
// jobfabric deletes the pods.
func (b *Bridge) syncGroup(ctx context.Context, g *group) error {
	var id uint64
	for _, p := range g.pods {
		if j, ok := jobOf(p); ok {
			id = j
		}
	}
	var open []*corev1.Pod
	for _, p := range g.pods {
		if gated(p) {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return b.followPlaced(ctx, g, id)
	}
	spec, why := b.jobSpec(g)
	if why != "" {
		b.refuse(ctx, open, "Refused", why)
		return nil
	}
	if spec == nil {
		return nil // the gang is not complete yet
	}
	var job *domain.Job
	var err error
	if id != 0 {
		job, err = b.cfg.Jobs.Job(ctx, id)
	} else {
		job, err = b.adoptOrSubmit(ctx, g, spec)
	}
	if err != nil {
		if !refusal(err) {
			return err
		}
		b.refuse(ctx, open, "Refused", fmt.Sprintf("jobfabric refused the job of pod group %s: %v", g.name, err))
		return nil
	}
	if id == 0 {
		if err := b.annotate(ctx, g.pods, map[string]string{AnnotationJob: strconv.FormatUint(job.ID, 10), AnnotationExternalID: spec.ExternalID}); err != nil {
			return err
		}
		open = slices.DeleteFunc(slices.Clone(g.pods), func(p *corev1.Pod) bool { return !gated(p) })
	}
	switch {
	case job.State == domain.JobCancelled:
		return b.deletePods(ctx, g, job)
	case job.State.Terminal():
		b.refuse(ctx, open, "JobEnded", fmt.Sprintf("jobfabric job %d is %s before its pods were placed", job.ID, job.State))
		return nil
	case job.State != domain.JobReady && job.State != domain.JobRunning:
		b.logWaiting(g, job)
		// Once per state: kubectl describe says why the pods wait.
		b.event(ctx, open, corev1.EventTypeNormal, "Waiting", fmt.Sprintf("jobfabric job %d is %s; the pods are released when it is Ready (GPUs placed, the tenant's network deployed)", job.ID, job.State))
		return nil
	}
	return b.place(ctx, g, job, open)
}

// jobSpec is the job the gang asks for, or why it is refused; nil and ""
// while pods of the gang are missing.
func (b *Bridge) jobSpec(g *group) (*domain.JobSpec, string) {
	ns, err := b.namespaces.Get(g.namespace)
	if err != nil {
		return nil, fmt.Sprintf("namespace %s: %v", g.namespace, err)
	}
	tenant, ws := ns.Labels[LabelTenant], ns.Labels[LabelWorkspace]
	if tenant == "" || ws == "" {
		return nil, fmt.Sprintf("namespace %s needs the labels %s and %s naming the jobfabric tenant and workspace its pods use", g.namespace, LabelTenant, LabelWorkspace)
	}
	want := 1
	if !g.single {
		raw := ""
		for _, p := range g.pods {
			if v := p.Labels[KeyPodGroupSize]; v != "" {
				raw = v
			} else if v := p.Annotations[KeyPodGroupSize]; v != "" {
				raw = v
			}
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Sprintf("pod group %s: %s %q must be the number of pods in the group (1 to 10000), as a label or annotation", g.name, KeyPodGroupSize, raw)
		}
		want = n
	}
	if len(g.pods) < want {
		return nil, ""
	}
	if len(g.pods) > want {
		return nil, fmt.Sprintf("pod group %s has %d pods, but %s says %d", g.name, len(g.pods), KeyPodGroupSize, want)
	}
	per := -1
	for _, p := range g.pods {
		n := podGPUs(p)
		if per >= 0 && n != per {
			return nil, fmt.Sprintf("pod group %s: pods ask for different %s counts (%d and %d); a gang's pods must be alike", g.name, ResourceGPU, per, n)
		}
		per = n
	}
	if per < 1 {
		return nil, fmt.Sprintf("pod group %s: each pod must request %s (at least 1)", g.name, ResourceGPU)
	}
	s := &domain.JobSpec{Tenant: tenant, Workspace: ws, GPUs: per * want, ExternalID: g.externalID()}
	if want > 1 {
		s.GPUsPerNode = per
	}
	if len(g.name) <= domain.MaxNameLen && domain.ValidateName("name", g.name) == nil {
		s.Name = g.name
	}
	return s, ""
}

// podGPUs sums the containers' nvidia.com/gpu (extended resources are
// requested as limits; a request, when given, equals the limit).
func podGPUs(p *corev1.Pod) int {
	n := 0
	for _, c := range p.Spec.Containers {
		q, ok := c.Resources.Limits[ResourceGPU]
		if !ok {
			q = c.Resources.Requests[ResourceGPU]
		}
		n += int(q.Value())
	}
	return n
}

// adoptOrSubmit finds the live job a previous run (or a bridge that
// crashed before annotating) submitted for the gang, else submits one.
func (b *Bridge) adoptOrSubmit(ctx context.Context, g *group, spec *domain.JobSpec) (*domain.Job, error) {
	j, err := b.cfg.Jobs.JobByExternalID(ctx, spec.ExternalID)
	switch {
	case err == nil && !j.State.Terminal():
		b.cfg.Logger.Info("kube bridge: adopted job", "job", j.ID, "externalId", spec.ExternalID)
		return j, nil
	case err != nil && !isCode(err, domain.CodeNotFound):
		return nil, err
	}
	j, err = b.cfg.Jobs.SubmitJob(ctx, *spec)
	if err != nil {
		return nil, err
	}
	b.cfg.Logger.Info("kube bridge: submitted job", "job", j.ID, "externalId", spec.ExternalID, "tenant", spec.Tenant, "workspace", spec.Workspace, "gpus", spec.GPUs)
	return j, nil
}

// place binds each gated pod to its server: node affinity, the binding's
// env and the job's identity as annotations, the gate removed (one
// update, allowed while the pod is gated), then the pod bound to the node.
func (b *Bridge) place(ctx context.Context, g *group, job *domain.Job, open []*corev1.Pod) error {
	servers := make([]string, 0, len(job.Placement))
	for _, pl := range job.Placement {
		servers = append(servers, pl.Server)
	}
	if len(servers) != len(g.pods) {
		return fmt.Errorf("job %d is placed on %d servers for %d pods", job.ID, len(servers), len(g.pods))
	}
	// Pods keep a server once chosen (a pass may have been cut short);
	// the others take the free servers in order.
	taken := map[string]bool{}
	for _, p := range g.pods {
		if n := p.Annotations[AnnotationNode]; n != "" {
			taken[n] = true
		}
	}
	free := slices.DeleteFunc(slices.Clone(servers), func(s string) bool { return taken[s] })
	for _, p := range open {
		node := p.Annotations[AnnotationNode]
		if node == "" || !slices.Contains(servers, node) {
			if len(free) == 0 {
				return fmt.Errorf("job %d: no server left for pod %s", job.ID, p.Name)
			}
			node, free = free[0], free[1:]
		}
		bd, err := b.cfg.Jobs.Binding(ctx, job.ID, node)
		if err != nil {
			return fmt.Errorf("binding of job %d on %s: %w", job.ID, node, err)
		}
		if err := b.release(ctx, p, job, node, bd); err != nil {
			return err
		}
		b.cfg.Logger.Info("kube bridge: pod placed", "namespace", p.Namespace, "pod", p.Name, "node", node, "job", job.ID)
	}
	return nil
}

func (b *Bridge) release(ctx context.Context, cached *corev1.Pod, job *domain.Job, node string, bd *binding.Binding) error {
	p := cached.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[AnnotationJob] = strconv.FormatUint(job.ID, 10)
	p.Annotations[AnnotationNode] = node
	p.Annotations[AnnotationEnv] = bd.Shell()
	for _, e := range bd.Env {
		if k := EnvAnnotationPrefix + e.Name; len(validation.IsQualifiedName(k)) == 0 {
			p.Annotations[k] = e.Value
		}
	}
	requireNode(p, node)
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == Gate })
	up, err := b.cfg.Kube.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{FieldManager: Component})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if up.Spec.NodeName != "" || len(up.Spec.SchedulingGates) > 0 {
		return nil // another gate holds it, or a scheduler was first
	}
	// Bind as a scheduler would: the affinity says the same to any
	// scheduler that runs, and the pod lands even where none does.
	err = b.cfg.Kube.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("bind pod %s/%s to %s: %w", p.Namespace, p.Name, node, err)
	}
	return nil
}

// requireNode narrows the pod's required node affinity to node: a gated
// pod's affinity may be set when it had none, and only narrowed after.
func requireNode(p *corev1.Pod, node string) {
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := p.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchFields = append(terms[i].MatchFields, req)
	}
}

// followPlaced watches a gang already placed: its job cancelled in
// jobfabric deletes the pods.
func (b *Bridge) followPlaced(ctx context.Context, g *group, id uint64) error {
	if id == 0 {
		return nil
	}
	job, err := b.cfg.Jobs.Job(ctx, id)
	if err != nil {
		return err
	}
	if job.State == domain.JobCancelled {
		return b.deletePods(ctx, g, job)
	}
	return nil
}

func (b *Bridge) deletePods(ctx context.Context, g *group, job *domain.Job) error {
	for _, p := range g.pods {
		err := b.cfg.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s of cancelled job %d: %w", p.Namespace, p.Name, job.ID, err)
		}
		b.cfg.Logger.Info("kube bridge: job cancelled, pod deleted", "namespace", p.Namespace, "pod", p.Name, "job", job.ID)
	}
	return nil
}

func (b *Bridge) annotate(ctx context.Context, pods []*corev1.Pod, ann map[string]string) error {
	for i, cached := range pods {
		p := cached.DeepCopy() // the lister's objects are shared: never written
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for k, v := range ann {
			p.Annotations[k] = v
		}
		up, err := b.cfg.Kube.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{FieldManager: Component})
		if err != nil {
			return fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		pods[i] = up // the same pass goes on with the new version
	}
	return nil
}

func (b *Bridge) logWaiting(g *group, job *domain.Job) {
	key := g.namespace + "/" + g.name
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting[key] == job.State {
		return
	}
	b.waiting[key] = job.State
	b.cfg.Logger.Info("kube bridge: waiting for the job to be Ready", "namespace", g.namespace, "group", g.name, "job", job.ID, "state", job.State)
}

// refuse writes a warning event on each pod, once per message: the pods
// stay gated.
func (b *Bridge) refuse(ctx context.Context, pods []*corev1.Pod, reason, msg string) {
	b.event(ctx, pods, corev1.EventTypeWarning, reason, msg)
}

// event writes an event on each pod, once per reason and message.
func (b *Bridge) event(ctx context.Context, pods []*corev1.Pod, typ, reason, msg string) {
	for _, p := range pods {
		b.mu.Lock()
		seen := b.reported[string(p.UID)][reason+"\x00"+msg]
		b.mu.Unlock()
		if seen {
			continue
		}
		now := metav1.NewTime(b.cfg.Clock.Now())
		ev := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name,
				UID: p.UID, ResourceVersion: p.ResourceVersion},
			Reason: reason, Message: msg, Type: typ, Count: 1,
			FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: Component},
			ReportingController: "jobfabric.io/bridge", ReportingInstance: Component,
		}
		if _, err := b.cfg.Kube.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			b.cfg.Logger.Warn("kube bridge: write event", "namespace", p.Namespace, "pod", p.Name, "err", err)
			continue
		}
		b.cfg.Logger.Debug("kube bridge: event", "namespace", p.Namespace, "pod", p.Name, "reason", reason, "message", msg)
		b.mu.Lock()
		if b.reported[string(p.UID)] == nil {
			b.reported[string(p.UID)] = map[string]bool{}
		}
		b.reported[string(p.UID)][reason+"\x00"+msg] = true
		b.mu.Unlock()
	}
}
