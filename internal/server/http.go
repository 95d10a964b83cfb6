package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/console"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// access says who may call a route at all; finer checks are in handlers.
type access int

const (
	public access = iota // no token: health, OpenAPI
	authed               // any valid token
)

// param documents a query parameter.
type param struct {
	name, typ, doc string
}

// route is one API operation: the handler and what the OpenAPI document
// says of it, kept in one place so the two cannot drift.
type route struct {
	method, path, summary string
	access                access
	// local routes are answered by any member; the rest go to the leader.
	local bool
	// dedup routes apply a request carrying an Idempotency-Key once, so a
	// request whose outcome is unknown may be retried.
	dedup bool
	query []param
	body  any // request body type (nil: none)
	// yaml routes take a YAML body as well as JSON (the topology).
	yaml bool
	// rawBody, instead of body, lists the media types of a body the
	// handler reads itself (exposition text); no JSON check is made.
	rawBody []string
	resp    any // success response type
	status  int // success status (200 if 0)
	h       func(r *http.Request, p *principal) (any, error)
	// sse, instead of h, streams Server-Sent Events (resp documents the
	// data of each event). It returns an error only before it has written.
	sse func(w http.ResponseWriter, r *http.Request, p *principal) error
}

// handler serves the API, /metrics, pprof and the web console; tls says
// the API is served over TLS (the console's cookie is then Secure).
func (s *Server) handler(tls bool) (http.Handler, error) {
	mux := http.NewServeMux()
	for _, rt := range s.routes {
		mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	// The console reads and writes through the routes above, in process,
	// with the session's token (internal/console).
	con, err := console.New(console.Config{API: mux, Secure: tls, Clock: s.clock, Logger: s.log.With("component", "console")})
	if err != nil {
		return nil, err
	}
	mux.Handle(console.Prefix, con)
	mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusSeeOther))
	// Not API routes: text, not JSON, answered by every member for itself.
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.Handle("/debug/pprof/", s.pprofHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Counted under one route: a scanner's paths must not grow the
		// label set.
		rec := s.track(w, r, "unmatched")
		defer rec.done()
		writeError(rec, domain.Errorf(domain.CodeNotFound, "no API operation %s %s (see /v1/openapi.json)", r.Method, r.URL.Path))
	})
	return mux, nil
}

func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := s.track(w, r, rt.path)
		defer rec.done() // after the recover below has answered a panic
		w = rec
		// Every answer says the API revision, so a client notices skew
		// without asking /v1/health.
		w.Header().Set(RevisionHeader, strconv.Itoa(api.Revision))
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					// The reverse proxy lost the leader mid-answer (a stream
					// cut by a leader change): let net/http drop the
					// connection, the client reconnects.
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, domain.Errorf(domain.CodeInternal, "internal error"))
			}
		}()
		if r.Method == http.MethodGet || (rt.dedup && r.Header.Get(idempotencyHeader) != "") {
			r = r.WithContext(context.WithValue(r.Context(), retrySafeKey{}, true))
		}
		if rt.body != nil {
			// Before forwarding: a follower refuses what the leader would.
			if err := checkBodyHeaders(r, rt.yaml); err != nil {
				writeError(w, err)
				return
			}
		}
		if rt.sse != nil {
			// Before forwarding too: a follower's proxy streams as well.
			var end func()
			w, r, end = s.stream(w, r)
			defer end()
		}
		if rt.access != public && s.guard.authRefused(w, r) {
			return
		}
		if !rt.local && !s.store.IsLeader() {
			if by := r.Header.Get(forwardedHeader); by != "" {
				writeError(w, domain.Errorf(domain.CodeUnavailable, "request forwarded by %s reached %s, which is not the leader either; retry", by, s.nodeID))
				return
			}
			u, err := s.leaderURL()
			if err != nil {
				writeError(w, err)
				return
			}
			// The leader trusts this member: the follower counts its
			// clients' failures, before the 401 reaches the client (its
			// next request must find it counted).
			rec.onStatus = func(code int) {
				if code == http.StatusUnauthorized {
					s.guard.authFailed(r)
				}
			}
			s.fwd.Load().forward(w, r, u, s.nodeID)
			return
		}
		var p *principal
		if rt.access != public {
			var err error
			if p, err = s.authenticate(r); err != nil {
				s.guard.authFailed(r)
				writeError(w, err)
				return
			}
			rec.tokenID = p.tok.ID
		}
		if rt.sse != nil {
			if err := rt.sse(w, r, p); err != nil {
				writeError(w, err)
			}
			return
		}
		v, err := rt.h(r, p)
		if err != nil {
			writeError(w, err)
			return
		}
		if pg, ok := v.(paged); ok {
			w.Header().Set(ContinueHeader, pg.next)
			v = pg.v
		}
		status := rt.status
		if ws, ok := v.(withStatus); ok {
			status, v = ws.status, ws.v
		}
		if status == 0 {
			status = http.StatusOK
		}
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, v)
	})
}

// RevisionHeader carries api.Revision on every answer.
const RevisionHeader = "Jobfabric-Api-Revision"

// idempotencyHeader carries a client-chosen key that makes a retried
// request apply at most once (on routes marked dedup).
const idempotencyHeader = "Idempotency-Key"

type retrySafeKey struct{}

// retrySafe reports whether repeating the request cannot apply it twice, so
// an unknown outcome may be answered "unavailable" (retry) instead of
// "internal" (check before retrying).
func retrySafe(ctx context.Context) bool {
	v, _ := ctx.Value(retrySafeKey{}).(bool)
	return v
}

// withStatus lets a handler answer another status than its route's (a dry
// run of a create answers 200, not 201).
type withStatus struct {
	status int
	v      any
}

func notFoundf(kind string, name any) error { return domain.NotFound(kind, fmt.Sprint(name)) }
