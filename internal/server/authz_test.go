package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestCrossTenantMatrix checks every role against every endpoint: what it
// may do succeeds, what it may not see answers 404 exactly as if it did not
// exist, what it may see but not change answers 403.
func TestCrossTenantMatrix(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	acmeJob := submit(t, admin, "acme", "research", 8)
	prodJob := submit(t, admin, "acme", "prod", 8)
	globexJob := submit(t, admin, "globex", "infer", 8)
	// Jobs that ended: a watch of them answers the job once and ends.
	acmeDone := submit(t, admin, "acme", "research", 1)
	globexDone := submit(t, admin, "globex", "infer", 1)
	for _, j := range []*domain.Job{acmeDone, globexDone} {
		if _, err := admin.CancelJob(ctxT(t), j.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Reports need placed jobs: the scheduler places them at once.
	for _, j := range []*domain.Job{acmeJob, prodJob, globexJob} {
		waitJob(t, admin, j.ID, "Ready", func(j *domain.Job) bool { return j.State == domain.JobReady })
	}

	platformRT, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleRuntime, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{
		"admin":            c.AdminToken,
		"acme-admin":       mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""),
		"acme-member":      mustToken(t, admin, domain.RoleMember, "acme", "research"),
		"globex-admin":     mustToken(t, admin, domain.RoleTenantAdmin, "globex", ""),
		"acme-runtime":     mustToken(t, admin, domain.RoleRuntime, "acme", ""),
		"platform-runtime": platformRT.Secret,
		"none":             "",
		"forged":           "jf_000000000000_" + strings.Repeat("ab", 32),
	}
	globexTok, _ := admin.CreateToken(ctxT(t), tokReq(domain.RoleMember, "globex", "infer"))
	acmeTok, _ := admin.CreateToken(ctxT(t), tokReq(domain.RoleMember, "acme", "prod"))

	type call struct {
		method, path, body string
	}
	// want: role -> status. Roles not listed expect 401 (none, forged).
	type row struct {
		name string
		call
		want map[string]int
	}
	job := func(id uint64) string { return fmt.Sprintf("/v1/jobs/%d", id) }
	running := `{"state":"running","message":"up"}`
	// Rows run in order: later rows see the changes of earlier ones, and the
	// admin runs last in each row so its successes do not hide others' answers.
	// Columns: admin, acme-admin, acme-member, globex-admin, acme-runtime, platform-runtime.
	rows := []row{
		{"list tenants", call{"GET", "/v1/tenants", ""}, all(200)},
		{"get own tenant", call{"GET", "/v1/tenants/acme", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"get other tenant", call{"GET", "/v1/tenants/globex", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"create tenant", call{"POST", "/v1/tenants", `{"name":"new1","isolation":"gpu","network":"pure-rt5"}`}, roles(201, 403, 403, 403, 403, 403)},
		{"delete own tenant", call{"DELETE", "/v1/tenants/acme", ""}, roles(409, 403, 403, 404, 403, 403)},
		{"delete other tenant", call{"DELETE", "/v1/tenants/globex", ""}, roles(409, 404, 404, 403, 404, 403)},
		{"list own workspaces", call{"GET", "/v1/tenants/acme/workspaces", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"list other workspaces", call{"GET", "/v1/tenants/globex/workspaces", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"get own workspace", call{"GET", "/v1/tenants/acme/workspaces/research", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"get sibling workspace", call{"GET", "/v1/tenants/acme/workspaces/prod", ""}, roles(200, 200, 404, 404, 200, 200)},
		{"get other workspace", call{"GET", "/v1/tenants/globex/workspaces/infer", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"create workspace", call{"POST", "/v1/tenants/acme/workspaces", `{"name":"w2","guaranteed":0}`}, roles(201, 403, 403, 404, 403, 403)},
		{"update own workspace", call{"PATCH", "/v1/tenants/acme/workspaces/research", `{"borrowLimit":16}`}, roles(200, 403, 403, 404, 403, 403)},
		{"update other workspace", call{"PATCH", "/v1/tenants/globex/workspaces/infer", `{"borrowLimit":4}`}, roles(200, 404, 404, 403, 404, 403)},
		{"delete other workspace", call{"DELETE", "/v1/tenants/globex/workspaces/infer", ""}, roles(409, 404, 404, 403, 404, 403)},
		{"get own job", call{"GET", job(acmeJob.ID), ""}, roles(200, 200, 200, 404, 200, 200)},
		{"get sibling job", call{"GET", job(prodJob.ID), ""}, roles(200, 200, 404, 404, 200, 200)},
		{"get other job", call{"GET", job(globexJob.ID), ""}, roles(200, 404, 404, 200, 404, 200)},
		{"get missing job", call{"GET", job(999), ""}, roles(404, 404, 404, 404, 404, 404)},
		{"health of own job", call{"GET", job(acmeJob.ID) + "/health", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"health of sibling job", call{"GET", job(prodJob.ID) + "/health", ""}, roles(200, 200, 404, 404, 200, 200)},
		{"health of other job", call{"GET", job(globexJob.ID) + "/health", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"health of missing job", call{"GET", job(999) + "/health", ""}, roles(404, 404, 404, 404, 404, 404)},
		{"health of an ended job", call{"GET", job(acmeDone.ID) + "/health", ""}, roles(409, 409, 409, 404, 409, 409)},
		{"hotspots", call{"GET", "/v1/fabric/hotspots", ""}, all(200)},
		// A report is the runtime's word: users who see the job may not make it.
		{"report own job", call{"POST", job(acmeJob.ID) + "/report", running}, roles(200, 403, 403, 404, 200, 200)},
		{"report sibling job", call{"POST", job(prodJob.ID) + "/report", running}, roles(200, 403, 404, 404, 200, 200)},
		{"report other job", call{"POST", job(globexJob.ID) + "/report", running}, roles(200, 404, 404, 403, 404, 200)},
		{"report missing job", call{"POST", job(999) + "/report", running}, roles(404, 404, 404, 404, 404, 404)},
		{"report an ended job", call{"POST", job(acmeDone.ID) + "/report", running}, roles(409, 403, 403, 404, 409, 409)},
		{"watch own ended job", call{"GET", job(acmeDone.ID) + "/watch", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"watch other ended job", call{"GET", job(globexDone.ID) + "/watch", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"watch missing job", call{"GET", job(999) + "/watch", ""}, roles(404, 404, 404, 404, 404, 404)},
		{"cancel own job", call{"POST", job(prodJob.ID) + "/cancel", ""}, roles(409, 200, 404, 404, 403, 403)},
		{"cancel other job", call{"POST", job(globexJob.ID) + "/cancel", ""}, roles(409, 404, 404, 200, 404, 403)},
		{"submit to own workspace", call{"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1}`}, roles(201, 201, 201, 404, 403, 403)},
		{"submit to other tenant", call{"POST", "/v1/jobs", `{"tenant":"globex","workspace":"infer","gpus":1}`}, roles(201, 404, 404, 201, 404, 403)},
		{"submit to sibling", call{"POST", "/v1/jobs", `{"tenant":"acme","workspace":"prod","gpus":1}`}, roles(201, 201, 404, 404, 403, 403)},
		{"dry-run own workspace", call{"POST", "/v1/jobs?dryRun=true", `{"tenant":"acme","workspace":"research","gpus":1}`}, roles(200, 200, 200, 404, 200, 200)},
		{"list jobs of own tenant", call{"GET", "/v1/jobs?tenant=acme", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"list jobs of other tenant", call{"GET", "/v1/jobs?tenant=globex", ""}, roles(200, 404, 404, 200, 404, 200)},
		// The read index's lists (a tenant's live jobs, a workspace's):
		// a filter by state or a page names the tenant no differently.
		{"list pending jobs of other tenant", call{"GET", "/v1/jobs?tenant=globex&state=pending&limit=1", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"list jobs of other workspace", call{"GET", "/v1/jobs?tenant=globex&workspace=infer&state=pending,running", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"events of own tenant", call{"GET", "/v1/events?tenant=acme", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"events of other tenant", call{"GET", "/v1/events?tenant=globex", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"usage of own tenant", call{"GET", "/v1/usage?tenant=acme&since=1h", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"usage of other tenant", call{"GET", "/v1/usage?tenant=globex&since=1h&by=job", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"usage of sibling workspace", call{"GET", "/v1/usage?tenant=acme&workspace=prod&since=1h", ""}, roles(200, 200, 404, 404, 200, 200)},
		{"queue of own tenant", call{"GET", "/v1/queue?tenant=acme", ""}, roles(200, 200, 200, 404, 200, 200)},
		{"queue of other tenant", call{"GET", "/v1/queue?tenant=globex", ""}, roles(200, 404, 404, 200, 404, 200)},
		{"queue of sibling workspace", call{"GET", "/v1/queue?tenant=acme&workspace=prod", ""}, roles(200, 200, 404, 404, 200, 200)},
		{"topology", call{"GET", "/v1/topology", ""}, roles(200, 403, 403, 403, 403, 403)},
		{"apply topology", call{"PUT", "/v1/topology", `{"sitez":[]}`}, roles(400, 403, 403, 403, 403, 403)},
		{"nodes", call{"GET", "/v1/nodes", ""}, roles(200, 403, 403, 403, 403, 403)},
		{"cordon node", call{"PATCH", "/v1/nodes/s1-gpu001", `{}`}, roles(400, 403, 403, 403, 403, 403)},
		{"cluster", call{"GET", "/v1/cluster", ""}, roles(200, 403, 403, 403, 403, 403)},
		{"whoami", call{"GET", "/v1/whoami", ""}, all(200)},
		{"list tokens", call{"GET", "/v1/tokens", ""}, all(200)},
		{"token for other tenant", call{"POST", "/v1/tokens", `{"role":"member","tenant":"globex","workspace":"infer"}`}, roles(201, 404, 404, 201, 404, 403)},
		{"token for own tenant", call{"POST", "/v1/tokens", `{"role":"member","tenant":"acme","workspace":"prod"}`}, roles(201, 201, 403, 404, 403, 403)},
		{"runtime token for own tenant", call{"POST", "/v1/tokens", `{"role":"runtime","tenant":"acme"}`}, roles(201, 201, 403, 404, 403, 403)},
		{"runtime token for other tenant", call{"POST", "/v1/tokens", `{"role":"runtime","tenant":"globex"}`}, roles(201, 404, 404, 201, 404, 403)},
		{"platform runtime token", call{"POST", "/v1/tokens", `{"role":"runtime"}`}, roles(201, 403, 403, 403, 403, 403)},
		{"admin token", call{"POST", "/v1/tokens", `{"role":"admin"}`}, roles(201, 403, 403, 403, 403, 403)},
		{"revoke other tenant token", call{"DELETE", "/v1/tokens/" + globexTok.Token.ID, ""}, roles(404, 404, 404, 200, 404, 404)},
		{"revoke own tenant token", call{"DELETE", "/v1/tokens/" + acmeTok.Token.ID, ""}, roles(404, 200, 404, 404, 404, 404)},
		// A runtime sees its own token but may not revoke it; the admin
		// does, last, so the platform runtime answers 401 from here on.
		{"revoke platform runtime token", call{"DELETE", "/v1/tokens/" + platformRT.Token.ID, ""}, roles(200, 404, 404, 404, 404, 403)},
	}
	order := []string{"acme-runtime", "platform-runtime", "acme-member", "acme-admin", "globex-admin", "none", "forged", "admin"}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for _, role := range order {
				want, ok := r.want[role]
				if !ok {
					want = 401
				}
				got, body := do(t, c.Servers[0].URL(), tokens[role], r.method, r.path, r.body)
				if got != want {
					t.Errorf("%s %s as %s: status %d, want %d (%s)", r.method, r.path, role, got, want, body)
				}
				var e struct{ Code string }
				if got == 404 && (json.Unmarshal([]byte(body), &e) != nil || e.Code != "not_found") {
					t.Errorf("%s as %s: 404 without code not_found: %s", r.path, role, body)
				}
				if got == 404 && (strings.Contains(body, "permission") || strings.Contains(body, "forbidden")) {
					t.Errorf("%s as %s: 404 body hints the object exists: %s", r.path, role, body)
				}
			}
		})
	}

	// Lists are filtered, not refused: a tenant sees only its own objects.
	for role, tenant := range map[string]string{"acme-admin": "acme", "globex-admin": "globex", "acme-member": "acme", "acme-runtime": "acme"} {
		for _, path := range []string{"/v1/tenants", "/v1/jobs", "/v1/events", "/v1/tokens", "/v1/usage?since=1h&by=job", "/v1/usage?since=1h&by=token", "/v1/queue",
			"/v1/jobs?state=pending", "/v1/jobs?state=pending,running&limit=1", "/v1/jobs?limit=1", "/v1/pools"} {
			_, body := do(t, c.Servers[0].URL(), tokens[role], "GET", path, "")
			other := map[string]string{"acme": "globex", "globex": "acme"}[tenant]
			if strings.Contains(body, `"`+other+`"`) {
				t.Errorf("%s GET %s shows tenant %s: %s", role, path, other, body)
			}
		}
	}
	for _, path := range []string{"/v1/jobs", "/v1/jobs?state=pending", "/v1/jobs?tenant=acme&state=pending,running", "/v1/queue"} {
		_, body := do(t, c.Servers[0].URL(), tokens["acme-member"], "GET", path, "")
		if strings.Contains(body, `"prod"`) {
			t.Errorf("member of acme/research sees acme/prod jobs in GET %s: %s", path, body)
		}
	}
	_, body := do(t, c.Servers[0].URL(), tokens["acme-member"], "GET", "/v1/jobs", "")
	// A runtime sees all its tenant's jobs, and of the tokens only itself.
	_, body = do(t, c.Servers[0].URL(), tokens["acme-runtime"], "GET", "/v1/jobs", "")
	if !strings.Contains(body, `"prod"`) || !strings.Contains(body, `"research"`) {
		t.Errorf("acme's runtime does not see all acme's jobs: %s", body)
	}
	var toks []domain.Token
	_, body = do(t, c.Servers[0].URL(), tokens["acme-runtime"], "GET", "/v1/tokens", "")
	if json.Unmarshal([]byte(body), &toks) != nil || len(toks) != 1 || toks[0].Role != domain.RoleRuntime {
		t.Errorf("acme's runtime lists tokens %s, want only itself", body)
	}
	// A platform runtime reads every tenant's events but not the
	// platform's own (topology, admin tokens).
	prt := mustToken(t, admin, domain.RoleRuntime, "", "")
	var events []domain.Event
	_, body = do(t, c.Servers[0].URL(), prt, "GET", "/v1/events", "")
	if err := json.Unmarshal([]byte(body), &events); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Tenant == "" {
			t.Errorf("platform runtime sees platform event %+v", e)
		}
		seen[e.Tenant] = true
	}
	if !seen["acme"] || !seen["globex"] {
		t.Errorf("platform runtime sees events of tenants %v, want acme and globex", seen)
	}
}

func all(code int) map[string]int {
	return roles(code, code, code, code, code, code)
}

// roles gives the expected status for admin, acme-admin, acme-member,
// globex-admin, acme-runtime (runtime of tenant acme) and platform-runtime
// (a runtime token without a tenant).
func roles(admin, acmeAdmin, acmeMember, globexAdmin, acmeRuntime, platformRuntime int) map[string]int {
	return map[string]int{"admin": admin, "acme-admin": acmeAdmin, "acme-member": acmeMember, "globex-admin": globexAdmin,
		"acme-runtime": acmeRuntime, "platform-runtime": platformRuntime}
}

func do(t *testing.T, base, token, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
