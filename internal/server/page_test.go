package server_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
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

// TestQueueAndUsagePages: GET /v1/queue and GET /v1/usage without limit
// answer one page and the continue header (they answered every pending
// job and every row before, issue 18: this fails on the old code, one
// page). Following the headers gives exactly the one-page answer's jobs
// and rows in its order, and every page carries the whole queue's
// workspaces and the whole period's total. A tenant holding the admin's
// token, or a token it made up, reads only its own rows.
func TestQueueAndUsagePages(t *testing.T) {
	const page = 3
	c := startPaged(t, page)
	admin := c.Client(0)
	seed(t, admin)
	// Fill the 32 GPUs (4 jobs that held GPUs: usage rows), then queue
	// jobs of both tenants, the later ones of higher priority, so the
	// queue's order is not the IDs'.
	submit(t, admin, "acme", "research", 8)
	submit(t, admin, "acme", "research", 8)
	submit(t, admin, "acme", "prod", 8)
	submit(t, admin, "globex", "infer", 8)
	base, fsm := c.Servers[0].URL(), c.Servers[0].State()
	waitState(t, c.Servers[0], "the first jobs placed", func(f *state.FSM) bool {
		return len(f.Jobs(state.JobFilter{State: domain.JobPending})) == 0
	})
	for i := range 5 {
		for _, ws := range [][2]string{{"acme", "research"}, {"globex", "infer"}, {"acme", "prod"}} {
			if _, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: ws[0], Workspace: ws[1], GPUs: 8, Priority: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitState(t, c.Servers[0], "the queue ordered", func(f *state.FSM) bool {
		for _, j := range f.Jobs(state.JobFilter{State: domain.JobPending}) {
			if j.Reason == nil || j.Reason.Code == domain.ReasonQueued {
				return false
			}
		}
		return true
	})
	globex := mustToken(t, admin, domain.RoleTenantAdmin, "globex", "")
	// A period that ends in the past, so every page counts the same, and
	// starts at a fixed time: "since=1h" is an hour before each request,
	// so a first page asked a second after the whole report began a
	// second later (it failed so on a loaded CI machine).
	time.Sleep(1100 * time.Millisecond)
	until := time.Now().UTC().Truncate(time.Second)
	period := "since=" + url.QueryEscape(until.Add(-time.Hour).Format(time.RFC3339)) + "&until=" + url.QueryEscape(until.Format(time.RFC3339))

	for _, tc := range []struct {
		name, token, tenant string
	}{
		{"admin", c.AdminToken, ""},
		{"globex's admin", globex, "globex"},
	} {
		t.Run(tc.name+" queue", func(t *testing.T) {
			var whole api.Queue
			var pages []api.Queue
			unchanged(t, fsm, func() {
				if next := getPage(t, base, tc.token, "/v1/queue?limit=10000", &whole); next != "" {
					t.Fatalf("the whole queue in one page of 10000 has a next page %q", next)
				}
				pages = nil
				path := "/v1/queue"
				for {
					var q api.Queue
					next := getPage(t, base, tc.token, path, &q)
					if next != "" && len(q.Pending) != page {
						t.Fatalf("page %d holds %d jobs and has a next page; a page without limit holds %d", len(pages)+1, len(q.Pending), page)
					}
					pages = append(pages, q)
					if next == "" {
						break
					}
					path = "/v1/queue?continue=" + url.QueryEscape(next)
				}
			})
			if len(pages) < 2 {
				t.Fatalf("%d page(s) of the queue, want more than one", len(pages))
			}
			var got []domain.Job
			for i, q := range pages {
				got = append(got, q.Pending...)
				if !sameJSON(t, q.Workspaces, whole.Workspaces) {
					t.Errorf("page %d's workspaces %+v, want the whole queue's %+v", i+1, q.Workspaces, whole.Workspaces)
				}
			}
			if !sameJSON(t, got, whole.Pending) {
				t.Fatalf("the pages hold jobs %v, want %v", jobIDs(got), jobIDs(whole.Pending))
			}
			if slices.IsSortedFunc(got, func(a, b domain.Job) int { return cmp.Compare(a.ID, b.ID) }) {
				t.Fatalf("the queue %v is in ID order: the test's priorities did not reorder it", jobIDs(got))
			}
			for _, j := range got {
				if tc.tenant != "" && j.Tenant != tc.tenant {
					t.Fatalf("%s's queue holds job %d of tenant %s", tc.tenant, j.ID, j.Tenant)
				}
			}
		})
		t.Run(tc.name+" usage by job", func(t *testing.T) {
			var whole api.Usage
			if next := getPage(t, base, tc.token, "/v1/usage?by=job&limit=10000&"+period, &whole); next != "" {
				t.Fatalf("the whole report in one page of 10000 has a next page %q", next)
			}
			var rows []api.UsageRow
			var pages int
			path := "/v1/usage?by=job&limit=1&" + period
			for {
				var u api.Usage
				next := getPage(t, base, tc.token, path, &u)
				pages++
				if !sameJSON(t, u.Total, whole.Total) || !u.Since.Equal(whole.Since) || !u.Until.Equal(whole.Until) {
					t.Errorf("page %d: total %+v over %v-%v, want the whole report's %+v over %v-%v", pages, u.Total, u.Since, u.Until, whole.Total, whole.Since, whole.Until)
				}
				rows = append(rows, u.Rows...)
				if next == "" {
					break
				}
				path = "/v1/usage?by=job&limit=1&" + period + "&continue=" + url.QueryEscape(next)
			}
			if pages != len(whole.Rows) || !sameJSON(t, rows, whole.Rows) {
				t.Fatalf("%d page(s) of one row hold rows %+v, want %d: %+v", pages, rows, len(whole.Rows), whole.Rows)
			}
		})
	}

	// A continue token is a position, not a grant: globex's admin passing
	// the admin's tokens reads only globex's rows after them.
	var q api.Queue
	mid := getPage(t, base, c.AdminToken, "/v1/queue", &q)
	var gq api.Queue
	getPage(t, base, globex, "/v1/queue?limit=100&continue="+url.QueryEscape(mid), &gq)
	for _, j := range gq.Pending {
		if j.Tenant != "globex" {
			t.Fatalf("globex with the admin's queue token reads job %d of %s", j.ID, j.Tenant)
		}
	}
	for _, w := range gq.Workspaces {
		if w.Tenant != "globex" {
			t.Fatalf("globex with the admin's queue token reads workspace %s/%s", w.Tenant, w.Workspace)
		}
	}
	var u api.Usage
	umid := getPage(t, base, c.AdminToken, "/v1/usage?by=job&limit=1&"+period, &u)
	var gu api.Usage
	getPage(t, base, globex, "/v1/usage?by=job&"+period+"&continue="+url.QueryEscape(umid), &gu)
	for _, r := range gu.Rows {
		if r.Tenant != "globex" {
			t.Fatalf("globex with the admin's usage token reads job %d of %s", r.Job, r.Tenant)
		}
	}
	if gu.Total.Jobs != 1 {
		t.Errorf("globex's total with the admin's usage token counts %d jobs, want its own 1", gu.Total.Jobs)
	}
	// A made-up token of an order the server never made resumes at the
	// place it names in the current order: globex's own jobs from there.
	var gwhole, gfrom api.Queue
	unchanged(t, fsm, func() {
		getPage(t, base, globex, "/v1/queue?limit=10000", &gwhole)
		made := base64.RawURLEncoding.EncodeToString([]byte("queue:1:1:2"))
		getPage(t, base, globex, "/v1/queue?limit=10000&continue="+made, &gfrom)
	})
	if !sameJSON(t, gfrom.Pending, gwhole.Pending[2:]) {
		t.Fatalf("globex from place 2 of another order: %v, want %v", jobIDs(gfrom.Pending), jobIDs(gwhole.Pending[2:]))
	}

	// The Go client follows the pages.
	for _, size := range []int{0, 1, 4} {
		cl := c.Client(0)
		cl.PageSize = size
		all, err := cl.Queue(ctxT(t), "", "")
		if err != nil || len(all.Pending) != 15 || len(all.Workspaces) != 3 {
			t.Fatalf("client.Queue with pages of %d: %d jobs, %d workspaces (%v), want 15 and 3", size, len(all.Pending), len(all.Workspaces), err)
		}
		rep, err := cl.Usage(ctxT(t), client.UsageQuery{By: "job", Since: "1h", PageSize: size})
		if err != nil || len(rep.Rows) != 4 || rep.Total.Jobs != 4 {
			t.Fatalf("client.Usage with pages of %d: %d rows, %d jobs (%v), want 4", size, len(rep.Rows), rep.Total.Jobs, err)
		}
	}
}
