package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/health"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// healthServer starts a server whose switches push link state through a
// push source, with debounce off so the test needs no waiting.
func healthServer(t *testing.T) *server.Server {
	t.Helper()
	cfg, err := telemetry.ParseConfig([]byte(`
rules:
  switch:
  - {metric: port_link_down, signal: link_down, type: gauge, kind: port, device_label: switch, port_label: port}
push:
- {name: switches, rules: switch, staleness: 1h}
`))
	if err != nil {
		t.Fatal(err)
	}
	hc := health.DefaultConfig()
	hc.Debounce.Settle = 0
	s, err := startServer(t, server.Config{DataDir: t.TempDir(), Telemetry: cfg, Health: &hc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jobPorts returns the leaf ports of a job's NICs ("leaf", "port").
func jobPorts(t *testing.T, s *server.Server, j *domain.Job) [][2]string {
	t.Helper()
	var out [][2]string
	f := s.State().Topology().Topology.Sites[0].Fabrics[0]
	for _, pl := range j.Placement {
		for _, c := range f.Cables {
			for _, g := range pl.GPUs {
				if c.Server == pl.Server && c.NIC == fmt.Sprintf("nic%d", g) {
					out = append(out, [2]string{c.Leaf, c.Port})
				}
			}
		}
	}
	return out
}

// pushLinks pushes the link state of ports, those of down down: a push
// carries the source's every series (one missing from it goes stale).
func pushLinks(t *testing.T, s *server.Server, ports [][2]string, down ...[2]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# TYPE port_link_down gauge\n")
	for _, p := range ports {
		fmt.Fprintf(&b, "port_link_down{switch=%q,port=%q} %d\n", p[0], p[1], map[bool]int{true: 1}[slices.Contains(down, p)])
	}
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", s.URL()+"/v1/telemetry/push?source=switches", strings.NewReader(b.String()))
	req.Header.Set("Authorization", "Bearer "+s.AdminToken())
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("push: %d %s", resp.StatusCode, out)
	}
}

func getRaw(t *testing.T, s *server.Server, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", s.URL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The attacker's side: globex asks for acme's job health and for the
// hotspots while an acme port is down; it learns nothing of acme. The
// leader commits acme's path verdict and its events.
func TestJobHealthAndHotspotsIsolation(t *testing.T) {
	s := healthServer(t)
	admin := as(t, s.URL(), s.AdminToken())
	seed(t, admin)
	acmeJob := submit(t, admin, "acme", "research", 8)
	globexJob := submit(t, admin, "globex", "infer", 2)
	waitState(t, s, "jobs placed", func(f *state.FSM) bool {
		a, _ := f.Job(acmeJob.ID)
		g, _ := f.Job(globexJob.ID)
		return a.State.HoldsGPUs() && g.State.HoldsGPUs()
	})
	a, _ := s.State().Job(acmeJob.ID)
	g, _ := s.State().Job(globexJob.ID)
	acmePorts, globexPorts := jobPorts(t, s, a), jobPorts(t, s, g)
	if len(acmePorts) != 8 || len(globexPorts) != 2 {
		t.Fatalf("ports: acme %v, globex %v", acmePorts, globexPorts)
	}
	all := append(slices.Clone(acmePorts), globexPorts...)
	pushLinks(t, s, all, acmePorts[0]) // acme's first port is down
	hot := acmePorts[0][0] + "/" + acmePorts[0][1]

	// The admin sees acme's job unhealthy and the port as a hotspot naming it.
	h, err := admin.JobHealth(ctxT(t), acmeJob.ID)
	if err != nil || h.Verdict != domain.PathLinkErrors || !strings.Contains(h.Message, hot) {
		t.Fatalf("admin: acme job health %+v %v, want link_errors at %s", h, err, hot)
	}
	hs, err := admin.Hotspots(ctxT(t), 0, false)
	if err != nil || len(hs.Ports) != 1 || hs.Ports[0].Port != hot || len(hs.Ports[0].Jobs) != 1 || hs.Ports[0].Jobs[0].Tenant != "acme" {
		t.Fatalf("admin hotspots %+v %v, want %s with acme's job", hs, err, hot)
	}

	globex := mustToken(t, admin, domain.RoleTenantAdmin, "globex", "")
	prod := mustToken(t, admin, domain.RoleMember, "acme", "prod")
	research := mustToken(t, admin, domain.RoleMember, "acme", "research")
	// Another tenant's job answers exactly as a job that does not exist.
	code, body := getRaw(t, s, globex, fmt.Sprintf("/v1/jobs/%d/health", acmeJob.ID))
	code2, body2 := getRaw(t, s, globex, "/v1/jobs/999999/health")
	if code != 404 || code2 != 404 || strings.Replace(body, fmt.Sprint(acmeJob.ID), "999999", 1) != body2 {
		t.Fatalf("globex asking acme's job health: %d %s; a missing job: %d %s", code, body, code2, body2)
	}
	for _, c := range []struct {
		who, token string
		ports      int
	}{{"globex", globex, 0}, {"acme/prod member", prod, 0}, {"acme/research member", research, 1}} {
		code, body := getRaw(t, s, c.token, "/v1/fabric/hotspots")
		var got api.Hotspots
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Ports) != c.ports {
			t.Fatalf("%s hotspots: %d %s, want %d ports", c.who, code, body, c.ports)
		}
		if c.ports == 0 && (strings.Contains(body, "acme") || strings.Contains(body, "research") || strings.Contains(body, hot)) {
			t.Fatalf("%s hotspots leak acme: %s", c.who, body)
		}
	}
	// globex's own job: it may ask, and sees its own path.
	code, body = getRaw(t, s, globex, fmt.Sprintf("/v1/jobs/%d/health", globexJob.ID))
	if code != 200 || strings.Contains(body, "acme") {
		t.Fatalf("globex own job health: %d %s", code, body)
	}

	// The leader commits the verdict: the job carries it, and an event says so.
	waitState(t, s, "acme's path unhealthy", func(f *state.FSM) bool {
		j, _ := f.Job(acmeJob.ID)
		return j.PathHealth != nil && j.PathHealth.Verdict == domain.PathLinkErrors
	})
	// /metrics carries the committed verdicts: the admin sees acme's
	// faulty job; globex's scope has its own job's healthy count and
	// nothing of acme.
	code, body = getRaw(t, s, s.AdminToken(), "/metrics")
	faulty := fmt.Sprintf(`jobfabric_job_path_unhealthy{job="%d",tenant="acme",verdict="link_errors",workspace="research"} 1`, acmeJob.ID)
	if code != 200 || !strings.Contains(body, faulty) || !strings.Contains(body, `jobfabric_jobs_path_health{tenant="acme",verdict="link_errors",workspace="research"} 1`) {
		t.Fatalf("admin /metrics lacks %s: %d\n%s", faulty, code, grepLines(body, "path"))
	}
	code, body = getRaw(t, s, globex, "/metrics")
	if code != 200 || strings.Contains(body, "acme") || !strings.Contains(body, `jobfabric_jobs_path_health{tenant="globex",verdict="healthy",workspace="infer"} 1`) {
		t.Fatalf("globex /metrics: %d\n%s", code, grepLines(body, "path"))
	}
	pushLinks(t, s, all)
	waitState(t, s, "acme's path recovered", func(f *state.FSM) bool {
		j, _ := f.Job(acmeJob.ID)
		return j.PathHealth != nil && j.PathHealth.Verdict == domain.PathHealthy
	})
	var actions []string
	for _, e := range s.State().Events(state.EventFilter{}) {
		if strings.HasPrefix(e.Action, "job.path_") {
			actions = append(actions, e.Action+" "+e.Object+" "+e.Tenant)
		}
	}
	want := []string{fmt.Sprintf("job.path_unhealthy job/%d acme", acmeJob.ID), fmt.Sprintf("job.path_recovered job/%d acme", acmeJob.ID)}
	if !slices.Equal(actions, want) {
		t.Fatalf("path events %v, want %v", actions, want)
	}
	// globex's events never show acme's path.
	code, body = getRaw(t, s, globex, "/v1/events")
	if code != 200 || strings.Contains(body, "job.path_") {
		t.Fatalf("globex events: %d %s", code, body)
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHotspotsOnJobPathsUnlessAll: hotspots rank the ports on jobs' paths;
// a port no job uses (a down, unassigned server port) shows only when a
// platform caller asks for all, and a tenant's all=true changes nothing.
func TestHotspotsOnJobPathsUnlessAll(t *testing.T) {
	s := healthServer(t)
	admin := as(t, s.URL(), s.AdminToken())
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	waitState(t, s, "job placed", func(f *state.FSM) bool {
		cur, _ := f.Job(j.ID)
		return cur.State.HoldsGPUs()
	})
	cur, _ := s.State().Job(j.ID)
	used := jobPorts(t, s, cur)
	var unused [2]string
	for _, c := range s.State().Topology().Topology.Sites[0].Fabrics[0].Cables {
		if p := [2]string{c.Leaf, c.Port}; !slices.Contains(used, p) {
			unused = p
			break
		}
	}
	pushLinks(t, s, append(slices.Clone(used), unused), used[0], unused)
	ports := func(token, query string) []string {
		t.Helper()
		code, body := getRaw(t, s, token, "/v1/fabric/hotspots"+query)
		var h api.Hotspots
		if code != 200 || json.Unmarshal([]byte(body), &h) != nil {
			t.Fatalf("hotspots%s: %d %s", query, code, body)
		}
		var out []string
		for _, p := range h.Ports {
			out = append(out, p.Port)
		}
		return out
	}
	onPath, idle := used[0][0]+"/"+used[0][1], unused[0]+"/"+unused[1]
	if got := ports(s.AdminToken(), ""); !slices.Equal(got, []string{onPath}) {
		t.Fatalf("admin hotspots %v, want only %s (on the job's path)", got, onPath)
	}
	if got := ports(s.AdminToken(), "?all=true"); !slices.Contains(got, onPath) || !slices.Contains(got, idle) {
		t.Fatalf("admin hotspots?all=true %v, want %s and the unused %s", got, onPath, idle)
	}
	acme := mustToken(t, admin, domain.RoleTenantAdmin, "acme", "")
	if got := ports(acme, "?all=true"); !slices.Equal(got, []string{onPath}) {
		t.Fatalf("acme hotspots?all=true %v, want only its own path's %s", got, onPath)
	}
	if code, body := getRaw(t, s, s.AdminToken(), "/v1/fabric/hotspots?all=yes"); code != 400 || !strings.Contains(body, "all") {
		t.Fatalf("all=yes: %d %s, want 400 naming all", code, body)
	}
}
