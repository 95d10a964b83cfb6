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

	tokens := map[string]string{
		"admin":        c.AdminToken,
		"acme-admin":   mustToken(t, admin, domain.RoleTenantAdmin, "acme", ""),
		"acme-member":  mustToken(t, admin, domain.RoleMember, "acme", "research"),
		"globex-admin": mustToken(t, admin, domain.RoleTenantAdmin, "globex", ""),
		"none":         "",
		"forged":       "jf_000000000000_" + strings.Repeat("ab", 32),
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
	// Rows run in order: later rows see the changes of earlier ones, and the
	// admin runs last in each row so its successes do not hide others' answers.
	rows := []row{
		{"list tenants", call{"GET", "/v1/tenants", ""}, all(200)},
		{"get own tenant", call{"GET", "/v1/tenants/acme", ""}, roles(200, 200, 200, 404)},
		{"get other tenant", call{"GET", "/v1/tenants/globex", ""}, roles(200, 404, 404, 200)},
		{"create tenant", call{"POST", "/v1/tenants", `{"name":"new1","isolation":"gpu","network":"pure-rt5"}`}, roles(201, 403, 403, 403)},
		{"delete other tenant", call{"DELETE", "/v1/tenants/globex", ""}, roles(409, 404, 404, 403)},
		{"list own workspaces", call{"GET", "/v1/tenants/acme/workspaces", ""}, roles(200, 200, 200, 404)},
		{"list other workspaces", call{"GET", "/v1/tenants/globex/workspaces", ""}, roles(200, 404, 404, 200)},
		{"get own workspace", call{"GET", "/v1/tenants/acme/workspaces/research", ""}, roles(200, 200, 200, 404)},
		{"get sibling workspace", call{"GET", "/v1/tenants/acme/workspaces/prod", ""}, roles(200, 200, 404, 404)},
		{"get other workspace", call{"GET", "/v1/tenants/globex/workspaces/infer", ""}, roles(200, 404, 404, 200)},
		{"create workspace", call{"POST", "/v1/tenants/acme/workspaces", `{"name":"w2","guaranteed":0}`}, roles(201, 403, 403, 404)},
		{"update other workspace", call{"PATCH", "/v1/tenants/globex/workspaces/infer", `{"borrowLimit":4}`}, roles(200, 404, 404, 403)},
		{"delete other workspace", call{"DELETE", "/v1/tenants/globex/workspaces/infer", ""}, roles(409, 404, 404, 403)},
		{"get own job", call{"GET", job(acmeJob.ID), ""}, roles(200, 200, 200, 404)},
		{"get sibling job", call{"GET", job(prodJob.ID), ""}, roles(200, 200, 404, 404)},
		{"get other job", call{"GET", job(globexJob.ID), ""}, roles(200, 404, 404, 200)},
		{"cancel other job", call{"POST", job(globexJob.ID) + "/cancel", ""}, roles(409, 404, 404, 200)},
		{"submit to own workspace", call{"POST", "/v1/jobs", `{"tenant":"acme","workspace":"research","gpus":1}`}, roles(201, 201, 201, 404)},
		{"submit to other tenant", call{"POST", "/v1/jobs", `{"tenant":"globex","workspace":"infer","gpus":1}`}, roles(201, 404, 404, 201)},
		{"submit to sibling", call{"POST", "/v1/jobs", `{"tenant":"acme","workspace":"prod","gpus":1}`}, roles(201, 201, 404, 404)},
		{"list jobs of other tenant", call{"GET", "/v1/jobs?tenant=globex", ""}, roles(200, 404, 404, 200)},
		{"events of other tenant", call{"GET", "/v1/events?tenant=globex", ""}, roles(200, 404, 404, 200)},
		{"topology", call{"GET", "/v1/topology", ""}, roles(200, 403, 403, 403)},
		{"apply topology", call{"PUT", "/v1/topology", `{"sitez":[]}`}, roles(400, 403, 403, 403)},
		{"cluster", call{"GET", "/v1/cluster", ""}, roles(200, 403, 403, 403)},
		{"whoami", call{"GET", "/v1/whoami", ""}, all(200)},
		{"list tokens", call{"GET", "/v1/tokens", ""}, all(200)},
		{"token for other tenant", call{"POST", "/v1/tokens", `{"role":"member","tenant":"globex","workspace":"infer"}`}, roles(201, 404, 404, 201)},
		{"token for own tenant", call{"POST", "/v1/tokens", `{"role":"member","tenant":"acme","workspace":"prod"}`}, roles(201, 201, 403, 404)},
		{"admin token", call{"POST", "/v1/tokens", `{"role":"admin"}`}, roles(201, 403, 403, 403)},
		{"revoke other tenant token", call{"DELETE", "/v1/tokens/" + globexTok.Token.ID, ""}, roles(404, 404, 404, 200)},
		{"revoke own tenant token", call{"DELETE", "/v1/tokens/" + acmeTok.Token.ID, ""}, roles(404, 200, 404, 404)},
	}
	order := []string{"acme-member", "acme-admin", "globex-admin", "none", "forged", "admin"}
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
	for role, tenant := range map[string]string{"acme-admin": "acme", "globex-admin": "globex", "acme-member": "acme"} {
		for _, path := range []string{"/v1/tenants", "/v1/jobs", "/v1/events", "/v1/tokens"} {
			_, body := do(t, c.Servers[0].URL(), tokens[role], "GET", path, "")
			other := map[string]string{"acme": "globex", "globex": "acme"}[tenant]
			if strings.Contains(body, `"`+other+`"`) {
				t.Errorf("%s GET %s shows tenant %s: %s", role, path, other, body)
			}
		}
	}
	_, body := do(t, c.Servers[0].URL(), tokens["acme-member"], "GET", "/v1/jobs", "")
	if strings.Contains(body, `"prod"`) {
		t.Errorf("member of acme/research sees acme/prod jobs: %s", body)
	}
}

func all(code int) map[string]int {
	return roles(code, code, code, code)
}

// roles gives the expected status for admin, acme-admin, acme-member, globex-admin.
func roles(admin, acmeAdmin, acmeMember, globexAdmin int) map[string]int {
	return map[string]int{"admin": admin, "acme-admin": acmeAdmin, "acme-member": acmeMember, "globex-admin": globexAdmin}
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
