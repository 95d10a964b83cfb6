package console

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// maxForm bounds a form body: a job spec, a token.
const maxForm = 64 << 10

var (
	errForeignOrigin = domain.Errorf(domain.CodePermissionDenied, "refused: the request came from another site (Origin, Referer or Sec-Fetch-Site is not this console)")
	errCSRF          = domain.Errorf(domain.CodePermissionDenied, "refused: the request carries no valid CSRF token (reload the page)")
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext keeps a post-login destination on the console: a path under
// Prefix, never another host (//evil, /console/\evil).
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "//") {
		return Prefix
	}
	return next
}

type loginView struct {
	Next, Why, Token string
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), r.URL.Query().Get("why"))
}

// showLogin renders the login form with a fresh login CSRF token, the
// double-submit kind: a cookie and the same value in the form (there is no
// session yet to hold one).
func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, next, why string) {
	tok := randomHex(32)
	c.setCookie(w, loginCookie, tok, 600)
	c.render(w, r, "login", "page", status, view{Title: "Log in", CSRF: tok, Data: loginView{Next: safeNext(next), Why: why}})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !sameOrigin(r) {
		c.fail(w, r, nil, errForeignOrigin)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, domain.Invalid("form", "cannot read the form: %v", err))
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameSecret(ck.Value, r.PostForm.Get("csrf")) {
		c.showLogin(w, r, http.StatusForbidden, r.PostForm.Get("next"), "the login form expired or came from elsewhere; log in again")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := r.PostForm.Get("next")
	if token == "" || len(token) > 512 {
		c.showLogin(w, r, http.StatusUnauthorized, next, "give a token (jf_...)")
		return
	}
	var who domain.Token
	if err := (caller{api: c.cfg.API, token: token, remote: r.RemoteAddr}).get(r.Context(), "/v1/whoami", &who); err != nil {
		c.showLogin(w, r, statusOf(err), next, describe(err))
		return
	}
	id, _ := c.sessions.create(token, who)
	c.setCookie(w, loginCookie, "", -1)
	c.setCookie(w, c.cookieName(), id, int(c.cfg.MaxAge.Seconds()))
	c.log.Info("console login", "token", who.ID, "role", who.Role, "tenant", who.Tenant, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	q, ok := c.authed(w, r)
	if !ok {
		return
	}
	if err := c.checkWrite(w, r, q); err != nil {
		c.fail(w, r, q, err)
		return
	}
	c.endSession(w, r)
	c.toLogin(w, r, "logged out")
}

func (c *Console) endSession(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(c.cookieName()); err == nil {
		c.sessions.end(ck.Value)
	}
	c.setCookie(w, c.cookieName(), "", -1)
}

// checkWrite guards a state-changing request: from this origin, with the
// session's CSRF token (a header from the script, a field from a form).
func (c *Console) checkWrite(w http.ResponseWriter, r *http.Request, q *request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !sameOrigin(r) {
		return errForeignOrigin
	}
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		if err := r.ParseForm(); err != nil {
			return domain.Invalid("form", "cannot read the form: %v", err)
		}
		tok = r.PostForm.Get("csrf")
	}
	if !sameSecret(q.s.csrf, tok) {
		return errCSRF
	}
	return nil
}

// action serves a state-changing request: the script gets JSON (the
// message, or the API's error as the CLI words it), a plain form a
// redirect.
func (c *Console) action(h func(r *http.Request, q *request) (msg, to string, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, ok := c.authed(w, r)
		if !ok {
			return
		}
		if err := c.checkWrite(w, r, q); err != nil {
			c.log.Warn("console: refused a write", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			c.fail(w, r, q, err)
			return
		}
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, q, domain.Invalid("form", "cannot read the form: %v", err))
			return
		}
		msg, to, err := h(r, q)
		if err != nil {
			if sessionEnded(err) {
				c.endSession(w, r)
				c.toLogin(w, r, describe(err))
				return
			}
			c.fail(w, r, q, err)
			return
		}
		to = safeNext(to)
		if scripted(r) {
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "message": msg, "location": to})
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}
