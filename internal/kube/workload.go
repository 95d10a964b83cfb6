package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == Gate })
}

func jobOf(p *corev1.Pod) (uint64, bool) {
	id, err := strconv.ParseUint(p.Annotations[AnnotationJob], 10, 64)
	return id, err == nil && id > 0
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// liveJobs are the bridge's jobs that hold or wait for GPUs, read once a
// pass (one list instead of a lookup per gang).
type liveJobs struct {
	// byExt: each tenant's external ids are its own, and a gang's id may
	// be guessed (k8s:CLUSTER:NAMESPACE/GROUP), so an id can name jobs of
	// several tenants; a gang's job is its namespace's tenant's (of).
	byExt map[string][]*domain.Job
	byID  map[uint64]*domain.Job
}

// of is the live job of tenant with external id key, nil when none.
func (l *liveJobs) of(key, tenant string) *domain.Job {
	for _, j := range l.byExt[key] {
		if tenant != "" && j.Tenant == tenant {
			return j
		}
	}
	return nil
}

// tenantOf is the tenant a namespace's label names, "" when it names none
// (or the namespace is gone).
func (b *Bridge) tenantOf(namespace string) string {
	ns, err := b.namespaces.Get(namespace)
	if err != nil {
		return ""
	}
	return ns.Labels[LabelTenant]
}

// syncGroup moves one gang on: submit its job, then once the job is Ready
// bind each pod to its server and lift the gate; report the pods' phases;
// evict the pods of a job told to stop; delete those of a job that ended.
func (b *Bridge) syncGroup(ctx context.Context, g *group, live *liveJobs) error {
	tenant := b.tenantOf(g.namespace)
	job := live.of(g.key, tenant)
	// A pod names its job by annotation; the bridge writes it, but a user
	// may too: a job of another tenant is never the gang's (its pods
	// would run on that tenant's GPUs, in its network).
	byID := func(id uint64) *domain.Job {
		if j := live.byID[id]; j != nil && tenant != "" && j.Tenant == tenant {
			return j
		}
		return nil
	}
	// Pods annotated with a job that is no longer live belong to it, not
	// to the gang: dealt with once (deleted if still running, or all if it
	// was cancelled, even before they were placed), never submitted again.
	// The others (a Job controller's retries, a group made again) are the
	// gang, with its live job or a new one.
	stale := map[uint64][]*corev1.Pod{}
	cur := *g
	cur.pods, cur.gone = nil, nil
	for _, p := range g.pods {
		id, ok := jobOf(p)
		switch {
		case ok && byID(id) == nil:
			stale[id] = append(stale[id], p)
			continue
		case ok && job == nil:
			job = byID(id)
		}
		cur.pods = append(cur.pods, p)
	}
	for _, p := range g.gone {
		if id, ok := jobOf(p); !ok || byID(id) != nil {
			cur.gone = append(cur.gone, p)
		}
	}
	for id, pods := range stale {
		if err := b.ended(ctx, pods, id); err != nil {
			return err
		}
	}
	g = &cur
	if job == nil && len(g.pods) == 0 {
		return nil
	}
	open := slices.DeleteFunc(slices.Clone(g.pods), func(p *corev1.Pod) bool { return !gated(p) })
	if job == nil {
		if len(open) == 0 {
			return nil
		}
		b.preferencesIgnored(ctx, open)
		spec, why, err := b.jobSpec(ctx, g)
		if err != nil {
			return err
		}
		if why != "" {
			b.refuse(ctx, open, "Refused", why)
			return nil
		}
		if spec == nil {
			return nil // the gang is not complete yet
		}
		job, err = b.submit(ctx, spec)
		if err != nil {
			if !refusal(err) {
				return err
			}
			b.refuse(ctx, open, "Refused", fmt.Sprintf("jobfabric refused the job of pod group %s: %s", g.name, message(err)))
			return nil
		}
		if job.State.Terminal() {
			return b.ended(ctx, g.pods, job.ID)
		}
	}
	if want, _ := b.size(g); len(open) > 0 && want > 0 && len(g.pods) > want {
		// A pod joined a gang already submitted.
		b.refuse(ctx, open, "Refused", fmt.Sprintf("pod group %s has %d pods, but its size is %d", g.name, len(g.pods), want))
		return nil
	}
	var unmarked []*corev1.Pod
	for _, p := range g.pods {
		if p.Annotations[AnnotationJob] != strconv.FormatUint(job.ID, 10) {
			unmarked = append(unmarked, p)
		}
	}
	if len(unmarked) > 0 {
		if err := b.annotate(ctx, unmarked, map[string]string{AnnotationJob: strconv.FormatUint(job.ID, 10), AnnotationExternalID: job.ExternalID}); err != nil {
			return err
		}
		for _, up := range unmarked { // the same pass goes on with the new versions
			for i := range g.pods {
				if g.pods[i].UID == up.UID {
					g.pods[i] = up
				}
			}
		}
		open = slices.DeleteFunc(slices.Clone(g.pods), func(p *corev1.Pod) bool { return !gated(p) })
	}
	switch job.State {
	case domain.JobPreempting:
		return b.evict(ctx, g, job)
	case domain.JobReady, domain.JobRunning:
		if len(open) > 0 {
			if err := b.place(ctx, g, job, open); err != nil {
				return err
			}
			return nil // the phases are read from the next pass's pods
		}
		return b.phases(ctx, g, job)
	default:
		if job.State == domain.JobPending && job.Pool != "" {
			// Nodes relabelled or tainted: the waiting gang follows its
			// pods' constraint, in the pool its job names.
			if b.ownPool(job.Pool) {
				if _, why, err := b.nodePool(ctx, g, job.Pool); err != nil || why != "" {
					b.cfg.Logger.Warn("kube bridge: the pool of a waiting gang", "group", g.name, "pool", job.Pool, "why", why, "err", err)
				}
			}
		}
		b.logWaiting(g, job)
		// Once per state: kubectl describe says why the pods wait.
		b.event(ctx, open, corev1.EventTypeNormal, "Waiting", fmt.Sprintf("jobfabric job %d is %s; the pods are released when it is Ready (GPUs placed, the tenant's network deployed)", job.ID, job.State))
		return nil
	}
}

// preferencesIgnored says on each pod with preferred node affinity that
// jobfabric does not weigh it: the scheduler ranks servers by topology and
// fragmentation, and a job has no notion of a preferred server (only of
// GPU models and a topology level it prefers), so a preference cannot
// steer placement; the event spares users wondering why it was not met.
func (b *Bridge) preferencesIgnored(ctx context.Context, pods []*corev1.Pod) {
	var with []*corev1.Pod
	for _, p := range pods {
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
			with = append(with, p)
		}
	}
	b.event(ctx, with, corev1.EventTypeNormal, ReasonPreferenceIgnored, "jobfabric places the gang by its own topology and packing rules and does not weigh "+
		"preferredDuringSchedulingIgnoredDuringExecution node affinity; required node affinity, nodeSelector and tolerations are honoured, "+
		"and the annotations "+AnnotationGPUModel+" (models by preference) and "+AnnotationTopology+" (LEVEL:preferred) state preferences jobfabric weighs")
}

func message(err error) string {
	var de *domain.Error
	if errors.As(err, &de) && de.Message != "" {
		return de.Message
	}
	return err.Error()
}

// jobSpec is the job the gang asks for, or why it is refused; nil and ""
// while pods of the gang are missing.
func (b *Bridge) jobSpec(ctx context.Context, g *group) (*domain.JobSpec, string, error) {
	ns, err := b.namespaces.Get(g.namespace)
	if err != nil {
		return nil, fmt.Sprintf("namespace %s: %v", g.namespace, err), nil
	}
	tenant, ws := ns.Labels[LabelTenant], ns.Labels[LabelWorkspace]
	if tenant == "" || ws == "" {
		return nil, fmt.Sprintf("namespace %s needs the labels %s and %s naming the jobfabric tenant and workspace its pods use", g.namespace, LabelTenant, LabelWorkspace), nil
	}
	if len(b.cfg.Tenants) > 0 && !slices.Contains(b.cfg.Tenants, tenant) {
		return nil, fmt.Sprintf("namespace %s names tenant %s, which this bridge does not serve (its --tenant list)", g.namespace, tenant), nil
	}
	want, why := b.size(g)
	if why != "" || want == 0 {
		return nil, why, nil
	}
	if len(g.pods) < want {
		return nil, "", nil
	}
	if len(g.pods) > want {
		return nil, fmt.Sprintf("pod group %s has %d pods, but its size is %d", g.name, len(g.pods), want), nil
	}
	var per request
	for i, p := range g.pods {
		r, why, err := b.podRequest(ctx, p)
		if err != nil || why != "" {
			return nil, why, err
		}
		if i > 0 && r != per {
			why := fmt.Sprintf("pod group %s: pods ask for different GPUs (%s and %s); a gang's pods must be alike", g.name, per, r)
			if g.kind == kindLWS {
				// A jobfabric job spreads its GPUs evenly (gpusPerNode):
				// it has no shape for a smaller leader.
				why += ": jobfabric places a gang as equal shares, one per server, so a LeaderWorkerSet's leader asks for as many GPUs as each worker"
			}
			return nil, why, nil
		}
		per = r
	}
	if want > 1 && (per.migProfile != "" || per.share > 0) {
		return nil, fmt.Sprintf("pod group %s: MIG slices and shares are for one pod (they are placed on one server), not a gang of %d", g.name, want), nil
	}
	s := &domain.JobSpec{Tenant: tenant, Workspace: ws, ExternalID: g.key}
	jobRequest(s, per, want)
	if why := jobOptions(s, g); why != "" {
		return nil, why, nil
	}
	// Placed only on the Nodes its pods may run on: a kubelet refuses a
	// pod bound off its nodeSelector or required node affinity.
	pool, why, err := b.nodePool(ctx, g, "")
	if err != nil || why != "" {
		return nil, why, err
	}
	s.Pool = pool
	if len(g.name) <= domain.MaxNameLen && domain.ValidateName("name", g.name) == nil {
		s.Name = g.name
	} else if n := strings.ReplaceAll(g.name, "/", "-"); len(n) <= domain.MaxNameLen && domain.ValidateName("name", n) == nil {
		s.Name = n
	}
	return s, "", nil
}

// jobOption is a pod annotation that sets JobSpec fields: set parses
// the raw value; fields are the JobSpec fields (as domain.ValidateJobSpec
// names them) whose rules the value must also meet.
type jobOption struct {
	key    string
	fields []string
	set    func(s *domain.JobSpec, raw string) error
}

var jobOptionList = []jobOption{
	{AnnotationPriority, []string{"priority"}, func(s *domain.JobSpec, raw string) (err error) {
		s.Priority, err = strconv.Atoi(raw)
		return err
	}},
	{AnnotationPreemptible, nil, func(s *domain.JobSpec, raw string) (err error) {
		s.Preemptible, err = strconv.ParseBool(raw)
		return err
	}},
	{AnnotationTimeLimit, []string{"timeLimitSeconds"}, durationOption(func(s *domain.JobSpec) *int64 { return &s.TimeLimitSeconds })},
	{AnnotationMinRuntime, []string{"minRuntimeSeconds"}, durationOption(func(s *domain.JobSpec) *int64 { return &s.MinRuntimeSeconds })},
	{AnnotationExpectedDuration, []string{"expectedDurationSeconds"}, durationOption(func(s *domain.JobSpec) *int64 { return &s.ExpectedDurationSeconds })},
	{AnnotationTopology, []string{"topology", "topology.level"}, func(s *domain.JobSpec, raw string) error {
		// LEVEL[:required|:preferred], as jobfabric job submit --topology.
		level, mode, _ := strings.Cut(raw, ":")
		s.Topology = &domain.TopologyRequirement{Level: level}
		switch mode {
		case "", "preferred":
		case "required":
			s.Topology.Required = true
		default:
			return fmt.Errorf("the mode after ':' is required or preferred, not %q", mode)
		}
		return nil
	}},
	{AnnotationGPUModel, []string{"gpuModel", "gpuModels"}, func(s *domain.JobSpec, raw string) error {
		// One model, or several in order of preference (gpuModels).
		models := strings.Split(raw, ",")
		for i := range models {
			models[i] = strings.TrimSpace(models[i])
		}
		if len(models) == 1 {
			s.GPUModel = models[0]
		} else {
			s.GPUModels = models
		}
		return nil
	}},
	{AnnotationMinDriver, []string{"minDriver"}, func(s *domain.JobSpec, raw string) error { s.MinDriver = raw; return nil }},
	{AnnotationDriver, []string{"driver"}, func(s *domain.JobSpec, raw string) error { s.Driver = raw; return nil }},
}

// durationOption reads a Go duration (12h, 90m) of whole seconds into
// the seconds field f points to.
func durationOption(f func(*domain.JobSpec) *int64) func(*domain.JobSpec, string) error {
	return func(s *domain.JobSpec, raw string) error {
		d, err := time.ParseDuration(raw)
		switch {
		case err != nil:
			return errors.New("not a duration such as 90m or 12h")
		case d < time.Second:
			return errors.New("below 1s")
		case d%time.Second != 0:
			return errors.New("not a whole number of seconds")
		}
		*f(s) = int64(d / time.Second)
		return nil
	}
}

// jobOptions sets the job's priority, preemptible, time limit, minimum
// runtime, expected duration, topology, GPU models and drivers from the
// gang's annotations; the pods must agree. Values are checked against
// jobfabric's own rules (domain.ValidateJobSpec) here, so the refusal
// names the annotation rather than the API field.
func jobOptions(s *domain.JobSpec, g *group) string {
	owner := map[string]jobOption{} // JobSpec field -> the annotation that set it
	for _, o := range jobOptionList {
		raw := g.pods[0].Annotations[o.key]
		for _, p := range g.pods[1:] {
			if p.Annotations[o.key] != raw {
				return fmt.Sprintf("pod group %s: pods %s and %s disagree on %s (%q and %q)", g.name, g.pods[0].Name, p.Name, o.key, raw, p.Annotations[o.key])
			}
		}
		if raw == "" {
			continue
		}
		if err := o.set(s, raw); err != nil {
			return fmt.Sprintf("pod %s: %s %q: %v", g.pods[0].Name, o.key, raw, err)
		}
		for _, f := range o.fields {
			owner[f] = o
		}
	}
	err := domain.ValidateJobSpec(s)
	if err == nil {
		return ""
	}
	field, _, _ := strings.Cut(err.Field, "[") // gpuModels[1]
	if o, ok := owner[field]; ok {
		return fmt.Sprintf("pod %s: %s %q: %s", g.pods[0].Name, o.key, g.pods[0].Annotations[o.key], err.Message)
	}
	return "" // not the annotations': the server's answer says it
}

// submit finds the live job a previous run (or a bridge that crashed
// before annotating) submitted for the gang, else submits one.
func (b *Bridge) submit(ctx context.Context, spec *domain.JobSpec) (*domain.Job, error) {
	j, err := b.cfg.Jobs.SubmitJob(ctx, *spec)
	if isCode(err, domain.CodeAlreadyExists) {
		// Live with this ExternalID: a pass whose list predates it.
		if j, err = b.cfg.Jobs.JobByExternalID(ctx, spec.ExternalID, spec.Tenant); err == nil {
			b.cfg.Logger.Info("kube bridge: adopted job", "job", j.ID, "externalId", spec.ExternalID)
		}
		return j, err
	}
	if err != nil {
		return nil, err
	}
	b.cfg.Logger.Info("kube bridge: submitted job", "job", j.ID, "externalId", spec.ExternalID, "tenant", spec.Tenant, "workspace", spec.Workspace,
		"gpus", spec.GPUs, "mig", spec.MIGProfile, "share", spec.Share)
	return j, nil
}

// ended acts once on the pods of a job that ended: a cancelled job
// deletes them all; any other end deletes the pods still running or
// waiting (their GPUs are someone else's now) and leaves the finished ones
// to be read.
func (b *Bridge) ended(ctx context.Context, pods []*corev1.Pod, id uint64) error {
	b.mu.Lock()
	done := b.settled[id]
	b.mu.Unlock()
	if done {
		return nil
	}
	job, err := b.cfg.Jobs.Job(ctx, id)
	if isCode(err, domain.CodeNotFound) {
		b.settle(id) // retained no longer: nothing to do
		return nil
	}
	if err != nil {
		return err
	}
	if !job.State.Terminal() {
		return nil // live after all (the list was older): the next pass
	}
	var del []*corev1.Pod
	for _, p := range pods {
		if job.State == domain.JobCancelled || !finished(p) {
			del = append(del, p)
		}
	}
	if err := b.deletePods(ctx, del, job, nil); err != nil {
		return err
	}
	b.settle(id)
	return nil
}

func (b *Bridge) settle(id uint64) {
	b.mu.Lock()
	b.settled[id] = true
	b.mu.Unlock()
}

// phases reports the placed gang's pods to jobfabric, as its runtime: a
// failed pod fails the job, all succeeded succeed it, and the job runs
// once every pod has started.
func (b *Bridge) phases(ctx context.Context, g *group, job *domain.Job) error {
	if b.cfg.Runtime == nil {
		return nil
	}
	started, succeeded := 0, 0
	for _, p := range g.pods {
		switch p.Status.Phase {
		case corev1.PodFailed:
			msg := fmt.Sprintf("pod %s/%s failed", p.Namespace, p.Name)
			if p.Status.Reason != "" || p.Status.Message != "" {
				msg += ": " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
			}
			return b.report(ctx, job, "failed", msg)
		case corev1.PodSucceeded:
			succeeded++
			started++
		case corev1.PodRunning:
			started++
		}
	}
	switch {
	case len(g.gone) > 0 || len(g.pods) < len(job.Placement):
		return nil // a pod is being deleted: the job is cancelled, or evicted
	case succeeded == len(g.pods):
		return b.report(ctx, job, "succeeded", fmt.Sprintf("all %d pods succeeded", succeeded))
	case started == len(g.pods) && job.State == domain.JobReady:
		return b.report(ctx, job, "running", fmt.Sprintf("all %d pods started", started))
	}
	return nil
}

func (b *Bridge) report(ctx context.Context, job *domain.Job, state, msg string) error {
	_, err := b.cfg.Runtime.Report(ctx, job.ID, state, msg)
	if err != nil {
		return fmt.Errorf("report job %d %s: %w", job.ID, state, err)
	}
	if state != "running" {
		b.markFreed()
	}
	b.cfg.Logger.Info("kube bridge: reported", "job", job.ID, "state", state, "message", msg)
	return nil
}

// evict tells the pods of a job jobfabric preempted to stop within the
// job's grace (the Eviction API, deleting when a disruption budget refuses)
// and reports the job stopped once they are all gone.
func (b *Bridge) evict(ctx context.Context, g *group, job *domain.Job) error {
	var run []*corev1.Pod
	for _, p := range g.pods {
		if !finished(p) {
			run = append(run, p)
		}
	}
	b.mu.Lock()
	b.evicted[job.ID] = true
	b.mu.Unlock()
	if len(run) == 0 && len(g.gone) == 0 {
		return b.stopped(ctx, job)
	}
	grace := int64(1)
	if job.StopDeadline != nil {
		grace = max(1, int64(math.Ceil(job.StopDeadline.Sub(b.cfg.Clock.Now()).Seconds())))
	}
	for _, p := range run {
		if !gated(p) {
			err := b.cfg.Kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
				DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}},
			})
			if err == nil || apierrors.IsNotFound(err) {
				b.cfg.Logger.Info("kube bridge: pod evicted", "namespace", p.Namespace, "pod", p.Name, "job", job.ID, "grace", grace)
				continue
			}
			if !apierrors.IsTooManyRequests(err) {
				return fmt.Errorf("evict pod %s/%s of job %d: %w", p.Namespace, p.Name, job.ID, err)
			}
			// A disruption budget: the GPUs go at the deadline anyway.
		}
		if err := b.deletePods(ctx, []*corev1.Pod{p}, job, &grace); err != nil {
			return err
		}
	}
	b.event(ctx, run, corev1.EventTypeNormal, "Preempted", fmt.Sprintf("jobfabric job %d is told to stop (%s): the pods are evicted with a grace of %ds", job.ID, reasonOf(job), grace))
	return nil
}

func reasonOf(j *domain.Job) string {
	if j.Reason != nil {
		return j.Reason.Message
	}
	return string(j.State)
}

// stopped reports a Preempting job whose pods are all gone: its GPUs may
// go before the deadline.
func (b *Bridge) stopped(ctx context.Context, job *domain.Job) error {
	if b.cfg.Runtime == nil {
		return nil // the deadline releases them
	}
	return b.report(ctx, job, "stopped", "its pods are gone")
}

// place binds each gated pod to its server: node affinity, the binding's
// env, CDI devices and the job's identity as annotations, the gate
// removed (one update, allowed while the pod is gated), then the pod bound
// to the node.
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
		if n := p.Annotations[AnnotationNode]; n != "" && slices.Contains(servers, n) {
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
	p.Annotations[AnnotationExternalID] = job.ExternalID
	p.Annotations[AnnotationTenant] = job.Tenant
	p.Annotations[AnnotationWorkspace] = job.Workspace
	p.Annotations[AnnotationNode] = node
	p.Annotations[AnnotationEnv] = bd.Shell()
	for _, e := range bd.Env {
		if k := EnvAnnotationPrefix + e.Name; len(validation.IsQualifiedName(k)) == 0 {
			p.Annotations[k] = e.Value
		}
	}
	if len(bd.CDIDevices) > 0 {
		// containerd and CRI-O hand a container the CDI devices named in
		// cdi.k8s.io/ annotations.
		p.Annotations[AnnotationCDI] = strings.Join(bd.CDIDevices, ",")
	}
	requireNode(p, node)
	p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == Gate })
	up, err := b.cfg.Kube.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{FieldManager: Component})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	b.released(up)
	if up.Spec.NodeName != "" || len(up.Spec.SchedulingGates) > 0 || len(up.Spec.ResourceClaims) > 0 {
		// Another gate holds it, or a scheduler was first; a pod with
		// ResourceClaims is bound by the scheduler, which allocates them
		// (on the one node the affinity allows).
		return nil
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

// released feeds the gate-removal observer (the benchmark's clock).
func (b *Bridge) released(p *corev1.Pod) {
	if b.cfg.OnRelease != nil {
		b.cfg.OnRelease(p, b.cfg.Clock.Now())
	}
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

// deletePods deletes pods of job (with grace, when given, else each pod's own).
func (b *Bridge) deletePods(ctx context.Context, pods []*corev1.Pod, job *domain.Job, grace *int64) error {
	for _, p := range pods {
		err := b.cfg.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s of job %d (%s): %w", p.Namespace, p.Name, job.ID, job.State, err)
		}
		b.cfg.Logger.Info("kube bridge: pod deleted", "namespace", p.Namespace, "pod", p.Name, "job", job.ID, "state", job.State)
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
		pods[i] = up
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

// orphanAfter is how long a live job of the bridge's may have no pod at
// all before it is cancelled: pods deleted while the bridge was down, or
// a requeued job whose evicted pods no controller makes again.
const orphanAfter = 5 * time.Second
