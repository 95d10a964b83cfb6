// Package console is the web console: server-rendered pages (html/template,
// a little hand-written JavaScript, SVG) that show the cluster, tenants and
// workspaces, the queue, a job and the fabric, and submit, cancel and drain.
//
// It holds no state of its own but sessions. Every page is built from the
// API as the logged-in token sees it: each read and write is an in-process
// request to the server's own API handler (authentication, authorization,
// leader forwarding, metrics) with the session's token as its bearer, so a
// tenant's view is exactly what its token may read with the CLI.
//
// The token never reaches the browser after login: it stays in the
// session, which the browser knows by an HttpOnly, SameSite=Strict cookie.
// Every state-changing request carries the session's CSRF token and must
// come from the console's own origin; pages are served with a strict
// Content-Security-Policy (scripts and styles only from the console's own
// files, no inline script).
package console
