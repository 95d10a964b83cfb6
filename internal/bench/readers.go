package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// Readers poll the API while the submits run (issue 18): every apply takes
// the state's write lock, so a read that holds the read lock for a walk of
// every live job delays the submits queued behind it. The reader tenant
// ("watch") holds a few jobs of its own beside the preloaded ones, so a
// read scoped to it answers little whatever the state holds: its time is
// the walk, not the answer.

// ReadRoutes names the routes a reader may poll, each as the caller it
// stands for: a tenant token (the watch tenant's admin) or the admin.
var ReadRoutes = map[string]readRoute{
	// A tenant's own jobs, a page of them (the CLI's `job list`).
	"jobs-tenant": {path: "/v1/jobs?limit=100", tenant: true},
	// A tenant's pending jobs: a live-state filter.
	"jobs-pending": {path: "/v1/jobs?state=pending&limit=100", tenant: true},
	// A tenant's queue: its pending jobs in order and its quota use.
	"queue": {path: "/v1/queue", tenant: true},
	// The pools a tenant's live jobs name.
	"pools": {path: "/v1/pools", tenant: true},
	// A tenant's usage over the last hour.
	"usage": {path: "/v1/usage?since=1h", tenant: true},
	// A tenant's latest events.
	"events": {path: "/v1/events?limit=100", tenant: true},
	// Every job as the admin asks for them, unfiltered and without limit:
	// before default pages the answer copied every job under the read
	// lock; now it is the first page (the readers do not follow it).
	"jobs-admin": {path: "/v1/jobs"},
	// The whole queue as the admin asks for it, without limit: before
	// pages the answer copied every pending job under the read lock; now
	// it is the first page (the readers do not follow it).
	"queue-admin": {path: "/v1/queue"},
	// Every job's usage over the last hour as the admin asks for it,
	// without limit: a row per job that held GPUs before pages, now the
	// first page.
	"usage-jobs": {path: "/v1/usage?since=1h&by=job"},
	// A Prometheus scrape of the leader (admin).
	"metrics": {path: "/metrics"},
}

type readRoute struct {
	path   string
	tenant bool // as the watch tenant's admin; else as the admin
}

// ReadFigures is one route's latency as the readers saw it.
type ReadFigures struct {
	Route  string  `json:"route"`
	Reads  int     `json:"reads"`
	Errors int     `json:"errors"`
	P50ms  float64 `json:"p50ms"`
	P99ms  float64 `json:"p99ms"`
	Maxms  float64 `json:"maxms"`
}

// watchJobs is how many jobs the reader tenant submits.
const watchJobs = 8

// checkReaders validates the reader options.
func checkReaders(o *SubmitOptions) error {
	if o.Readers < 0 || o.Readers > 256 {
		return domain.Invalid("readers", "readers %d must be between 0 and 256", o.Readers)
	}
	if o.Readers > 0 && len(o.ReadRoutes) == 0 {
		return domain.Invalid("read-routes", "readers need at least one route: %s", strings.Join(slices.Sorted(maps.Keys(ReadRoutes)), ", "))
	}
	for _, r := range o.ReadRoutes {
		if _, ok := ReadRoutes[r]; !ok {
			return domain.Invalid("read-routes", "route %q is not one of %s", r, strings.Join(slices.Sorted(maps.Keys(ReadRoutes)), ", "))
		}
	}
	return nil
}

// seedWatch creates the reader tenant, its jobs and its admin token, and
// returns the token's secret.
func seedWatch(ctx context.Context, cl *client.Client) (string, error) {
	if _, err := cl.CreateTenant(ctx, api.TenantCreateRequest{Name: "watch", Isolation: domain.IsolationServer, Network: domain.NetworkPureRT5}); err != nil {
		return "", fmt.Errorf("create tenant: %w", err)
	}
	if _, err := cl.CreateWorkspace(ctx, "watch", api.WorkspaceCreateRequest{Name: "look", Guaranteed: 0, BorrowLimit: 8}); err != nil {
		return "", fmt.Errorf("create workspace: %w", err)
	}
	for range watchJobs {
		if _, err := cl.SubmitJob(ctx, domain.JobSpec{Tenant: "watch", Workspace: "look", GPUs: 8, GPUsPerNode: 8}); err != nil {
			return "", fmt.Errorf("watch job: %w", err)
		}
	}
	tok, err := cl.CreateToken(ctx, api.TokenCreateRequest{Role: domain.RoleTenantAdmin, Tenant: "watch", Description: "bench readers"})
	if err != nil {
		return "", fmt.Errorf("reader token: %w", err)
	}
	return tok.Secret, nil
}

// readLoop polls routes round-robin (closed loop: the next read leaves
// when the last is answered) until end, recording from measureFrom.
type readLoop struct {
	base                string
	adminTok, tenantTok string
	routes              []string
	http                *http.Client
	mu                  sync.Mutex
	lat                 map[string][]time.Duration
	errs                map[string]int
}

// readClient keeps a connection per reader (the default transport keeps
// two idle, so a third reader would dial again each read).
func readClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

func (l *readLoop) run(ctx context.Context, first int, measureFrom, end time.Time) {
	for i := first; ; i++ {
		if time.Now().After(end) || ctx.Err() != nil {
			return
		}
		name := l.routes[i%len(l.routes)]
		rt := ReadRoutes[name]
		tok := l.adminTok
		if rt.tenant {
			tok = l.tenantTok
		}
		t0 := time.Now()
		err := l.get(ctx, rt.path, tok)
		d := time.Since(t0)
		if t0.Before(measureFrom) {
			continue
		}
		l.mu.Lock()
		if err != nil {
			l.errs[name]++
		} else {
			l.lat[name] = append(l.lat[name], d)
		}
		l.mu.Unlock()
	}
}

// get reads a route's whole answer: the encoding is part of what a
// reader costs the server.
func (l *readLoop) get(ctx context.Context, path, tok string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := l.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

func (l *readLoop) figures() []ReadFigures {
	out := make([]ReadFigures, 0, len(l.routes))
	for _, name := range slices.Compact(slices.Sorted(slices.Values(l.routes))) {
		lat := l.lat[name]
		sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
		f := ReadFigures{Route: name, Reads: len(lat), Errors: l.errs[name]}
		if len(lat) > 0 {
			ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			f.P50ms, f.P99ms, f.Maxms = ms(0.5), ms(0.99), ms(1)
		}
		out = append(out, f)
	}
	return out
}
