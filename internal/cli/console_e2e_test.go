package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// chromium finds a Chromium to drive: $JOBFABRIC_CHROMIUM, else Debian's.
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{os.Getenv("JOBFABRIC_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium to drive (apt-get install chromium, or set JOBFABRIC_CHROMIUM): the console's browser test needs one")
	return ""
}

// browser starts a headless Chromium with a 1280x800 window.
func browser(t testing.TB, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 800))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root without it (CI containers)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first run starts the browser, which lives as long as the context
	// of that run: this one, not a step's timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// startDemo runs `jobfabric demo` (no job stream) and returns its URL and
// admin token.
func startDemo(t testing.TB, o demoOptions) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &globals{stdout: io.Discard, stderr: io.Discard, printing: printing{output: "table"}}
	done := make(chan error, 1)
	ready := make(chan [2]string, 1)
	o.listen = "127.0.0.1:0"
	go func() {
		done <- runDemo(ctx, g, o, func(url, tok string) { ready <- [2]string{url, tok} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case r := <-ready:
		return r[0], r[1]
	case err := <-done:
		t.Fatalf("demo ended early: %v", err)
	case <-time.After(5 * time.Minute):
		t.Fatal("demo did not become ready")
	}
	return "", ""
}

// shotDir is where screenshots go: $JOBFABRIC_CONSOLE_SHOTS (docs/console
// refreshes the docs' pictures), else the test's temp dir.
func shotDir(t testing.TB) string {
	if d := os.Getenv("JOBFABRIC_CONSOLE_SHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func login(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	do(t, ctx, "log in",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("svg.grid, #live p.summary")),
	)
}

// TestConsoleInBrowser drives the console of `jobfabric demo` in headless
// Chromium: log in with the admin token, the GPU grid shows the demo
// tenants' jobs (MIG slices inside their GPU), a job submitted through the
// API appears without a reload, a form's refusal carries the API's error as
// the CLI words it; every page is photographed. Then the attacker's side:
// a tenant's token sees only its tenant and gets 404 for another tenant's
// job page; a forged or absent cookie, a request without the CSRF token and
// a cross-origin form post are all refused, and change nothing.
func TestConsoleInBrowser(t *testing.T) {
	path := chromium(t)
	base, admin := startDemo(t, demoOptions{stripes: 2, sps: 4})
	ctx := browser(t, path)
	dir := shotDir(t)
	c, err := client.New(base, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()

	login(t, ctx, base, admin)
	// The demo's jobs: 1 (acme, 16 GPUs), 2 (acme, 8), 3 (globex, two MIG slices).
	do(t, ctx, "demo jobs on the grid", chromedp.WaitVisible(chromedp.CSS(`g.srv[data-jobs*="3+3"]`)))
	// gpus counts the GPUs of the grid whose data-jobs names the job.
	gpus := func(id int) int {
		return eval[int](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('g.srv[data-jobs]')].flatMap(g => g.dataset.jobs.split(' ')).filter(x => x.split('+').includes('%d')).length`, id))
	}
	if n := gpus(1); n != 16 {
		t.Errorf("job 1 holds %d GPUs of the grid, want 16", n)
	}
	// Job 3's two MIG slices share one GPU: two cells of globex's colour
	// (acme's jobs 1 and 2 are whole GPUs of the other).
	if n := gpus(3); n != 1 {
		t.Errorf("job 3 is on %d GPUs of the grid, want 1", n)
	}
	cells := eval[map[string]int](t, ctx, `[...document.querySelectorAll('path.cells')].reduce((m, p) => {
		const c = p.getAttribute('class').split(' ')[1];
		m[c] = (m[c] || 0) + p.getAttribute('d').split('M').length - 1;
		return m;
	}, {})`)
	// 64 GPUs: 24 whole ones of acme, one GPU with globex's two slices
	// drawn over its free cell, 39 free.
	col := legend(t, ctx)
	if want := map[string]int{"free": 40, col["acme"]: 24, col["globex"]: 2}; col["acme"] == col["globex"] || !maps.Equal(cells, want) {
		t.Errorf("grid cells by colour: %v, want %v (legend %v)", cells, want, col)
	}
	// The session cookie is out of the page's reach; nothing is stored.
	if got := eval[string](t, ctx, `document.cookie + '|' + localStorage.length + '|' + sessionStorage.length`); got != "|0|0" {
		t.Errorf("document.cookie|localStorage|sessionStorage = %q, want nothing visible", got)
	}
	cookies, err := chromedp.Run(ctx, chromedp.Action[*network.GetCookiesResult](func(ctx context.Context, tg *chromedp.Target) (*network.GetCookiesResult, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		return &r, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, ck := range cookies.Cookies {
		if ck.Name == "jf_session" {
			session = ck
		}
		if strings.Contains(ck.Value, admin) {
			t.Errorf("cookie %s carries the token", ck.Name)
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict", session)
	}
	do(t, ctx, "select job 1", chromedp.Click(chromedp.CSS(`g.srv[data-jobs^="1 "]`)), chromedp.WaitVisible(chromedp.CSS(`#detail a[href="/console/jobs/1"]`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('svg.grid rect.sel').length`); n != 16 {
		t.Errorf("selecting job 1 outlines %d GPUs, want 16", n)
	}
	shot(t, ctx, dir, "cluster")

	// A job submitted through the API shows up without a reload.
	eval[bool](t, ctx, `window.__noReload = true`)
	j, err := c.SubmitJob(bg, domain.JobSpec{Name: "from-the-api", Tenant: "globex", Workspace: "inference", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the new job appears", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#job-%d`, j.ID))))
	if !eval[bool](t, ctx, `window.__noReload === true`) {
		t.Error("the page reloaded to show the new job")
	}

	for _, p := range []struct{ path, wait, name string }{
		{"/console/tenants", "section.tenant svg.bar", "tenants"},
		{"/console/queue", "#pending", "queue"},
		{"/console/jobs/1", "#job-state", "job"},
		{"/console/fabric", "#devices", "fabric"},
	} {
		do(t, ctx, p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		shot(t, ctx, dir, p.name)
	}
	// The job page: placement, NVLink domain, leaves, fabric identity.
	do(t, ctx, "job 1's page", chromedp.Navigate(base+"/console/jobs/1"), chromedp.WaitVisible(chromedp.CSS("section.binding")))
	text := eval[string](t, ctx, `document.getElementById('live').innerText`)
	for _, want := range []string{"Ready", "acme/research", "NVLink domains", "leaves:", "VRF", "L3VNI", "job.submit"} {
		if !strings.Contains(text, want) {
			t.Errorf("job page lacks %q:\n%s", want, text)
		}
	}

	// A refused submit says what the CLI says (the API's message and code).
	spec := domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 3, GPUsPerNode: 2}
	_, apiErr := c.SubmitJob(bg, spec)
	if apiErr == nil {
		t.Fatal("the API accepted 3 GPUs at 2 per node")
	}
	do(t, ctx, "submit a bad job from the console",
		chromedp.Navigate(base+"/console/queue"),
		chromedp.WaitVisible(chromedp.CSS("#submit-form")),
		chromedp.SetValue(chromedp.CSS("#f-ws"), "acme/research"),
		chromedp.SendKeys(chromedp.CSS("#f-gpus"), "3"),
		chromedp.SendKeys(chromedp.CSS("#f-gpn"), "2"),
		chromedp.Click(chromedp.CSS(`#submit-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#submit-form output.err")),
	)
	if out := eval[string](t, ctx, `document.querySelector('#submit-form output').textContent`); !strings.Contains(out, errorOf(apiErr).Message) {
		t.Errorf("console says %q; the API said %q", out, errorOf(apiErr).Message)
	}

	// Log out: the session is gone, pages ask for a login again.
	do(t, ctx, "log out", chromedp.Click(chromedp.CSS(`.who button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	do(t, ctx, "after logout", chromedp.Navigate(base+"/console/queue"), chromedp.WaitVisible(chromedp.CSS("#token")))

	// The tenant's view: globex sees its jobs and tenant, nothing of acme.
	gtok, err := c.CreateToken(bg, api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	login(t, ctx, base, gtok.Secret)
	do(t, ctx, "globex's grid", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#job-%d`, j.ID))))
	if own := legend(t, ctx); len(own) != 3 || own["globex"] != col["globex"] {
		t.Errorf("globex's legend %v: want only globex, free and unknown cells, globex in the colour the admin sees (%s)", own, col["globex"])
	}
	shot(t, ctx, dir, "cluster-tenant")
	for _, p := range []string{"/console/", "/console/tenants", "/console/queue", "/console/fabric"} {
		do(t, ctx, p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("#live")))
		html := eval[string](t, ctx, `document.documentElement.outerHTML`)
		for _, leak := range []string{"acme", "llama-pretrain", "serving-canary", "/console/jobs/1\""} {
			if strings.Contains(html, leak) {
				t.Errorf("globex's %s shows %q", p, leak)
			}
		}
	}
	if st := eval[int](t, ctx, `fetch('/console/jobs/1').then(r => r.status)`); st != http.StatusNotFound {
		t.Errorf("globex opening acme's job page: %d, want 404", st)
	}
	do(t, ctx, "acme's job page", chromedp.Navigate(base+"/console/jobs/1"), chromedp.WaitVisible(chromedp.CSS("p.err")))
	if html := eval[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, "llama") || strings.Contains(html, "acme") {
		t.Errorf("acme's job page, as globex, names it:\n%s", html)
	}

	// A cross-origin page posts a cancel with the victim's cookie: refused
	// by origin (and it cannot know the CSRF token).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/console/jobs/%d/cancel"><input name="csrf" value="guess"></form><script>document.getElementById('f').submit()</script>`, base, j.ID)
	}))
	defer evil.Close()
	do(t, ctx, "the attacker's page", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("p.err")))
	if got, err := c.Job(bg, j.ID); err != nil || got.State.Terminal() {
		t.Fatalf("after a cross-origin post job %d is %v (%v): the console cancelled it", j.ID, got.State, err)
	}

	// Outside the browser: no cookie, a forged one, a real one without
	// the CSRF token.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(cookie string) *http.Response {
		req, _ := http.NewRequest("GET", base+"/console/queue", nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, ck := range []string{"", "jf_session=" + strings.Repeat("ab", 32)} {
		if r := get(ck); r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/console/login") {
			t.Errorf("cookie %q: %s to %q, want a redirect to the login", ck, r.Status, r.Header.Get("Location"))
		}
	}
	cookies, err = chromedp.Run(ctx, chromedp.Action[*network.GetCookiesResult](func(ctx context.Context, tg *chromedp.Target) (*network.GetCookiesResult, error) {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
		return &r, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	var real string
	for _, ck := range cookies.Cookies {
		if ck.Name == "jf_session" {
			real = "jf_session=" + ck.Value
		}
	}
	for name, h := range map[string]map[string]string{
		"no CSRF token":      {"Cookie": real},
		"a wrong CSRF token": {"Cookie": real, "X-CSRF-Token": strings.Repeat("0", 64)},
		"another origin":     {"Cookie": real, "Origin": "http://evil.example"},
	} {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/console/jobs/%d/cancel", base, j.ID), bytes.NewReader(nil))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cancel with %s: %s, want 403", name, resp.Status)
		}
	}
	if got, err := c.Job(bg, j.ID); err != nil || got.State.Terminal() {
		t.Fatalf("job %d is %v (%v) after refused cancels", j.ID, got.State, err)
	}
	// With the token the page holds, the same cancel goes through.
	do(t, ctx, "cancel from the console", chromedp.Navigate(base+fmt.Sprintf("/console/jobs/%d", j.ID)),
		chromedp.Click(chromedp.CSS(`#cancel-form button`)), chromedp.WaitVisible(chromedp.CSS("#cancel-form output.ok")))
	if got, err := c.Job(bg, j.ID); err != nil || got.State != domain.JobCancelled {
		t.Errorf("after the console's cancel job %d is %v (%v)", j.ID, got.State, err)
	}
}

// legend maps the names of the cluster page's colour keys to their class.
func legend(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	return eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('.legend .key')].filter(k => k.querySelector('rect')).map(k => [k.textContent.trim(), k.querySelector('rect').getAttribute('class')]))`)
}

func errorOf(err error) *domain.Error {
	de, _ := err.(*domain.Error)
	if de == nil {
		return &domain.Error{Message: err.Error()}
	}
	return de
}
