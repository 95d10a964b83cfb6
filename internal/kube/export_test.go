package kube

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Admits reports whether the pool of p's gang holds n: p's nodeSelector,
// required node affinity and tolerations (of the taints a pool heeds)
// all admit it.
func Admits(p *corev1.Pod, n *corev1.Node) (bool, error) {
	return constraintOf(p).matcher(logr.Discard()).admits(n)
}

// ConstraintKey is the canonical form of p's node constraint, which its
// pool's name hashes.
func ConstraintKey(p *corev1.Pod) string { return constraintOf(p).key() }

// CollectPools runs one collection of b's pools, as each pass does.
func CollectPools(ctx context.Context, b *Bridge) error { return b.collectPools(ctx) }

// AskPool records that a gang asked for pool now, as nodePool does.
func AskPool(b *Bridge, pool string) {
	b.mu.Lock()
	b.poolAsked[pool] = b.cfg.Clock.Now()
	b.mu.Unlock()
}

// Admitted is the names of the nodes the pool of p's gang holds, sorted.
func Admitted(p *corev1.Pod, nodes []*corev1.Node) ([]string, error) {
	return constraintOf(p).matcher(logr.Discard()).admitted(nodes)
}

// JobOptions sets spec's fields from the annotations of a gang of pods
// (named group) as jobSpec does, or says why the gang is refused.
func JobOptions(spec *domain.JobSpec, name string, pods []*corev1.Pod) string {
	return jobOptions(spec, &group{name: name, pods: pods})
}

// FollowAPIServer runs b's kube-apiserver follower on probe until ctx ends.
func FollowAPIServer(ctx context.Context, b *Bridge, probe func(context.Context) error, back chan<- struct{}) {
	b.followAPIServer(ctx, probe, back)
}

// APIRetry is the wait before the probe after failed failed probes, for a
// jitter draw r in [0, 1).
func APIRetry(failed int, r float64) time.Duration { return apiRetry(failed, r) }
