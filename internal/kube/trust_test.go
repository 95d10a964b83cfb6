package kube_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/kube"
	"github.com/jobfabric/jobfabric/internal/kube/kubetest"
)

// TestNamespaceLabelPolicy applies the ValidatingAdmissionPolicy of
// docs/kubernetes.md (the block as written there) and checks it from the
// attacker's side: a user RBAC lets edit namespaces cannot set or change
// the jobfabric.io/ labels (so cannot pick the tenant an admin bridge
// bills), while other labels and a cluster admin's changes go through.
func TestNamespaceLabelPolicy(t *testing.T) {
	kc := kubetest.Start(t)
	ctx := ctxT(t)
	vap, binding := docPolicy(t)
	if _, err := kc.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// alice may create and edit namespaces.
	if _, err := kc.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ns-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create", "update", "patch"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-ns-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ns-editor"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice, err := kubernetes.NewForConfig(kc.UserConfig)
	if err != nil {
		t.Fatal(err)
	}
	denied := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "only cluster admins set the jobfabric.io/ namespace labels")
	}
	// The policy takes a moment to be loaded: until alice's labelled
	// namespace is refused.
	eventually(t, "alice refused a namespace labelled with a tenant", func() (bool, string) {
		_, err := alice.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "alice-",
			Labels: map[string]string{kube.LabelTenant: "acme", kube.LabelWorkspace: "research"}}}, metav1.CreateOptions{})
		return denied(err), fmt.Sprintf("err %v", err)
	})
	ns, err := alice.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x", Labels: map[string]string{"team": "x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("alice's namespace without jobfabric labels: %v", err)
	}
	ns.Labels[kube.LabelTenant] = "acme"
	if _, err := alice.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); !denied(err) {
		t.Fatalf("alice labelled her namespace with a tenant: %v", err)
	}
	ns, err = kc.Client.CoreV1().Namespaces().Get(ctx, "team-x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels[kube.LabelTenant], ns.Labels[kube.LabelWorkspace] = "acme", "research"
	if ns, err = kc.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("a cluster admin labels the namespace: %v", err)
	}
	ns.Labels["team"] = "y"
	if ns, err = alice.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("alice changes another label: %v", err)
	}
	ns.Labels[kube.LabelTenant] = "globex"
	if _, err := alice.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); !denied(err) {
		t.Fatalf("alice moved the namespace to another tenant: %v", err)
	}
	delete(ns.Labels, kube.LabelTenant)
	if _, err := alice.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); !denied(err) {
		t.Fatalf("alice removed the tenant label: %v", err)
	}
}

// docPolicy reads the ValidatingAdmissionPolicy and its binding from the
// yaml block of docs/kubernetes.md that holds them.
func docPolicy(t *testing.T) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("```yaml\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"))
	block, _, ok2 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("docs/kubernetes.md has no yaml block starting with the ValidatingAdmissionPolicy")
	}
	parts := strings.Split("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"+string(block), "\n---\n")
	if len(parts) != 2 {
		t.Fatalf("the policy block has %d documents, want the policy and its binding", len(parts))
	}
	var vap admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict([]byte(parts[0]), &vap); err != nil {
		t.Fatalf("the policy: %v", err)
	}
	if err := yaml.UnmarshalStrict([]byte(parts[1]), &binding); err != nil {
		t.Fatalf("the binding: %v", err)
	}
	return &vap, &binding
}
