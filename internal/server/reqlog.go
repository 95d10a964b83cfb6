package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// requestRecord follows one request: its status for the request metrics
// and the request log. Durations are real time, not the server's clock: a
// test's fake clock does not move while a handler runs.
type requestRecord struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	route   string // the route's path pattern: bounded, unlike the URL
	status  int
	start   time.Time
	tokenID string // the principal's token ID (never its secret), once known
	// onStatus, when set, learns the status before any of the answer
	// reaches the client (a follower counts the leader's 401s so).
	onStatus func(code int)
}

func (s *Server) track(w http.ResponseWriter, r *http.Request, route string) *requestRecord {
	return &requestRecord{ResponseWriter: w, s: s, r: r, route: route, start: time.Now()}
}

func (rec *requestRecord) WriteHeader(code int) {
	rec.noteStatus(code)
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *requestRecord) Write(b []byte) (int, error) {
	rec.noteStatus(http.StatusOK)
	return rec.ResponseWriter.Write(b)
}

// noteStatus records the answer's status, the first one given.
func (rec *requestRecord) noteStatus(code int) {
	if rec.status != 0 {
		return
	}
	rec.status = code
	if rec.onStatus != nil {
		rec.onStatus(code)
	}
}

// Unwrap lets http.ResponseController reach the connection (streams flush
// and set deadlines through it).
func (rec *requestRecord) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// Flush keeps the writer an http.Flusher for the reverse proxy.
func (rec *requestRecord) Flush() {
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// done records the request: a metric sample, and a log line at a level by
// what happened: server errors warn, changes are info, reads debug (watch
// streams and agents' polls would drown the rest).
func (rec *requestRecord) done() {
	if v := recover(); v != nil {
		rec.status = http.StatusInternalServerError
		defer panic(v)
	}
	if rec.status == 0 {
		rec.status = http.StatusOK // nothing written: net/http answers 200
	}
	d := time.Since(rec.start)
	m := rec.s.metrics
	method := methodLabel(rec.r.Method)
	m.Requests.WithLabelValues(method, rec.route, strconv.Itoa(rec.status)).Inc()
	m.RequestDuration.WithLabelValues(method, rec.route).Observe(d.Seconds())
	level := slog.LevelDebug
	switch {
	case rec.status >= 500:
		level = slog.LevelWarn
	case rec.r.Method != http.MethodGet && rec.r.Method != http.MethodHead:
		level = slog.LevelInfo
	}
	log := rec.s.log
	if !log.Enabled(rec.r.Context(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("method", rec.r.Method), slog.String("route", rec.route),
		slog.Int("status", rec.status), slog.Duration("duration", d)}
	if rec.tokenID != "" {
		attrs = append(attrs, slog.String("token", rec.tokenID))
	}
	if by := rec.r.Header.Get(forwardedHeader); by != "" {
		attrs = append(attrs, slog.String("forwarded_by", by))
	}
	log.LogAttrs(rec.r.Context(), level, "request", attrs...)
}

// methodLabel bounds the method label: net/http accepts any token as a
// method, and the catch-all and pprof routes match every one.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func contextWith(r *http.Request, k, v any) context.Context {
	return context.WithValue(r.Context(), k, v)
}
