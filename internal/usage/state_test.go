package usage_test

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/tstime"
	"github.com/jobfabric/jobfabric/internal/usage"
)

// fsm drives a real state machine with commands stamped by a fake clock,
// as the leader stamps them.
type fsm struct {
	t   *testing.T
	f   *state.FSM
	clk *tstime.Fake
	n   uint64
}

func (m *fsm) do(ct state.CommandType, actor string, payload any) any {
	m.t.Helper()
	b, err := state.Encode(ct, m.clk.Now(), actor, payload)
	if err != nil {
		m.t.Fatal(err)
	}
	m.n++
	r := m.f.Apply(&raft.Log{Index: m.n, Type: raft.LogCommand, Data: b}).(*state.Result)
	if r.Err != nil {
		m.t.Fatalf("%s: %v", ct, r.Err)
	}
	if pr, ok := r.Value.(*state.PlanResult); ok && len(pr.Rejected) > 0 {
		m.t.Fatalf("%s refused: %v", ct, pr.Rejected)
	}
	return r.Value
}

func (m *fsm) report(from *state.FSM, q usage.Query) *usage.Report {
	m.t.Helper()
	var rep *usage.Report
	var err error
	from.Read(func(v state.View) { rep, err = usage.Compute(v, q) })
	if err != nil {
		m.t.Fatal(err)
	}
	if q.Limit == 0 {
		m.pages(from, q, rep)
	}
	return rep
}

// pages checks the API's pages of the report (Query.After and Limit):
// pages of 1, 2 and 3 rows, each resuming after the last row of the one
// before, hold the report's rows in order, each with its total.
func (m *fsm) pages(from *state.FSM, q usage.Query, whole *usage.Report) {
	m.t.Helper()
	for _, size := range []int{1, 2, 3} {
		var rows []usage.Row
		pq := q
		pq.Limit = size
		for n := 0; ; n++ {
			var rep *usage.Report
			var err error
			from.Read(func(v state.View) { rep, err = usage.Compute(v, pq) })
			if err != nil || n > len(whole.Rows) {
				m.t.Fatalf("page %d of %d rows by %s: %v", n+1, size, q.By, err)
			}
			if rep.Total != whole.Total || len(rep.Rows) > size || (rep.More && len(rep.Rows) != size) {
				m.t.Fatalf("page %d of %d rows by %s: %d rows (more %v), total %+v; want at most %d and the whole report's total %+v",
					n+1, size, q.By, len(rep.Rows), rep.More, rep.Total, size, whole.Total)
			}
			rows = append(rows, rep.Rows...)
			if !rep.More {
				break
			}
			pq.After = &rep.Rows[len(rep.Rows)-1].Key
		}
		if !slices.Equal(rows, whole.Rows) {
			m.t.Fatalf("pages of %d rows by %s: %+v, want the report's %+v", size, q.By, rows, whole.Rows)
		}
	}
}

// TestFromReplicatedState: the figures come from the runs apply records:
// a job placed for an hour on 8 GPUs is 8 GPU-hours; a job preempted,
// requeued and placed again counts both runs and not the gap, to the
// second; a snapshot restored on another state machine answers the same.
func TestFromReplicatedState(t *testing.T) {
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	m := &fsm{t: t, f: state.New(), clk: tstime.NewFake(start)}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	m.do(state.CmdTopologyApply, "admin:root", state.TopologyApply{Topology: *topo})
	m.do(state.CmdTenantCreate, "admin:root", state.TenantCreate{Tenant: domain.Tenant{Name: "acme", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}})
	m.do(state.CmdWorkspaceCreate, "admin:root", state.WorkspaceCreate{Workspace: domain.Workspace{Tenant: "acme", Name: "research", Guaranteed: 8, BorrowLimit: 8, Weight: 1}})
	servers := topo.Servers()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}

	a := m.do(state.CmdJobSubmit, "member:tok-a", state.JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8}}).(*domain.Job).ID
	b := m.do(state.CmdJobSubmit, "member:tok-b", state.JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 8, Preemptible: true}}).(*domain.Job).ID
	m.clk.Advance(time.Minute)
	placedA := m.clk.Now()
	m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: a, Placements: []domain.Placement{{Server: servers[0].Name, GPUs: all}}}}})
	m.clk.Advance(500 * time.Millisecond) // b's run starts 0.5s into a second
	m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: b, Placements: []domain.Placement{{Server: servers[1].Name, GPUs: all}}}}})
	m.clk.Advance(time.Hour - 500*time.Millisecond)
	m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: a, State: state.ReportSucceeded})
	// b (borrowing: a held the guarantee when b was placed) is preempted
	// at a's end + 20 minutes, stops 10s later, waits 40 minutes, runs 30
	// minutes more.
	m.clk.Advance(20 * time.Minute)
	m.do(state.CmdJobsPreempt, "scheduler", state.JobsPreempt{Jobs: []state.Preemption{{ID: b, Reason: domain.Reason{Code: "reclaimed", Message: "reclaimed"}, Deadline: m.clk.Now().Add(time.Minute)}}})
	m.clk.Advance(10 * time.Second)
	m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: b, State: state.ReportStopped})
	m.clk.Advance(40 * time.Minute)
	m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: b, Placements: []domain.Placement{{Server: servers[0].Name, GPUs: all}}}}})
	m.clk.Advance(30 * time.Minute)

	q := usage.Query{Since: start, Until: start.Add(24 * time.Hour), Now: m.clk.Now(), By: usage.ByJob}
	rep := m.report(m.f, q)
	// a: 3600 s on 8 GPUs, guaranteed. b: first run from placedA+0.5s
	// (times count truncated to the second: from placedA) to its stop at
	// placedA+1h20m10s = 4810 s,
	// borrowed (a held the 8 guaranteed GPUs); second run 1800 s, still
	// held, within the guarantee (a had ended).
	want := []usage.Figures{
		{GPUSeconds: 8 * 3600, UnitSeconds: 8 * 7000 * 3600, Jobs: 1},
		{GPUSeconds: 8 * (4810 + 1800), UnitSeconds: 8 * 7000 * (4810 + 1800), BorrowedUnitSeconds: 8 * 7000 * 4810, Jobs: 1},
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Job != a || rep.Rows[1].Job != b {
		t.Fatalf("rows %+v, want jobs %d and %d", rep.Rows, a, b)
	}
	for i, w := range want {
		if rep.Rows[i].Figures != w {
			t.Errorf("job %d: %+v, want %+v", rep.Rows[i].Job, rep.Rows[i].Figures, w)
		}
	}
	if got := rep.Rows[0].GPUHours(); got != 8 {
		t.Errorf("job %d placed at %s for an hour on 8 GPUs: %v GPU-hours, want 8", a, placedA.Format(time.TimeOnly), got)
	}
	if tok := rep.Rows[1].Token; tok != "member:tok-b" {
		t.Errorf("job %d's token %q, want its submitter member:tok-b", b, tok)
	}

	// The same answer from a state machine restored from a snapshot.
	snap, err := m.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := state.New()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	again := m.report(restored, q)
	if len(again.Rows) != len(rep.Rows) || again.Total != rep.Total {
		t.Fatalf("restored state answers %+v, want %+v", again.Total, rep.Total)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// TestReportUnchangedByRetention: usage over periods that span jobs
// retention removed is identical, row for row and by every grouping,
// before and after removal (the removed jobs' runs are in the archive);
// and a tenant's report holds none of another tenant's archived jobs.
func TestReportUnchangedByRetention(t *testing.T) {
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	m := &fsm{t: t, f: state.New(), clk: tstime.NewFake(start)}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	m.do(state.CmdTopologyApply, "admin:root", state.TopologyApply{Topology: *topo})
	for _, ten := range []string{"acme", "beta"} {
		m.do(state.CmdTenantCreate, "admin:root", state.TenantCreate{Tenant: domain.Tenant{Name: ten, Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}})
		m.do(state.CmdWorkspaceCreate, "admin:root", state.WorkspaceCreate{Workspace: domain.Workspace{Tenant: ten, Name: "ws", Guaranteed: 4, BorrowLimit: 8, Weight: 1}})
	}
	servers := topo.Servers()
	// Jobs of both tenants, on odd fractions of a second, some preempted
	// and run again, some never placed, one still running at the end.
	var live uint64
	for i := range 12 {
		ten := []string{"acme", "beta"}[i%2]
		gpus := 2 + i%3*2
		id := m.do(state.CmdJobSubmit, "member:tok-"+ten+string(rune('a'+i%3)), state.JobSubmit{Spec: domain.JobSpec{Tenant: ten, Workspace: "ws", GPUs: gpus, Preemptible: true}}).(*domain.Job).ID
		m.clk.Advance(time.Duration(i)*7*time.Minute + 300*time.Millisecond)
		if i%5 == 4 {
			m.do(state.CmdJobCancel, "member:x", state.JobCancel{ID: id})
			continue
		}
		gs := make([]int, gpus)
		for k := range gs {
			gs[k] = k
		}
		m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: id, Placements: []domain.Placement{{Server: servers[i%2].Name, GPUs: gs}}}}})
		m.clk.Advance(time.Duration(20+i*3)*time.Minute + 700*time.Millisecond)
		if i%4 == 1 {
			m.do(state.CmdJobsPreempt, "scheduler", state.JobsPreempt{Jobs: []state.Preemption{{ID: id, Reason: domain.Reason{Code: "reclaimed", Message: "reclaimed"}, Deadline: m.clk.Now().Add(time.Minute)}}})
			m.clk.Advance(1500 * time.Millisecond)
			m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: id, State: state.ReportStopped})
			m.clk.Advance(13 * time.Minute)
			m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: id, Placements: []domain.Placement{{Server: servers[i%2].Name, GPUs: gs}}}}})
			m.clk.Advance(17*time.Minute + 100*time.Millisecond)
		}
		if i == 11 {
			live = id
			break
		}
		m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: id, State: state.ReportSucceeded})
	}
	end := m.clk.Now()
	m.clk.Advance(3 * time.Hour)

	type period struct{ since, until time.Time }
	periods := []period{
		{start, end.Add(time.Hour)},
		{start.Add(95*time.Minute + 500*time.Millisecond), start.Add(5 * time.Hour)},
		{start.Add(2 * time.Hour), start.Add(2*time.Hour + 17*time.Second)},
		{start.Add(-time.Hour), start.Add(30 * time.Minute)},
	}
	var queries []usage.Query
	for _, p := range periods {
		for _, by := range usage.Bys {
			for _, scope := range [][2]string{{"", ""}, {"acme", ""}, {"beta", "ws"}} {
				queries = append(queries, usage.Query{Tenant: scope[0], Workspace: scope[1], Since: p.since, Until: p.until, Now: m.clk.Now(), By: by})
			}
		}
	}
	before := make([]*usage.Report, len(queries))
	for i, q := range queries {
		before[i] = m.report(m.f, q)
	}
	if before[0].Total.Jobs < 8 {
		t.Fatalf("the setup ran %d jobs, want at least 8", before[0].Total.Jobs)
	}
	snap := func(f *state.FSM) []byte {
		s, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &memSink{}
		if err := s.Persist(sink); err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()
	}
	base := snap(m.f)

	for _, tc := range []struct {
		name string
		p    state.Retain
	}{
		{"by age, all ended", state.Retain{JobsEndedBefore: m.clk.Now()}},
		{"by age, half", state.Retain{JobsEndedBefore: start.Add(3 * time.Hour)}},
		{"one a tenant", state.Retain{JobsPerTenant: 1}},
		{"twice", state.Retain{JobsPerTenant: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := state.New()
			if err := f.Restore(io.NopCloser(bytes.NewReader(base))); err != nil {
				t.Fatal(err)
			}
			m := &fsm{t: t, f: f, clk: m.clk, n: m.n}
			r := m.do(state.CmdRetain, "system", tc.p).(state.Retained)
			if tc.name == "twice" {
				r2 := m.do(state.CmdRetain, "system", state.Retain{JobsEndedBefore: m.clk.Now()}).(state.Retained)
				r.Jobs += r2.Jobs
			}
			if r.Jobs == 0 {
				t.Fatal("retention removed no job: the test proves nothing")
			}
			if _, ok := f.Job(live); !ok {
				t.Fatalf("the running job %d was removed", live)
			}
			// Through a snapshot too: the archive travels with it.
			restored := state.New()
			if err := restored.Restore(io.NopCloser(bytes.NewReader(snap(f)))); err != nil {
				t.Fatal(err)
			}
			for i, q := range queries {
				got := m.report(restored, q)
				if !reflect.DeepEqual(got, before[i]) {
					t.Fatalf("%s by %s of %q/%q over [%s, %s): after removing %d jobs\n%+v\nbefore\n%+v",
						tc.name, q.By, q.Tenant, q.Workspace, q.Since.Format(time.TimeOnly), q.Until.Format(time.TimeOnly), r.Jobs, got, before[i])
				}
				for _, row := range got.Rows {
					if q.Tenant != "" && row.Tenant != q.Tenant {
						t.Fatalf("%s's report holds %s's row %+v", q.Tenant, row.Tenant, row)
					}
				}
			}
		})
	}
}

// TestRequeuedJobKeepsItsLastRuns: a job preempted and placed again 40
// times keeps at most domain.MaxJobRuns runs, the older ones moved to the
// usage archive; its usage, by every grouping and over periods before,
// across and after the move, is still every run's to the second, counted
// as one job; and so after retention removes it, and through a snapshot.
func TestRequeuedJobKeepsItsLastRuns(t *testing.T) {
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	m := &fsm{t: t, f: state.New(), clk: tstime.NewFake(start)}
	topo, err := topology.Generate(topology.GenerateOptions{Stripes: 1, ServersPerStripe: 2, GPUsPerServer: 8})
	if err != nil {
		t.Fatal(err)
	}
	m.do(state.CmdTopologyApply, "admin:root", state.TopologyApply{Topology: *topo})
	m.do(state.CmdTenantCreate, "admin:root", state.TenantCreate{Tenant: domain.Tenant{Name: "acme", Isolation: domain.IsolationGPU, Network: domain.NetworkPureRT5}})
	m.do(state.CmdWorkspaceCreate, "admin:root", state.WorkspaceCreate{Workspace: domain.Workspace{Tenant: "acme", Name: "research", Guaranteed: 8, BorrowLimit: 8, Weight: 1}})
	servers := topo.Servers()
	gs := []int{0, 1, 2, 3}
	other := m.do(state.CmdJobSubmit, "member:tok-a", state.JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 4}}).(*domain.Job).ID
	m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: other, Placements: []domain.Placement{{Server: servers[1].Name, GPUs: gs}}}}})
	id := m.do(state.CmdJobSubmit, "member:tok-b", state.JobSubmit{Spec: domain.JobSpec{Tenant: "acme", Workspace: "research", GPUs: 4, Preemptible: true}}).(*domain.Job).ID
	// Each run, to the second (what usage counts).
	type span struct{ start, end int64 }
	var spans []span
	const placements = 40
	for i := range placements {
		m.clk.Advance(time.Duration(7+i%5)*time.Minute + 300*time.Millisecond)
		s := m.clk.Now().Unix()
		m.do(state.CmdJobsPlace, "scheduler", state.JobsPlace{Jobs: []state.JobPlacement{{ID: id, Placements: []domain.Placement{{Server: servers[0].Name, GPUs: gs}}}}})
		m.clk.Advance(time.Duration(20+i%7)*time.Minute + 900*time.Millisecond)
		if i == placements-1 {
			spans = append(spans, span{s, -1}) // still running
			break
		}
		m.do(state.CmdJobsPreempt, "scheduler", state.JobsPreempt{Jobs: []state.Preemption{{ID: id, Reason: domain.Reason{Code: "reclaimed", Message: "reclaimed"}, Deadline: m.clk.Now().Add(time.Minute)}}})
		m.clk.Advance(1500 * time.Millisecond)
		spans = append(spans, span{s, m.clk.Now().Unix()})
		m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: id, State: state.ReportStopped})
	}
	j, ok := m.f.Job(id)
	if !ok {
		t.Fatalf("job %d gone", id)
	}
	if len(j.Runs) > domain.MaxJobRuns || j.RunsArchived == 0 || j.RunsArchived+len(j.Runs) != placements {
		t.Fatalf("job %d placed %d times keeps %d runs with %d archived; want at most %d kept, the rest archived", id, placements, len(j.Runs), j.RunsArchived, domain.MaxJobRuns)
	}
	firstKept := j.Runs[0].Start.Unix()
	now := m.clk.Now()
	// want is job id's figures over [since, until), from spans.
	want := func(since, until time.Time) usage.Figures {
		var f usage.Figures
		for _, s := range spans {
			e := s.end
			if e < 0 {
				e = min(now.Unix(), until.Unix())
			}
			lo, hi := max(s.start, since.Unix()), min(e, until.Unix())
			if hi > lo {
				f.GPUSeconds += 4 * (hi - lo)
				f.UnitSeconds += 4 * 7000 * (hi - lo)
				f.Jobs = 1
			}
		}
		return f
	}
	periods := [][2]time.Time{
		{start, now.Add(time.Hour)},                                          // all of it
		{start, time.Unix(firstKept, 0).Add(-time.Minute)},                   // archived runs only
		{time.Unix(firstKept, 0).Add(-2 * time.Hour), now},                   // across the move
		{time.Unix(firstKept, 0).Add(time.Hour + 500*time.Millisecond), now}, // kept runs only
	}
	check := func(what string, f *state.FSM) {
		t.Helper()
		for _, p := range periods {
			w := want(p[0], p[1])
			for _, by := range usage.Bys {
				rep := m.report(f, usage.Query{Since: p[0], Until: p[1], Now: now, By: by})
				var got usage.Figures
				rows := 0
				for _, r := range rep.Rows {
					if by == usage.ByJob && r.Job == id || by == usage.ByToken && r.Token == "member:tok-b" {
						got.GPUSeconds += r.GPUSeconds
						got.UnitSeconds += r.UnitSeconds
						got.BorrowedUnitSeconds += r.BorrowedUnitSeconds
						got.Jobs += r.Jobs
						rows++
					}
				}
				if by == usage.ByJob || by == usage.ByToken {
					if rows != 1 || got != w {
						t.Errorf("%s, %s to %s by %s: job %d in %d rows, %+v; want one row, %+v", what, p[0].Format(time.DateTime), p[1].Format(time.DateTime), by, id, rows, got, w)
					}
				}
				const otherJobs = 1 // other holds GPUs from the start on
				if rep.Total.Jobs != w.Jobs+otherJobs {
					t.Errorf("%s, %s to %s by %s: %d jobs in all, want %d", what, p[0].Format(time.DateTime), p[1].Format(time.DateTime), by, rep.Total.Jobs, w.Jobs+otherJobs)
				}
			}
		}
	}
	check("live", m.f)
	snap := func(f *state.FSM) *state.FSM {
		s, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &memSink{}
		if err := s.Persist(sink); err != nil {
			t.Fatal(err)
		}
		r := state.New()
		if err := r.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatal(err)
		}
		return r
	}
	check("restored", snap(m.f))

	// The job ends and retention removes it: its last runs join the
	// archive, and the report is the same.
	m.do(state.CmdJobReport, "runtime:rt", state.JobReport{ID: id, State: state.ReportSucceeded})
	spans[len(spans)-1].end = m.clk.Now().Unix()
	m.clk.Advance(time.Hour)
	if r := m.do(state.CmdRetain, "system", state.Retain{JobsEndedBefore: m.clk.Now()}).(state.Retained); r.Jobs != 1 {
		t.Fatalf("retention removed %d jobs, want job %d", r.Jobs, id)
	}
	if _, ok := m.f.Job(id); ok {
		t.Fatalf("job %d not removed", id)
	}
	check("removed", m.f)
	check("removed, restored", snap(m.f))
}
