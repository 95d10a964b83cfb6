package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/devcluster"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
	"github.com/jobfabric/jobfabric/internal/state"
)

// runningJob seeds the cluster, places an 8-GPU acme job, reports it
// running "pid 1" with a tenant runtime token and returns the runtime's
// client on server i, the token's id and the job.
func runningJob(t *testing.T, c *devcluster.Cluster, i int) (*client.Client, string, *domain.Job) {
	t.Helper()
	admin := c.Client(i)
	seed(t, admin)
	rtTok, err := admin.CreateToken(ctxT(t), tokReq(domain.RoleRuntime, "acme", ""))
	if err != nil {
		t.Fatal(err)
	}
	rt := withRetries(t, c.Servers[i].URL(), rtTok.Secret)
	j := submit(t, admin, "acme", "research", 8)
	j = waitJob(t, rt, j.ID, "Ready", isReady)
	if j, err = rt.Report(ctxT(t), j.ID, "running", "pid 1"); err != nil || j.State != domain.JobRunning {
		t.Fatalf("first running report: %v, %+v", err, j)
	}
	return rt, rtTok.Token.ID, j
}

// reportEvents counts the job's job.report events.
func reportEvents(t *testing.T, c *client.Client, id uint64) int {
	t.Helper()
	es, err := c.Events(ctxT(t), client.EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.Action == "job.report" && e.Object == fmt.Sprintf("job/%d", id) {
			n++
		}
	}
	return n
}

// TestRunningHeartbeatsStayOutOfLog: a runtime repeating "running" with no
// change (no message, or the same one) is answered from the leader's
// memory: no raft entry, no event, and the job's lastReport moves; a new
// message or an end commits exactly one entry each.
func TestRunningHeartbeatsStayOutOfLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(ctxT(t), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, t.TempDir(), 1, devcluster.Options{Logger: quietLogger(), RaftTimeout: 300 * time.Millisecond,
		Tune: func(cfg *server.Config) { cfg.TokenUseFlush = 20 * time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := c.Servers[0]
	rt, tokID, j := runningJob(t, c, 0)
	if j.LastReport == nil {
		t.Fatalf("the report's answer has no lastReport: %+v", j)
	}
	// Tokens' first uses are committed by the leader's flush loop; later
	// ones within a minute are not. Let those land before counting.
	waitState(t, srv, "tokens' first uses committed", func(f *state.FSM) bool {
		rtok, _ := f.Token(tokID)
		return rtok.LastUsedAt != nil
	})
	waitState(t, srv, "job running and deployed", func(f *state.FSM) bool {
		st := f.FabricStatus()
		for _, d := range st.Devices {
			if d.Deployed != d.DesiredHash {
				return false
			}
		}
		return true
	})
	events := reportEvents(t, c.Client(0), j.ID)
	index := srv.State().AppliedIndex()
	var last time.Time
	for i := range 50 {
		msg := ""
		if i%2 == 1 {
			msg = "pid 1" // the message the job already carries
		}
		got, err := rt.Report(ctxT(t), j.ID, "running", msg)
		if err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if got.State != domain.JobRunning || got.Message != "pid 1" || got.LastReport == nil || got.LastReport.Before(last) {
			t.Fatalf("heartbeat %d answered %s %q lastReport %v (previous %v)", i, got.State, got.Message, got.LastReport, last)
		}
		last = *got.LastReport
	}
	if got := srv.State().AppliedIndex(); got != index {
		t.Fatalf("50 unchanged running reports wrote %d raft entries, want 0", got-index)
	}
	if n := reportEvents(t, c.Client(0), j.ID); n != events {
		t.Fatalf("50 unchanged running reports wrote %d events, want 0", n-events)
	}
	read, err := rt.Job(ctxT(t), j.ID)
	if err != nil || read.LastReport == nil || !read.LastReport.Equal(last) {
		t.Fatalf("job get: lastReport %v (%v), want %v", read.LastReport, err, last)
	}

	for _, step := range []struct{ state, msg, want string }{
		{"running", "epoch 2/10", "Running"}, // a new message
		{"succeeded", "", "Succeeded"},
	} {
		index = srv.State().AppliedIndex()
		got, err := rt.Report(ctxT(t), j.ID, step.state, step.msg)
		if err != nil || string(got.State) != step.want {
			t.Fatalf("report %s %q: %v %+v", step.state, step.msg, err, got)
		}
		if d := srv.State().AppliedIndex() - index; d < 1 {
			t.Fatalf("report %s %q wrote no raft entry", step.state, step.msg)
		}
		events++
		if n := reportEvents(t, c.Client(0), j.ID); n != events {
			t.Fatalf("report %s %q: %d report events, want %d", step.state, step.msg, n, events)
		}
	}
}

// TestHeartbeatLivenessFailover: liveness is the leader's memory. After the
// leader stops, the new leader knows no last report for the job (unset,
// never stale) until its runtime reports again; unchanged heartbeats stay
// out of the log there too, and a change still commits.
func TestHeartbeatLivenessFailover(t *testing.T) {
	c := startCluster(t, 3)
	lead, err := c.WaitLeader(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	other := (lead + 1) % 3
	_, _, j := runningJob(t, c, other)
	rtTok, err := c.Client(other).CreateToken(ctxT(t), tokReq(domain.RoleRuntime, "acme", ""))
	if err != nil {
		t.Fatal(err)
	}
	// The token is committed; wait until the server the runtime will call
	// has applied it too (a follower applies a moment after the leader).
	waitState(t, c.Servers[other], "the runtime token applied", func(f *state.FSM) bool {
		_, ok := f.Token(rtTok.Token.ID)
		return ok
	})
	if err := c.Stop(lead); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rt := withRetries(t, c.Servers[other].URL(), rtTok.Secret)
	read, err := rt.Job(ctxT(t), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if read.LastReport != nil || read.State != domain.JobRunning || read.Message != "pid 1" {
		t.Fatalf("after failover: %s %q lastReport %v, want Running \"pid 1\" with no last report", read.State, read.Message, read.LastReport)
	}
	events := reportEvents(t, c.Client(other), j.ID)
	for range 10 {
		got, err := rt.Report(ctxT(t), j.ID, "running", "")
		if err != nil || got.LastReport == nil {
			t.Fatalf("heartbeat to the new leader: %v, %+v", err, got)
		}
	}
	if n := reportEvents(t, c.Client(other), j.ID); n != events {
		t.Fatalf("unchanged heartbeats after failover wrote %d report events", n-events)
	}
	if got, err := rt.Report(ctxT(t), j.ID, "failed", "exit 1"); err != nil || got.State != domain.JobFailed {
		t.Fatalf("failed report after failover: %v, %+v", err, got)
	}
	if n := reportEvents(t, c.Client(other), j.ID); n != events+1 {
		t.Fatalf("a failed report after failover wrote %d report events, want 1", n-events)
	}
}

// BenchmarkRunningReport: one runtime reporting a running job over the
// API to a single server. "unchanged" is a heartbeat (the leader's memory,
// this code); "changed" carries a new message each time, so every report
// is a raft entry, which is what every heartbeat cost before.
func BenchmarkRunningReport(b *testing.B) {
	c, err := devcluster.Start(context.Background(), b.TempDir(), 1, devcluster.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	admin := c.Client(0)
	seed(b, admin)
	tok, err := admin.CreateToken(context.Background(), tokReq(domain.RoleRuntime, "acme", ""))
	if err != nil {
		b.Fatal(err)
	}
	rt := as(b, c.Servers[0].URL(), tok.Secret)
	j, err := admin.SubmitJob(context.Background(), domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8})
	if err != nil {
		b.Fatal(err)
	}
	waitState(b, c.Servers[0], "job ready", func(f *state.FSM) bool {
		got, _ := f.Job(j.ID)
		return got.State == domain.JobReady
	})
	if _, err := rt.Report(context.Background(), j.ID, "running", "start"); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"unchanged", "changed"} {
		b.Run(mode, func(b *testing.B) {
			i := 0
			for b.Loop() {
				msg := ""
				if mode == "changed" {
					i++
					msg = fmt.Sprintf("step %d", i)
				}
				if _, err := rt.Report(context.Background(), j.ID, "running", msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
		})
	}
}
