package kube

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// syncInventory makes every server of the topology a Node with the
// topology export's labels (created when absent, as in a cluster whose
// kubelets have not joined yet), and jobfabric's cordon or drain its
// spec.unschedulable. Labels the bridge does not own are left alone.
func (b *Bridge) syncInventory(ctx context.Context) error {
	tv, err := b.cfg.Inventory.Topology(ctx)
	if err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	if tv.Topology == nil {
		return nil // nothing applied yet
	}
	tree, err := export.Build(tv.Topology)
	if err != nil {
		return err
	}
	views, err := b.cfg.Inventory.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	unschedulable := map[string]bool{}
	for _, v := range views {
		unschedulable[v.Name] = v.Condition.Cordoned || v.Condition.Draining
	}
	nodes := b.cfg.Kube.CoreV1().Nodes()
	for _, s := range tree.Servers {
		want := export.NodeLabels(tree, s)
		n, err := b.nodes.Get(s.Name)
		if apierrors.IsNotFound(err) {
			lbl := maps.Clone(want)
			lbl[export.LabelHostname] = s.Name // the kubelet's label, for a node it has not registered
			_, err = nodes.Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: lbl},
				Spec:       corev1.NodeSpec{Unschedulable: unschedulable[s.Name]},
			}, metav1.CreateOptions{FieldManager: Component})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create node %s: %w", s.Name, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		same := n.Spec.Unschedulable == unschedulable[s.Name]
		for k, v := range want {
			same = same && n.Labels[k] == v
		}
		if same {
			continue
		}
		n = n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, want)
		n.Spec.Unschedulable = unschedulable[s.Name]
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{FieldManager: Component}); err != nil {
			return fmt.Errorf("update node %s: %w", s.Name, err)
		}
	}
	return nil
}
