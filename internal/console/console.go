package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/tstime"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// Config configures the console.
type Config struct {
	// API answers the /v1 routes: the server's own handler, called in
	// process with the session's token.
	API http.Handler
	// Secure marks the session cookie Secure (the server speaks TLS) and
	// names it with the __Host- prefix.
	Secure bool
	Clock  tstime.Clock
	Logger *slog.Logger
	// IdleTimeout ends a session unused for that long (default 30m);
	// MaxAge any session (default 12h). Either way one logs in again.
	IdleTimeout, MaxAge time.Duration
	// MaxSessions bounds the sessions kept (default 10,000); the least
	// recently used goes first.
	MaxSessions int
}

// Console serves the web console.
type Console struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	static   http.Handler
	mux      *http.ServeMux
}

// Content-Security-Policy of every answer: scripts, styles and fetches only
// from the console itself, no inline script or style, no framing, forms
// posted only here.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.API == nil {
		return nil, errors.New("console: no API handler")
	}
	if cfg.Clock == nil {
		cfg.Clock = tstime.Std{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Minute
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 12 * time.Hour
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 10000
	}
	c := &Console{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.Clock, cfg.IdleTimeout, cfg.MaxAge, cfg.MaxSessions), pages: map[string]*template.Template{}}
	for _, name := range []string{"login", "cluster", "tenants", "queue", "job", "fabric", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		c.pages[name] = t
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(static))
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET "+Prefix+"static/", func(w http.ResponseWriter, r *http.Request) {
		// The files change only with the binary.
		w.Header().Set("Cache-Control", "max-age=300")
		c.static.ServeHTTP(w, r)
	})
	m.HandleFunc("GET "+Prefix+"login", c.loginForm)
	m.HandleFunc("POST "+Prefix+"login", c.login)
	m.HandleFunc("POST "+Prefix+"logout", c.logout)
	m.HandleFunc("GET "+Prefix+"{$}", c.page("cluster", c.clusterData))
	m.HandleFunc("GET "+Prefix+"tenants", c.page("tenants", c.tenantsData))
	m.HandleFunc("GET "+Prefix+"queue", c.page("queue", c.queueData))
	m.HandleFunc("GET "+Prefix+"jobs/{id}", c.page("job", c.jobData))
	m.HandleFunc("GET "+Prefix+"fabric", c.page("fabric", c.fabricData))
	m.HandleFunc("POST "+Prefix+"jobs", c.action(c.submit))
	m.HandleFunc("POST "+Prefix+"jobs/{id}/cancel", c.action(c.cancel))
	m.HandleFunc("POST "+Prefix+"drain", c.action(c.drain))
	m.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, nil, domain.Errorf(domain.CodeNotFound, "no console page %s %s", r.Method, r.URL.Path))
	})
	c.mux = m
}

// ServeHTTP serves the console under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, Prefix+"static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// cookieName is the session cookie's name: with TLS, the __Host- prefix
// makes the browser refuse one set by a sibling domain or without Secure.
func (c *Console) cookieName() string {
	if c.cfg.Secure {
		return "__Host-jf_session"
	}
	return "jf_session"
}

const loginCookie = "jf_login"

func (c *Console) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteStrictMode})
}

// view is what every page template gets.
type view struct {
	Title, Nav string
	Who        *domain.Token
	CSRF       string
	// Refresh is how often (ms) the page's live part is fetched again.
	Refresh int
	Error   string
	Data    any
}

// request is one authenticated page or action: the session and the API as
// its token.
type request struct {
	s   *session
	api caller
}

// authed finds the request's session; without one a page redirects to the
// login, a script's request answers 401.
func (c *Console) authed(w http.ResponseWriter, r *http.Request) (*request, bool) {
	ck, err := r.Cookie(c.cookieName())
	var s *session
	ok := false
	if err == nil {
		s, ok = c.sessions.get(ck.Value)
	}
	if !ok {
		c.toLogin(w, r, "")
		return nil, false
	}
	return &request{s: s, api: caller{api: c.cfg.API, token: s.token, remote: r.RemoteAddr}}, true
}

// scripted reports whether the console's script sent the request (it asks
// for JSON or for a page's live part) rather than a navigation.
func scripted(r *http.Request) bool {
	return r.Header.Get("X-Console-Part") != "" || strings.Contains(r.Header.Get("Accept"), "application/json")
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request, why string) {
	if scripted(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": &domain.Error{Code: domain.CodeUnauthenticated, Message: firstOf(why, "not logged in, or the session ended")}, "login": Prefix + "login"})
		return
	}
	to := Prefix + "login"
	if r.Method == http.MethodGet && r.URL.Path != Prefix+"login" {
		to += "?next=" + urlQueryEscape(r.URL.RequestURI())
	}
	if why != "" {
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		to += sep + "why=" + urlQueryEscape(why)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// sessionEnded reports whether err says the session's token no longer
// works (revoked, expired): the session ends with it.
func sessionEnded(err error) bool {
	c := domain.CodeOf(err)
	return c == domain.CodeUnauthenticated || c == domain.CodeTokenExpired
}

// page serves a page built by data; a request for its live part gets only
// that (the script swaps it in).
func (c *Console) page(name string, data func(r *http.Request, q *request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, ok := c.authed(w, r)
		if !ok {
			return
		}
		title, d, err := data(r, q)
		if err != nil {
			if sessionEnded(err) {
				c.endSession(w, r)
				c.toLogin(w, r, describe(err))
				return
			}
			c.fail(w, r, q, err)
			return
		}
		v := view{Title: title, Nav: name, Who: &q.s.who, CSRF: q.s.csrf, Refresh: 3000, Data: d}
		if name == "cluster" {
			v.Refresh = 5000 // the largest page: a 2,048-server grid
		}
		tmpl := "page"
		if r.Header.Get("X-Console-Part") == "live" {
			tmpl = "live"
		}
		c.render(w, r, name, tmpl, http.StatusOK, v)
	}
}

// render executes a template into a buffer first, so a failure answers
// 500 instead of half a page; an unchanged live part answers 304.
func (c *Console) render(w http.ResponseWriter, r *http.Request, page, tmpl string, status int, v view) {
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, tmpl, v); err != nil {
		c.log.Error("console: render", "page", page, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if tmpl == "live" {
		sum := sha256.Sum256(buf.Bytes())
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows an API error as the CLI words it, with the status its code
// maps to (a job of another tenant: 404, as the API answers).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, q *request, err error) {
	status := statusOf(err)
	if scripted(r) {
		writeJSON(w, status, map[string]any{"error": errorOf(err), "text": describe(err)})
		return
	}
	v := view{Title: "Error", Error: describe(err)}
	if q != nil {
		v.Who, v.CSRF = &q.s.who, q.s.csrf
	}
	c.render(w, r, "error", "page", status, v)
}

func errorOf(err error) *domain.Error {
	var de *domain.Error
	if errors.As(err, &de) {
		return de
	}
	return &domain.Error{Code: domain.CodeInternal, Message: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
