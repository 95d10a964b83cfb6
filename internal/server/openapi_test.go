package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
	"github.com/jobfabric/jobfabric/internal/topology"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json from the route table (and openapi_docs_gen.go from the sources)")

// loadDoc parses an OpenAPI document and validates it with kin-openapi.
func loadDoc(t *testing.T, raw []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	return doc
}

// TestOpenAPIDocument: the committed api/openapi.json is what the server
// serves, a valid OpenAPI 3 document (kin-openapi's validator) that
// documents every route with a tag, its path parameters and its errors.
func TestOpenAPIDocument(t *testing.T) {
	c := startCluster(t, 1)
	status, served := do(t, c.Servers[0].URL(), "", "GET", "/v1/openapi.json", "")
	if status != 200 {
		t.Fatalf("GET /v1/openapi.json: %d", status)
	}
	doc := loadDoc(t, []byte(served))
	var tags []string
	for _, tg := range doc.Tags {
		tags = append(tags, tg.Name)
	}
	for _, r := range c.Servers[0].Routes() {
		method, path, _ := strings.Cut(r, " ")
		item := doc.Paths.Value(path)
		var op *openapi3.Operation
		if item != nil {
			op = item.GetOperation(method)
		}
		if op == nil {
			t.Errorf("route %s is not in the OpenAPI document", r)
			continue
		}
		if len(op.Tags) != 1 || !slices.Contains(tags, op.Tags[0]) {
			t.Errorf("%s: tags %v, want one of the declared %v", r, op.Tags, tags)
		}
		if strings.Contains(path, "{") && op.Responses.Status(http.StatusBadRequest) == nil {
			t.Errorf("%s: takes path parameters but documents no 400", r)
		}
		if op.Security != nil && op.Responses.Status(http.StatusUnauthorized) == nil {
			t.Errorf("%s: needs a token but documents no 401", r)
		}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(served), "", "  "); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("..", "..", "api", "openapi.json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run: make openapi)", err)
	}
	if !bytes.Equal(want, pretty.Bytes()) {
		t.Fatalf("api/openapi.json is stale: run `make openapi` and commit it")
	}
}

// conformance sends requests to a real server and checks each request and
// answer against the OpenAPI document with kin-openapi's openapi3filter.
type conformance struct {
	t      *testing.T
	base   string
	router routers.Router
	// exercised operations ("METHOD path-template") and statuses.
	seen map[string][]int
}

func newConformance(t *testing.T, base string, doc *openapi3.T) *conformance {
	t.Helper()
	r, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &conformance{t: t, base: base, router: r, seen: map[string][]int{}}
}

// call validates the request, sends it, validates the answer and returns
// its status and body; a status other than want fails the test.
func (c *conformance) call(token, method, path string, body any, want int) []byte {
	c.t.Helper()
	status, b, err := c.try(token, method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	return b
}

func (c *conformance) try(token, method, path string, body any) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	req := func() *http.Request {
		r, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
		if err != nil {
			c.t.Fatal(err)
		}
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	doc := req()
	route, params, err := c.router.FindRoute(doc)
	if err != nil {
		return 0, nil, fmt.Errorf("not in the document: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: doc, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return 0, nil, fmt.Errorf("request does not match the document: %w", err)
	}
	resp, err := http.DefaultClient.Do(req())
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if err := validateAnswer(in, resp.StatusCode, resp.Header, b); err != nil {
		return resp.StatusCode, b, fmt.Errorf("answer %d does not match the document: %w\n%s", resp.StatusCode, err, b)
	}
	key := method + " " + route.Path
	c.seen[key] = append(c.seen[key], resp.StatusCode)
	return resp.StatusCode, b, nil
}

// events reads an event stream to its end, checks the answer's status and
// headers against the document and each event's data against schema, and
// returns the number of events.
func (c *conformance) events(token, path string, schema *openapi3.Schema) int {
	c.t.Helper()
	r := mustReq(c.t, "GET", c.base+path)
	r.Header.Set("Authorization", "Bearer "+token)
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(b)), Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Fatalf("GET %s: answer %d does not match the document: %v", path, resp.StatusCode, err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		n++
		var v any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			c.t.Fatal(err)
		}
		if err := schema.VisitJSON(v); err != nil {
			c.t.Errorf("GET %s: event data does not match its schema: %v", path, err)
		}
	}
	c.seen["GET "+route.Path] = append(c.seen["GET "+route.Path], resp.StatusCode)
	return n
}

// raw sends a body the document does not describe (another Content-Type,
// a duplicate key, an oversize body) and validates only the answer.
func (c *conformance) raw(token, method, path, ctype, body string, want int) {
	c.t.Helper()
	r := mustReq(c.t, method, c.base+path)
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		c.t.Fatal(err)
	}
	r.Body = io.NopCloser(strings.NewReader(body))
	r.Header.Set("Content-Type", ctype)
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route}
	if err := validateAnswer(in, resp.StatusCode, resp.Header, b); err != nil {
		c.t.Fatalf("%s %s (%s): answer %d does not match the document: %v", method, path, ctype, resp.StatusCode, err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s (%s): status %d, want %d: %s", method, path, ctype, resp.StatusCode, want, b)
	}
	c.seen[method+" "+route.Path] = append(c.seen[method+" "+route.Path], resp.StatusCode)
}

func validateAnswer(in *openapi3filter.RequestValidationInput, status int, h http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	return openapi3filter.ValidateResponse(context.Background(), out)
}

func decodeInto[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, b)
	}
	return v
}

// TestOpenAPIConformance drives a real server through its main
// operations (and some of their errors) and validates every request and
// answer against the served document: a field the code writes but the
// document lacks (or types, requires or enumerates otherwise) fails here.
// It also checks that every field the document marks required in a
// request body is refused when left out.
func TestOpenAPIConformance(t *testing.T) {
	cl := startCluster(t, 1)
	srv := cl.Servers[0]
	_, served := do(t, srv.URL(), "", "GET", "/v1/openapi.json", "")
	doc := loadDoc(t, []byte(served))
	c := newConformance(t, srv.URL(), doc)
	admin := srv.AdminToken()
	esc := url.PathEscape

	c.call("", "GET", "/v1/health", nil, 200)
	c.call("", "GET", "/v1/openapi.json", nil, 200)
	c.call(admin, "GET", "/v1/whoami", nil, 200)
	c.call(admin, "GET", "/v1/cluster", nil, 200)
	c.call("", "GET", "/v1/whoami", nil, 401)
	c.call(admin, "GET", "/v1/topology", nil, 404)

	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	c.call(admin, "PUT", "/v1/topology?dryRun=true", topo, 200)
	c.call(admin, "PUT", "/v1/topology", topo, 200)
	c.call(admin, "GET", "/v1/topology", nil, 200)

	acme := api.TenantCreateRequest{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true, Quota: &domain.TenantQuota{Guaranteed: 16, BorrowLimit: 8}}
	c.call(admin, "POST", "/v1/tenants", acme, 201)
	c.call(admin, "POST", "/v1/tenants", acme, 409)
	c.call(admin, "GET", "/v1/tenants", nil, 200)
	c.call(admin, "GET", "/v1/tenants/acme", nil, 200)
	c.call(admin, "PATCH", "/v1/tenants/acme", api.TenantUpdateRequest{Sites: &[]string{topo.Sites[0].Name}}, 200)
	c.call(admin, "GET", "/v1/tenants/nope", nil, 404)
	c.call(admin, "POST", "/v1/tenants/acme/workspaces", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 8, BorrowLimit: 8,
		Models: []domain.ModelQuota{{Model: topo.Sites[0].Fabrics[0].Servers[0].GPUModel, Guaranteed: 8, BorrowLimit: 8}}}, 201)
	c.call(admin, "GET", "/v1/tenants/acme/workspaces", nil, 200)
	c.call(admin, "GET", "/v1/tenants/acme/workspaces/research", nil, 200)
	weight := 2
	c.call(admin, "PATCH", "/v1/tenants/acme/workspaces/research", api.WorkspaceUpdateRequest{Weight: &weight}, 200)

	created := decodeInto[api.TokenCreated](t, c.call(admin, "POST", "/v1/tokens", api.TokenCreateRequest{Role: domain.RoleMember, Tenant: "acme", Workspace: "research", TTLSeconds: 3600}, 201))
	member := created.Secret
	c.call(member, "GET", "/v1/whoami", nil, 200)
	c.call(member, "GET", "/v1/cluster", nil, 403)
	c.call(admin, "GET", "/v1/tokens", nil, 200)
	tmp := decodeInto[api.TokenCreated](t, c.call(admin, "POST", "/v1/tokens", api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: "acme"}, 201))
	c.call(admin, "DELETE", "/v1/tokens/"+tmp.Token.ID, nil, 200)

	spec := domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Priority: 5, Preemptible: true, ExternalID: "slurm:4242",
		Topology: &domain.TopologyRequirement{Level: domain.TopologyStripe}}
	dry := decodeInto[api.DryRun](t, c.call(member, "POST", "/v1/jobs?dryRun=true", spec, 200))
	if len(dry.Placement) == 0 {
		t.Fatalf("dry run placed nothing: %+v", dry.Reason)
	}
	c.call(member, "POST", "/v1/jobs?dryRun=true", domain.JobSpec{GPUs: 16, Topology: &domain.TopologyRequirement{Level: domain.TopologyNVLinkDomain, Required: true}}, 200) // would wait: a reason
	c.call(member, "POST", "/v1/jobs", domain.JobSpec{GPUs: -1}, 400)
	job := decodeInto[domain.Job](t, c.call(member, "POST", "/v1/jobs", spec, 201))
	jobPath := fmt.Sprintf("/v1/jobs/%d", job.ID)
	waitJob(t, as(t, srv.URL(), member), job.ID, "Ready", isReady)
	job = decodeInto[domain.Job](t, c.call(member, "GET", jobPath, nil, 200))
	if job.State != domain.JobReady {
		t.Fatalf("job %d seen Ready on its watch, then %s", job.ID, job.State)
	}
	c.call(member, "GET", "/v1/jobs?tenant=acme&workspace=research&state=Ready", nil, 200)
	c.call(member, "GET", "/v1/jobs/999999", nil, 404)
	node := job.Placement[0].Server
	c.call(member, "GET", jobPath+"/binding?node="+esc(node), nil, 200)
	c.call(admin, "GET", "/v1/external-jobs/"+esc("slurm:4242"), nil, 200)

	// The node's agent: facts, heartbeat, its record, a job report.
	agent := decodeInto[api.TokenCreated](t, c.call(admin, "POST", "/v1/tokens", api.TokenCreateRequest{Role: domain.RoleRuntime, Node: node}, 201)).Secret
	facts := recorded(t)
	c.call(agent, "PUT", "/v1/nodes/"+node+"/facts", api.HostReportRequest{Agent: "test-agent", Facts: facts}, 200)
	c.call(agent, "POST", "/v1/nodes/"+node+"/heartbeat", api.HeartbeatRequest{Agent: "test-agent", FactsHash: hostfacts.Fingerprint(&facts)}, 200)
	c.call(agent, "GET", "/v1/nodes/"+node+"/host", nil, 200)
	c.call(agent, "GET", jobPath+"/binding", nil, 200)
	c.call(agent, "POST", fmt.Sprintf("/v1/nodes/%s/jobs/%d/report", node, job.ID), api.JobReportRequest{State: "running"}, 200)
	c.call(admin, "GET", "/v1/hosts", nil, 200)
	pol := decodeInto[domain.HostPolicy](t, c.call(admin, "GET", "/v1/hosts/policy", nil, 200))
	c.call(admin, "PUT", "/v1/hosts/policy", pol, 200)
	c.call(admin, "GET", "/v1/nodes", nil, 200)
	cordon := true
	c.call(admin, "PATCH", "/v1/nodes/"+topo.Sites[0].Fabrics[0].Servers[3].Name, api.NodeUpdateRequest{Cordoned: &cordon, Reason: "test"}, 200)
	c.call(admin, "POST", "/v1/nodes/"+node+"/accept", nil, 200)

	c.call(admin, "GET", "/v1/fabric/status", nil, 200)
	c.call(admin, "GET", "/v1/fabric/revisions", nil, 200)
	c.call(admin, "GET", "/v1/fabric/configs", nil, 200)
	c.call(admin, "GET", "/v1/fabric/configs?nos=eos", nil, 200)
	c.call(admin, "GET", "/v1/fabric/diff", nil, 200)
	c.call(admin, "GET", "/v1/fabric/verify?matrix=true", nil, 200)
	opts := decodeInto[api.FabricOptions](t, c.call(admin, "GET", "/v1/fabric/options", nil, 200))
	c.call(admin, "PUT", "/v1/fabric/options", opts, 200)
	c.call(admin, "PUT", "/v1/fabric/options", api.FabricOptions{VRFPlacement: "nowhere"}, 400)
	c.call(member, "GET", "/v1/fabric/options", nil, 403)

	c.try(admin, "POST", "/v1/fabric/deploy", nil) // validated whatever it answers without a driver
	c.call(admin, "POST", "/v1/tenants", api.TenantCreateRequest{Name: "gone", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}, 201)
	c.call(admin, "POST", "/v1/tenants/gone/workspaces", api.WorkspaceCreateRequest{Name: "w"}, 201)
	c.call(admin, "DELETE", "/v1/tenants/gone", nil, 409) // it has a workspace
	c.call(admin, "DELETE", "/v1/tenants/gone/workspaces/w", nil, 200)
	c.call(admin, "DELETE", "/v1/tenants/gone", nil, 200)
	c.call(admin, "DELETE", "/v1/cluster/members/"+srv.NodeID(), nil, 409) // the leader
	c.call(admin, "POST", jobPath+"/report", api.JobReportRequest{State: "running", Message: "step 10"}, 200)
	c.call(admin, "POST", "/v1/cluster/members", api.JoinRequest{ID: "n9", RaftAddr: "127.0.0.1:1", APIAddr: "ftp://x"}, 400)
	c.call(member, "POST", jobPath+"/cancel", nil, 200)
	// The watch of an ended job: one event, whose data is a Job.
	if n := c.events(member, jobPath+"/watch", doc.Components.Schemas["Job"].Value); n != 1 {
		t.Errorf("watch of an ended job sent %d events, want 1", n)
	}
	c.call(admin, "GET", "/v1/events?limit=50", nil, 200)
	c.call(admin, "GET", "/v1/usage?since=1h&by=job", nil, 200)
	c.call(member, "GET", "/v1/usage?since=1h&by=token", nil, 200)
	c.call(admin, "GET", "/v1/usage?since=soon", nil, 400)

	// Errors a client can cause before its body is read.
	c.raw(admin, "POST", "/v1/tenants", "application/x-www-form-urlencoded", "name=x", http.StatusUnsupportedMediaType)
	c.raw(admin, "POST", "/v1/tenants", "application/json", `{"name":"x","name":"y"}`, http.StatusBadRequest)
	c.raw(admin, "POST", "/v1/tenants", "application/json", `{"name":"`+strings.Repeat("x", 2<<20)+`"}`, http.StatusRequestEntityTooLarge)
	// Telemetry push takes exposition text; this cluster has no push source.
	c.raw(admin, "POST", "/v1/telemetry/push?source=none", "text/plain; version=0.0.4", "up 1\n", http.StatusNotFound)
	c.raw(admin, "POST", "/v1/telemetry/push?source=none", "application/json", "{}", http.StatusUnsupportedMediaType)
	c.raw(member, "POST", "/v1/telemetry/push?source=none", "text/plain", "up 1\n", http.StatusForbidden)

	var missed []string
	for _, r := range srv.Routes() {
		if len(c.seen[r]) == 0 {
			missed = append(missed, r)
		}
	}
	t.Logf("%d of %d operations exercised; not: %v", len(srv.Routes())-len(missed), len(srv.Routes()), missed)
	for _, want := range []string{
		"GET /v1/tenants", "POST /v1/tenants/{tenant}/workspaces", "POST /v1/jobs", "GET /v1/topology",
		"POST /v1/tokens", "GET /v1/events", "GET /v1/nodes", "GET /v1/hosts", "GET /v1/fabric/status",
		"GET /v1/fabric/verify", "GET /v1/jobs/{id}/binding", "GET /v1/cluster", "GET /v1/external-jobs/{externalId}",
		"GET /v1/usage",
	} {
		if len(c.seen[want]) == 0 {
			t.Errorf("%s was not exercised", want)
		}
	}

	// What the document requires of a request body, the server refuses
	// without: every required field of these bodies, left out, is a 400.
	bodies := []struct {
		method, path, token string
		body                any
	}{
		{"POST", "/v1/tenants", admin, api.TenantCreateRequest{Name: "initech", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware}},
		{"POST", "/v1/tenants/acme/workspaces", admin, api.WorkspaceCreateRequest{Name: "prod"}},
		{"POST", "/v1/tokens", admin, api.TokenCreateRequest{Role: domain.RoleRuntime}},
		{"POST", "/v1/jobs?dryRun=true", admin, spec},
		{"PUT", "/v1/hosts/policy", admin, pol},
		{"PUT", "/v1/topology?dryRun=true", admin, topo},
		{"POST", "/v1/cluster/members", admin, api.JoinRequest{ID: "n9", RaftAddr: "127.0.0.1:1", APIAddr: "http://127.0.0.1:2"}},
		{"POST", jobPath + "/report", admin, api.JobReportRequest{State: "running"}},
	}
	for _, bc := range bodies {
		route, _, err := c.router.FindRoute(mustReq(t, bc.method, srv.URL()+bc.path))
		if err != nil {
			t.Fatal(err)
		}
		schema := route.Operation.RequestBody.Value.Content.Get("application/json").Schema.Value
		var v any
		raw, _ := json.Marshal(bc.body)
		_ = json.Unmarshal(raw, &v)
		paths := requiredPaths(schema, v, nil)
		if len(paths) == 0 {
			t.Errorf("%s %s: the document requires nothing of this body", bc.method, bc.path)
		}
		t.Logf("%s %s: %d required fields left out in turn", bc.method, bc.path, len(paths))
		for _, p := range paths {
			cut := without(v, p)
			st, b := do(t, srv.URL(), bc.token, bc.method, bc.path, string(mustJSON(t, cut)))
			if st != http.StatusBadRequest {
				t.Errorf("%s %s without required %s: %d, want 400: %s", bc.method, bc.path, strings.Join(p, "."), st, b)
			}
		}
	}
}

func mustReq(t *testing.T, method, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requiredPaths lists the paths (keys and array indices) of the required
// properties present in v, at any depth; of an array, only the first
// element is visited.
func requiredPaths(s *openapi3.Schema, v any, at []string) [][]string {
	if s == nil {
		return nil
	}
	var out [][]string
	for _, sub := range s.AllOf {
		out = append(out, requiredPaths(sub.Value, v, at)...)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := v[r]; ok {
				out = append(out, append(slices.Clone(at), r))
			}
		}
		for k, ps := range s.Properties {
			if sub, ok := v[k]; ok {
				out = append(out, requiredPaths(ps.Value, sub, append(slices.Clone(at), k))...)
			}
		}
	case []any:
		if len(v) > 0 && s.Items != nil {
			out = append(out, requiredPaths(s.Items.Value, v[0], append(slices.Clone(at), "0"))...)
		}
	}
	return out
}

// without is a deep copy of v without the key at path p.
func without(v any, p []string) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			switch {
			case len(p) == 1 && k == p[0]:
			case len(p) > 1 && k == p[0]:
				out[k] = without(x, p[1:])
			default:
				out[k] = x
			}
		}
		return out
	case []any:
		out := slices.Clone(v)
		if len(p) > 1 && p[0] == "0" {
			out[0] = without(v[0], p[1:])
		}
		return out
	}
	return v
}

// TestOpenAPIConformanceCanFail: the conformance check rejects an answer
// that breaks the document, so TestOpenAPIConformance can fail: a job whose
// state is not in the enum, an unknown-free request with a wrong type, and
// a document whose Job schema lost a property the server writes
// (required there) all fail validation.
func TestOpenAPIConformanceCanFail(t *testing.T) {
	cl := startCluster(t, 1)
	srv := cl.Servers[0]
	_, served := do(t, srv.URL(), "", "GET", "/v1/openapi.json", "")
	admin := srv.AdminToken()

	// A real answer, validated against a doctored document.
	var raw map[string]any
	if err := json.Unmarshal([]byte(served), &raw); err != nil {
		t.Fatal(err)
	}
	health := raw["components"].(map[string]any)["schemas"].(map[string]any)["Health"].(map[string]any)
	health["properties"].(map[string]any)["isLeader"] = map[string]any{"type": "string"}
	broken := loadDoc(t, mustJSON(t, raw))
	c := newConformance(t, srv.URL(), broken)
	if _, _, err := c.try("", "GET", "/v1/health", nil); err == nil {
		t.Fatal("an answer whose field has another type than the document's passed validation")
	}

	good := newConformance(t, srv.URL(), loadDoc(t, []byte(served)))
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"request with an unknown field", "POST", "/v1/tenants", map[string]any{"name": "x", "isolation": "gpu", "network": "pure-rt5", "colour": "red"}},
		{"request with a value outside the enum", "POST", "/v1/tenants", map[string]any{"name": "x", "isolation": "rack", "network": "pure-rt5"}},
		{"request without a required field", "POST", "/v1/tokens", map[string]any{"tenant": "acme"}},
	} {
		if _, _, err := good.try(admin, tc.method, tc.path, tc.body); err == nil || !strings.Contains(err.Error(), "request does not match") {
			t.Errorf("%s: %v, want a request validation error", tc.name, err)
		}
	}

	// An answer that lacks a required field or has a value outside an
	// enum fails, as a server bug would.
	route, params, err := good.router.FindRoute(mustReq(t, "GET", srv.URL()+"/v1/jobs/1"))
	if err != nil {
		t.Fatal(err)
	}
	in := &openapi3filter.RequestValidationInput{Request: mustReq(t, "GET", srv.URL()+"/v1/jobs/1"), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	h := http.Header{"Content-Type": {"application/json"}}
	job := domain.Job{ID: 1, JobSpec: domain.JobSpec{Tenant: "a", Workspace: "b", GPUs: 1}, State: domain.JobPending}
	ok := mustJSON(t, job)
	if err := validateAnswer(in, 200, h, ok); err != nil {
		t.Fatalf("a valid job fails: %v", err)
	}
	bad := bytes.Replace(ok, []byte(`"state":"Pending"`), []byte(`"state":"Sleeping"`), 1)
	if err := validateAnswer(in, 200, h, bad); err == nil {
		t.Error("a job state outside the enum passed")
	}
	var m map[string]any
	_ = json.Unmarshal(ok, &m)
	delete(m, "submittedAt")
	if err := validateAnswer(in, 200, h, mustJSON(t, m)); err == nil {
		t.Error("a job without its required submittedAt passed")
	}
	if err := validateAnswer(in, 404, h, []byte(`{"code":"invalid_argument","message":"x"}`)); err == nil {
		t.Error("a 404 with another status's code passed")
	}
	if err := validateAnswer(in, 418, h, ok); err == nil {
		t.Error("an undocumented status passed")
	}
}
