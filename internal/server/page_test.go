package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
)

// startPaged is one server whose lists answer pages of size items when
// a request names no limit.
func startPaged(t *testing.T, size int) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: quietLogger(), RaftTimeout: time.Second,
		Tune: func(cfg *server.Config) { cfg.ListPage = size }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getPage sends GET path as token and decodes the list into out,
// returning the continue header.
func getPage(t *testing.T, base, token, path string, out any) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.Header.Get(server.ContinueHeader)
}

// TestListsWithoutLimitAnswerAPage: GET /v1/jobs and GET /v1/events
// without limit answer one page and the continue header (they answered
// every job before, issue 18); following the headers gives exactly the
// whole list in the same order, and a tenant's pages hold only its own
// jobs and events.
func TestListsWithoutLimitAnswerAPage(t *testing.T) {
	const page = 3
	c := startPaged(t, page)
	admin := c.Client(0)
	seed(t, admin)
	// Interleaved, so each tenant's pages skip the other's IDs.
	for range 5 {
		submit(t, admin, "acme", "research", 1)
		submit(t, admin, "globex", "infer", 1)
	}
	globex := mustToken(t, admin, domain.RoleTenantAdmin, "globex", "")
	base, fsm := c.Servers[0].URL(), c.Servers[0].State()

	for _, tc := range []struct {
		name, token, tenant string
	}{
		{"admin", c.AdminToken, ""},
		{"globex's admin", globex, "globex"},
	} {
		t.Run(tc.name+" jobs", func(t *testing.T) {
			var want, got []domain.Job
			var pages int
			unchanged(t, fsm, func() {
				want = fsm.Jobs(state.JobFilter{Tenant: tc.tenant})
				got, pages = nil, 0
				path := "/v1/jobs"
				for {
					var js []domain.Job
					next := getPage(t, base, tc.token, path, &js)
					pages++
					if next != "" && len(js) != page {
						t.Fatalf("page %d holds %d jobs and has a next page; a page without limit holds %d", pages, len(js), page)
					}
					got = append(got, js...)
					if next == "" {
						break
					}
					path = "/v1/jobs?continue=" + url.QueryEscape(next)
				}
			})
			if pages < 2 {
				t.Fatalf("%d jobs in %d page(s) of %d", len(got), pages, page)
			}
			if !sameJSON(t, got, want) {
				t.Fatalf("the pages hold jobs %v, want %v", jobIDs(got), jobIDs(want))
			}
			for _, j := range got {
				if tc.tenant != "" && j.Tenant != tc.tenant {
					t.Fatalf("%s's pages hold job %d of tenant %s", tc.tenant, j.ID, j.Tenant)
				}
			}
		})
		t.Run(tc.name+" events", func(t *testing.T) {
			var want []domain.Event
			var pages [][]domain.Event
			unchanged(t, fsm, func() {
				want = fsm.Events(state.EventFilter{Tenant: tc.tenant})
				pages = nil
				path := "/v1/events"
				for {
					var es []domain.Event
					next := getPage(t, base, tc.token, path, &es)
					if next != "" && len(es) != page {
						t.Fatalf("page %d holds %d events and has a next page; a page without limit holds %d", len(pages)+1, len(es), page)
					}
					pages = append(pages, es)
					if next == "" {
						break
					}
					path = "/v1/events?continue=" + url.QueryEscape(next)
				}
			})
			if len(pages) < 2 {
				t.Fatalf("%d page(s) of events, want more than one", len(pages))
			}
			var got []domain.Event
			for i := len(pages) - 1; i >= 0; i-- { // pages go back in time
				got = append(got, pages[i]...)
			}
			if !sameJSON(t, got, want) {
				t.Fatalf("the pages hold %d events, differing from the %d of the whole trail", len(got), len(want))
			}
			for _, e := range got {
				if tc.tenant != "" && e.Tenant != tc.tenant {
					t.Fatalf("%s's pages hold an event of tenant %q: %s %s", tc.tenant, e.Tenant, e.Action, e.Object)
				}
			}
		})
	}

	// A continue token is a position, not a grant: globex's admin passing
	// the admin's token for the middle of every job still reads only
	// globex's jobs after it.
	var first []domain.Job
	mid := getPage(t, base, c.AdminToken, "/v1/jobs", &first)
	var after []domain.Job
	getPage(t, base, globex, "/v1/jobs?limit=100&continue="+url.QueryEscape(mid), &after)
	if len(after) == 0 {
		t.Fatal("globex's jobs after the admin's first page: none")
	}
	for _, j := range after {
		if j.Tenant != "globex" || j.ID <= first[len(first)-1].ID {
			t.Fatalf("globex with the admin's continue token reads job %d of %s", j.ID, j.Tenant)
		}
	}

	// A limit above the most a page holds is taken as that most, not
	// refused: a client built for a higher maximum still reads its pages.
	var js []domain.Job
	if next := getPage(t, base, c.AdminToken, "/v1/jobs?limit=1000000", &js); next != "" || len(js) != 10 {
		t.Fatalf("limit=1000000: %d jobs, continue %q; want all 10 and no next page", len(js), next)
	}

	// The Go client follows the pages: every job, however small the page.
	for _, size := range []int{0, 1, 4} {
		all, err := admin.Jobs(ctxT(t), client.JobQuery{PageSize: size})
		if err != nil || len(all) != 10 {
			t.Fatalf("client.Jobs with pages of %d: %d jobs (%v), want 10", size, len(all), err)
		}
	}
}

// unchanged runs read until the state applied nothing while it ran (the
// scheduler places the jobs and writes events meanwhile), so that its
// pages and the state's own list are of one state.
func unchanged(t *testing.T, fsm *state.FSM, read func()) {
	t.Helper()
	for range 50 {
		changed := fsm.Changed()
		read()
		select {
		case <-changed:
		default:
			return
		}
	}
	t.Fatal("the state changed during each of 50 reads")
}

func jobIDs(js []domain.Job) []uint64 {
	out := make([]uint64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}
