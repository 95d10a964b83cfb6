package kube

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// Admits reports whether the pool of p's gang holds n: p's nodeSelector,
// required node affinity and tolerations (of the taints a pool heeds)
// all admit it.
func Admits(p *corev1.Pod, n *corev1.Node) (bool, error) {
	return constraintOf(p).admits(logr.Discard(), n)
}

// ConstraintKey is the canonical form of p's node constraint, which its
// pool's name hashes.
func ConstraintKey(p *corev1.Pod) string { return constraintOf(p).key() }
