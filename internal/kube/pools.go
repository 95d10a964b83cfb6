package kube

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// PoolsAPI sets and collects jobfabric server pools: an admin's or a
// platform runtime's token (a tenant's may not). Its Jobs sees every
// tenant's, so a pool another bridge's job names is never collected.
type PoolsAPI interface {
	Pools(ctx context.Context) ([]api.Pool, error)
	SetPool(ctx context.Context, name string, servers []string) (*api.Pool, error)
	DeletePool(ctx context.Context, name string) (*api.Pool, error)
	Jobs(ctx context.Context, q client.JobQuery) ([]domain.Job, error)
}

// DefaultPoolGrace is how long a pool no live job names is kept after a
// gang last asked for it: the gang may be between setting it and
// submitting, or its job between ending and being submitted again.
const DefaultPoolGrace = time.Minute

// constraint is where a pod's kubelet admits it and kube-scheduler would
// place it: its nodeSelector, its required node affinity, and its
// tolerations of the Nodes' NoSchedule and NoExecute taints.
type constraint struct {
	selector    map[string]string
	affinity    *corev1.NodeSelector
	tolerations []corev1.Toleration
}

func constraintOf(p *corev1.Pod) constraint {
	c := constraint{selector: p.Spec.NodeSelector, tolerations: p.Spec.Tolerations}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		c.affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return c
}

// poolTaint reports whether a Node's taint narrows the pool. PreferNoSchedule
// does not bind; jobfabric's own cordon taint is jobfabric's placement
// already; the node lifecycle controller's node.kubernetes.io/ taints
// mirror Node conditions and spec.unschedulable (which the bridge's cordon
// sets), and a pool following them would churn with every node's health
// (pods tolerate not-ready and unreachable NoExecute for 300 s by default).
func poolTaint(t *corev1.Taint) bool {
	return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
		t.Key != TaintUnschedulable && !strings.HasPrefix(t.Key, "node.kubernetes.io/")
}

// matcher decides c's Nodes, its affinity parsed once for them all.
type matcher struct {
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
	log         logr.Logger
}

func (c constraint) matcher(log logr.Logger) matcher {
	return matcher{affinity: nodeaffinity.NewRequiredNodeAffinity(c.selector, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: c.affinity}}), tolerations: c.tolerations, log: log}
}

// admits reports whether the pods may run on n, as kube-scheduler's
// NodeAffinity and TaintToleration filters decide.
func (m matcher) admits(n *corev1.Node) (bool, error) {
	ok, err := m.affinity.Match(n)
	if err != nil || !ok {
		return false, err
	}
	// Comparison operators (Gt, Lt) are only on tolerations the API server
	// accepted, so honouring them agrees with its scheduler.
	_, untolerated := schedcorev1.FindMatchingUntoleratedTaint(m.log, n.Spec.Taints, m.tolerations, poolTaint, true)
	return !untolerated, nil
}

// admitted is the names of the nodes m admits, sorted.
func (m matcher) admitted(nodes []*corev1.Node) ([]string, error) {
	var out []string
	for _, n := range nodes {
		ok, err := m.admits(n)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// key is c's canonical form: the same for constraints that admit the
// same Nodes by the same rules, whatever the order of pairs, terms,
// requirements, values and tolerations (ORed, ANDed or sets).
func (c constraint) key() string {
	type requirement struct {
		Key    string   `json:"k"`
		Op     string   `json:"o"`
		Values []string `json:"v,omitempty"`
	}
	type term struct {
		Labels []requirement `json:"l,omitempty"`
		Fields []requirement `json:"f,omitempty"`
	}
	reqs := func(rs []corev1.NodeSelectorRequirement) []requirement {
		out := make([]requirement, 0, len(rs))
		for _, r := range rs {
			out = append(out, requirement{Key: r.Key, Op: string(r.Operator), Values: slices.Compact(slices.Sorted(slices.Values(r.Values)))})
		}
		slices.SortFunc(out, func(a, b requirement) int {
			return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Op, b.Op), slices.Compare(a.Values, b.Values))
		})
		return slices.CompactFunc(out, func(a, b requirement) bool { return a.Key == b.Key && a.Op == b.Op && slices.Equal(a.Values, b.Values) })
	}
	var k struct {
		Selector    []string `json:"s,omitempty"`
		Terms       []string `json:"a"` // null: no affinity; []: no Node
		Tolerations []string `json:"t,omitempty"`
	}
	for _, l := range slices.Sorted(maps.Keys(c.selector)) {
		k.Selector = append(k.Selector, l+"="+c.selector[l])
	}
	if c.affinity != nil {
		for _, t := range c.affinity.NodeSelectorTerms {
			b, _ := json.Marshal(term{Labels: reqs(t.MatchExpressions), Fields: reqs(t.MatchFields)})
			k.Terms = append(k.Terms, string(b))
		}
		// An empty list of terms matches no Node; keep it apart from none.
		if k.Terms == nil {
			k.Terms = []string{}
		}
		slices.Sort(k.Terms)
		k.Terms = slices.Compact(k.Terms)
	}
	for _, t := range c.tolerations {
		var secs int64 = -1
		if t.TolerationSeconds != nil {
			secs = *t.TolerationSeconds
		}
		b, _ := json.Marshal([]any{t.Key, t.Operator, t.Value, t.Effect, secs})
		k.Tolerations = append(k.Tolerations, string(b))
	}
	slices.Sort(k.Tolerations)
	k.Tolerations = slices.Compact(k.Tolerations)
	b, _ := json.Marshal(k)
	return string(b)
}

// String is c for a pod's event: the parts it has.
func (c constraint) String() string {
	var parts []string
	if len(c.selector) > 0 {
		parts = append(parts, fmt.Sprintf("nodeSelector %v", c.selector))
	}
	if c.affinity != nil {
		parts = append(parts, fmt.Sprintf("required node affinity of %d terms", len(c.affinity.NodeSelectorTerms)))
	}
	if len(c.tolerations) > 0 {
		parts = append(parts, fmt.Sprintf("%d tolerations", len(c.tolerations)))
	}
	if len(parts) == 0 {
		return "no node constraint"
	}
	return strings.Join(parts, ", ")
}

// nodePool is the server pool of the Nodes the gang's pods may run on
// (constraint): a pod bound off its nodeSelector or required node
// affinity is refused by its kubelet, one on a NoExecute taint it does
// not tolerate is evicted at once, and kube-scheduler would place none of
// them there, nor on a NoSchedule taint; so jobfabric places the gang on
// those Nodes only. The pool is k8s[:CLUSTER]:sel-HASH of the constraint
// (or name, when set: the pool a waiting job already names), set (PUT
// /v1/pools) when its Nodes changed since the bridge last set it. When
// every Node qualifies: no pool. why says why the gang cannot have one.
func (b *Bridge) nodePool(ctx context.Context, g *group, name string) (pool, why string, err error) {
	c := constraintOf(g.pods[0])
	key := c.key()
	for _, p := range g.pods[1:] {
		if o := constraintOf(p); o.key() != key {
			return "", fmt.Sprintf("pod group %s: pods %s and %s may run on different nodes (%s and %s: nodeSelector, required node affinity or tolerations differ); a gang's pods must be alike", g.name, g.pods[0].Name, p.Name, c, o), nil
		}
	}
	// Read before the Nodes: a change after it is computed again.
	done := key + "@" + strconv.FormatUint(b.nodeGen.Load(), 10)
	if name != "" {
		b.mu.Lock()
		b.poolAsked[name] = b.cfg.Clock.Now()
		same := b.poolDone[name] == done && b.pools[name] != nil
		b.mu.Unlock()
		if same {
			return name, "", nil
		}
	}
	all, err := b.nodes.List(labels.Everything())
	if err != nil {
		return "", "", err
	}
	servers, err := c.matcher(logr.FromSlogHandler(b.cfg.Logger.Handler())).admitted(all)
	if err != nil {
		return "", fmt.Sprintf("pod group %s: its required node affinity cannot be matched: %v", g.name, err), nil
	}
	switch {
	case len(servers) == 0:
		return "", fmt.Sprintf("pod group %s: no node admits its pods (%s)", g.name, c), nil
	case len(servers) == len(all) && name == "":
		return "", "", nil // any placement will do (a waiting job's pool grows to all)
	case b.cfg.Pools == nil:
		return "", fmt.Sprintf("pod group %s: its pods (%s) may run on %d of %d nodes, and this bridge sets no server pools (it needs an admin or platform runtime token for them)", g.name, c, len(servers), len(all)), nil
	}
	pool = name
	if pool == "" {
		pool = b.poolName(key)
	}
	b.mu.Lock()
	b.poolAsked[pool] = b.cfg.Clock.Now()
	same := slices.Equal(b.pools[pool], servers)
	if same && name != "" {
		b.poolDone[pool] = done
	}
	b.mu.Unlock()
	if same {
		return pool, "", nil
	}
	if _, err := b.cfg.Pools.SetPool(ctx, pool, servers); err != nil {
		if refusal(err) {
			return "", fmt.Sprintf("pod group %s: jobfabric refused the server pool of its pods' nodes (%s): %s", g.name, c, message(err)), nil
		}
		return "", "", fmt.Errorf("set pool %s: %w", pool, err)
	}
	b.mu.Lock()
	b.pools[pool] = servers
	if name != "" {
		b.poolDone[pool] = done
	}
	b.mu.Unlock()
	b.cfg.Logger.Info("kube bridge: pool set", "pool", pool, "constraint", c.String(), "servers", len(servers))
	return pool, "", nil
}

// poolPrefix starts the name of each pool this bridge sets.
func (b *Bridge) poolPrefix() string {
	prefix := ExternalSystem + ":"
	if b.cfg.Cluster != "" {
		prefix += b.cfg.Cluster + ":"
	}
	return prefix + "sel-"
}

// poolName names the pool of a constraint by a hash of its key (labels
// may hold characters a pool name may not).
func (b *Bridge) poolName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return b.poolPrefix() + hex.EncodeToString(sum[:8])
}

// ownPool reports whether name is of the form this bridge gives its pools
// (prefix and 16 hex digits): a cluster named sel-x is no hash of ours.
func (b *Bridge) ownPool(name string) bool {
	h, ok := strings.CutPrefix(name, b.poolPrefix())
	if !ok || len(h) != 16 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// collectPools deletes this bridge's pools that no live job of any tenant
// names and that no gang asked for within Config.PoolGrace: one pool per
// distinct constraint would otherwise pile up. Only names of the bridge's
// form are collected: another cluster's pools (another prefix) and an
// admin's (any other name) are left alone.
func (b *Bridge) collectPools(ctx context.Context) error {
	if b.cfg.Pools == nil {
		return nil
	}
	ps, err := b.cfg.Pools.Pools(ctx)
	if err != nil {
		return fmt.Errorf("list pools: %w", err)
	}
	now := b.cfg.Clock.Now()
	b.mu.Lock()
	// A pool deleted or changed by someone else is set again when a gang
	// next asks for it, rather than taken as set.
	listed := make(map[string][]string, len(ps))
	for _, p := range ps {
		listed[p.Name] = p.Servers
	}
	for name, servers := range b.pools {
		if got, ok := listed[name]; !ok || !slices.Equal(got, servers) {
			delete(b.pools, name)
			delete(b.poolDone, name)
		}
	}
	for name, at := range b.poolAsked {
		if _, ok := listed[name]; !ok && now.Sub(at) >= b.cfg.PoolGrace {
			delete(b.poolAsked, name)
		}
	}
	var stale []string
	for _, p := range ps {
		if !b.ownPool(p.Name) {
			continue
		}
		if _, ok := b.poolAsked[p.Name]; !ok {
			// First seen (a restarted bridge): the grace starts now.
			b.poolAsked[p.Name] = now
		}
		if now.Sub(b.poolAsked[p.Name]) >= b.cfg.PoolGrace {
			stale = append(stale, p.Name)
		}
	}
	b.mu.Unlock()
	if len(stale) == 0 {
		return nil
	}
	// Listed after the pools: a job submitted since names its pool here.
	jobs, err := b.cfg.Pools.Jobs(ctx, client.JobQuery{States: liveStates})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	named := map[string]bool{}
	for _, j := range jobs {
		named[j.Pool] = true
	}
	for _, name := range stale {
		if named[name] {
			continue
		}
		if _, err := b.cfg.Pools.DeletePool(ctx, name); err != nil && !isCode(err, domain.CodeNotFound) {
			return fmt.Errorf("delete pool %s: %w", name, err)
		}
		b.mu.Lock()
		delete(b.pools, name)
		delete(b.poolAsked, name)
		delete(b.poolDone, name)
		b.mu.Unlock()
		b.cfg.Logger.Info("kube bridge: pool collected", "pool", name)
	}
	return nil
}
