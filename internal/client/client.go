package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// Client talks to one jobfabric server (any member: followers forward to
// the leader).
type Client struct {
	base  string
	token string
	http  *http.Client
	// stream has no overall timeout: a watch lasts as long as its job.
	stream *http.Client
	// serverRevision is the API revision the last answer carried (0:
	// none seen yet, or a server too old to say).
	serverRevision atomic.Int64
	// RetryFor bounds how long a request answered "unavailable" (an election
	// in progress) is retried; 0 disables retries.
	RetryFor time.Duration
	// PageSize is how many items a list request asks for when its query
	// names no PageSize (0: DefaultPageSize). The lists read every page
	// either way; tests of a bridge set it small to see it do so.
	PageSize int
}

// maxDialRetries: a server that refuses connections is usually down, not
// electing; a few quick tries cover a restart, more would only delay the error.
const maxDialRetries = 2

// New returns a client for base (e.g. http://127.0.0.1:7070) with a bearer
// token. tlsConf may be nil.
func New(base, token string, tlsConf *tls.Config) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, domain.Invalid("server", "server %q must be a URL like http://127.0.0.1:7070", base)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Its own copy: the transport's HTTP/2 set-up writes NextProtos into
	// it, and callers share one configuration among clients.
	tr.TLSClientConfig = tlsConf.Clone()
	tr.MaxIdleConnsPerHost = 256
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}, stream: &http.Client{Transport: tr}, RetryFor: 10 * time.Second}, nil
}

// Do sends a request with a JSON (or raw, when body is []byte) body and
// decodes a JSON answer into out (when non-nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, body, out, nil)
}

// do is Do, also copying the answer's headers into hdr when non-nil.
func (c *Client) do(ctx context.Context, method, path string, body, out any, hdr *http.Header) error {
	var payload []byte
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		payload, contentType = b, "application/yaml"
	default:
		var err error
		if payload, err = json.Marshal(b); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	// One key for every attempt of this call: the server applies it once.
	key := ""
	if method == http.MethodPost {
		key = newKey()
	}
	deadline := time.Now().Add(c.RetryFor)
	backoff := 50 * time.Millisecond
	dialFailures := 0
	for {
		err, dialFailed := c.once(ctx, method, path, contentType, key, payload, out, hdr)
		if dialFailed {
			dialFailures++
		}
		if domain.CodeOf(err) != domain.CodeUnavailable || time.Now().Add(backoff).After(deadline) || dialFailures > maxDialRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// once sends one request; dialFailed reports that the server could not be
// reached at all.
func (c *Client) once(ctx context.Context, method, path, contentType, key string, payload []byte, out any, hdr *http.Header) (err error, dialFailed bool) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err), false
	}
	if payload != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &domain.Error{Code: domain.CodeUnavailable, Message: fmt.Sprintf("cannot reach %s: %v", c.base, err)}, true
	}
	defer resp.Body.Close()
	if rev, err := strconv.Atoi(resp.Header.Get(RevisionHeader)); err == nil {
		c.serverRevision.Store(int64(rev))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return &domain.Error{Code: domain.CodeUnavailable, Message: fmt.Sprintf("reading answer from %s: %v", c.base, err)}, false
	}
	if resp.StatusCode >= 300 {
		return answerError(method, path, resp.Status, b), false
	}
	if hdr != nil {
		*hdr = resp.Header
	}
	if out == nil {
		return nil, false
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil, false
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err), false
	}
	return nil, false
}

// RevisionHeader names the answer header with the server's API revision
// (internal/server.RevisionHeader).
const RevisionHeader = "Jobfabric-Api-Revision"

// ServerAPIRevision is the API revision the server's last answer carried;
// 0 when no answer said.
func (c *Client) ServerAPIRevision() int { return int(c.serverRevision.Load()) }

// answerError decodes an API error answer; anything else is internal.
func answerError(method, path, status string, b []byte) error {
	var de domain.Error
	if json.Unmarshal(b, &de) == nil && de.Code != "" {
		return &de
	}
	return &domain.Error{Code: domain.CodeInternal, Message: fmt.Sprintf("%s %s answered %s: %s", method, path, status, bytes.TrimSpace(b))}
}

func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// Typed helpers for the operations the CLI and tests use.

func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	var h api.Health
	return &h, c.Do(ctx, "GET", "/v1/health", nil, &h)
}

func (c *Client) WhoAmI(ctx context.Context) (*domain.Token, error) {
	var t domain.Token
	return &t, c.Do(ctx, "GET", "/v1/whoami", nil, &t)
}

func (c *Client) Cluster(ctx context.Context) (*api.ClusterView, error) {
	var v api.ClusterView
	return &v, c.Do(ctx, "GET", "/v1/cluster", nil, &v)
}

// ApplyTopology sends a topology file (YAML or JSON) as is.
func (c *Client) ApplyTopology(ctx context.Context, file []byte, dryRun bool) (*domain.TopologyResult, error) {
	var r domain.TopologyResult
	path := "/v1/topology"
	if dryRun {
		path += "?dryRun=true"
	}
	return &r, c.Do(ctx, "PUT", path, file, &r)
}

func (c *Client) Topology(ctx context.Context) (*domain.TopologyView, error) {
	var v domain.TopologyView
	return &v, c.Do(ctx, "GET", "/v1/topology", nil, &v)
}

func (c *Client) CreateTenant(ctx context.Context, req api.TenantCreateRequest) (*domain.Tenant, error) {
	var t domain.Tenant
	return &t, c.Do(ctx, "POST", "/v1/tenants", req, &t)
}

func (c *Client) Tenants(ctx context.Context) ([]domain.Tenant, error) {
	var ts []domain.Tenant
	return ts, c.Do(ctx, "GET", "/v1/tenants", nil, &ts)
}

func (c *Client) CreateWorkspace(ctx context.Context, tenant string, req api.WorkspaceCreateRequest) (*domain.Workspace, error) {
	var w domain.Workspace
	return &w, c.Do(ctx, "POST", "/v1/tenants/"+url.PathEscape(tenant)+"/workspaces", req, &w)
}

func (c *Client) Workspaces(ctx context.Context, tenant string) ([]domain.Workspace, error) {
	var ws []domain.Workspace
	return ws, c.Do(ctx, "GET", "/v1/tenants/"+url.PathEscape(tenant)+"/workspaces", nil, &ws)
}

func (c *Client) CreateToken(ctx context.Context, req api.TokenCreateRequest) (*api.TokenCreated, error) {
	var t api.TokenCreated
	return &t, c.Do(ctx, "POST", "/v1/tokens", req, &t)
}

func (c *Client) SubmitJob(ctx context.Context, spec domain.JobSpec) (*domain.Job, error) {
	var j domain.Job
	return &j, c.Do(ctx, "POST", "/v1/jobs", spec, &j)
}

// JobQuery filters job lists.
type JobQuery struct {
	Tenant, Workspace string
	// States keeps jobs in any of them (none: every state).
	States []domain.JobState
	// Limit caps the list (0: every job); PageSize is how many jobs each
	// request asks for (0: DefaultPageSize).
	Limit, PageSize int
}

// DefaultPageSize is how many items a list request asks for at a time
// (the server's own page without limit; it answers at most 10,000).
const DefaultPageSize = 500

// ContinueHeader names the answer header with the next page's token
// (internal/server.ContinueHeader).
const ContinueHeader = "Jobfabric-Continue"

// Jobs lists the jobs matching q, by ID, reading as many pages as it takes.
func (c *Client) Jobs(ctx context.Context, q JobQuery) ([]domain.Job, error) {
	states := make([]string, len(q.States))
	for i, s := range q.States {
		states[i] = string(s)
	}
	out := []domain.Job{}
	token := ""
	for {
		size := pageSize(cmp.Or(q.PageSize, c.PageSize), q.Limit, len(out))
		path := withQuery("/v1/jobs", "tenant", q.Tenant, "workspace", q.Workspace, "state", strings.Join(states, ","), "limit", strconv.Itoa(size), "continue", token)
		var page []domain.Job
		var hdr http.Header
		if err := c.do(ctx, "GET", path, nil, &page, &hdr); err != nil {
			return nil, err
		}
		out = append(out, page...)
		if token = hdr.Get(ContinueHeader); token == "" || (q.Limit > 0 && len(out) >= q.Limit) {
			return out, nil
		}
	}
}

// pageSize is the limit of the next request: a page, or what is left of
// the caller's limit when that is less.
func pageSize(size, limit, have int) int {
	if size <= 0 {
		size = DefaultPageSize
	}
	if limit > 0 && limit-have < size {
		return limit - have
	}
	return size
}

// DryRun asks where spec would land now, or why it would wait.
func (c *Client) DryRun(ctx context.Context, spec domain.JobSpec) (*api.DryRun, error) {
	var d api.DryRun
	return &d, c.Do(ctx, "POST", "/v1/jobs?dryRun=true", spec, &d)
}

func (c *Client) Job(ctx context.Context, id uint64) (*domain.Job, error) {
	var j domain.Job
	return &j, c.Do(ctx, "GET", "/v1/jobs/"+strconv.FormatUint(id, 10), nil, &j)
}

func (c *Client) CancelJob(ctx context.Context, id uint64) (*domain.Job, error) {
	var j domain.Job
	return &j, c.Do(ctx, "POST", "/v1/jobs/"+strconv.FormatUint(id, 10)+"/cancel", nil, &j)
}

// SetJobPool moves a job that has not started to another server pool
// ("": any server).
func (c *Client) SetJobPool(ctx context.Context, id uint64, pool string) (*domain.Job, error) {
	var j domain.Job
	return &j, c.Do(ctx, "POST", "/v1/jobs/"+strconv.FormatUint(id, 10)+"/pool", api.JobPoolRequest{Pool: pool}, &j)
}

// Report sends a runtime's word on a job: state is running (also a
// heartbeat), succeeded, failed or stopped; message is optional.
func (c *Client) Report(ctx context.Context, id uint64, state, message string) (*domain.Job, error) {
	var j domain.Job
	return &j, c.Do(ctx, "POST", "/v1/jobs/"+strconv.FormatUint(id, 10)+"/report", api.JobReportRequest{State: state, Message: message}, &j)
}

// EventQuery filters the audit trail.
type EventQuery struct {
	Tenant, Workspace, Since string
	// Limit keeps the newest Limit events (0: all); PageSize is how many
	// each request asks for (0: DefaultPageSize).
	Limit, PageSize int
}

// Events lists the events matching q, oldest first, reading pages from the
// newest back until the limit or the start of the trail.
func (c *Client) Events(ctx context.Context, q EventQuery) ([]domain.Event, error) {
	var pages [][]domain.Event
	n := 0
	token := ""
	for {
		size := pageSize(cmp.Or(q.PageSize, c.PageSize), q.Limit, n)
		path := withQuery("/v1/events", "tenant", q.Tenant, "workspace", q.Workspace, "since", q.Since, "limit", strconv.Itoa(size), "continue", token)
		var page []domain.Event
		var hdr http.Header
		if err := c.do(ctx, "GET", path, nil, &page, &hdr); err != nil {
			return nil, err
		}
		pages = append(pages, page)
		n += len(page)
		if token = hdr.Get(ContinueHeader); token == "" || (q.Limit > 0 && n >= q.Limit) {
			break
		}
	}
	out := make([]domain.Event, 0, n)
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	return out, nil
}

// withQuery appends the non-empty name/value pairs kv to path.
func withQuery(path string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// JobHealth is a job's path health now (GET /v1/jobs/{id}/health).
func (c *Client) JobHealth(ctx context.Context, id uint64) (*api.JobHealth, error) {
	var h api.JobHealth
	return &h, c.Do(ctx, "GET", "/v1/jobs/"+strconv.FormatUint(id, 10)+"/health", nil, &h)
}

// Hotspots is the worst switch ports on jobs' paths now, at most limit
// (0: the server's default); all (platform callers) adds the ports no job
// uses (GET /v1/fabric/hotspots).
func (c *Client) Hotspots(ctx context.Context, limit int, all bool) (*api.Hotspots, error) {
	var h api.Hotspots
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if all {
		q.Set("all", "true")
	}
	path := "/v1/fabric/hotspots"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return &h, c.Do(ctx, "GET", path, nil, &h)
}

// UsageQuery selects a usage report: Since is required, a duration back
// from now (30d, 12h) or an RFC 3339 time; Until likewise (empty: now);
// By is tenant (default), workspace, job or token.
type UsageQuery struct {
	Tenant, Workspace, Since, Until, By string
	// PageSize is how many rows each request asks for (0: the client's).
	PageSize int
}

// Usage reports the GPU-hours of the jobs q selects over its period,
// reading every page of rows: the period and total are the first page's
// (each later page counts the same period).
func (c *Client) Usage(ctx context.Context, q UsageQuery) (*api.Usage, error) {
	return allPages(ctx, c, func(token string) string {
		return withQuery("/v1/usage", "tenant", q.Tenant, "workspace", q.Workspace, "since", q.Since, "until", q.Until, "by", q.By,
			"limit", strconv.Itoa(pageSize(cmp.Or(q.PageSize, c.PageSize), 0, 0)), "continue", token)
	}, func(out, page *api.Usage) { out.Rows = append(out.Rows, page.Rows...) })
}

// Queue is the pending jobs in scheduling order and the workspaces' quota
// use, as the token may see them (GET /v1/queue), reading every page of
// jobs: the order's time and the workspaces are the first page's.
func (c *Client) Queue(ctx context.Context, tenant, workspace string) (*api.Queue, error) {
	return allPages(ctx, c, func(token string) string {
		return withQuery("/v1/queue", "tenant", tenant, "workspace", workspace, "limit", strconv.Itoa(pageSize(c.PageSize, 0, 0)), "continue", token)
	}, func(out, page *api.Queue) { out.Pending = append(out.Pending, page.Pending...) })
}

// allPages reads an answer whose list comes in pages: the first page is
// the answer, each later one's list appended to it by more, until the
// server sends no continue token.
func allPages[T any](ctx context.Context, c *Client, path func(token string) string, more func(out, page *T)) (*T, error) {
	var out *T
	token := ""
	for {
		page := new(T)
		var hdr http.Header
		if err := c.do(ctx, "GET", path(token), nil, page, &hdr); err != nil {
			return nil, err
		}
		if out == nil {
			out = page
		} else {
			more(out, page)
		}
		if token = hdr.Get(ContinueHeader); token == "" {
			return out, nil
		}
	}
}

// Workspace reads one workspace.
func (c *Client) Workspace(ctx context.Context, tenant, name string) (*domain.Workspace, error) {
	var w domain.Workspace
	return &w, c.Do(ctx, "GET", "/v1/tenants/"+url.PathEscape(tenant)+"/workspaces/"+url.PathEscape(name), nil, &w)
}

// FabricOptions returns the operator's fabric options (GET /v1/fabric/options).
func (c *Client) FabricOptions(ctx context.Context) (*api.FabricOptions, error) {
	var o api.FabricOptions
	return &o, c.Do(ctx, "GET", "/v1/fabric/options", nil, &o)
}

// SetFabricOptions replaces them (PUT /v1/fabric/options, admin).
func (c *Client) SetFabricOptions(ctx context.Context, o api.FabricOptions) (*api.FabricOptions, error) {
	var out api.FabricOptions
	return &out, c.Do(ctx, "PUT", "/v1/fabric/options", o, &out)
}
