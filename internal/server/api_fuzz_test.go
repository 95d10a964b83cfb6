package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
)

// fuzzRoute is a write operation of the API with a request body.
type fuzzRoute struct {
	method, path string
	// readOnly: the operation never changes state, whatever it answers
	// (a dry run).
	readOnly bool
}

// fuzzRoutes are the operations FuzzAPIWrite sends bodies to; the fuzzer
// picks one by index. Joining a member (POST /v1/cluster/members) is left
// out: a fuzzed but well-formed join adds a voter that never comes, and the
// one-server cluster loses its quorum.
var fuzzRoutes = []fuzzRoute{
	{method: "POST", path: "/v1/jobs"},
	{method: "POST", path: "/v1/jobs?dryRun=true", readOnly: true},
	{method: "POST", path: "/v1/tenants"},
	{method: "PATCH", path: "/v1/tenants/acme"},
	{method: "POST", path: "/v1/tenants/acme/workspaces"},
	{method: "PATCH", path: "/v1/tenants/acme/workspaces/research"},
	{method: "PUT", path: "/v1/topology"},
	{method: "PUT", path: "/v1/topology?dryRun=true", readOnly: true},
	{method: "POST", path: "/v1/tokens"},
	{method: "POST", path: "/v1/jobs/1/report"},
	{method: "PUT", path: "/v1/nodes/s1-gpu001/facts"},
	{method: "POST", path: "/v1/nodes/s1-gpu001/heartbeat"},
	{method: "PATCH", path: "/v1/nodes/s1-gpu002"},
	{method: "PUT", path: "/v1/hosts/policy"},
	{method: "PUT", path: "/v1/fabric/options"},
}

// fuzzContentTypes are the Content-Type headers the fuzzer picks from.
var fuzzContentTypes = []string{"application/json", "application/yaml", "", "text/plain", "application/json; charset=utf-8"}

// FuzzAPIWrite sends fuzzed bodies to the write operations of a real
// server (one per fuzzing process, over HTTP, with an admin token) and
// asserts: never a 5xx (a handler panic answers 500); every error answer is
// a JSON error with a code and a message; a 4xx, and any answer to a dry
// run, changes no state (a fingerprint of everything an admin's request can
// change, and the audit trail's entries by anyone but the server's own
// loops, before and after).
func FuzzAPIWrite(f *testing.F) {
	srv, token, seeds := startFuzzServer(f)
	for _, s := range seeds {
		f.Add(s.route, s.ctype, s.body)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	f.Fuzz(func(t *testing.T, route, ctype uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		ct := fuzzContentTypes[int(ctype)%len(fuzzContentTypes)]
		before, index := stateFingerprint(t, srv), srv.State().AppliedIndex()
		req, err := http.NewRequest(rt.method, srv.URL()+rt.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.method, rt.path, err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", rt.method, rt.path, err)
		}
		what := fmt.Sprintf("%s %s (%s) %q", rt.method, rt.path, ct, truncate(body, 300))
		if resp.StatusCode >= 500 {
			t.Fatalf("%s answered %d: %s", what, resp.StatusCode, answer)
		}
		if resp.StatusCode >= 400 {
			var de domain.Error
			if err := json.Unmarshal(answer, &de); err != nil || de.Code == "" || de.Message == "" {
				t.Fatalf("%s answered %d with %q, not a JSON error with a code and a message", what, resp.StatusCode, answer)
			}
		} else if resp.StatusCode != http.StatusNoContent && !json.Valid(answer) {
			t.Fatalf("%s answered %d with %q, not JSON", what, resp.StatusCode, answer)
		}
		if resp.StatusCode < 400 && !rt.readOnly {
			// A change was made: let the scheduler's answer to it land
			// before the next input measures its own "before".
			settle(t, srv)
			return
		}
		if after := stateFingerprint(t, srv); after != before {
			t.Fatalf("%s answered %d (%s) and changed the state", what, resp.StatusCode, bytes.TrimSpace(answer))
		}
		if strictLog && srv.State().AppliedIndex() != index {
			t.Fatalf("%s answered %d (%s) and added %d entries to the raft log", what, resp.StatusCode, bytes.TrimSpace(answer), srv.State().AppliedIndex()-index)
		}
	})
}

// strictLog (JOBFABRIC_FUZZ_STRICT_LOG=1) also asserts that a refused
// request adds nothing to the raft log: the leader checks before it
// proposes (FSM.Check), not only the state machine after. Off by default:
// the leader's own loops (scheduler, fabric, the batched last use of
// tokens) append entries of their own at times no input controls, so the
// index can move under a refused request; TestRefusedCommandNeverLogged
// checks the same property without them.
var strictLog = os.Getenv("JOBFABRIC_FUZZ_STRICT_LOG") == "1"

type fuzzSeed struct {
	route, ctype uint8
	body         []byte
}

// startFuzzServer starts one server for the fuzzing process, applies a
// 4-server topology, two tenants, a workspace each and one job, and returns
// the seeds: a well-formed body for every route, and the shapes that
// trouble decoders.
func startFuzzServer(f *testing.F) (*server.Server, string, []fuzzSeed) {
	f.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, f.TempDir(), 1, devcluster.Options{Logger: quietLogger(), Tune: func(cfg *server.Config) {
		// Changes come only from requests: no fabric deploys, no ticks
		// (a change still runs a scheduling cycle at once).
		cfg.FabricDriver = "none"
		cfg.ScheduleInterval = time.Hour
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	admin := c.Client(0)
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 4, GPUsPerServer: 8})
	if err != nil {
		f.Fatal(err)
	}
	topoJSON, _ := json.Marshal(topo)
	topoYAML, _ := yaml.Marshal(topo)
	if _, err := admin.ApplyTopology(ctx, topoJSON, false); err != nil {
		f.Fatal(err)
	}
	for _, tr := range []api.TenantCreateRequest{
		{Name: "acme", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5, JobSegmentation: true},
		{Name: "globex", Isolation: domain.IsolationGPU, Network: domain.NetworkVLANAware},
	} {
		if _, err := admin.CreateTenant(ctx, tr); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := admin.CreateWorkspace(ctx, "acme", api.WorkspaceCreateRequest{Name: "research", Guaranteed: 8, BorrowLimit: 8}); err != nil {
		f.Fatal(err)
	}
	if _, err := admin.CreateWorkspace(ctx, "globex", api.WorkspaceCreateRequest{Name: "infer", Guaranteed: 8}); err != nil {
		f.Fatal(err)
	}
	if _, err := admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 1}); err != nil {
		f.Fatal(err)
	}
	facts, _ := json.Marshal(api.HostReportRequest{Agent: "jobfabric-agent s1-gpu001", Facts: recordedFacts(f)})

	route := func(path string) uint8 {
		for i, r := range fuzzRoutes {
			if r.path == path {
				return uint8(i)
			}
		}
		f.Fatalf("no fuzz route %s", path)
		return 0
	}
	var seeds []fuzzSeed
	add := func(path string, ctype uint8, bodies ...string) {
		for _, b := range bodies {
			seeds = append(seeds, fuzzSeed{route(path), ctype, []byte(b)})
		}
	}
	add("/v1/jobs", 0,
		`{"tenant":"acme","workspace":"research","gpus":1}`,
		`{"tenant":"acme","workspace":"research","gpus":2,"gpusPerNode":2,"topology":{"level":"server"},"priority":5,"preemptible":true}`,
		`{"tenant":"globex","workspace":"infer","share":0.5}`,
		`{"tenant":"acme","workspace":"research","gpus":1,"gpus":64}`, // a key given twice
		`{"tenant":"acme","workspace":"research","gpus":-1}`,
		`{"tenant":"acme","workspace":"research","gpus":1e400}`,
		`{"tenant":"acme","workspace":"research","gpus":1} {"gpus":2}`,
		`{"tenant":"acme","workspace":"research","gpus":1,"Gpus":2}`,
		`{"tenant":"acme","workspace":"research","gpus":"1"}`,
		`{"tenant":"acme","workspace":"nope","gpus":1}`,
		`{"tenant":"acme\u0000","workspace":"research","gpus":1}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`null`, ``, `"x"`, `{`, "\xff\xfe{}",
	)
	add("/v1/jobs?dryRun=true", 0, `{"tenant":"acme","workspace":"research","gpus":4}`, `{"tenant":"globex","workspace":"infer","gpus":99}`)
	add("/v1/tenants", 0,
		`{"name":"initech","isolation":"gpu","network":"vlan-aware"}`,
		`{"name":"acme","isolation":"gpu","network":"vlan-aware"}`,
		`{"name":"Bad Name","isolation":"gpu","network":"vlan-aware"}`,
		`{"name":"umbrella","isolation":"rack","network":"vlan-aware"}`,
		`{"name":"hooli","isolation":"gpu","network":"vlan-aware","quota":{"gpus":-3}}`,
		`{"name":"x","name":"y","isolation":"gpu","network":"vlan-aware"}`,
	)
	add("/v1/tenants", 1, "name: soylent\nisolation: gpu\nnetwork: vlan-aware\n")
	add("/v1/tenants/acme", 0, `{"quota":{"gpus":16}}`, `{"removeQuota":true,"quota":{"gpus":1}}`, `{"sites":["nowhere"]}`, `{"sites":null}`)
	add("/v1/tenants/acme/workspaces", 0,
		`{"name":"prod","guaranteed":8,"borrowLimit":0}`,
		`{"name":"research","guaranteed":1}`,
		`{"name":"big","guaranteed":100000}`,
		`{"name":"w","guaranteed":1,"weight":0}`,
		`{"name":"m","guaranteed":2,"models":[{"model":"H100-80GB","guaranteed":2}]}`,
	)
	add("/v1/tenants/acme/workspaces/research", 0, `{"borrowLimit":16}`, `{"guaranteed":-1}`, `{"models":[]}`, `{"weight":1000000000000}`)
	add("/v1/topology", 0, string(topoJSON), `{"sites":[]}`, `{"apiVersion":"jobfabric/v2"}`, `{"sites":[{"name":"dc1"}],"sites":[]}`)
	add("/v1/topology", 1, string(topoYAML), "sites:\n- name: dc1\n  name: dc2\n", "a: &a [*a]\n", "---\nsites: []\n---\nsites: []\n")
	add("/v1/topology?dryRun=true", 1, string(topoYAML), "sites: 7\n")
	add("/v1/tokens", 0,
		`{"role":"member","tenant":"acme","workspace":"research","description":"ci"}`,
		`{"role":"admin"}`,
		`{"role":"runtime","node":"s1-gpu001"}`,
		`{"role":"root"}`,
		`{"role":"member","tenant":"acme"}`,
		`{"role":"member","tenant":"acme","workspace":"research","description":"`+strings.Repeat("d", 201)+`"}`,
	)
	add("/v1/jobs/1/report", 0, `{"state":"running"}`, `{"state":"succeeded","message":"done"}`, `{"state":"exploded"}`, `{"state":"running","message":"`+strings.Repeat("m", 1025)+`"}`)
	add("/v1/nodes/s1-gpu001/facts", 0, string(facts), `{"facts":{}}`, `{"facts":{"gpus":[{"index":-1}]}}`)
	add("/v1/nodes/s1-gpu001/heartbeat", 0, `{"agent":"a","factsHash":""}`, `{"factsHash":7}`)
	add("/v1/nodes/s1-gpu002", 0, `{"cordoned":true,"reason":"maintenance"}`, `{"cordoned":false}`, `{"draining":true,"graceSeconds":-5}`)
	add("/v1/hosts/policy", 0, `{}`, `{"heartbeatTimeoutSeconds":-1}`)
	add("/v1/fabric/options", 0, `{"vrfPlacement":"used"}`, `{"vrfPlacement":"all","l3VLANMin":3000,"l3VLANMax":3001}`, `{"l3VLANMin":4000,"l3VLANMax":3000}`, `{"vrfPlacement":"x"}`)
	return c.Servers[0], c.AdminToken, seeds
}

// recordedFacts is what the agent reports of the h100-roce recording.
func recordedFacts(f *testing.F) domain.HostFacts {
	f.Helper()
	dir := os.DirFS("../hostfacts/testdata/hosts/h100-roce")
	c := hostfacts.Collector{Run: hostfacts.FileRunner{FS: dir}, FS: dir, Hostname: "s1-gpu001"}
	facts, err := c.Collect(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	return *facts
}

// stateFingerprint hashes everything an admin's request can change:
// tenants, workspaces, tokens, jobs as submitted, the topology, nodes'
// conditions, the host policy, and the audit trail's entries by anyone but
// the server's own loops (the scheduler places and releases jobs, the
// fabric loop deploys, the system records leaders and heartbeats).
func stateFingerprint(t *testing.T, s *server.Server) string {
	t.Helper()
	fsm := s.State()
	type jobKey struct {
		ID   uint64
		Spec domain.JobSpec
		By   string
	}
	var jobs []jobKey
	for _, j := range fsm.Jobs(state.JobFilter{}) {
		jobs = append(jobs, jobKey{j.ID, j.JobSpec, j.SubmittedBy})
	}
	var events []domain.Event
	for _, e := range fsm.Events(state.EventFilter{}) {
		switch e.Actor {
		case "scheduler", "fabric", "system":
		default:
			events = append(events, e)
		}
	}
	tenants := fsm.Tenants(func(*domain.Tenant) bool { return true })
	var workspaces []domain.Workspace
	for _, tn := range tenants {
		workspaces = append(workspaces, fsm.Workspaces(tn.Name, func(*domain.Workspace) bool { return true })...)
	}
	var nodes []domain.NodeCondition
	for _, n := range fsm.Nodes() {
		nodes = append(nodes, n.Condition)
	}
	b, err := json.Marshal([]any{
		tenants, workspaces, fsm.Tokens(func(*domain.Token) bool { return true }), jobs,
		fsm.Topology(), nodes, fsm.HostPolicy(), events,
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum)
}

// settle waits for the scheduling cycle a change triggers: one begun after
// the change has ended, its plan committed (Server.Settle).
func settle(t *testing.T, s *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
