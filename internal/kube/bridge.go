package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersbatchv1 "k8s.io/client-go/listers/batch/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// The names users write on their namespaces and pods, and those the bridge
// writes.
const (
	// Gate is the scheduling gate that hands a pod to jobfabric.
	Gate = "jobfabric.io/placement"
	// LabelTenant and LabelWorkspace, on a namespace, say whose quota its
	// pods use.
	LabelTenant    = "jobfabric.io/tenant"
	LabelWorkspace = "jobfabric.io/workspace"
	// LabelPodGroup puts pods of a namespace into one gang (one job).
	LabelPodGroup = "jobfabric.io/pod-group"
	// KeyPodGroupSize (a label or an annotation) is how many pods the gang
	// has: the job is submitted when all of them exist.
	KeyPodGroupSize = "jobfabric.io/pod-group-size"
	// AnnotationJob, AnnotationExternalID and AnnotationNode are the job's
	// identity on each of its pods.
	AnnotationJob        = "jobfabric.io/job"
	AnnotationExternalID = "jobfabric.io/external-id"
	AnnotationTenant     = "jobfabric.io/tenant"
	AnnotationWorkspace  = "jobfabric.io/workspace"
	AnnotationNode       = "jobfabric.io/node"
	// AnnotationCDI names the pod's GPUs as CDI devices
	// (nvidia.com/gpu=GPU-UUID, comma-separated): containerd and CRI-O
	// give a container the devices of its pod's cdi.k8s.io/ annotations.
	AnnotationCDI = "cdi.k8s.io/jobfabric"
	// AnnotationMIGProfile and AnnotationMIGCount ask for MIG slices
	// (jobfabric job submit --mig-profile, --mig-count); AnnotationShare
	// for a time-sliced share of one GPU (--share).
	AnnotationMIGProfile = "jobfabric.io/mig-profile"
	AnnotationMIGCount   = "jobfabric.io/mig-count"
	AnnotationShare      = "jobfabric.io/gpu-share"
	// AnnotationPriority, AnnotationPreemptible and AnnotationTimeLimit set
	// the job's priority, preemptible and time limit (a Go duration, such
	// as 12h) from a gang's pods (they must agree).
	AnnotationPriority    = "jobfabric.io/priority"
	AnnotationPreemptible = "jobfabric.io/preemptible"
	AnnotationTimeLimit   = "jobfabric.io/time-limit"
	// AnnotationMinRuntime, AnnotationExpectedDuration (Go durations),
	// AnnotationTopology (LEVEL[:required|:preferred]), AnnotationGPUModel
	// (one model, or several by preference, comma-separated),
	// AnnotationMinDriver and AnnotationDriver set the JobSpec fields of
	// jobfabric job submit's flags of the same names; a gang's pods agree.
	AnnotationMinRuntime       = "jobfabric.io/min-runtime"
	AnnotationExpectedDuration = "jobfabric.io/expected-duration"
	AnnotationTopology         = "jobfabric.io/topology"
	AnnotationGPUModel         = "jobfabric.io/gpu-model"
	AnnotationMinDriver        = "jobfabric.io/min-driver"
	AnnotationDriver           = "jobfabric.io/driver"
	// ReasonPreferenceIgnored is the event on a pod whose preferred node
	// affinity jobfabric does not weigh.
	ReasonPreferenceIgnored = "PreferenceIgnored"
	// AnnotationEnv holds the pod's binding as export lines (for a
	// downward API file to source); EnvAnnotationPrefix + NAME holds each
	// variable (for an env var's fieldRef).
	AnnotationEnv       = "jobfabric.io/env"
	EnvAnnotationPrefix = "env.jobfabric.io/"
	// ResourceGPU is the extended resource whose requests count GPUs.
	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")
	// DefaultGPUDeviceClass is the DRA device class whose devices count
	// GPUs (NVIDIA's DRA driver).
	DefaultGPUDeviceClass = "gpu.nvidia.com"
	// TaintUnschedulable is on a Node whose server jobfabric cordoned or
	// drains; ConditionUnhealthy and ConditionDrift are Node conditions
	// while jobfabric finds the server unhealthy or its facts drifted.
	TaintUnschedulable = "jobfabric.io/unschedulable"
	ConditionUnhealthy = corev1.NodeConditionType("JobfabricUnhealthy")
	ConditionDrift     = corev1.NodeConditionType("JobfabricDrift")
	// ExternalSystem prefixes the ExternalID of the bridge's jobs.
	ExternalSystem = "k8s"
	// Component names the bridge in events and as a field manager.
	Component = "jobfabric-bridge"
)

// JobsAPI is what the bridge asks of jobfabric about workloads: a
// tenant-scoped token limits it to that tenant's workspaces.
type JobsAPI interface {
	Jobs(ctx context.Context, q client.JobQuery) ([]domain.Job, error)
	SubmitJob(ctx context.Context, spec domain.JobSpec) (*domain.Job, error)
	Job(ctx context.Context, id uint64) (*domain.Job, error)
	JobByExternalID(ctx context.Context, ext, tenant string) (*domain.Job, error)
	CancelJob(ctx context.Context, id uint64) (*domain.Job, error)
	Binding(ctx context.Context, job uint64, node string) (*binding.Binding, error)
}

// RuntimeAPI reports the pods' progress on their job (a runtime's or an
// admin's token).
type RuntimeAPI interface {
	Report(ctx context.Context, id uint64, state, message string) (*domain.Job, error)
}

// InventoryAPI is what the bridge reads of the inventory (an admin token).
type InventoryAPI interface {
	Topology(ctx context.Context) (*domain.TopologyView, error)
	Nodes(ctx context.Context) ([]domain.NodeView, error)
}

// Config is the bridge's configuration.
type Config struct {
	Kube kubernetes.Interface
	Jobs JobsAPI
	// Runtime, when set, reports pod phases as the jobs' runtime (running,
	// succeeded, failed, stopped); nil leaves the jobs Ready until they
	// end otherwise.
	Runtime RuntimeAPI
	// Inventory, when set, syncs servers to Nodes; nil leaves Nodes alone.
	Inventory InventoryAPI
	// Pools, when set, keeps a server pool of the Nodes a gang's pods may
	// run on (nodeSelector, required node affinity, tolerated taints), and
	// the gang is placed on them only, and collects those pools when no
	// job names them (pools.go); nil refuses a gang that some Node does
	// not admit.
	Pools PoolsAPI
	// PoolGrace is how long a pool no live job names is kept after a gang
	// last asked for it (default DefaultPoolGrace).
	PoolGrace time.Duration
	// Tenants, when set, are the only tenants a namespace may name: with
	// an admin token, whoever labels namespaces otherwise picks who pays.
	Tenants []string
	// Cluster, when set, tells this cluster's jobs from others' of the
	// same tenants (ExternalID k8s:CLUSTER:ID).
	Cluster string
	// GPUDeviceClass is the DRA device class counted as GPUs
	// (default DefaultGPUDeviceClass).
	GPUDeviceClass string
	// OnRelease, when set, is called as each pod's gate is lifted.
	OnRelease func(p *corev1.Pod, at time.Time)
	// Interval is how often everything is looked at again besides the
	// pods' own events (job states change in jobfabric; default 2s).
	Interval time.Duration
	Clock    tstime.Clock
	Logger   *slog.Logger
}

// Bridge places gated pods through jobfabric. Run it once per cluster.
type Bridge struct {
	cfg        Config
	pods       listerscorev1.PodLister
	namespaces listerscorev1.NamespaceLister
	nodes      listerscorev1.NodeLister
	jobs       listersbatchv1.JobLister
	kick       chan struct{}

	mu       sync.Mutex
	cancels  map[uint64]bool            // jobs whose pods were deleted
	reported map[string]map[string]bool // pod UID -> events written
	waiting  map[string]domain.JobState // group -> state last logged
	settled  map[uint64]bool            // ended jobs whose pods were dealt with
	pools    map[string][]string        // node pools as last set (pools.go)
	// poolAsked is when a gang last asked for each pool (pools.go).
	poolAsked map[string]time.Time
	// poolDone is, for each pool a waiting job names, the constraint and
	// Node generation (nodeGen) it was last computed for: a waiting gang's
	// pool is computed again only when either changed.
	poolDone map[string]string
	nodeGen  atomic.Uint64
	orphans  map[uint64]time.Time // live jobs without a pod, since
	// evicted are jobs whose pods the bridge evicted: their deletion is no
	// cancel (the job is requeued or ends Preempted).
	evicted map[uint64]bool
	// freed: this pass ended a job (report or cancel), so GPUs went back
	// and jobfabric places waiting jobs within moments.
	freed bool
}

// recheck is when, after a pass freed GPUs, the bridge looks again for
// the jobs jobfabric placed on them: it has no watch on jobfabric's
// jobs, and the interval (2s) would leave the GPUs idle that long.
var recheck = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}

// New returns a bridge; Run starts it.
func New(cfg Config) *Bridge {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = tstime.Std{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PoolGrace <= 0 {
		cfg.PoolGrace = DefaultPoolGrace
	}
	if cfg.GPUDeviceClass == "" {
		cfg.GPUDeviceClass = DefaultGPUDeviceClass
	}
	return &Bridge{cfg: cfg, kick: make(chan struct{}, 1), cancels: map[uint64]bool{},
		reported: map[string]map[string]bool{}, waiting: map[string]domain.JobState{},
		settled: map[uint64]bool{}, pools: map[string][]string{}, poolAsked: map[string]time.Time{}, poolDone: map[string]string{}, orphans: map[uint64]time.Time{}, evicted: map[uint64]bool{}}
}

// Run watches pods, namespaces and nodes and reconciles until ctx ends.
func (b *Bridge) Run(ctx context.Context) error {
	if b.cfg.Kube == nil || b.cfg.Jobs == nil {
		return errors.New("kube bridge: a Kubernetes client and a jobfabric client are required")
	}
	back := make(chan struct{}, 1)
	if rc := b.cfg.Kube.Discovery().RESTClient(); rc != nil { // nil: a fake clientset
		go b.followAPIServer(ctx, b.readyz, back)
	}
	stop, err := b.watch(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	b.cfg.Logger.Info("kube bridge running", "interval", b.cfg.Interval, "inventory", b.cfg.Inventory != nil)
	t, tick := b.cfg.Clock.NewTicker(b.cfg.Interval)
	defer t.Stop()
	for {
		b.reconcile(ctx)
		b.mu.Lock()
		freed := b.freed
		b.freed = false
		b.mu.Unlock()
		if freed {
			for _, d := range recheck {
				b.cfg.Clock.AfterFunc(d, b.poke)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.kick:
		case <-tick:
		case <-back:
			// kube-apiserver is back after an outage: new informers list
			// now, where the old ones might wait a minute (apiserver.go).
			stop()
			for stop = nil; stop == nil; {
				if stop, err = b.watch(ctx, back); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					b.cfg.Logger.Warn("kube bridge: watch again", "err", err)
				}
			}
		}
	}
}

// watch starts informers on pods, namespaces, batch Jobs and Nodes, points
// the bridge's listers at them and waits until they have listed. It gives
// up (an error) when ctx ends, or when abort fires first (the API server
// went away and came back while they listed: the next informers list at
// once, these ones back off). stop ends them.
func (b *Bridge) watch(ctx context.Context, abort <-chan struct{}) (stop func(), err error) {
	ictx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(b.cfg.Kube, 0)
	stop = func() {
		cancel()
		f.Shutdown()
	}
	podInf, nsInf, nodeInf, jobInf := f.Core().V1().Pods(), f.Core().V1().Namespaces(), f.Core().V1().Nodes(), f.Batch().V1().Jobs()
	b.pods, b.namespaces, b.nodes, b.jobs = podInf.Lister(), nsInf.Lister(), nodeInf.Lister(), jobInf.Lister()
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { b.poke() },
		UpdateFunc: func(any, any) { b.poke() },
		DeleteFunc: func(any) { b.poke() },
	}
	// A bound pod is deleted gracefully: it lingers with a deletion
	// timestamp until its kubelet lets go. New informers (after an
	// outage) see such a pod as added.
	deleting := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
			b.podDeleted(p)
			return
		}
		b.poke()
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    deleting,
		UpdateFunc: func(_, obj any) { deleting(obj) },
		DeleteFunc: b.podDeleted,
	}); err != nil {
		stop()
		return nil, fmt.Errorf("kube bridge: watch pods: %w", err)
	}
	if _, err := nsInf.Informer().AddEventHandler(kick); err != nil {
		stop()
		return nil, fmt.Errorf("kube bridge: watch namespaces: %w", err)
	}
	if _, err := jobInf.Informer().AddEventHandler(kick); err != nil {
		stop()
		return nil, fmt.Errorf("kube bridge: watch jobs: %w", err)
	}
	// Pools are recomputed only when a Node changed (pools.go).
	countNodes := func(any) { b.nodeGen.Add(1) }
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: countNodes, UpdateFunc: func(_, n any) { countNodes(n) }, DeleteFunc: countNodes,
	}); err != nil {
		stop()
		return nil, fmt.Errorf("kube bridge: watch nodes: %w", err)
	}
	f.Start(ictx.Done())
	var mu sync.Mutex
	synced := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-abort: // nil: never
			mu.Lock()
			if !synced { // else the signal came too late to matter: these informers are new
				cancel()
			}
			mu.Unlock()
		case <-done:
		}
	}()
	for typ, ok := range f.WaitForCacheSync(ictx.Done()) {
		if !ok {
			stop()
			return nil, fmt.Errorf("kube bridge: %v cache did not sync: %w", typ, context.Cause(ictx))
		}
	}
	mu.Lock()
	synced = true
	mu.Unlock()
	if err := ictx.Err(); err != nil { // aborted as the last cache synced
		stop()
		return nil, fmt.Errorf("kube bridge: informers: %w", err)
	}
	return stop, nil
}

func (b *Bridge) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// podDeleted remembers the job of a deleted pod: deleting a gang's pods
// cancels its job.
func (b *Bridge) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	b.mu.Lock()
	delete(b.reported, string(p.UID))
	if id, ok := jobOf(p); ok {
		b.cancels[id] = true
	}
	b.mu.Unlock()
	b.poke()
}

// reconcile looks at everything once; each failure is logged and tried
// again on the next pass.
func (b *Bridge) reconcile(ctx context.Context) {
	if b.cfg.Inventory != nil {
		if err := b.syncInventory(ctx); err != nil {
			b.cfg.Logger.Warn("kube bridge: inventory sync", "err", err)
		}
	}
	b.cancelDeleted(ctx)
	all, err := b.cfg.Jobs.Jobs(ctx, client.JobQuery{States: liveStates})
	if err != nil {
		b.cfg.Logger.Warn("kube bridge: list jobs", "err", err)
		return
	}
	live := &liveJobs{byExt: map[string][]*domain.Job{}, byID: map[uint64]*domain.Job{}}
	for i := range all {
		if j := &all[i]; b.ours(j.ExternalID) {
			live.byExt[j.ExternalID], live.byID[j.ID] = append(live.byExt[j.ExternalID], j), j
		}
	}
	groups, err := b.groups()
	if err != nil {
		b.cfg.Logger.Warn("kube bridge: list pods", "err", err)
		return
	}
	seen := map[uint64]bool{}
	for _, g := range groups {
		if ctx.Err() != nil {
			return
		}
		if j := live.of(g.key, b.tenantOf(g.namespace)); j != nil {
			seen[j.ID] = true
		}
		for _, p := range slices.Concat(g.pods, g.gone) {
			if id, ok := jobOf(p); ok {
				seen[id] = true
			}
		}
		if err := b.syncGroup(ctx, g, live); err != nil {
			b.cfg.Logger.Warn("kube bridge: pod group", "namespace", g.namespace, "group", g.name, "err", err)
		}
	}
	b.withoutPods(ctx, live, seen)
	if err := b.collectPools(ctx); err != nil {
		b.cfg.Logger.Warn("kube bridge: collect pools", "err", err)
	}
	names := make(map[string]bool, len(groups))
	for _, g := range groups {
		names[g.namespace+"/"+g.name] = true
	}
	b.mu.Lock()
	for k := range b.waiting { // gangs gone: their last logged state too
		if !names[k] {
			delete(b.waiting, k)
		}
	}
	b.mu.Unlock()
}

// liveStates are the states of jobs that hold or wait for GPUs.
var liveStates = []domain.JobState{domain.JobPending, domain.JobPlaced, domain.JobReady, domain.JobRunning, domain.JobPreempting}

// withoutPods ends the bridge's live jobs no pod belongs to: a Preempting
// one has stopped; any other lost its pods while the bridge was down (or
// was requeued after its pods were evicted and nothing made them again),
// and is cancelled once that has lasted orphanAfter.
func (b *Bridge) withoutPods(ctx context.Context, live *liveJobs, seen map[uint64]bool) {
	now := b.cfg.Clock.Now()
	b.mu.Lock()
	for id := range b.orphans {
		if seen[id] || live.byID[id] == nil {
			delete(b.orphans, id)
		}
	}
	for id := range b.evicted {
		if live.byID[id] == nil {
			delete(b.evicted, id)
		}
	}
	b.mu.Unlock()
	for id, j := range live.byID {
		if seen[id] {
			continue
		}
		if j.State == domain.JobPreempting {
			if err := b.stopped(ctx, j); err != nil {
				b.cfg.Logger.Warn("kube bridge: report a preempted job stopped", "job", id, "err", err)
			}
			continue
		}
		b.mu.Lock()
		since, ok := b.orphans[id]
		if !ok {
			b.orphans[id] = now
		}
		b.mu.Unlock()
		if !ok || now.Sub(since) < orphanAfter {
			continue
		}
		if _, err := b.cfg.Jobs.CancelJob(ctx, id); err != nil && !isCode(err, domain.CodeNotFound) && !isCode(err, domain.CodeFailedPrecondition) {
			b.cfg.Logger.Warn("kube bridge: cancel a job without pods", "job", id, "err", err)
			continue
		}
		b.markFreed()
		b.cfg.Logger.Info("kube bridge: no pod left, job cancelled", "job", id, "externalId", j.ExternalID)
	}
}

// cancelDeleted cancels the jobs whose pods were deleted (not those the
// bridge evicted: a Preempting job is reported stopped instead).
func (b *Bridge) cancelDeleted(ctx context.Context) {
	b.mu.Lock()
	ids := b.cancels
	b.cancels = map[uint64]bool{}
	b.mu.Unlock()
	for id := range ids {
		b.mu.Lock()
		evicted := b.evicted[id]
		b.mu.Unlock()
		if evicted {
			continue
		}
		j, err := b.cfg.Jobs.Job(ctx, id)
		if err == nil && (j.State.Terminal() || j.State == domain.JobPreempting) {
			continue
		}
		if err == nil {
			_, err = b.cfg.Jobs.CancelJob(ctx, id)
		}
		if err != nil && !isCode(err, domain.CodeNotFound) {
			b.cfg.Logger.Warn("kube bridge: cancel the job of deleted pods", "job", id, "err", err)
			b.mu.Lock()
			b.cancels[id] = true
			b.mu.Unlock()
			continue
		}
		b.markFreed()
		b.cfg.Logger.Info("kube bridge: pods deleted, job cancelled", "job", id)
	}
}

func (b *Bridge) markFreed() {
	b.mu.Lock()
	b.freed = true
	b.mu.Unlock()
}

func isCode(err error, code domain.Code) bool {
	var de *domain.Error
	return errors.As(err, &de) && de.Code == code
}

// refusal reports whether err is jobfabric's answer about the request (a
// pod's event says it) rather than a failure to ask (tried again).
func refusal(err error) bool {
	for _, c := range []domain.Code{domain.CodeInvalidArgument, domain.CodePermissionDenied, domain.CodeNotFound,
		domain.CodeAlreadyExists, domain.CodeFailedPrecondition} {
		if isCode(err, c) {
			return true
		}
	}
	return false
}
