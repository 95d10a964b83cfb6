package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// doH sends a request with extra headers; it returns the status and the
// error body's code and field.
func doH(t *testing.T, base, token, method, path, body string, hdr map[string]string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct{ Code, Field string }
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Code, e.Field
}

// TestDuplicateKeysRefused: a key given twice in any object of a request
// body answers 400 naming the key's path, and nothing changes.
func TestDuplicateKeysRefused(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url, tok := c.Servers[0].URL(), c.AdminToken
	cases := map[string]struct{ method, path, body, field string }{
		"top level":        {"POST", "/v1/tenants", `{"name":"x","isolation":"gpu","network":"pure-rt5","name":"y"}`, "name"},
		"differs in case":  {"POST", "/v1/tokens", `{"role":"member","tenant":"acme","workspace":"research","Role":"admin"}`, "Role"},
		"nested":           {"POST", "/v1/tenants", `{"name":"x","isolation":"gpu","network":"pure-rt5","quota":{"guaranteed":1,"guaranteed":2}}`, "quota.guaranteed"},
		"in a list":        {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","models":[{"model":"H100-80GB"},{"model":"H100-80GB","model":"A100-80GB"}]}`, "models[1].model"},
		"job spec":         {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"gpus":8}`, "gpus"},
		"long s":           {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"gpuſ":8}`, "gpuſ"},
		"topology (json)":  {"PUT", "/v1/topology", `{"apiVersion":"jobfabric/v1","apiVersion":"jobfabric/v1","sites":[]}`, ""},
		"node condition":   {"PATCH", "/v1/nodes/s1-gpu001", `{"cordoned":true,"cordoned":false}`, "cordoned"},
		"different values": {"PATCH", "/v1/tenants/acme/workspaces/research", `{"guaranteed":8,"guaranteed":0}`, "guaranteed"},
	}
	before := requestEvents(t, admin)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, code, field := doH(t, url, tok, tc.method, tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			if status != http.StatusBadRequest || code != string(domain.CodeInvalidArgument) {
				t.Fatalf("status %d code %s, want 400 invalid_argument", status, code)
			}
			if tc.field != "" && field != tc.field {
				t.Fatalf("field %q, want %q", field, tc.field)
			}
		})
	}
	after := requestEvents(t, admin)
	if len(after) != len(before) {
		t.Fatalf("refused requests changed the state: %d events before, %d after", len(before), len(after))
	}
}

// TestBodyMediaTypes: a body in another Content-Type than JSON (YAML for
// the topology) or in any Content-Encoding answers 415; the accepted
// spellings go through.
func TestBodyMediaTypes(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	url, tok := c.Servers[0].URL(), c.AdminToken
	tenant := `{"name":"%s","isolation":"gpu","network":"pure-rt5"}`
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	topoJSON, _ := json.Marshal(topo)
	cases := map[string]struct {
		method, path, body string
		hdr                map[string]string
		want               int
	}{
		"form":                {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		"text":                {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "text/plain"}, 415},
		"yaml to a json op":   {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/yaml"}, 415},
		"malformed type":      {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json; charset"}, 415},
		"latin1":              {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}, 415},
		"gzip":                {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, 415},
		"br":                  {"PUT", "/v1/topology", string(topoJSON), map[string]string{"Content-Type": "application/json", "Content-Encoding": "br"}, 415},
		"xml topology":        {"PUT", "/v1/topology", string(topoJSON), map[string]string{"Content-Type": "application/xml"}, 415},
		"json":                {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json"}, 201},
		"json utf-8":          {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json; charset=UTF-8"}, 201},
		"identity":            {"POST", "/v1/tenants", tenant, map[string]string{"Content-Type": "application/json", "Content-Encoding": "identity"}, 201},
		"no content type":     {"POST", "/v1/tenants", tenant, nil, 201},
		"topology as yaml":    {"PUT", "/v1/topology?dryRun=true", string(topoJSON), map[string]string{"Content-Type": "application/yaml"}, 200},
		"topology as x-yaml":  {"PUT", "/v1/topology?dryRun=true", string(topoJSON), map[string]string{"Content-Type": "application/x-yaml"}, 200},
		"topology as json":    {"PUT", "/v1/topology?dryRun=true", string(topoJSON), map[string]string{"Content-Type": "application/json"}, 200},
		"bodiless op ignores": {"GET", "/v1/tenants", "", map[string]string{"Content-Type": "text/plain"}, 200},
	}
	n := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := tc.body
			if strings.Contains(body, "%s") {
				n++
				body = strings.Replace(body, "%s", "t"+strings.Repeat("x", n), 1)
			}
			status, code, field := doH(t, url, tok, tc.method, tc.path, body, tc.hdr)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, code, tc.want)
			}
			if tc.want == 415 && (code != string(domain.CodeUnsupportedMediaType) || field == "") {
				t.Fatalf("415 with code %q field %q, want unsupported_media_type naming the header", code, field)
			}
		})
	}
	// The client sends the right headers: JSON objects and YAML files.
	if _, err := admin.ApplyTopology(ctxT(t), topoJSON, false); err != nil {
		t.Fatalf("client topology: %v", err)
	}
}

// TestRefusedCommandNeverLogged: a command the state machine refuses (a
// topology below the workspaces' guarantees) answers its error and never
// enters the raft log: the member's state machine refuses no entry.
func TestRefusedCommandNeverLogged(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin) // 32 GPUs, workspaces guarantee 24
	small, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(small)
	srv := c.Servers[0]
	for range 2 {
		_, err = admin.ApplyTopology(ctxT(t), raw, false)
		if domain.CodeOf(err) != domain.CodeFailedPrecondition {
			t.Fatalf("16-GPU topology under 24 guaranteed GPUs: %v, want failed_precondition", err)
		}
	}
	if n := srv.State().Refused(state.CmdTopologyApply); n != 0 {
		t.Fatalf("%d refused entries entered the raft log", n)
	}
	// The dry run answers the same refusal.
	if _, err := admin.ApplyTopology(ctxT(t), raw, true); domain.CodeOf(err) != domain.CodeFailedPrecondition {
		t.Fatalf("dry run: %v, want failed_precondition", err)
	}
	if v := srv.State().Topology(); v.Summary.GPUs != 32 {
		t.Fatalf("topology has %d GPUs after refused applies, want 32", v.Summary.GPUs)
	}
}
