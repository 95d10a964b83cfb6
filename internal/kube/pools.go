package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/jobfabric/jobfabric/internal/api"
)

// PoolsAPI sets jobfabric server pools: an admin's or a platform
// runtime's token (a tenant's may not).
type PoolsAPI interface {
	SetPool(ctx context.Context, name string, servers []string) (*api.Pool, error)
}

// selectorPool is the server pool of the Nodes the gang's pods select
// (spec.nodeSelector): a pod bound off its selector is refused by its
// kubelet, so jobfabric must place the gang on those Nodes only. The pool
// is k8s[:CLUSTER]:sel-HASH of the selector, set (PUT /v1/pools) when its
// Nodes changed since the bridge last set it. No selector, or one every
// Node matches: no pool. why says why the gang cannot have one.
func (b *Bridge) selectorPool(ctx context.Context, g *group) (pool, why string, err error) {
	sel := g.pods[0].Spec.NodeSelector
	for _, p := range g.pods[1:] {
		if !maps.Equal(p.Spec.NodeSelector, sel) {
			return "", fmt.Sprintf("pod group %s: pods %s and %s select different nodes (nodeSelector %v and %v); a gang's pods must be alike", g.name, g.pods[0].Name, p.Name, sel, p.Spec.NodeSelector), nil
		}
	}
	if len(sel) == 0 {
		return "", "", nil
	}
	matched, err := b.nodes.List(labels.SelectorFromSet(sel))
	if err != nil {
		return "", "", err
	}
	all, err := b.nodes.List(labels.Everything())
	if err != nil {
		return "", "", err
	}
	switch {
	case len(matched) == 0:
		return "", fmt.Sprintf("pod group %s: no node matches its nodeSelector %v", g.name, sel), nil
	case len(matched) == len(all):
		return "", "", nil // any placement will do
	case b.cfg.Pools == nil:
		return "", fmt.Sprintf("pod group %s: its nodeSelector %v selects %d of %d nodes, and this bridge sets no server pools (it needs an admin or platform runtime token for them)", g.name, sel, len(matched), len(all)), nil
	}
	servers := make([]string, 0, len(matched))
	for _, n := range matched {
		servers = append(servers, n.Name)
	}
	slices.Sort(servers)
	pool = b.selectorPoolName(sel)
	b.mu.Lock()
	same := slices.Equal(b.pools[pool], servers)
	b.mu.Unlock()
	if same {
		return pool, "", nil
	}
	if _, err := b.cfg.Pools.SetPool(ctx, pool, servers); err != nil {
		if refusal(err) {
			return "", fmt.Sprintf("pod group %s: jobfabric refused the server pool of its nodeSelector %v: %s", g.name, sel, message(err)), nil
		}
		return "", "", fmt.Errorf("set pool %s: %w", pool, err)
	}
	b.mu.Lock()
	b.pools[pool] = servers
	b.mu.Unlock()
	b.cfg.Logger.Info("kube bridge: pool set", "pool", pool, "nodeSelector", sel, "servers", len(servers))
	return pool, "", nil
}

// selectorPoolName names the pool of a nodeSelector by a hash of its
// pairs, sorted (labels may hold characters a pool name may not).
func (b *Bridge) selectorPoolName(sel map[string]string) string {
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		pairs = append(pairs, k+"="+sel[k])
	}
	sum := sha256.Sum256([]byte(strings.Join(pairs, "\n")))
	prefix := ExternalSystem + ":"
	if b.cfg.Cluster != "" {
		prefix += b.cfg.Cluster + ":"
	}
	return prefix + "sel-" + hex.EncodeToString(sum[:8])
}
