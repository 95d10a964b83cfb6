package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The labels and annotations JobSet and LeaderWorkerSet controllers put on
// their pods: a gang is found from them without their CRDs.
const (
	LabelJobSetName          = "jobset.sigs.k8s.io/jobset-name"
	LabelJobSetUID           = "jobset.sigs.k8s.io/jobset-uid"
	LabelJobSetReplicatedJob = "jobset.sigs.k8s.io/replicatedjob-name"
	LabelJobSetReplicas      = "jobset.sigs.k8s.io/replicatedjob-replicas"
	LabelLWSName             = "leaderworkerset.sigs.k8s.io/name"
	LabelLWSGroupIndex       = "leaderworkerset.sigs.k8s.io/group-index"
	LabelLWSGroupKey         = "leaderworkerset.sigs.k8s.io/group-key"
	AnnotationLWSSize        = "leaderworkerset.sigs.k8s.io/size"
)

// group is a gang: the pods that are one jobfabric job.
type group struct {
	namespace string
	// name is the gang as people know it: the pod-group label's value,
	// job/NAME, jobset/NAME, lws/NAME/INDEX or pod/NAME.
	name string
	// key is the job's ExternalID: the owner's UID where there is one.
	key string
	// kind says where the gang and its size come from.
	kind groupKind
	// owner is the batch Job (kindJob) or the JobSet's UID (kindJobSet).
	owner string
	pods  []*corev1.Pod // live pods, oldest first
	// gone are pods being deleted (they linger until their kubelet lets go).
	gone []*corev1.Pod
}

type groupKind int

const (
	kindPod groupKind = iota
	kindLabel
	kindLWS
	kindJobSet
	kindJob
)

// memberOf says which gang p belongs to: the pod-group label, else its
// LeaderWorkerSet group, its JobSet, its controlling batch Job, else itself.
func (b *Bridge) memberOf(p *corev1.Pod) *group {
	g := &group{namespace: p.Namespace}
	switch {
	case p.Labels[LabelPodGroup] != "":
		g.kind, g.name = kindLabel, p.Labels[LabelPodGroup]
		g.key = b.externalID(p.Namespace + "/" + g.name)
	case p.Labels[LabelLWSName] != "" && p.Labels[LabelLWSGroupIndex] != "":
		g.kind, g.name = kindLWS, "lws/"+p.Labels[LabelLWSName]+"/"+p.Labels[LabelLWSGroupIndex]
		if k := p.Labels[LabelLWSGroupKey]; k != "" {
			g.key = b.externalID("lws-" + k)
		} else {
			g.key = b.externalID(p.Namespace + "/" + g.name)
		}
	case p.Labels[LabelJobSetUID] != "":
		g.kind, g.name, g.owner = kindJobSet, "jobset/"+p.Labels[LabelJobSetName], p.Labels[LabelJobSetUID]
		g.key = b.externalID(g.owner)
	default:
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" && strings.HasPrefix(ref.APIVersion, "batch/") {
			g.kind, g.name, g.owner = kindJob, "job/"+ref.Name, ref.Name
			g.key = b.externalID(string(ref.UID))
			break
		}
		g.kind, g.name = kindPod, "pod/"+p.Name
		// A pod re-created under the same name is another workload.
		g.key = b.externalID(string(p.UID))
	}
	return g
}

// externalID names a gang in jobfabric: k8s:ID, or k8s:CLUSTER:ID. An id
// too long for jobfabric's 128 characters (the longest namespace and
// group names) keeps its head and a hash of the whole.
func (b *Bridge) externalID(id string) string {
	prefix := ExternalSystem + ":"
	if b.cfg.Cluster != "" {
		prefix += b.cfg.Cluster + ":"
	}
	if len(prefix)+len(id) > maxExternalID {
		sum := sha256.Sum256([]byte(id))
		h := "~" + hex.EncodeToString(sum[:8])
		id = id[:maxExternalID-len(prefix)-len(h)] + h
	}
	return prefix + id
}

// maxExternalID is jobfabric's bound on ExternalIDs.
const maxExternalID = 128

// ours reports whether a job's ExternalID is one this bridge makes.
func (b *Bridge) ours(ext string) bool {
	prefix := b.externalID("")
	return strings.HasPrefix(ext, prefix) && !strings.Contains(ext[len(prefix):], ":")
}

// size is how many pods the gang has, or why that is not known: the
// jobfabric.io/pod-group-size label or annotation, else the owner's (a
// LeaderWorkerSet group's size, a JobSet's Jobs' parallelism summed, a
// Job's parallelism). 0 and "" mean not known yet (the owner's Jobs are
// not seen yet): the gang waits.
func (b *Bridge) size(g *group) (int, string) {
	if g.kind == kindPod {
		return 1, ""
	}
	raw := ""
	for _, p := range g.pods {
		if v := p.Labels[KeyPodGroupSize]; v != "" {
			raw = v
		} else if v := p.Annotations[KeyPodGroupSize]; v != "" {
			raw = v
		}
	}
	what := KeyPodGroupSize
	if raw == "" && g.kind == kindLWS {
		for _, p := range g.pods {
			if v := p.Annotations[AnnotationLWSSize]; v != "" {
				raw, what = v, AnnotationLWSSize
			}
		}
	}
	if raw == "" {
		switch g.kind {
		case kindJob:
			j, err := b.jobs.Jobs(g.namespace).Get(g.owner)
			if err != nil {
				return 0, "" // not seen yet
			}
			return jobPods(j)
		case kindJobSet:
			return b.jobSetSize(g)
		}
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 10000 {
		return 0, fmt.Sprintf("pod group %s: %s %q must be the number of pods in the group (1 to 10000), as a label or annotation", g.name, what, raw)
	}
	return n, ""
}

// jobPods is how many pods a gang's batch Job runs at once: all of them,
// so a Job whose completions differ from its parallelism is refused (it
// would run in waves, not as one gang).
func jobPods(j *batchv1.Job) (int, string) {
	par := int32(1)
	if j.Spec.Parallelism != nil {
		par = *j.Spec.Parallelism
	}
	if j.Spec.Completions != nil && *j.Spec.Completions != par {
		return 0, fmt.Sprintf("Job %s: completions %d differs from parallelism %d; a gang runs all its pods at once (set them equal, or set %s)", j.Name, *j.Spec.Completions, par, KeyPodGroupSize)
	}
	if par < 1 {
		return 0, fmt.Sprintf("Job %s: parallelism %d runs no pod", j.Name, par)
	}
	return int(par), ""
}

// jobSetSize sums the pods of a JobSet's Jobs, once every replicated Job
// has as many Jobs as its replicas label says.
func (b *Bridge) jobSetSize(g *group) (int, string) {
	sel := labels.SelectorFromSet(labels.Set{LabelJobSetUID: g.owner})
	jobs, err := b.jobs.Jobs(g.namespace).List(sel)
	if err != nil || len(jobs) == 0 {
		return 0, ""
	}
	seen, want := map[string]int{}, map[string]int{}
	total := 0
	for _, j := range jobs {
		n, why := jobPods(j)
		if why != "" {
			return 0, why
		}
		total += n
		rj := j.Labels[LabelJobSetReplicatedJob]
		seen[rj]++
		if r, err := strconv.Atoi(j.Labels[LabelJobSetReplicas]); err == nil {
			want[rj] = r
		}
	}
	for rj, n := range want {
		if seen[rj] < n {
			return 0, "" // the JobSet controller has not made them all yet
		}
	}
	return total, ""
}

// groups lists the gangs the bridge is concerned with: pods still gated,
// and pods it placed (their job goes on). Gangs are in the order their
// oldest pod was made, so jobs are submitted first come, first served.
func (b *Bridge) groups() ([]*group, error) {
	pods, err := b.pods.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byKey := map[string]*group{}
	var out []*group
	for _, p := range pods {
		if _, ok := jobOf(p); !ok && !gated(p) {
			continue
		}
		m := b.memberOf(p)
		g := byKey[m.key]
		if g == nil {
			g = m
			byKey[m.key] = g
			out = append(out, g)
		}
		if p.DeletionTimestamp != nil {
			g.gone = append(g.gone, p)
		} else {
			g.pods = append(g.pods, p)
		}
	}
	older := func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	}
	for _, g := range out {
		slices.SortFunc(g.pods, older)
	}
	first := func(g *group) *corev1.Pod {
		if len(g.pods) > 0 {
			return g.pods[0]
		}
		return g.gone[0]
	}
	slices.SortFunc(out, func(a, b *group) int { return older(first(a), first(b)) })
	return out, nil
}
