package kube_test

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/kube"
)

// podWith builds a pod spec for the matching tables.
type podWith struct {
	selector    map[string]string
	terms       []corev1.NodeSelectorTerm
	noTerms     bool // required affinity with an empty list of terms
	tolerations []corev1.Toleration
}

func (w podWith) pod() *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: w.selector, Tolerations: w.tolerations}}
	if w.terms != nil || w.noTerms {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: w.terms}}}
	}
	return p
}

func node(name string, lbl map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}, Spec: corev1.NodeSpec{Taints: taints}}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

// TestConstraintAdmits: the pool holds a Node only if the pod's
// nodeSelector, required node affinity (terms ORed, requirements ANDed)
// and tolerations all admit it, as the Kubernetes docs ("Assigning Pods
// to Nodes", "Taints and Tolerations") define them.
func TestConstraintAdmits(t *testing.T) {
	gpu := map[string]string{"zone": "a", "gpu": "h100", "rack": "12"}
	tests := []struct {
		name string
		pod  podWith
		node *corev1.Node
		want bool
	}{
		{"no constraint", podWith{}, node("n", gpu), true},
		{"selector matches", podWith{selector: map[string]string{"zone": "a"}}, node("n", gpu), true},
		{"selector differs", podWith{selector: map[string]string{"zone": "b"}}, node("n", gpu), false},
		{"selector label absent", podWith{selector: map[string]string{"pool": "x"}}, node("n", gpu), false},
		{"In", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpIn, "a100", "h100"))}}, node("n", gpu), true},
		{"In, other values", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpIn, "a100"))}}, node("n", gpu), false},
		{"NotIn", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpNotIn, "h100"))}}, node("n", gpu), false},
		{"NotIn, label absent", podWith{terms: []corev1.NodeSelectorTerm{term(expr("spot", corev1.NodeSelectorOpNotIn, "true"))}}, node("n", gpu), true},
		{"Exists", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpExists))}}, node("n", gpu), true},
		{"Exists, absent", podWith{terms: []corev1.NodeSelectorTerm{term(expr("ib", corev1.NodeSelectorOpExists))}}, node("n", gpu), false},
		{"DoesNotExist", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpDoesNotExist))}}, node("n", gpu), false},
		{"DoesNotExist, absent", podWith{terms: []corev1.NodeSelectorTerm{term(expr("ib", corev1.NodeSelectorOpDoesNotExist))}}, node("n", gpu), true},
		{"Gt", podWith{terms: []corev1.NodeSelectorTerm{term(expr("rack", corev1.NodeSelectorOpGt, "9"))}}, node("n", gpu), true},
		{"Gt, not greater (integers, not strings)", podWith{terms: []corev1.NodeSelectorTerm{term(expr("rack", corev1.NodeSelectorOpGt, "100"))}}, node("n", gpu), false},
		{"Lt", podWith{terms: []corev1.NodeSelectorTerm{term(expr("rack", corev1.NodeSelectorOpLt, "13"))}}, node("n", gpu), true},
		{"Lt, label not an integer", podWith{terms: []corev1.NodeSelectorTerm{term(expr("zone", corev1.NodeSelectorOpLt, "13"))}}, node("n", gpu), false},
		{"requirements ANDed, one fails", podWith{terms: []corev1.NodeSelectorTerm{term(expr("zone", corev1.NodeSelectorOpIn, "a"), expr("gpu", corev1.NodeSelectorOpIn, "a100"))}}, node("n", gpu), false},
		{"terms ORed, second matches", podWith{terms: []corev1.NodeSelectorTerm{term(expr("zone", corev1.NodeSelectorOpIn, "b")), term(expr("gpu", corev1.NodeSelectorOpIn, "h100"))}}, node("n", gpu), true},
		{"empty term matches nothing", podWith{terms: []corev1.NodeSelectorTerm{{}}}, node("n", gpu), false},
		{"no terms match nothing", podWith{noTerms: true}, node("n", gpu), false},
		{"matchFields metadata.name", podWith{terms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "n")}}}}, node("n", gpu), true},
		{"matchFields another name", podWith{terms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "m")}}}}, node("n", gpu), false},
		{"selector and affinity both needed", podWith{selector: map[string]string{"zone": "b"}, terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpExists))}}, node("n", gpu), false},

		{"NoSchedule not tolerated", podWith{}, node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoSchedule)), false},
		{"NoExecute not tolerated", podWith{}, node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoExecute)), false},
		{"PreferNoSchedule does not bind", podWith{}, node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectPreferNoSchedule)), true},
		{"Equal toleration", podWith{tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoSchedule)), true},
		{"Equal toleration, other value", podWith{tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "train", Effect: corev1.TaintEffectNoSchedule}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoSchedule)), false},
		{"toleration of another effect", podWith{tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoExecute)), false},
		{"Exists toleration, any effect", podWith{tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoExecute), taint("dedicated", "x", corev1.TaintEffectNoSchedule)), true},
		{"empty key Exists tolerates everything", podWith{tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoExecute)), true},
		{"one of two taints not tolerated", podWith{tolerations: []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}},
			node("n", gpu, taint("a", "", corev1.TaintEffectNoSchedule), taint("b", "", corev1.TaintEffectNoSchedule)), false},
		{"tolerationSeconds still tolerates (a bound pod stays that long)", podWith{tolerations: []corev1.Toleration{{Key: "maint", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(60))}}},
			node("n", gpu, taint("maint", "", corev1.TaintEffectNoExecute)), true},
		{"jobfabric's cordon is jobfabric's, not the pool's", podWith{}, node("n", gpu, taint(kube.TaintUnschedulable, "", corev1.TaintEffectNoSchedule)), true},
		{"the node lifecycle controller's taints follow health, not the pool", podWith{},
			node("n", gpu, taint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule), taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)), true},
		{"taint tolerated, affinity not", podWith{terms: []corev1.NodeSelectorTerm{term(expr("gpu", corev1.NodeSelectorOpIn, "a100"))}, tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			node("n", gpu, taint("dedicated", "infer", corev1.TaintEffectNoSchedule)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kube.Admits(tt.pod.pod(), tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("admits = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConstraintKey: the pool's name hashes the whole constraint, the
// same whatever the order of what is ANDed, ORed or a set, and differs
// when anything that decides a Node differs.
func TestConstraintKey(t *testing.T) {
	in := func(vs ...string) corev1.NodeSelectorRequirement { return expr("gpu", corev1.NodeSelectorOpIn, vs...) }
	ex := expr("ib", corev1.NodeSelectorOpExists)
	tolA := corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists}
	tolB := corev1.Toleration{Key: "b", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	base := podWith{selector: map[string]string{"zone": "a", "site": "dc1"},
		terms:       []corev1.NodeSelectorTerm{term(in("a100", "h100"), ex), term(expr("rack", corev1.NodeSelectorOpGt, "3"))},
		tolerations: []corev1.Toleration{tolA, tolB}}
	same := []podWith{
		{selector: map[string]string{"site": "dc1", "zone": "a"}, terms: base.terms, tolerations: base.tolerations},
		{selector: base.selector, terms: []corev1.NodeSelectorTerm{term(expr("rack", corev1.NodeSelectorOpGt, "3")), term(ex, in("h100", "a100"))}, tolerations: base.tolerations},
		{selector: base.selector, terms: base.terms, tolerations: []corev1.Toleration{tolB, tolA}},
	}
	differ := map[string]podWith{
		"selector value":       {selector: map[string]string{"zone": "b", "site": "dc1"}, terms: base.terms, tolerations: base.tolerations},
		"an In value":          {selector: base.selector, terms: []corev1.NodeSelectorTerm{term(in("h100"), ex), term(expr("rack", corev1.NodeSelectorOpGt, "3"))}, tolerations: base.tolerations},
		"operator":             {selector: base.selector, terms: []corev1.NodeSelectorTerm{term(in("a100", "h100"), ex), term(expr("rack", corev1.NodeSelectorOpLt, "3"))}, tolerations: base.tolerations},
		"terms ANDed not ORed": {selector: base.selector, terms: []corev1.NodeSelectorTerm{term(in("a100", "h100"), ex, expr("rack", corev1.NodeSelectorOpGt, "3"))}, tolerations: base.tolerations},
		"a toleration less":    {selector: base.selector, terms: base.terms, tolerations: []corev1.Toleration{tolA}},
		"no affinity":          {selector: base.selector, tolerations: base.tolerations},
		"affinity of no terms": {selector: base.selector, noTerms: true, tolerations: base.tolerations},
	}
	want := kube.ConstraintKey(base.pod())
	for i, w := range same {
		if got := kube.ConstraintKey(w.pod()); got != want {
			t.Errorf("reordered %d: key %s, want %s", i, got, want)
		}
	}
	seen := map[string]string{want: "base"}
	for name, w := range differ {
		k := kube.ConstraintKey(w.pod())
		if other, ok := seen[k]; ok {
			t.Errorf("%s: same key as %s: %s", name, other, k)
		}
		seen[k] = name
	}
}

// BenchmarkPoolOfNodes: the pool of a gang with a nodeSelector, two
// required affinity terms and three tolerations, over 4,096 Nodes with
// topology-sized labels and a taint on one in eight; one op is one pool
// (each gang's submission, and each pass while it waits).
func BenchmarkPoolOfNodes(b *testing.B) {
	nodes := make([]*corev1.Node, 4096)
	for i := range nodes {
		lbl := map[string]string{"site": "dc1", "zone": string(rune('a' + i%4)), "rack": strconv.Itoa(i / 32),
			"gpu": []string{"h100", "h200"}[i%2], "kubernetes.io/hostname": fmt.Sprintf("s%d-gpu%03d", i/256, i%256)}
		for r := range 8 {
			lbl[fmt.Sprintf("network.jobfabric.io/rail%d-leaf", r)] = fmt.Sprintf("leaf-%d-%d", i/64, r)
		}
		var taints []corev1.Taint
		if i%8 == 0 {
			taints = append(taints, taint("dedicated", "infer", corev1.TaintEffectNoSchedule))
		}
		nodes[i] = node(fmt.Sprintf("n%04d", i), lbl, taints...)
	}
	p := podWith{selector: map[string]string{"site": "dc1"},
		terms: []corev1.NodeSelectorTerm{
			term(expr("zone", corev1.NodeSelectorOpIn, "a", "b"), expr("gpu", corev1.NodeSelectorOpNotIn, "h200")),
			term(expr("rack", corev1.NodeSelectorOpGt, "100"), expr("spot", corev1.NodeSelectorOpDoesNotExist)),
		},
		tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Key: "maintenance", Operator: corev1.TolerationOpExists},
		}}.pod()
	want := -1
	for b.Loop() {
		got, err := kube.Admitted(p, nodes)
		if err != nil {
			b.Fatal(err)
		}
		if want >= 0 && len(got) != want {
			b.Fatalf("%d nodes, then %d", want, len(got))
		}
		want = len(got)
	}
	b.ReportMetric(float64(want), "nodes/pool")
}
