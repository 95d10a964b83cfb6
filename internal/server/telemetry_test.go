package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/telemetry"
)

// The leader scrapes its targets; pushes are authenticated, bounded and
// speak only for what the caller may: a tenant's token pushes nothing, a
// node's agent only for its own node.
func TestTelemetryScrapeAndPush(t *testing.T) {
	rec, err := os.ReadFile("../telemetry/testdata/node_exporter_1.5.0.prom")
	if err != nil {
		t.Fatal(err)
	}
	exp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(rec)
	}))
	defer exp.Close()
	cfg, err := telemetry.ParseConfig([]byte(fmt.Sprintf(`
targets: [{name: gpu-a1-node, url: %q, interval: 1s, device: gpu-a1, rules: node-exporter}]
push:
- {name: dcgm, rules: dcgm-exporter}
limits: {max_series: 100}
`, exp.URL+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(t, server.Config{DataDir: t.TempDir(), Telemetry: cfg})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Telemetry().Changed():
	case <-time.After(20 * time.Second): // a guard: the leader scrapes at once
		t.Fatal("the leader did not scrape its target")
	}
	if r := s.Telemetry().Readings(telemetry.Key{Kind: telemetry.KindNIC, Device: "gpu-a1", Port: "eth0"}); len(r) == 0 {
		t.Fatal("no readings of gpu-a1/eth0 from the scraped target")
	}

	admin := s.AdminToken()
	c := as(t, s.URL(), admin)
	seed(t, c)
	member := mustToken(t, c, domain.RoleMember, "acme", "research")
	tenantRuntime := mustToken(t, c, domain.RoleRuntime, "acme", "")
	agent, err := c.CreateToken(ctxT(t), api.TokenCreateRequest{Role: domain.RoleRuntime, Node: "gpu-b1"})
	if err != nil {
		t.Fatal(err)
	}
	body := `# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",Hostname="gpu-a1"} 79
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-b",Hostname="gpu-b1"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-c"} 0
`
	pushReq := func(token, query, ctype, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), "POST", s.URL()+"/v1/telemetry/push"+query, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const text = "text/plain; version=0.0.4"
	code, out := pushReq(admin, "?source=dcgm&device=gpu-c9", text, body)
	var res api.TelemetryPushResult
	if code != 200 || json.Unmarshal([]byte(out), &res) != nil || res.Accepted != 3 {
		t.Fatalf("admin push: %d %s, want 3 accepted", code, out)
	}
	if r := s.Telemetry().Readings(telemetry.Key{Kind: telemetry.KindGPU, Device: "gpu-a1", Port: "GPU-a"}); len(r) != 1 || r[0].Value != 79 {
		t.Errorf("pushed XID: %+v", r)
	}
	if r := s.Telemetry().Readings(telemetry.Key{Kind: telemetry.KindGPU, Device: "gpu-c9", Port: "GPU-c"}); len(r) != 1 {
		t.Errorf("GPU without Hostname on the device named by the push: %+v", r)
	}

	// The node's agent: its own node only.
	code, out = pushReq(agent.Secret, "?source=dcgm", text, body)
	if code != 200 || json.Unmarshal([]byte(out), &res) != nil || res.Accepted != 2 || res.Dropped != 1 {
		t.Errorf("agent push: %d %s, want gpu-b1's 2 accepted, gpu-a1's dropped", code, out)
	}
	if code, out := pushReq(agent.Secret, "?source=dcgm&device=gpu-a1", text, body); code != 403 {
		t.Errorf("agent pushing for another node: %d %s", code, out)
	}
	for _, c := range []struct {
		name, token, query, ctype, body string
		want                            int
	}{
		{"no token", "", "?source=dcgm", text, body, 401},
		{"member", member, "?source=dcgm", text, body, 403},
		{"tenant runtime", tenantRuntime, "?source=dcgm", text, body, 403},
		{"unknown source", admin, "?source=nope", text, body, 404},
		{"no source", admin, "", text, body, 400},
		{"json", admin, "?source=dcgm", "application/json", `{}`, 415},
		{"garbage", admin, "?source=dcgm", text, "DCGM_FI_DEV_XID_ERRORS{gpu=0 1\n", 400},
		{"oversize", admin, "?source=dcgm", text, strings.Repeat("# x\n", 5<<20), 413},
	} {
		if code, out := pushReq(c.token, c.query, c.ctype, c.body); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, out, c.want)
		}
	}
}
