package lab_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/lab/labdeploy"
)

// TestLabEVPNBestPathChange is the regression test of TestLabEndToEnd's
// flake (labdeploy/evpnsync.go): zebra 8.4 drops a type-5 prefix from its
// VTEP's next hop when bgpd replaces the prefix's best path and zebra reads
// the delete and the add together (a loaded machine), and the VTEP's
// router MAC and neighbour go once no prefix references them, black-holing
// the routes that stay installed. Here s1-leaf1's sessions to each spine
// are reset in turn, three rounds, while its zebra is stopped (SIGSTOP until bgpd has
// replaced the paths via that spine), which replaces the best path of
// every prefix s1-leaf1 imports, and of every prefix the other leaves
// import from it: with zebra 8.4 alone, s1-leaf1 reaches no other leaf any
// more. The lab driver's watch must repair it within a check's 30 s, and
// the deploy that follows (job 100 ends: every VTEP withdraws one prefix
// of each family) must leave job 102's pairs reaching each other and no
// drift.
func TestLabEVPNBestPathChange(t *testing.T) {
	e, _ := startE2E(t, 5*time.Minute)
	e.createTenants()
	j100 := e.place(domain.JobSpec{Name: "job-100", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	j102 := e.place(domain.JobSpec{Name: "job-102", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu002", "s2-gpu002")
	e.waitReady(j100, j102)
	e.check("jobs 100 and 102 (tenant A) ready, each on all 4 leaves")

	leaf := e.l.Device("s1-leaf1")
	b, err := os.ReadFile(filepath.Join(leaf.Dir, "zebra.pid"))
	if err != nil {
		t.Fatal(err)
	}
	zebra, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s's zebra.pid: %v", leaf.Name, err)
	}
	hostOf := map[string]string{} // uplink -> the spine's hostname
	for _, ds := range e.l.Status(e.ctx).Devices {
		if ds.Name == leaf.Name {
			for _, s := range ds.Sessions {
				hostOf[s.Peer] = s.Hostname
			}
		}
	}
	// Three rounds: zebra reads a delete and its add together most of the
	// time it was stopped, not every time.
	var resets []string
	for range 3 {
		resets = append(resets, leaf.Uplinks...)
	}
	for _, up := range resets {
		// A loaded machine, made certain: zebra is not scheduled while
		// bgpd replaces the best paths via this spine, so it reads each
		// delete and its add together, as it does under load.
		if err := syscall.Kill(zebra, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(zebra, syscall.SIGCONT) })
		// vtysh returns once bgpd has reset the session.
		if out, err := exec.CommandContext(e.ctx, "vtysh", "--vty_socket", leaf.Dir, "-d", "bgpd", "-c", "clear bgp "+up).CombinedOutput(); err != nil {
			syscall.Kill(zebra, syscall.SIGCONT)
			t.Fatalf("clear bgp %s on %s: %v: %s", up, leaf.Name, err, out)
		}
		// bgpd has replaced them once tenant A's table holds no path via
		// the spine any more.
		via := "(" + hostOf[up] + ")"
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			out, err := exec.CommandContext(e.ctx, "vtysh", "--vty_socket", leaf.Dir, "-d", "bgpd", "-c", "show bgp vrf tenant-a ipv4 unicast").CombinedOutput()
			if err == nil && !strings.Contains(string(out), via) {
				break
			}
			if time.Now().After(deadline) {
				syscall.Kill(zebra, syscall.SIGCONT)
				t.Fatalf("%s's tenant A table still has paths via %s 20s after the session reset:\n%s", leaf.Name, via, out)
			}
		}
		if err := syscall.Kill(zebra, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if err := e.l.WaitConverged(e.ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s's sessions to %s on %s reset and up again", leaf.Name, hostOf[up], up)
	}
	if drifts, err := e.l.EVPNDrifts(e.ctx); err == nil {
		t.Logf("right after the resets, zebra's EVPN state drifts on %s", driftSummary(drifts))
	}
	e.check("s1-leaf1's spine sessions reset")

	e.end(j100)
	e.check("job 100 ended after s1-leaf1's spine sessions were reset")
	drifts, err := e.l.EVPNDrifts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ds []string
	for dev, d := range drifts {
		for _, x := range d {
			ds = append(ds, dev+": "+x.String())
		}
	}
	if len(ds) > 0 {
		t.Fatalf("zebra's EVPN state drifts from the routes on %d routes:\n  %s", len(ds), strings.Join(ds, "\n  "))
	}
}

// driftSummary counts drifting routes by leaf.
func driftSummary(drifts map[string][]labdeploy.EVPNDrift) string {
	var parts []string
	for _, dev := range slices.Sorted(maps.Keys(drifts)) {
		parts = append(parts, fmt.Sprintf("%s: %d routes", dev, len(drifts[dev])))
	}
	if len(parts) == 0 {
		return "no leaf"
	}
	return strings.Join(parts, ", ")
}
