package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

// fixture is a real server (its console included) with a stepped clock,
// tenants acme and globex and a job of each.
type fixture struct {
	base               string
	clk                *tstime.Fake
	admin              *client.Client
	adminTok           string
	acmeJob, globexJob *domain.Job
	acmeTok, globexTok string
	srv                *server.Server
}

func start(t *testing.T) *fixture { t.Helper(); return startPaged(t, 0) }

// startPaged is start with the API's lists answering page items a page
// when asked without limit (0: the server's default).
func startPaged(t *testing.T, page int) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	clk := tstime.NewFake(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: slog.New(slog.DiscardHandler), RaftTimeout: time.Second,
		Tune: func(cfg *server.Config) { cfg.Clock, cfg.ListPage = clk, page }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &fixture{srv: c.Servers[0], base: c.Servers[0].URL(), clk: clk, admin: c.Client(0), adminTok: c.AdminToken}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(topo)
	if _, err := f.admin.ApplyTopology(ctx, raw, false); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"acme", "globex"} {
		if _, err := f.admin.CreateTenant(ctx, api.TenantCreateRequest{Name: tn, Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.admin.CreateWorkspace(ctx, tn, api.WorkspaceCreateRequest{Name: "main", Guaranteed: 8}); err != nil {
			t.Fatal(err)
		}
	}
	tok := func(tenant string, ttl int64) string {
		tk, err := f.admin.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: tenant, TTLSeconds: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return tk.Secret
	}
	f.acmeTok, f.globexTok = tok("acme", 0), tok("globex", 3600)
	if f.acmeJob, err = f.admin.SubmitJob(ctx, domain.JobSpec{Name: "acme-secret-training", Tenant: "acme", Workspace: "main", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	if f.globexJob, err = f.admin.SubmitJob(ctx, domain.JobSpec{Name: "globex-serving", Tenant: "globex", Workspace: "main", GPUs: 4}); err != nil {
		t.Fatal(err)
	}
	return f
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (f *fixture) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: f.base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// login logs in through the form as a browser would (the same origin) and
// returns the page's CSRF token.
func (b *browser) login(token string) string {
	b.t.Helper()
	_, page := b.do("GET", "/console/login", nil, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("login form without a CSRF field:\n%s", page)
	}
	resp, body := b.do("POST", "/console/login", url.Values{"csrf": {m[1]}, "token": {token}, "next": {"/console/queue"}}, map[string]string{"Origin": b.base})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/queue" {
		b.t.Fatalf("login: %s to %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	_, page = b.do("GET", "/console/queue", nil, nil)
	m = csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("page without a CSRF field:\n%s", page)
	}
	return m[1]
}

func cookieOf(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestLoginCookieAndHeaders: the login answers a session cookie that is
// HttpOnly, SameSite=Strict, for the whole host, and does not carry the
// token; every answer (pages, errors, assets) has the strict CSP.
func TestLoginCookieAndHeaders(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	resp, page := b.do("GET", "/console/login", nil, nil)
	lc := cookieOf(resp, "jf_login")
	if lc == nil || !lc.HttpOnly || lc.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login CSRF cookie: %+v", lc)
	}
	m := csrfField.FindStringSubmatch(page)
	resp, _ = b.do("POST", "/console/login", url.Values{"csrf": {m[1]}, "token": {f.acmeTok}}, nil)
	sc := cookieOf(resp, "jf_session")
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/" || sc.Secure || sc.MaxAge <= 0 {
		t.Fatalf("session cookie: %+v", sc)
	}
	if strings.Contains(sc.Value, f.acmeTok) || strings.Contains(sc.Value, strings.Split(f.acmeTok, "_")[1]) {
		t.Fatal("the session cookie carries the token")
	}
	for _, p := range []string{"/console/login", "/console/", "/console/queue", "/console/jobs/999", "/console/nope", "/console/static/console.js"} {
		resp, _ := b.do("GET", p, nil, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", p)
		}
	}
	// No inline script: every script element has a src on the console.
	_, page = b.do("GET", "/console/", nil, nil)
	if strings.Contains(page, "<script>") || strings.Count(page, "<script") != strings.Count(page, `<script src="/console/static/`) {
		t.Errorf("a page has an inline script:\n%s", page)
	}
}

// TestLoginRefusals: a login without the form's CSRF cookie, from another
// origin, or with a bad token starts no session; the bad token's answer is
// the API's.
func TestLoginRefusals(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	resp, _ := b.do("POST", "/console/login", url.Values{"csrf": {"x"}, "token": {f.acmeTok}}, nil)
	if resp.StatusCode != http.StatusForbidden || cookieOf(resp, "jf_session") != nil {
		t.Errorf("login without the form's cookie: %s, cookie %v", resp.Status, cookieOf(resp, "jf_session"))
	}
	_, page := b.do("GET", "/console/login", nil, nil)
	m := csrfField.FindStringSubmatch(page)
	resp, _ = b.do("POST", "/console/login", url.Values{"csrf": {m[1]}, "token": {f.acmeTok}}, map[string]string{"Origin": "http://evil.example"})
	if resp.StatusCode != http.StatusForbidden || cookieOf(resp, "jf_session") != nil {
		t.Errorf("login from another origin: %s", resp.Status)
	}
	_, page = b.do("GET", "/console/login", nil, nil)
	m = csrfField.FindStringSubmatch(page)
	resp, page = b.do("POST", "/console/login", url.Values{"csrf": {m[1]}, "token": {"jf_0123456789ab_nope"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || cookieOf(resp, "jf_session") != nil || !strings.Contains(page, "a valid bearer token is required") {
		t.Errorf("login with a bad token: %s\n%s", resp.Status, page)
	}
	// Absent and forged cookies see the login, not a page.
	for _, hdr := range []map[string]string{nil, {"Cookie": "jf_session=" + strings.Repeat("ab", 32)}} {
		resp, _ := f.browser(t).do("GET", "/console/queue", nil, hdr)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/login") {
			t.Errorf("cookie %v: %s to %q", hdr, resp.Status, resp.Header.Get("Location"))
		}
		resp, _ = f.browser(t).do("GET", "/console/queue", nil, map[string]string{"Cookie": hdr["Cookie"], "X-Console-Part": "live"})
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("live part with cookie %v: %s, want 401", hdr, resp.Status)
		}
	}
}

// TestCSRF: a state-changing request needs the session's CSRF token and
// this origin; refused ones change nothing, and the right one goes through
// with the API's answer.
func TestCSRF(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	tok := b.login(f.acmeTok)
	path := "/console/jobs/" + itoa(f.acmeJob.ID) + "/cancel"
	accept := map[string]string{"Accept": "application/json"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"Accept": "application/json"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for name, c := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no token":               {nil, accept},
		"a wrong token":          {url.Values{"csrf": {strings.Repeat("0", 64)}}, accept},
		"a wrong header":         {nil, with("X-CSRF-Token", "nope")},
		"another origin":         {url.Values{"csrf": {tok}}, with("Origin", "http://evil.example")},
		"a cross-site fetch":     {nil, with("X-CSRF-Token", tok, "Sec-Fetch-Site", "cross-site")},
		"another site's referer": {url.Values{"csrf": {tok}}, with("Referer", "http://evil.example/x")},
		"an opaque origin":       {url.Values{"csrf": {tok}}, with("Origin", "null")},
	} {
		resp, body := b.do("POST", path, c.form, c.hdr)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "permission_denied") {
			t.Errorf("cancel with %s: %s %s", name, resp.Status, body)
		}
	}
	if j, err := f.admin.Job(context.Background(), f.acmeJob.ID); err != nil || j.State.Terminal() {
		t.Fatalf("job after refused cancels: %v %v", j.State, err)
	}
	resp, body := b.do("POST", path, nil, with("X-CSRF-Token", tok, "Origin", f.base, "Sec-Fetch-Site", "same-origin"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("cancel with the token: %s %s", resp.Status, body)
	}
	if j, _ := f.admin.Job(context.Background(), f.acmeJob.ID); j.State != domain.JobCancelled {
		t.Errorf("job after the cancel: %s", j.State)
	}
	// A form post (no script) with the field also works, and redirects.
	resp, _ = b.do("POST", "/console/jobs", url.Values{"csrf": {tok}, "workspace": {"acme/main"}, "gpus": {"1"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/jobs/") {
		t.Errorf("form submit: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	// The API's refusal, as the CLI words it.
	resp, body = b.do("POST", "/console/jobs", url.Values{"workspace": {"acme/main"}, "gpus": {"3"}, "gpusPerNode": {"2"}}, with("X-CSRF-Token", tok))
	acme, err := client.New(f.base, f.acmeTok, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, apiErr := acme.SubmitJob(context.Background(), domain.JobSpec{Tenant: "acme", Workspace: "main", GPUs: 3, GPUsPerNode: 2})
	if resp.StatusCode != http.StatusBadRequest || apiErr == nil || !strings.Contains(body, jsonString(apiErr.(*domain.Error).Message)) {
		t.Errorf("bad submit: %s %s; the API says %v", resp.Status, body, apiErr)
	}
	// Logout needs the token too.
	if resp, _ := b.do("POST", "/console/logout", nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the token: %s", resp.Status)
	}
	resp, _ = b.do("POST", "/console/logout", url.Values{"csrf": {tok}}, nil)
	if resp.StatusCode != http.StatusSeeOther || cookieOf(resp, "jf_session") == nil || cookieOf(resp, "jf_session").MaxAge >= 0 {
		t.Errorf("logout: %s", resp.Status)
	}
	if resp, _ := b.do("GET", "/console/queue", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a page after logout: %s", resp.Status)
	}
}

// TestTenantSeesOnlyItsOwn: globex's session shows globex's job and
// tenant on every page, never acme's names, and acme's job page is a 404
// as in the API.
func TestTenantSeesOnlyItsOwn(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	b.login(f.globexTok)
	for _, p := range []string{"/console/", "/console/tenants", "/console/queue", "/console/fabric", "/console/jobs/" + itoa(f.globexJob.ID)} {
		resp, page := b.do("GET", p, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", p, resp.Status)
		}
		if strings.Contains(page, "acme") {
			t.Errorf("globex's %s names acme", p)
		}
	}
	if _, page := b.do("GET", "/console/queue", nil, nil); !strings.Contains(page, "globex-serving") {
		t.Error("globex's queue lacks its job")
	}
	resp, page := b.do("GET", "/console/jobs/"+itoa(f.acmeJob.ID), nil, nil)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(page, "acme") {
		t.Errorf("acme's job as globex: %s\n%s", resp.Status, page)
	}
	if resp, _ := b.do("GET", "/console/jobs/1%2F..%2F..%2Ftokens", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a crafted job id: %s", resp.Status)
	}
	if _, page := b.do("GET", "/console/fabric", nil, nil); !strings.Contains(page, "this operation needs an admin token") {
		t.Error("the fabric page does not say why a tenant sees no devices")
	}
}

// TestSessionExpiry: a session idle for longer than the idle timeout, and
// one whose token expired, end: pages go back to the login, saying why.
func TestSessionExpiry(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	b.login(f.acmeTok)
	g := f.browser(t)
	g.login(f.globexTok) // a token that expires an hour after it was made
	// Used every 29 minutes, both sessions live on.
	for range 2 {
		f.clk.Advance(29 * time.Minute)
		for _, br := range []*browser{b, g} {
			if resp, _ := br.do("GET", "/console/queue", nil, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("a session used within the idle timeout: %s", resp.Status)
			}
		}
	}
	f.clk.Advance(3 * time.Minute)
	resp, _ := g.do("GET", "/console/queue", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "expired") {
		t.Errorf("a session whose token expired: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := g.do("GET", "/console/queue", nil, nil); resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "expired") {
		t.Errorf("the ended session again: %s to %q, want the plain login", resp.Status, resp.Header.Get("Location"))
	}
	f.clk.Advance(31 * time.Minute)
	if resp, _ := b.do("GET", "/console/queue", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a session idle for 34m: %s, want the login", resp.Status)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// jsonString is s as it appears inside a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestDrainFromTheConsole: an admin drains a server from the cluster page;
// the grid then marks it, under its stripe's leaves by rail; a tenant's
// drain is refused with the API's words.
func TestDrainFromTheConsole(t *testing.T) {
	f := start(t)
	b := f.browser(t)
	tok := b.login(f.adminTok)
	resp, body := b.do("POST", "/console/drain", url.Values{"server": {"s1-gpu002"}, "reason": {"swap a PSU"}, "draining": {"true"}}, map[string]string{"X-CSRF-Token": tok, "Accept": "application/json"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "s1-gpu002 is draining") {
		t.Fatalf("drain: %s %s", resp.Status, body)
	}
	_, page := b.do("GET", "/console/", nil, nil)
	if !strings.Contains(page, `<g class="srv draining" transform=`) || !strings.Contains(page, `data-s="s1-gpu002"`) || !strings.Contains(page, "swap a PSU") {
		t.Errorf("the grid does not mark the drained server:\n%s", page)
	}
	if !strings.Contains(page, "rail 0: s1-leaf0") || !strings.Contains(page, "rail 7: s1-leaf7") {
		t.Errorf("the stripe does not list its leaves by rail")
	}
	g := f.browser(t)
	gtok := g.login(f.globexTok)
	resp, body = g.do("POST", "/console/drain", url.Values{"server": {"s1-gpu001"}}, map[string]string{"X-CSRF-Token": gtok, "Accept": "application/json"})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "this operation needs an admin token (permission_denied)") {
		t.Errorf("a tenant's drain: %s %s", resp.Status, body)
	}
}
