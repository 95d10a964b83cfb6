package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/httpcode"
)

// caller reads and writes the API in process, as one token.
type caller struct {
	api    http.Handler
	token  string
	remote string // the browser's address, for the API's request log
}

// memWriter collects an API answer.
type memWriter struct {
	hdr  http.Header
	code int
	body bytes.Buffer
}

func (w *memWriter) Header() http.Header { return w.hdr }
func (w *memWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *memWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}

// get decodes the answer of GET path into out.
func (c caller) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// continueHeader is internal/server.ContinueHeader (the console does not
// import the server: it is handed its handler).
const continueHeader = "Jobfabric-Continue"

// getAll reads every page of the paged list at path (GET /v1/jobs and
// GET /v1/events answer one page without limit, issue 18) as one list in
// the API's order. back says the pages go back in time (events: each
// page is older than the one before, its items oldest first).
func getAll[T any](ctx context.Context, c caller, path string, back bool) ([]T, error) {
	pages, err := getPages[[]T](ctx, c, path)
	if err != nil {
		return nil, err
	}
	if back {
		slices.Reverse(pages)
	}
	n := 0
	for _, p := range pages {
		n += len(p)
	}
	out := make([]T, 0, n)
	for _, p := range pages {
		out = append(out, p...)
	}
	return out, nil
}

// getPages reads every page of the answer at path, following the
// continue header: lists, and the answers that hold one (GET /v1/queue's
// jobs, GET /v1/usage's rows).
func getPages[T any](ctx context.Context, c caller, path string) ([]T, error) {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var pages []T
	next := path
	for {
		var page T
		hdr, err := c.send(ctx, http.MethodGet, next, nil, &page)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page)
		token := hdr.Get(continueHeader)
		if token == "" {
			return pages, nil
		}
		next = path + sep + "continue=" + url.QueryEscape(token)
	}
}

// getQueue reads every page of GET /v1/queue: the pending jobs of every
// page, the order's time and workspaces of the first.
func getQueue(ctx context.Context, c caller) (api.Queue, error) {
	pages, err := getPages[api.Queue](ctx, c, "/v1/queue")
	if err != nil {
		return api.Queue{}, err
	}
	q := pages[0]
	for _, p := range pages[1:] {
		q.Pending = append(q.Pending, p.Pending...)
	}
	return q, nil
}

// getUsage reads every page of a usage report at path: the rows of every
// page, the period and total of the first (every page counts them).
func getUsage(ctx context.Context, c caller, path string) (api.Usage, error) {
	pages, err := getPages[api.Usage](ctx, c, path)
	if err != nil {
		return api.Usage{}, err
	}
	u := pages[0]
	for _, p := range pages[1:] {
		u.Rows = append(u.Rows, p.Rows...)
	}
	return u, nil
}

// do sends a JSON body (nil: none) and decodes a JSON answer into out (nil:
// discard). An error answer is returned as the API's *domain.Error.
func (c caller) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.send(ctx, method, path, body, out)
	return err
}

// send is do, also returning the answer's headers.
func (c caller) send(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://console.local"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.RemoteAddr = c.remote
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	w := &memWriter{hdr: http.Header{}}
	c.api.ServeHTTP(w, req)
	if w.code >= 300 {
		var de domain.Error
		if json.Unmarshal(w.body.Bytes(), &de) == nil && de.Code != "" {
			return nil, &apiError{status: w.code, err: &de}
		}
		return nil, &apiError{status: w.code, err: &domain.Error{Code: domain.CodeInternal, Message: fmt.Sprintf("%s %s answered %d: %s", method, path, w.code, strings.TrimSpace(w.body.String()))}}
	}
	if out == nil || w.code == http.StatusNoContent {
		return w.hdr, nil
	}
	if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
		return nil, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return w.hdr, nil
}

// describe renders an API error as the CLI does: the message, each detail
// on its own line, and the code unless the message says it all.
func describe(err error) string {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err.Error()
	}
	s := de.Message
	if de.Field != "" && !strings.Contains(s, de.Field) {
		s = de.Field + ": " + s
	}
	for _, d := range de.Details {
		s += "\n  - "
		if d.Field != "" {
			s += d.Field + ": "
		}
		s += d.Message
		if d.Rule != "" {
			s += " [rule " + d.Rule + "]"
		}
	}
	if de.Code != domain.CodeNotFound && de.Code != domain.CodeInvalidArgument {
		s += " (" + string(de.Code) + ")"
	}
	return s
}

// apiError is an API error answer with its HTTP status, which the console
// answers too (another tenant's job is a 404 here as in the API).
type apiError struct {
	status int
	err    *domain.Error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// statusOf is the HTTP status of err: the API's own, or for the console's
// refusals (a form's bad number, a missing CSRF token) the one its code
// means.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return httpcode.Status(domain.CodeOf(err))
}
