package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestPagesFollowTheAPIPages: the API answers a list asked without limit
// one page at a time (issue 18); the console reads every page, so with
// pages of one item its pages still show every live job and every event
// of a job, oldest first, and a tenant's still only its own.
func TestPagesFollowTheAPIPages(t *testing.T) {
	f := startPaged(t, 1)
	b := f.browser(t)
	b.login(f.adminTok)
	ctx := t.Context()
	placed := func() bool {
		for _, id := range []uint64{f.acmeJob.ID, f.globexJob.ID} {
			if j, ok := f.srv.State().Job(id); !ok || j.State != domain.JobPlaced {
				return false
			}
		}
		return true
	}
	// A cycle runs after the submits; the state changes when it places.
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		changed := f.srv.State().Changed()
		if placed() {
			break
		}
		select {
		case <-changed:
		case <-wait.Done():
			t.Fatal("the fixture's jobs were not placed within 20s")
		}
	}

	live, err := f.admin.Jobs(ctx, client.JobQuery{States: liveJobStates})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) < 2 {
		t.Fatalf("%d live jobs; the fixture places both of its jobs", len(live))
	}
	for _, p := range []string{"/console/", "/console/queue"} {
		resp, page := b.do("GET", p, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", p, resp.Status)
		}
		for _, j := range live {
			if !strings.Contains(page, j.Name) {
				t.Errorf("the admin's %s lacks live job %d %s (a page of one job shows only the first)", p, j.ID, j.Name)
			}
		}
	}

	// The queue's pending jobs come a page of one at a time too (GET
	// /v1/queue answered every one before, issue 18).
	var waiting []string
	for i := range 3 {
		j, err := f.admin.SubmitJob(ctx, domain.JobSpec{Tenant: "acme", Workspace: "main", Name: "waiting-" + itoa(uint64(i)), GPUs: 8})
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, j.Name)
	}
	_, queue := b.do("GET", "/console/queue", nil, nil)
	for _, name := range waiting {
		if !strings.Contains(queue, name) {
			t.Errorf("the admin's queue lacks pending job %s (a page of one job shows only the first)", name)
		}
	}

	all, err := f.admin.Events(ctx, client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range all {
		if e.Object == "job/"+itoa(f.acmeJob.ID) {
			want = append(want, e.Action)
		}
	}
	if len(want) < 2 {
		t.Fatalf("job %d has %d events; the test needs more than a page of one", f.acmeJob.ID, len(want))
	}
	_, page := b.do("GET", "/console/jobs/"+itoa(f.acmeJob.ID), nil, nil)
	var got []string
	for _, li := range strings.Split(page, "<li><time>")[1:] {
		if a, ok := between(li, "<code>", "</code>"); ok {
			got = append(got, a)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("job page events %v, want %v", got, want)
	}

	g := f.browser(t)
	g.login(f.globexTok)
	if _, page := g.do("GET", "/console/queue", nil, nil); strings.Contains(page, "acme") || !strings.Contains(page, "globex-serving") {
		t.Errorf("globex's queue in pages of one: names acme or lacks its own job\n%s", page)
	}
}

func between(s, from, to string) (string, bool) {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return "", false
	}
	v, _, ok := strings.Cut(rest, to)
	return v, ok
}

// liveJobStates are the states the console's pages list as live
// (console.liveStates).
var liveJobStates = []domain.JobState{domain.JobPlaced, domain.JobReady, domain.JobRunning, domain.JobPreempting}
