package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBadInput: malformed, unknown, negative and absurd input answers 400
// (or 413) naming the field, and changes nothing.
func TestBadInput(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	// Job 1, to report on; placed before the count of events starts.
	waitJob(t, admin, submit(t, admin, "acme", "research", 1).ID, "Ready", isReady)
	url, tok := c.Servers[0].URL(), c.AdminToken
	cases := map[string]struct {
		method, path, body string
		wantStatus         int
		wantField          string
	}{
		"malformed json":        {"POST", "/v1/tenants", `{"name": "x",`, 400, ""},
		"trailing data":         {"POST", "/v1/tenants", `{"name":"x","isolation":"gpu","network":"pure-rt5"} {}`, 400, ""},
		"empty body":            {"POST", "/v1/tenants", ``, 400, ""},
		"unknown field":         {"POST", "/v1/tenants", `{"name":"x","isolation":"gpu","network":"pure-rt5","colour":"red"}`, 400, "colour"},
		"wrong type":            {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":"eight"}`, 400, "gpus"},
		"negative gpus":         {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":-1}`, 400, "gpus"},
		"absurd gpus":           {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":99999999999}`, 400, "gpus"},
		"fractional gpus":       {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1.5}`, 400, "gpus"},
		"long name":             {"POST", "/v1/tenants", `{"name":"` + strings.Repeat("a", 64) + `","isolation":"gpu","network":"pure-rt5"}`, 400, "name"},
		"upper-case name":       {"POST", "/v1/tenants", `{"name":"Acme","isolation":"gpu","network":"pure-rt5"}`, 400, "name"},
		"bad isolation":         {"POST", "/v1/tenants", `{"name":"x","isolation":"rack","network":"pure-rt5"}`, 400, "isolation"},
		"negative guaranteed":   {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","guaranteed":-3}`, 400, "guaranteed"},
		"absurd borrow":         {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","borrowLimit":2000000000}`, 400, "borrowLimit"},
		"lend above guaranteed": {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","guaranteed":1,"lendLimit":2}`, 400, "lendLimit"},
		"zero weight":           {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","weight":0}`, 400, "weight"},
		"bad preemption":        {"POST", "/v1/tenants/acme/workspaces", `{"name":"w","preemption":"suspend"}`, 400, "preemption"},
		"bad preemption update": {"PATCH", "/v1/tenants/acme/workspaces/research", `{"preemption":"Requeue"}`, 400, "preemption"},
		"bad role":              {"POST", "/v1/tokens", `{"role":"root"}`, 400, "role"},
		"negative time limit":   {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"timeLimitSeconds":-60}`, 400, "timeLimitSeconds"},
		"absurd time limit":     {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"timeLimitSeconds":99999999999}`, 400, "timeLimitSeconds"},
		"time limit as text":    {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"timeLimitSeconds":"2h"}`, 400, "timeLimitSeconds"},
		"negative min runtime":  {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"minRuntimeSeconds":-1}`, 400, "minRuntimeSeconds"},
		"fractional min":        {"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1,"minRuntimeSeconds":0.5}`, 400, "minRuntimeSeconds"},
		"report bad state":      {"POST", "/v1/jobs/1/report", `{"state":"exploded"}`, 400, "state"},
		"report bad body":       {"POST", "/v1/jobs/1/report", `{"state":1}`, 400, "state"},
		"report bad job id":     {"POST", "/v1/jobs/x/report", `{"state":"running"}`, 400, "id"},
		"watch bad job id":      {"GET", "/v1/jobs/-1/watch", "", 400, "id"},
		"bad job id":            {"GET", "/v1/jobs/abc", "", 400, "id"},
		"bad state filter":      {"GET", "/v1/jobs?state=Sleeping", "", 400, "state"},
		"bad since":             {"GET", "/v1/events?since=yesterday", "", 400, "since"},
		"bad limit":             {"GET", "/v1/events?limit=12abc", "", 400, "limit"},
		"usage without since":   {"GET", "/v1/usage", "", 400, "since"},
		"usage bad until":       {"GET", "/v1/usage?since=30d&until=tomorrow", "", 400, "until"},
		"usage bad by":          {"GET", "/v1/usage?since=30d&by=rack", "", 400, "by"},
		"oversized body":        {"POST", "/v1/tenants", `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, ""},
		"topology unknown key":  {"PUT", "/v1/topology", `{"sites":[{"name":"dc1","fabricz":[]}]}`, 400, ""},
		"topology not yaml":     {"PUT", "/v1/topology", "sites: [\n  - name: : :\n", 400, ""},
		"unknown route":         {"GET", "/v1/nothing", "", 404, ""},
	}
	before := requestEvents(t, admin)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, body := do(t, url, tok, tc.method, tc.path, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			var e struct{ Code, Message, Field string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code == "" || e.Message == "" {
				t.Fatalf("error body is not {code, message}: %s", body)
			}
			if tc.wantField != "" && e.Field != tc.wantField {
				t.Fatalf("field %q, want %q: %s", e.Field, tc.wantField, body)
			}
		})
	}
	after := requestEvents(t, admin)
	if len(after) != len(before) {
		t.Fatalf("rejected requests changed the state: %d events before, %d after", len(before), len(after))
	}
}
