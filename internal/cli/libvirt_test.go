package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// copyFollowing copies the tree at src into dst, following symbolic links
// (the recorded hosts link to shared fixture files).
func copyFollowing(t *testing.T, src, dst string) {
	t.Helper()
	st, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		copyFollowing(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
	}
}

// TestJobEnvLibvirt: an agent reports a recorded InfiniBand H100 host
// (nvidia-smi -q, sysfs) whose sysfs also carries each HCA's device link,
// as a live host's does; a placed job's libvirt hostdevs are its GPUs' and
// rail NICs' PCI functions as the agent reported them.
func TestJobEnvLibvirt(t *testing.T) {
	host := filepath.Join(t.TempDir(), "h100-ib")
	copyFollowing(t, filepath.Join("..", "hostfacts", "testdata", "hosts", "h100-ib"), host)
	ib := filepath.Join(host, "sys", "class", "infiniband")
	devs, err := os.ReadDir(ib)
	if err != nil {
		t.Fatal(err)
	}
	nicPCI := map[string]string{}
	for i, d := range devs {
		// /sys/class/infiniband/mlx5_N/device -> ../../../0000:BB:00.0
		bus := fmt.Sprintf("0000:%02x:00.0", 0x18+0x10*i)
		if err := os.Symlink("../../../"+bus, filepath.Join(ib, d.Name(), "device")); err != nil {
			t.Fatal(err)
		}
		nicPCI[d.Name()] = bus
	}

	c := startServer(t)
	url := c.Servers[0].URL()
	admin := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "topo.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, admin, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "1", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, admin, "topology", "apply", "-f", topo)
	mustRun(t, admin, "tenant", "create", "acme", "--isolation", "gpu", "--network", "pure-rt5")
	mustRun(t, admin, "workspace", "create", "acme/research", "--guaranteed", "8")
	node := "s1-gpu001"
	// The recorded host has 7 of the inventory's 8 HCAs' names: the missing
	// ones must not cordon it (the job's are present).
	mustRun(t, admin, "host", "policy", "--cordon-on", "driver,gpu-missing")
	agentTok := strings.TrimSpace(mustRun(t, admin, "token", "create", "--role", "runtime", "--node", node))
	mustRun(t, map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": agentTok}, "agent", "--node", node, "--fixture", host, "--once")

	var j domain.Job
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "submit", "--workspace", "acme/research", "--gpus", "2", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(j.ID)
	deadline := time.Now().Add(15 * time.Second)
	for j.State != domain.JobReady {
		if time.Now().After(deadline) {
			t.Fatalf("job never ready: %s %+v\n%s\n%s", j.State, j.Reason, mustRun(t, admin, "job", "show", id), mustRun(t, admin, "host", "show", node))
		}
		time.Sleep(50 * time.Millisecond)
		if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "show", id, "-o", "json")), &j); err != nil {
			t.Fatal(err)
		}
	}
	var b binding.Binding
	if err := json.Unmarshal([]byte(mustRun(t, admin, "job", "env", id, "--format", "json")), &b); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range b.GPUs {
		a, err := binding.ParsePCIBusID(g.PCIBusID)
		if err != nil {
			t.Fatalf("GPU %d: %v", g.Index, err)
		}
		want = append(want, a.String())
	}
	for _, n := range b.NICs {
		if n.PCIBusID != nicPCI[n.RDMADevice] {
			t.Errorf("NIC %s (%s) pciBusId %q, want the agent's %q", n.Name, n.RDMADevice, n.PCIBusID, nicPCI[n.RDMADevice])
		}
		want = append(want, n.PCIBusID)
	}
	if len(b.GPUs) != 2 || len(b.NICs) != 2 {
		t.Fatalf("binding holds %d GPUs, %d NICs; want 2 and 2", len(b.GPUs), len(b.NICs))
	}

	out := mustRun(t, admin, "job", "env", id, "--format", "libvirt")
	var d struct {
		Hostdevs []struct {
			Mode    string `xml:"mode,attr"`
			Type    string `xml:"type,attr"`
			Managed string `xml:"managed,attr"`
			Address struct {
				Domain   string `xml:"domain,attr"`
				Bus      string `xml:"bus,attr"`
				Slot     string `xml:"slot,attr"`
				Function string `xml:"function,attr"`
			} `xml:"source>address"`
		} `xml:"hostdev"`
	}
	if err := xml.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("libvirt output does not parse: %v\n%s", err, out)
	}
	var got []string
	for _, h := range d.Hostdevs {
		if h.Mode != "subsystem" || h.Type != "pci" || h.Managed != "yes" {
			t.Errorf("hostdev %+v is not a managed PCI subsystem hostdev", h)
		}
		var dom, bus, slot, fn int
		fmt.Sscanf(h.Address.Domain+" "+h.Address.Bus+" "+h.Address.Slot+" "+h.Address.Function, "0x%x 0x%x 0x%x 0x%x", &dom, &bus, &slot, &fn)
		got = append(got, fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, slot, fn))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("hostdevs %v, want the job's GPUs then rail NICs %v:\n%s", got, want, out)
	}
}
