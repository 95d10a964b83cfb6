package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
)

// withRetries is a client that retries "unavailable" like the CLI does
// (a follower may answer it until the leader has published its address).
func withRetries(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isReady(j *domain.Job) bool { return j.State == domain.JobReady }

// TestReportFlow: a tenant's runtime takes a job Ready -> Running ->
// Succeeded over HTTP; users may not report; a report the state does not
// allow is refused naming the field.
func TestReportFlow(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	url := c.Servers[0].URL()
	rtTok, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleRuntime, "acme", ""))
	if err != nil {
		t.Fatal(err)
	}
	rt := as(t, url, rtTok.Secret)
	member := as(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))

	j, err := member.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, TimeLimitSeconds: 7200, MinRuntimeSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if j.TimeLimitSeconds != 7200 || j.MinRuntimeSeconds != 600 {
		t.Fatalf("submitted job lost its limits: %+v", j)
	}
	j = waitJob(t, rt, j.ID, "Ready", isReady)
	if len(j.Placement) == 0 || j.PlacedAt == nil {
		t.Fatalf("ready job without placement: %+v", j)
	}
	if _, err := member.Report(ctxT(t), j.ID, "running", ""); domain.CodeOf(err) != domain.CodePermissionDenied {
		t.Fatalf("a member reported: %v, want permission_denied", err)
	}

	steps := []struct {
		state, message string
		want           domain.JobState
	}{
		{"running", "pid 4242", domain.JobRunning},
		{"running", "epoch 3/10", domain.JobRunning}, // heartbeat
		{"succeeded", "exit 0", domain.JobSucceeded},
	}
	for _, s := range steps {
		got, err := rt.Report(ctxT(t), j.ID, s.state, s.message)
		if err != nil {
			t.Fatalf("report %s: %v", s.state, err)
		}
		if got.State != s.want || got.Message != s.message {
			t.Fatalf("after report %s: %s %q, want %s %q", s.state, got.State, got.Message, s.want, s.message)
		}
	}
	done, _ := rt.Job(ctxT(t), j.ID)
	if done.StartedAt == nil || done.EndedAt == nil || len(done.Placement) != 0 || done.Reason.Code != "succeeded" {
		t.Fatalf("finished job = %+v: want started, ended, GPUs released, reason succeeded", done)
	}

	refused := map[string]struct {
		body      string
		wantCode  domain.Code
		wantField string
	}{
		"running after the end": {`{"state":"running"}`, domain.CodeFailedPrecondition, "state"},
		"stopped, not stopping": {`{"state":"stopped"}`, domain.CodeFailedPrecondition, "state"},
		"unknown state":         {`{"state":"done"}`, domain.CodeInvalidArgument, "state"},
		"no state":              {`{"message":"hi"}`, domain.CodeInvalidArgument, "state"},
		"unknown field":         {`{"state":"running","exitCode":0}`, domain.CodeInvalidArgument, "exitCode"},
		"long message":          {`{"state":"running","message":"` + strings.Repeat("x", 1025) + `"}`, domain.CodeInvalidArgument, "message"},
	}
	before, _ := admin.Events(ctxT(t), client.EventQuery{})
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			err := rt.Do(ctxT(t), "POST", fmt.Sprintf("/v1/jobs/%d/report", j.ID), jsonRaw(tc.body), nil)
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != tc.wantCode || de.Field != tc.wantField {
				t.Fatalf("got %v, want %s on field %q", err, tc.wantCode, tc.wantField)
			}
		})
	}
	after, _ := admin.Events(ctxT(t), client.EventQuery{})
	// The fabric loop writes its own events (the job's end is a new
	// revision): count the job's.
	ofJob := func(es []domain.Event) int {
		n := 0
		for _, e := range es {
			if e.Object == fmt.Sprintf("job/%d", j.ID) {
				n++
			}
		}
		return n
	}
	if ofJob(after) != ofJob(before) {
		t.Fatalf("refused reports wrote %d events", ofJob(after)-ofJob(before))
	}
	var reports int
	for _, e := range after {
		if e.Action == "job.report" {
			reports++
			if e.Actor != "runtime:"+rtTok.Token.ID || e.Tenant != "acme" {
				t.Fatalf("report event %+v: want the runtime as actor, tenant acme", e)
			}
		}
	}
	if reports != len(steps) {
		t.Fatalf("%d report events, want %d", reports, len(steps))
	}
}

// jsonRaw sends a body verbatim as JSON through client.Do.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// watchStates runs Watch in the background and hands over each state.
func watchStates(ctx context.Context, c *client.Client, id uint64) (<-chan domain.JobState, <-chan error) {
	states := make(chan domain.JobState, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, id, func(j *domain.Job) error {
			states <- j.State
			return nil
		})
		close(states)
	}()
	return states, done
}

// awaitState reads the stream until want arrives, returning what came.
func awaitState(t *testing.T, states <-chan domain.JobState, want domain.JobState) []domain.JobState {
	t.Helper()
	var seen []domain.JobState
	timeout := time.After(20 * time.Second)
	for {
		select {
		case s, ok := <-states:
			if !ok {
				t.Fatalf("the watch ended before %s; saw %v", want, seen)
			}
			seen = append(seen, s)
			if s == want {
				return seen
			}
		case <-timeout:
			t.Fatalf("no %s in the watch after 20s; saw %v", want, seen)
		}
	}
}

// TestWatchStream: a watch delivers every change of the job in order, as it
// happens (the next step waits for the stream to show the last), and ends
// when the job does: on the leader, and through a follower's proxy.
func TestWatchStream(t *testing.T) {
	cases := map[string]struct {
		servers  int
		follower bool
	}{
		"leader":   {servers: 1},
		"follower": {servers: 3, follower: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, tc.servers)
			leader, err := c.WaitLeader(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			admin := c.Client(leader)
			seed(t, admin)
			via := leader
			if tc.follower {
				via = (leader + 1) % tc.servers
			}
			url := c.Servers[via].URL()
			rt := withRetries(t, url, mustToken(t, admin, domain.RoleRuntime, "acme", ""))
			member := withRetries(t, url, mustToken(t, admin, domain.RoleMember, "acme", "research"))

			j, err := member.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
			if err != nil {
				t.Fatal(err)
			}
			states, done := watchStates(ctxT(t), member, j.ID)
			seen := awaitState(t, states, domain.JobReady)
			if _, err := rt.Report(ctxT(t), j.ID, "running", ""); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, awaitState(t, states, domain.JobRunning)...)
			if _, err := rt.Report(ctxT(t), j.ID, "succeeded", ""); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, awaitState(t, states, domain.JobSucceeded)...)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("watch of an ended job: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not end with the job")
			}
			// The scheduler may place the job before the watch opens; a
			// Placed job's reason changes while its network is deployed
			// (each change is an event, its state the same).
			seen = slices.Compact(seen)
			for len(seen) > 0 && (seen[0] == domain.JobPending || seen[0] == domain.JobPlaced) {
				seen = seen[1:]
			}
			if fmt.Sprint(seen) != fmt.Sprint([]domain.JobState{domain.JobReady, domain.JobRunning, domain.JobSucceeded}) {
				t.Fatalf("states %v, want [Pending] [Placed] Ready Running Succeeded", seen)
			}

			// On the wire: one event with the ended job, then the end.
			req, _ := http.NewRequestWithContext(ctxT(t), "GET", fmt.Sprintf("%s/v1/jobs/%d/watch", url, j.ID), nil)
			req.Header.Set("Authorization", "Bearer "+c.AdminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
			}
			if !strings.HasPrefix(string(body), "event: job\ndata: {") || !strings.HasSuffix(string(body), "}\n\n") ||
				strings.Count(string(body), "event: job") != 1 || !strings.Contains(string(body), `"state":"Succeeded"`) {
				t.Fatalf("stream of an ended job:\n%s", body)
			}
		})
	}
}

// TestWatchEnds: a watch ends when its client goes away, and a server
// shutting down ends its streams instead of waiting for them.
func TestWatchEnds(t *testing.T) {
	c := startCluster(t, 1)
	admin := c.Client(0)
	seed(t, admin)
	j := submit(t, admin, "acme", "research", 8)
	watcher := as(t, c.Servers[0].URL(), c.AdminToken)

	ctx, cancel := context.WithCancel(ctxT(t))
	states, done := watchStates(ctx, watcher, j.ID)
	awaitState(t, states, domain.JobReady)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the context did not end the watch")
	}

	states, done = watchStates(ctxT(t), watcher, j.ID)
	awaitState(t, states, domain.JobReady)
	start := time.Now()
	if err := c.Stop(0); err != nil {
		t.Fatalf("close with an open watch: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("close waited %v for an open watch", took)
	}
	select {
	case err := <-done:
		if domain.CodeOf(err) != domain.CodeUnavailable {
			t.Fatalf("watch of a stopped server returned %v, want unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch outlived its server")
	}
}

// TestWatchSurvivesLeaderChange: a watch through a follower is cut when the
// leader stops; the client reopens it (forwarded to the new leader) and sees
// the rest of the job's life.
func TestWatchSurvivesLeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	leader, err := c.WaitLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := c.Client(leader)
	seed(t, admin)
	follower := (leader + 1) % 3
	rtTok := mustToken(t, admin, domain.RoleRuntime, "", "")
	j := submit(t, admin, "acme", "research", 8)
	waitJob(t, admin, j.ID, "Ready", isReady)
	if _, err := withRetries(t, c.Servers[follower].URL(), rtTok).Report(ctxT(t), j.ID, "running", ""); err != nil {
		t.Fatal(err)
	}

	states, done := watchStates(ctxT(t), withRetries(t, c.Servers[follower].URL(), rtTok), j.ID)
	awaitState(t, states, domain.JobRunning)
	if err := c.Stop(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := withRetries(t, c.Servers[follower].URL(), rtTok).Report(ctxT(t), j.ID, "failed", "node lost"); err != nil {
		t.Fatal(err)
	}
	if seen := awaitState(t, states, domain.JobFailed); len(seen) != 1 {
		t.Fatalf("after the reconnect the watch showed %v, want only the new state", seen)
	}
	if err := <-done; err != nil {
		t.Fatalf("watch across a leader change: %v", err)
	}
}

// TestRuntimeStopsPreemptedJob: the runtime watches its job, sees it
// Preempting with a stop deadline, stops it and says so; the GPUs are
// released at once (not at the deadline) and the preemptible job is
// requeued and placed again.
func TestRuntimeStopsPreemptedJob(t *testing.T) {
	const grace = time.Minute
	c := startTuned(t, func(cfg *server.Config) { cfg.PreemptionGrace = grace })
	admin := c.Client(0)
	seed(t, admin)
	rt := as(t, c.Servers[0].URL(), mustToken(t, admin, domain.RoleRuntime, "acme", ""))
	j, err := admin.SubmitJob(ctxT(t), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Preemptible: true})
	if err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, rt, j.ID, "Ready", isReady)
	first := j.Placement[0].Server
	if _, err := rt.Report(ctxT(t), j.ID, "running", ""); err != nil {
		t.Fatal(err)
	}

	// The runtime's loop: stop what is told to stop, until the job is back
	// on GPUs.
	start := time.Now()
	stopped := false
	var deadline time.Time
	watchErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go func() {
		watchErr <- rt.Watch(ctx, j.ID, func(j *domain.Job) error {
			switch {
			case j.State == domain.JobPreempting && !stopped:
				deadline = *j.StopDeadline
				stopped = true
				_, err := rt.Report(ctx, j.ID, "stopped", "checkpointed")
				return err
			case j.State == domain.JobReady && stopped:
				return errors.New("placed again")
			}
			return nil
		})
	}()
	yes := true
	if err := admin.Do(ctxT(t), "PATCH", "/v1/nodes/"+first, api.NodeUpdateRequest{Draining: &yes}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-watchErr; err == nil || err.Error() != "placed again" {
		t.Fatalf("runtime loop ended with %v", err)
	}
	if took := time.Since(start); took > grace/2 {
		t.Fatalf("the job moved after %v: the stop report did not release its GPUs", took)
	}
	if d := time.Until(deadline); d < grace/2 {
		t.Fatalf("stop deadline %v away, want about the grace of %v", d, grace)
	}
	moved, _ := rt.Job(ctxT(t), j.ID)
	if moved.Requeues != 1 || moved.Placement[0].Server == first || moved.Message != "checkpointed" {
		t.Fatalf("requeued job = %+v: want 1 requeue, placed off the draining server, the runtime's message", moved)
	}
}
