package cli

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
)

// usageAnswer is a server's answer by job: a 16-GPU job of an hour, half
// borrowed, and 2 x MIG 3g.40gb for an hour.
var usageAnswer = api.Usage{
	Since: time.Date(2026, 10, 27, 12, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), By: "job",
	Rows: []api.UsageRow{
		{Tenant: "acme", Workspace: "research", Job: 7, JobName: "llama", Token: "member:t1",
			UsageFigures: api.UsageFigures{GPUHours: 16, GPUEquivalentHours: 16, GuaranteedHours: 8, BorrowedHours: 8, Jobs: 1, GPUSeconds: 57600, UnitSeconds: 403200000}},
		{Tenant: "acme", Workspace: "research", Job: 9, JobName: "notebook", Token: "member:t1",
			UsageFigures: api.UsageFigures{GPUHours: 0, GPUEquivalentHours: 6.0 / 7, GuaranteedHours: 6.0 / 7, Jobs: 1, UnitSeconds: 21600000}},
	},
	Total: api.UsageFigures{GPUHours: 16, GPUEquivalentHours: 16 + 6.0/7, GuaranteedHours: 8 + 6.0/7, BorrowedHours: 8, Jobs: 2, GPUSeconds: 57600, UnitSeconds: 424800000},
}

// TestUsageOutputs: the flags reach the API as its query; the rows of
// every page are read (the server answers one row a page); the table has a
// column per key and a total; -o csv (encoding/csv) carries every column at
// full precision; -o json the answer as is; csv is refused elsewhere.
func TestUsageOutputs(t *testing.T) {
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/usage" {
			http.NotFound(w, r)
			return
		}
		page := usageAnswer
		q := r.URL.Query()
		if q.Get("continue") == "" {
			got = q
			page.Rows = page.Rows[:1]
			w.Header().Set(client.ContinueHeader, "second")
		} else {
			if q.Get("continue") != "second" || q.Get("since") != got.Get("since") || q.Get("by") != got.Get("by") {
				http.Error(w, "a next page without the first page's query and token: "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			page.Rows = page.Rows[1:]
		}
		w.Header().Set(client.RevisionHeader, strconv.Itoa(api.Revision))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	t.Setenv("JOBFABRIC_CONFIG", filepath.Join(t.TempDir(), "none.yaml"))
	t.Setenv("JOBFABRIC_SERVER", srv.URL)
	t.Setenv("JOBFABRIC_TOKEN", "x")
	// Flags are parsed into g (-o is given as a flag: its default would
	// replace a preset value).
	g := func() *globals { return &globals{printing: printing{loc: time.UTC}} }

	out := runWith(t, g(), "usage", "--workspace", "acme/research", "--since", "30d", "--until", "2026-11-26T12:00:00Z", "--by", "job")
	want := url.Values{"tenant": {"acme"}, "workspace": {"research"}, "since": {"30d"}, "until": {"2026-11-26T12:00:00Z"}, "by": {"job"}, "limit": {"500"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("query %v, want %v", got, want)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	wantLines := []string{
		"Usage from 2026-10-27 12:00:00 UTC to 2026-11-26 12:00:00 UTC, by job",
		"TENANT WORKSPACE JOB NAME TOKEN GPU-HOURS GPU-EQ-HOURS GUARANTEED BORROWED JOBS",
		"acme research 7 llama member:t1 16.00 16.00 8.00 8.00 1",
		"acme research 9 notebook member:t1 0.00 0.86 0.86 0.00 1",
		"TOTAL 16.00 16.86 8.86 8.00 2",
	}
	if len(lines) != len(wantLines) {
		t.Fatalf("table:\n%s", out)
	}
	for i, l := range lines {
		if strings.Join(strings.Fields(l), " ") != wantLines[i] {
			t.Errorf("table line %d: %q, want %q", i, l, wantLines[i])
		}
	}

	out = runWith(t, g(), "usage", "-o", "csv", "--tenant", "acme", "--by", "job")
	if got.Get("since") != "30d" || got.Get("by") != "job" || got.Get("tenant") != "acme" {
		t.Fatalf("defaults: query %v, want since 30d", got)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("-o csv is not CSV: %v\n%s", err, out)
	}
	wantCSV := [][]string{
		{"tenant", "workspace", "job", "job_name", "token", "gpu_hours", "gpu_equivalent_hours", "guaranteed_hours", "borrowed_hours", "jobs", "gpu_seconds", "unit_seconds"},
		{"acme", "research", "7", "llama", "member:t1", "16", "16", "8", "8", "1", "57600", "403200000"},
		{"acme", "research", "9", "notebook", "member:t1", "0", strconv.FormatFloat(6.0/7, 'f', -1, 64), strconv.FormatFloat(6.0/7, 'f', -1, 64), "0", "1", "0", "21600000"},
	}
	if !reflect.DeepEqual(recs, wantCSV) {
		t.Fatalf("csv\n got %q\nwant %q", recs, wantCSV)
	}
	if out := runWith(t, g(), "usage", "-o", "csv", "--no-headers"); strings.HasPrefix(out, "tenant,") || !strings.HasPrefix(out, "acme,research,7,") {
		t.Fatalf("-o csv --no-headers:\n%s", out)
	}

	var back api.Usage
	if err := json.Unmarshal([]byte(runWith(t, g(), "usage", "-o", "json")), &back); err != nil || !reflect.DeepEqual(back, usageAnswer) {
		t.Fatalf("-o json: %+v, %v", back, err)
	}

	if _, errs, err := runG(t.Context(), g(), "job", "list", "-o", "csv"); err == nil || !strings.Contains(err.Error()+errs, "only jobfabric usage prints csv") {
		t.Fatalf("job list -o csv: %v %s", err, errs)
	}
}

// TestUsageAgainstServer: the command reaches a real server; a tenant's
// token asking for another tenant gets not found, and bad flags come back
// as errors naming the field.
func TestUsageAgainstServer(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	setupCluster(t, env)
	if out := mustRun(t, env, "usage", "--since", "1h", "-o", "csv"); !strings.HasPrefix(out, "tenant,workspace,job,") {
		t.Fatalf("usage -o csv:\n%s", out)
	}
	mustRun(t, env, "tenant", "create", "globex", "--isolation", "gpu", "--network", "pure-rt5")
	secret := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "tenant-admin", "--tenant", "globex"))
	globex := map[string]string{"JOBFABRIC_SERVER": env["JOBFABRIC_SERVER"], "JOBFABRIC_TOKEN": secret}
	runErrCases(t, map[string]errCase{
		"another tenant": {globex, []string{"usage", "--tenant", "acme"}, "not found"},
		"bad since":      {env, []string{"usage", "--since", "yesterday"}, "since"},
		"bad until":      {env, []string{"usage", "--until", "later"}, "until"},
		"bad by":         {env, []string{"usage", "--by", "rack"}, "by"},
		"bad workspace":  {env, []string{"usage", "--workspace", "research"}, "TENANT/WORKSPACE"},
	})
	if out := mustRun(t, globex, "usage", "--by", "job"); strings.Contains(out, "acme") {
		t.Fatalf("globex's usage shows acme:\n%s", out)
	}
}
