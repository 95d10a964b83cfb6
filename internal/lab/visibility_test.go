package lab_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/lab"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// loadThreshold is the lab's hot-port bound: the switches' own chatter
// (BGP, EVPN, ARP/ND) stays far below it, the iperf3 stream far above.
const loadThreshold = 1e6 // bytes/s

// TestLabVisibility proves the correlation with real counters: Debian's
// prometheus-node-exporter runs inside every switch namespace (and its VRF
// namespaces, see exporter) and exports its real interface counters, the
// server scrapes them (the
// node-exporter-switch rules) at 1 s, and traffic between one job's two
// endpoints (iperf3) must show on that job's path and as a hotspot, never
// on another tenant's job, whose tenant sees no hot port and no name of
// the other's. When the traffic stops the job recovers; both transitions
// are events.
func TestLabVisibility(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("skipping: iperf3 is not installed (apt-get install iperf3)")
	}
	var exporters []*exporter
	e, _ := startE2E(t, 5*time.Minute, func(l *lab.Lab, cfg *server.Config) {
		var b strings.Builder
		b.WriteString("limits: {window_samples: 3}\ntargets:\n")
		for i := range l.Devices {
			x := startExporter(t, &l.Devices[i])
			exporters = append(exporters, x)
			fmt.Fprintf(&b, "- {name: %s, url: %q, interval: 1s, device: %s, rules: node-exporter-switch}\n", x.device, x.url, x.device)
		}
		tc, err := telemetry.ParseConfig([]byte(b.String()))
		if err != nil {
			t.Fatalf("telemetry config: %v\n%s", err, b.String())
		}
		hc, err := health.ParseConfig([]byte(fmt.Sprintf("thresholds: {loadBytesPerSec: %g}\ndebounce: {raise: 0s, settle: 3s}\n", loadThreshold)))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Telemetry, cfg.Health = tc, &hc
	})
	t.Logf("%d node_exporters scraped at 1s: %v", len(exporters), exporters)
	e.createTenants()

	// Job A (tenant A) spans both stripes: its rail-0 traffic crosses the
	// uplinks of s1-leaf0 and s2-leaf0. Job B (tenant B) is on one server:
	// its path is two leaf ports and no uplink.
	jA := e.place(domain.JobSpec{Name: "job-a", Tenant: "tenant-a", Workspace: "train", GPUs: 4, GPUsPerNode: 2}, "s1-gpu001", "s2-gpu001")
	jB := e.place(domain.JobSpec{Name: "job-b", Tenant: "tenant-b", Workspace: "train", GPUs: 2, GPUsPerNode: 2}, "s1-gpu003")
	e.waitReady(jA, jB)
	tokA, tokB := e.tenantClient("tenant-a"), e.tenantClient("tenant-b")

	// Before the traffic both paths are healthy: every switch port on them
	// has fresh counters. (In the lab a port moving into its VRF namespace
	// at placement flaps its carrier, a link error until the flap leaves
	// the window: wait for the committed verdicts too.)
	e.waitHealth(e.admin, jA.ID, "job A healthy before traffic", func(h *api.JobHealth) bool { return h.Verdict == domain.PathHealthy })
	e.waitHealth(e.admin, jB.ID, "job B healthy before traffic", func(h *api.JobHealth) bool { return h.Verdict == domain.PathHealthy })
	e.waitJobHealth(jA.ID, "job A committed healthy before traffic", domain.PathHealthy, 30*time.Second)
	e.waitJobHealth(jB.ID, "job B committed healthy before traffic", domain.PathHealthy, 30*time.Second)
	before, err := e.admin.Events(e.ctx, client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	mark := before[len(before)-1].Seq

	// Traffic between job A's two rail-0 endpoints on different leaves.
	var src, dst lab.Endpoint
	for _, ep := range e.endpointsOf(jA, domain.IsolationServer) {
		switch {
		case ep.Server == "s1-gpu001" && ep.GPU == 0:
			src = ep
		case ep.Server == "s2-gpu001" && ep.GPU == 0:
			dst = ep
		}
	}
	if src.Netns == "" || dst.Netns == "" || src.Leaf == dst.Leaf {
		t.Fatalf("job A has no rail-0 endpoints on two leaves: %+v %+v", src, dst)
	}
	srv := exec.CommandContext(e.ctx, "ip", "netns", "exec", dst.Netns, "iperf3", "-s", "-B", dst.Addr4())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		ok, err := lab.TCPConnect(e.ctx, src.Netns, netip.AddrPortFrom(netip.MustParseAddr(dst.Addr4()), 5201), "", time.Second)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("iperf3 -s in %s does not answer from %s: %v", dst.Netns, src.Netns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cli := exec.CommandContext(e.ctx, "ip", "netns", "exec", src.Netns, "iperf3", "-c", dst.Addr4(), "-t", "12", "-b", "100M", "--connect-timeout", "5000")
	var cliOut strings.Builder
	cli.Stdout, cli.Stderr = &cliOut, &cliOut
	trafficAt := time.Now()
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Process.Kill(); cli.Wait() })
	t.Logf("iperf3 %s (%s on %s/%s) -> %s (%s on %s/%s), 100 Mbit/s for 12 s", src.Name(), src.Addr4(), src.Leaf, src.Port, dst.Name(), dst.Addr4(), dst.Leaf, dst.Port)

	// Job A turns congested on its own leaf ports and an uplink.
	hA := e.waitHealth(e.admin, jA.ID, "job A congested", func(h *api.JobHealth) bool {
		return h.Verdict == domain.PathCongested && hot(h, "port", src.Leaf+"/"+src.Port) && hot(h, "port", dst.Leaf+"/"+dst.Port) && hot(h, "uplink", "")
	})
	t.Logf("job A congested %s after the traffic started: %s", time.Since(trafficAt).Round(time.Millisecond), hA.Message)

	// Job B stays healthy: none of its hops is hot.
	hB, err := e.admin.JobHealth(e.ctx, jB.ID)
	if err != nil {
		t.Fatal(err)
	}
	if hB.Verdict != domain.PathHealthy || hot(hB, "", "") {
		t.Fatalf("job B shares no link with job A's traffic, but its health is %s: %+v", hB.Verdict, hB.Hops)
	}

	// The admin's hotspots (ports on jobs' paths): the congested ports
	// carry job A and only job A.
	hs, err := e.admin.Hotspots(e.ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	var hotPorts []string
	for _, p := range hs.Ports {
		if p.Verdict != domain.PathCongested {
			continue
		}
		hotPorts = append(hotPorts, p.Port)
		for _, j := range p.Jobs {
			if j.ID != jA.ID {
				t.Errorf("hotspot %s names job %d (%s), not job A", p.Port, j.ID, j.Name)
			}
		}
	}
	for _, want := range []string{src.Leaf + "/" + src.Port, dst.Leaf + "/" + dst.Port} {
		if !slices.Contains(hotPorts, want) {
			t.Errorf("hotspots %v lack job A's port %s", hotPorts, want)
		}
	}
	if !slices.ContainsFunc(hotPorts, func(p string) bool { return strings.Contains(p, "spine") }) {
		t.Errorf("congested hotspots %v hold no uplink of job A's traffic", hotPorts)
	}
	t.Logf("congested hotspots: %v", hotPorts)

	// Tenant A sees its job on the hot ports; tenant B sees no hot port and
	// nothing of tenant A, in hotspots and in job A's health.
	hsA, err := tokA.Hotspots(e.ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(hsA.Ports, func(p api.Hotspot) bool {
		return p.Verdict == domain.PathCongested && slices.ContainsFunc(p.Jobs, func(j api.JobRef) bool { return j.ID == jA.ID })
	}) {
		t.Errorf("tenant A's hotspots do not show job A on a congested port: %+v", hsA.Ports)
	}
	hsB, err := tokB.Hotspots(e.ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(hsB.Ports) != 0 {
		t.Errorf("tenant B's paths carry no traffic, but its hotspots list %+v", hsB.Ports)
	}
	if _, err := tokB.JobHealth(e.ctx, jA.ID); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("tenant B asking job A's health: %v, want not found", err)
	}
	if b := fmt.Sprintf("%+v", hsB); strings.Contains(b, "tenant-a") || strings.Contains(b, "job-a") {
		t.Errorf("tenant B's hotspots name tenant A: %s", b)
	}

	// The committed condition and its events: unhealthy, then recovered
	// once the stream ends (settle 3 s).
	if err := cli.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, cliOut.String())
	}
	e.waitJobHealth(jA.ID, "job A recovered", domain.PathHealthy, 30*time.Second)
	evs, err := e.admin.Events(e.ctx, client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ev := range evs {
		if ev.Seq > mark && strings.HasPrefix(ev.Action, "job.path_") {
			seq = append(seq, ev.Object+" "+ev.Action)
		}
	}
	objA := fmt.Sprintf("job/%d", jA.ID)
	if !slices.Contains(seq, objA+" job.path_unhealthy") || !slices.Contains(seq, objA+" job.path_recovered") {
		t.Errorf("path events %v lack job A's unhealthy and recovered", seq)
	}
	for _, s := range seq {
		if strings.HasPrefix(s, fmt.Sprintf("job/%d ", jB.ID)) {
			t.Errorf("job B had a path event: %s", s)
		}
	}
	t.Logf("path events: %v", seq)
}

// hot reports whether a hop of kind (any when empty) whose name contains
// name is a fault.
func hot(h *api.JobHealth, kind, name string) bool {
	for _, hop := range h.Hops {
		if (kind == "" || hop.Kind == kind) && strings.Contains(hop.Name, name) && hop.Verdict.Severity() > domain.PathUnknown.Severity() {
			return true
		}
	}
	return false
}

// tenantClient makes a tenant-admin token of tenant and a client with it.
func (e *e2e) tenantClient(tenant string) *client.Client {
	e.t.Helper()
	tok, err := e.admin.CreateToken(e.ctx, api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: tenant})
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := client.New(e.url, tok.Secret, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitHealth polls a job's health (as c sees it) until ok, for 30 s.
func (e *e2e) waitHealth(c *client.Client, id uint64, what string, ok func(*api.JobHealth) bool) *api.JobHealth {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := c.JobHealth(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within 30s; last: %s %s %+v", what, h.Verdict, h.Message, h.Hops)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitJobHealth waits until the job carries the committed verdict.
func (e *e2e) waitJobHealth(id uint64, what string, want domain.PathVerdict, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := e.admin.Job(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if j.PathHealth != nil && j.PathHealth.Verdict == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: job %d carries %+v after %s", what, id, j.PathHealth, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
