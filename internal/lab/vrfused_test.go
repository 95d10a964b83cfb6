package lab_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestLabVRFsWhereUsed runs the FRR lab with VRFs where used (jobfabric
// fabric options --vrf-placement used): a leaf gets a tenant's VRF (its
// namespace, L3VNI and BGP instance) only while the tenant owns a port on
// it, and packets agree at every step; a server that moves from tenant A
// to tenant B takes A's VRF off its leaves and brings B's, whose new
// VRFs import the routes of B's other leaves.
//
// It is opt-in (JOBFABRIC_LAB_VRFS_WHERE_USED=1) until the lab driver
// survives it: on Debian's FRR 8.4.4, when job-a ends and tenant-a's VRF
// leaves stripe 1 with the port it had held, zebra aborts
// (route_unlock_node assertion in if_delete_update, from the netns
// notifier) as labdeploy deletes the VRF's namespace, and the next
// revision fails with "zebra is not running". The lab's VRFs are network
// namespaces; with every VRF on every leaf a VRF goes only with its
// tenant, never after holding a port.
func TestLabVRFsWhereUsed(t *testing.T) {
	if os.Getenv("JOBFABRIC_LAB_VRFS_WHERE_USED") == "" {
		t.Skip("opt-in (JOBFABRIC_LAB_VRFS_WHERE_USED=1): the lab's zebra (FRR 8.4.4, netns VRFs) aborts when a VRF that held a port is removed")
	}
	e, _ := startE2E(t, 5*time.Minute)
	// VRFs where used before any tenant: switching a live lab from every
	// VRF on every leaf removes every leaf's VRF namespaces at once, and
	// the zebra of Debian's FRR 8.4.4 aborts on it (route_unlock_node
	// assertion in if_delete_update, from the netns notifier).
	if _, err := e.admin.SetFabricOptions(e.ctx, api.FabricOptions{VRFPlacement: "used"}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"tenant-a", "tenant-b"} {
		iso := domain.IsolationGPU
		if tn == "tenant-a" {
			iso = domain.IsolationServer
		}
		if _, err := e.admin.CreateTenant(e.ctx, api.TenantCreateRequest{Name: tn, Isolation: iso, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.CreateWorkspace(e.ctx, tn, api.WorkspaceCreateRequest{Name: "train", BorrowLimit: 16}); err != nil {
			t.Fatal(err)
		}
	}
	e.deployed(nil)
	// leavesOf lists the leaves with the tenant's VRF namespace.
	leavesOf := func(tenant string) []string {
		ns := e.vrfNamespaces(tenant)
		var out []string
		for _, d := range e.l.Devices {
			if d.Role == "leaf" && slices.Contains(ns, d.VRFNetnsPrefix()+tenant) {
				out = append(out, d.Name)
			}
		}
		if len(out) != len(ns) {
			t.Fatalf("%s's VRF namespaces %v are not all a leaf's", tenant, ns)
		}
		slices.Sort(out)
		return out
	}
	want := func(step, tenant string, leaves ...string) {
		t.Helper()
		if got := leavesOf(tenant); !slices.Equal(got, leaves) {
			t.Fatalf("%s: %s's VRF is on %v, want %v", step, tenant, got, leaves)
		}
	}
	want("no job", "tenant-a")
	want("no job", "tenant-b")

	// A holds server s1-gpu001 (stripe 1's two leaves), B s2-gpu001
	// (stripe 2's): each VRF only where its tenant is.
	a := e.place(domain.JobSpec{Name: "job-a", Tenant: "tenant-a", Workspace: "train", GPUs: 2, GPUsPerNode: 2}, "s1-gpu001")
	b1 := e.place(domain.JobSpec{Name: "job-b1", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 2}, "s2-gpu001")
	e.waitReady(a, b1)
	want("A on stripe 1, B on stripe 2", "tenant-a", "s1-leaf0", "s1-leaf1")
	want("A on stripe 1, B on stripe 2", "tenant-b", "s2-leaf0", "s2-leaf1")
	e.check("A on stripe 1, B on stripe 2 (VRFs where used)")

	// s1-gpu001 moves from A to B: A's VRF leaves stripe 1 with its last
	// port there, B's comes, and B's two servers reach each other across
	// the stripes.
	e.end(a)
	want("A's job ended", "tenant-a")
	b2 := e.place(domain.JobSpec{Name: "job-b2", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 2}, "s1-gpu001")
	e.waitReady(b2)
	want("s1-gpu001 moved to B", "tenant-a")
	want("s1-gpu001 moved to B", "tenant-b", "s1-leaf0", "s1-leaf1", "s2-leaf0", "s2-leaf1")
	e.check("s1-gpu001 moved from tenant A to tenant B (VRFs where used)")
}
