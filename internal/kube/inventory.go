package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/topology/export"
)

// syncInventory makes every server of the topology a Node with the
// topology export's labels (created when absent, as in a cluster whose
// kubelets have not joined yet); jobfabric's cordon or drain its
// spec.unschedulable and the jobfabric.io/unschedulable:NoSchedule taint;
// an unhealthy server or drifted facts Node conditions, removed when
// cleared. Labels, taints and conditions the bridge does not own are left
// alone.
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
	byName := map[string]domain.NodeView{}
	for _, v := range views {
		byName[v.Name] = v
	}
	nodes := b.cfg.Kube.CoreV1().Nodes()
	for _, s := range tree.Servers {
		v := byName[s.Name]
		unschedulable := v.Condition.Cordoned || v.Condition.Draining
		want := export.NodeLabels(tree, s)
		n, err := b.nodes.Get(s.Name)
		if apierrors.IsNotFound(err) {
			lbl := maps.Clone(want)
			lbl[export.LabelHostname] = s.Name // the kubelet's label, for a node it has not registered
			n = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: lbl}}
			setTaint(n, unschedulable)
			n, err = nodes.Create(ctx, n, metav1.CreateOptions{FieldManager: Component})
			if apierrors.IsAlreadyExists(err) {
				continue // the next pass sees it
			}
			if err != nil {
				return fmt.Errorf("create node %s: %w", s.Name, err)
			}
		} else if err != nil {
			return err
		} else {
			up := n.DeepCopy()
			if up.Labels == nil {
				up.Labels = map[string]string{}
			}
			maps.Copy(up.Labels, want)
			setTaint(up, unschedulable)
			if !maps.Equal(up.Labels, n.Labels) || up.Spec.Unschedulable != n.Spec.Unschedulable || !slices.Equal(up.Spec.Taints, n.Spec.Taints) {
				if n, err = nodes.Update(ctx, up, metav1.UpdateOptions{FieldManager: Component}); err != nil {
					return fmt.Errorf("update node %s: %w", s.Name, err)
				}
			}
		}
		up := n.DeepCopy()
		setConditions(up, v, metav1.NewTime(b.cfg.Clock.Now()))
		if !sameConditions(up.Status.Conditions, n.Status.Conditions) {
			if _, err := nodes.UpdateStatus(ctx, up, metav1.UpdateOptions{FieldManager: Component}); err != nil {
				return fmt.Errorf("update node %s status: %w", s.Name, err)
			}
		}
	}
	return nil
}

// setTaint sets spec.unschedulable and the bridge's NoSchedule taint.
func setTaint(n *corev1.Node, on bool) {
	n.Spec.Unschedulable = on
	has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUnschedulable })
	switch {
	case on && !has:
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnschedulable, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	case !on && has:
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUnschedulable })
	}
}

// setConditions sets the bridge's Node conditions from the server's view:
// JobfabricUnhealthy while it is unhealthy, JobfabricDrift while its
// agent's facts differ from the inventory; absent otherwise.
func setConditions(n *corev1.Node, v domain.NodeView, now metav1.Time) {
	var drift []string
	for _, c := range v.Conditions {
		if c.Type != domain.CondHeartbeat {
			drift = append(drift, c.Type+": "+c.Message)
		}
	}
	slices.Sort(drift)
	unhealthy := ""
	if v.Condition.Unhealthy {
		unhealthy = v.Condition.Reason
		if unhealthy == "" {
			unhealthy = "jobfabric marked the server unhealthy"
		}
	}
	setCondition(n, ConditionUnhealthy, "Unhealthy", unhealthy, now)
	setCondition(n, ConditionDrift, "FactsDrift", strings.Join(drift, "; "), now)
}

// setCondition makes typ True with msg, or removes it when msg is "".
func setCondition(n *corev1.Node, typ corev1.NodeConditionType, reason, msg string, now metav1.Time) {
	i := slices.IndexFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == typ })
	switch {
	case msg == "" && i >= 0:
		n.Status.Conditions = slices.Delete(n.Status.Conditions, i, i+1)
	case msg != "" && i < 0:
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now})
	case msg != "" && n.Status.Conditions[i].Message != msg:
		n.Status.Conditions[i].Message, n.Status.Conditions[i].LastHeartbeatTime = msg, now
	}
}

func sameConditions(a, b []corev1.NodeCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Message == y.Message
	})
}
