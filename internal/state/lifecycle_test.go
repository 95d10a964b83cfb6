package state

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// advance moves the harness clock: the next command is applied d (plus the
// usual second) later.
func (h *harness) advance(d time.Duration) { h.at = h.at.Add(d) }

// grace is the stop deadline lifecycleAt gives a Preempting job, counted
// from its preempt command.
const grace = 30 * time.Second

// lifecycleAt seeds 4 servers of 8 GPUs and brings job 1 (8 GPUs on the
// first server) to state st through the commands that lead there.
func lifecycleAt(t *testing.T, st domain.JobState, job *jobB) *harness {
	t.Helper()
	h := newHarness(t).cluster(1, 4, 16)
	h.must(CmdJobSubmit, job.Obj())
	steps := map[domain.JobState][]func(){
		domain.JobPending: nil,
		domain.JobReady:   {h.placeFirst},
		domain.JobRunning: {h.placeFirst, h.report(ReportRunning)},
		domain.JobPreempting: {h.placeFirst, h.report(ReportRunning), func() {
			h.must(CmdJobsPreempt, JobsPreempt{Jobs: []Preemption{{ID: 1, Reason: domain.Reason{Code: "reclaim", Message: "reclaimed"}, Deadline: h.at.Add(time.Second + grace), ForJob: 9}}})
		}},
		domain.JobSucceeded: {h.placeFirst, h.report(ReportRunning), h.report(ReportSucceeded)},
		domain.JobCancelled: {func() { h.must(CmdJobCancel, JobCancel{ID: 1}) }},
	}
	fns, ok := steps[st]
	if !ok {
		t.Fatalf("lifecycleAt has no way to %s", st)
	}
	for _, f := range fns {
		f()
	}
	if j, _ := h.f.Job(1); j.State != st {
		t.Fatalf("setup: job 1 is %s, want %s", j.State, st)
	}
	return h
}

var eightGPUs = []int{0, 1, 2, 3, 4, 5, 6, 7}

func (h *harness) firstServer() string {
	return h.f.Topology().Topology.Sites[0].Fabrics[0].Servers[0].Name
}

func (h *harness) placeFirst() {
	h.t.Helper()
	res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: h.firstServer(), GPUs: eightGPUs}}}}}).(*PlanResult)
	if len(res.Placed) != 1 {
		h.t.Fatalf("place job 1: %+v", res)
	}
}

func (h *harness) report(st string) func() {
	return func() { h.t.Helper(); h.must(CmdJobReport, JobReport{ID: 1, State: st}) }
}

// gpusFree checks that the first server's GPUs can be given to a new job.
func (h *harness) gpusFree() bool {
	h.t.Helper()
	id := h.must(CmdJobSubmit, MakeJob("research", 8).Obj()).(*domain.Job).ID
	res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: id, Placements: []domain.Placement{{Server: h.firstServer(), GPUs: eightGPUs}}}}}).(*PlanResult)
	return len(res.Placed) == 1
}

// replays checks determinism: the log applied to a fresh FSM gives the
// same bytes.
func (h *harness) replays() {
	h.t.Helper()
	r := New()
	for i, b := range h.log {
		r.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b})
	}
	s, _ := r.Snapshot()
	if !bytes.Equal(snapshotBytes(h.t, s), h.snapshot()) {
		h.t.Fatal("replaying the log gives another state")
	}
}

// refusedChangesNothing applies a command that must be refused (an error,
// or a plan result rejecting every entry) and checks the state did not move.
func (h *harness) refusedChangesNothing(ct CommandType, payload any) *Result {
	h.t.Helper()
	before := h.snapshot()
	r := h.apply(ct, payload)
	if res, ok := r.Value.(*PlanResult); ok && len(res.Placed) != 0 {
		h.t.Fatalf("%s was not refused: %+v", ct, res)
	}
	if r.Err == nil && r.Value == nil {
		h.t.Fatalf("%s: no result", ct)
	}
	if !bytes.Equal(before, h.snapshot()) {
		h.t.Fatalf("refused %s changed the state", ct)
	}
	return r
}

func TestJobReport(t *testing.T) {
	cases := map[string]struct {
		from      domain.JobState
		job       *jobB
		report    JobReport
		want      domain.JobState
		wantCode  domain.Code
		wantField string
		check     func(t *testing.T, h *harness, j *domain.Job)
	}{
		"ready, running": {from: domain.JobReady, report: JobReport{State: ReportRunning, Message: "started"}, want: domain.JobRunning,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.StartedAt == nil || !j.StartedAt.Equal(h.at) || j.Reason != nil || j.Message != "started" || len(j.Placement) != 1 {
					t.Fatalf("started job = %+v: want StartedAt now, no reason, the message, its placement", j)
				}
			}},
		"running, running again is a heartbeat": {from: domain.JobRunning, report: JobReport{State: ReportRunning, Message: "epoch 2"}, want: domain.JobRunning,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.StartedAt == nil || j.StartedAt.Equal(h.at) || j.Message != "epoch 2" || !j.UpdatedAt.Equal(h.at) {
					t.Fatalf("heartbeat = %+v: want the first StartedAt kept, the new message, UpdatedAt now", j)
				}
			}},
		"running, succeeded frees the GPUs": {from: domain.JobRunning, report: JobReport{State: ReportSucceeded}, want: domain.JobSucceeded,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.EndedAt == nil || len(j.Placement) != 0 || j.Reason == nil || j.Reason.Code != ReportSucceeded {
					t.Fatalf("succeeded job = %+v: want EndedAt, no placement, reason succeeded", j)
				}
				if !h.gpusFree() {
					t.Fatal("a succeeded job's GPUs are still held")
				}
			}},
		"ready, failed before it ran": {from: domain.JobReady, report: JobReport{State: ReportFailed, Message: "image pull"}, want: domain.JobFailed},
		"preempting, running is a heartbeat": {from: domain.JobPreempting, report: JobReport{State: ReportRunning}, want: domain.JobPreempting,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.StopDeadline == nil || len(j.Placement) != 1 {
					t.Fatalf("heartbeat of a Preempting job = %+v: want its deadline and GPUs kept", j)
				}
			}},
		"preempting, succeeded": {from: domain.JobPreempting, report: JobReport{State: ReportSucceeded}, want: domain.JobSucceeded,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.StopDeadline != nil {
					t.Fatalf("ended job keeps a stop deadline: %+v", j)
				}
			}},
		"preempting, stopped requeues a preemptible job": {from: domain.JobPreempting, job: MakeJob("research", 8).Preemptible(), report: JobReport{State: ReportStopped}, want: domain.JobPending,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.Requeues != 1 || len(j.Placement) != 0 || j.StopDeadline != nil || j.PlacedAt != nil || j.StartedAt != nil || j.EndedAt != nil || j.Reason == nil || j.Reason.Code != "requeued" {
					t.Fatalf("requeued job = %+v", j)
				}
				// It can be placed again.
				res := h.must(CmdJobsPlace, JobsPlace{Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: h.firstServer(), GPUs: eightGPUs}}}}}).(*PlanResult)
				if len(res.Placed) != 1 {
					t.Fatalf("requeued job not placeable: %+v", res)
				}
			}},
		"preempting, stopped ends a job that is not preemptible": {from: domain.JobPreempting, report: JobReport{State: ReportStopped}, want: domain.JobPreempted,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.EndedAt == nil || len(j.Placement) != 0 || j.Reason == nil || j.Reason.Code != "preempted" || j.Requeues != 0 {
					t.Fatalf("preempted job = %+v", j)
				}
				if !h.gpusFree() {
					t.Fatal("a preempted job's GPUs are still held")
				}
			}},

		"ready, rejected requeues it: pending, GPUs free, no failure": {from: domain.JobReady,
			report: JobReport{State: ReportRejected, Message: "slurm job 7 stayed pending on gpu1: ReqNodeNotAvail"}, want: domain.JobPending,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.EndedAt != nil || len(j.Placement) != 0 || j.PlacedAt != nil || j.Requeues != 1 || j.Reason == nil || j.Reason.Code != "requeued" ||
					!strings.Contains(j.Reason.Message, "ReqNodeNotAvail") || !strings.Contains(j.Reason.Message, "admin:test") {
					t.Fatalf("rejected job = %+v (reason %+v)", j, j.Reason)
				}
				if len(j.Runs) != 1 || j.Runs[0].End == nil {
					t.Fatalf("the rejected placement's run is not ended: %+v", j.Runs)
				}
				if !h.gpusFree() {
					t.Fatal("a rejected job's GPUs are still held")
				}
			}},
		"ready, rejected without a message": {from: domain.JobReady, report: JobReport{State: ReportRejected}, wantCode: domain.CodeInvalidArgument, wantField: "message"},
		"running, rejected":                 {from: domain.JobRunning, report: JobReport{State: ReportRejected, Message: "x"}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"pending, rejected":                 {from: domain.JobPending, report: JobReport{State: ReportRejected, Message: "x"}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"preempting, rejected":              {from: domain.JobPreempting, report: JobReport{State: ReportRejected, Message: "x"}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"pending, running":                  {from: domain.JobPending, report: JobReport{State: ReportRunning}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"pending, succeeded":                {from: domain.JobPending, report: JobReport{State: ReportSucceeded}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"ready, stopped":                    {from: domain.JobReady, report: JobReport{State: ReportStopped}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"running, stopped":                  {from: domain.JobRunning, report: JobReport{State: ReportStopped}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"succeeded, running":                {from: domain.JobSucceeded, report: JobReport{State: ReportRunning}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"succeeded, failed":                 {from: domain.JobSucceeded, report: JobReport{State: ReportFailed}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"cancelled, stopped":                {from: domain.JobCancelled, report: JobReport{State: ReportStopped}, wantCode: domain.CodeFailedPrecondition, wantField: "state"},
		"unknown state":                     {from: domain.JobRunning, report: JobReport{State: "done"}, wantCode: domain.CodeInvalidArgument, wantField: "state"},
		"empty state":                       {from: domain.JobRunning, report: JobReport{}, wantCode: domain.CodeInvalidArgument, wantField: "state"},
		"long message":                      {from: domain.JobRunning, report: JobReport{State: ReportRunning, Message: strings.Repeat("x", 1025)}, wantCode: domain.CodeInvalidArgument, wantField: "message"},
		"unknown job":                       {from: domain.JobRunning, report: JobReport{ID: 42, State: ReportRunning}, wantCode: domain.CodeNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := tc.job
			if job == nil {
				job = MakeJob("research", 8)
			}
			h := lifecycleAt(t, tc.from, job)
			rep := tc.report
			if rep.ID == 0 {
				rep.ID = 1
			}
			if tc.wantCode != "" {
				r := h.refusedChangesNothing(CmdJobReport, rep)
				if r.Err == nil || r.Err.Code != tc.wantCode || r.Err.Field != tc.wantField {
					t.Fatalf("got %v, want code %s field %q", r.Err, tc.wantCode, tc.wantField)
				}
				return
			}
			j := h.must(CmdJobReport, rep).(*domain.Job)
			if j.State != tc.want {
				t.Fatalf("reported %s from %s: job is %s, want %s", rep.State, tc.from, j.State, tc.want)
			}
			if es := h.f.Events(EventFilter{Limit: 1}); es[0].Action != "job.report" || es[0].Object != "job/1" || es[0].Actor != "admin:test" {
				t.Fatalf("last event %+v, want the report", es[0])
			}
			if tc.check != nil {
				tc.check(t, h, j)
			}
			h.replays()
		})
	}
}

func TestJobsPreempt(t *testing.T) {
	cases := map[string]struct {
		from domain.JobState
		id   uint64
		ok   bool
	}{
		"running":           {from: domain.JobRunning, ok: true},
		"ready":             {from: domain.JobReady, ok: true},
		"pending":           {from: domain.JobPending},
		"already stopping":  {from: domain.JobPreempting},
		"ended":             {from: domain.JobSucceeded},
		"unknown job":       {from: domain.JobRunning, id: 42},
		"cancelled pending": {from: domain.JobCancelled},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := lifecycleAt(t, tc.from, MakeJob("research", 8))
			id := tc.id
			if id == 0 {
				id = 1
			}
			deadline, backoff := h.at.Add(time.Minute), h.at.Add(time.Hour)
			cmd := JobsPreempt{Jobs: []Preemption{{ID: id, Reason: domain.Reason{Code: "priority", Message: "a higher-priority job needs its GPUs"}, Deadline: deadline, ForJob: 7, BorrowBackoff: &backoff}}}
			if !tc.ok {
				r := h.refusedChangesNothing(CmdJobsPreempt, cmd)
				if r.Err != nil || r.Value.(*PlanResult).Rejected[id] == "" {
					t.Fatalf("got %v %+v, want job %d rejected in the result", r.Err, r.Value, id)
				}
				return
			}
			res := h.must(CmdJobsPreempt, cmd).(*PlanResult)
			j, _ := h.f.Job(1)
			if len(res.Placed) != 1 || j.State != domain.JobPreempting || j.StopDeadline == nil || !j.StopDeadline.Equal(deadline) ||
				j.Reason.Code != "priority" || j.PreemptedFor != 7 || j.BorrowNotBefore == nil || !j.BorrowNotBefore.Equal(backoff) || len(j.Placement) != 1 {
				t.Fatalf("preempted job = %+v (result %+v): want Preempting by the deadline, GPUs kept until then", j, res)
			}
			h.replays()
		})
	}
}

func TestJobsRelease(t *testing.T) {
	const limit = 3600
	cases := map[string]struct {
		from    domain.JobState
		job     *jobB
		advance time.Duration
		release Release
		want    domain.JobState // "" when the release is refused
		check   func(t *testing.T, h *harness, j *domain.Job)
	}{
		"at the deadline a preemptible job is requeued": {from: domain.JobPreempting, job: MakeJob("research", 8).Preemptible(), advance: grace - time.Second,
			release: Release{Cause: "deadline"}, want: domain.JobPending,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.Requeues != 1 || len(j.Placement) != 0 || j.StopDeadline != nil || j.Reason.Code != "requeued" || j.EndedAt != nil {
					t.Fatalf("requeued job = %+v", j)
				}
				if !h.gpusFree() {
					t.Fatal("released GPUs are still held")
				}
			}},
		"at the deadline a job that is not preemptible ends Preempted": {from: domain.JobPreempting, advance: grace - time.Second,
			release: Release{Cause: "deadline"}, want: domain.JobPreempted,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.Requeues != 0 || j.EndedAt == nil || len(j.Placement) != 0 || j.Reason.Code != "preempted" {
					t.Fatalf("preempted job = %+v", j)
				}
			}},
		"after the deadline": {from: domain.JobPreempting, advance: time.Hour, release: Release{Cause: "deadline"}, want: domain.JobPreempted},
		"before the deadline": {from: domain.JobPreempting, job: MakeJob("research", 8).Preemptible(), advance: grace - 3*time.Second,
			release: Release{Cause: "deadline"}},
		"deadline of a running job": {from: domain.JobRunning, advance: time.Hour, release: Release{Cause: "deadline"}},
		"time limit reached": {from: domain.JobRunning, job: MakeJob("research", 8).TimeLimit(limit), advance: limit * time.Second,
			release: Release{Cause: "time_limit"}, want: domain.JobFailed,
			check: func(t *testing.T, h *harness, j *domain.Job) {
				if j.Reason.Code != "time_limit" || !strings.Contains(j.Reason.Message, "1h0m0s") || j.EndedAt == nil || len(j.Placement) != 0 {
					t.Fatalf("timed-out job = %+v", j)
				}
			}},
		"time limit of a job that never started": {from: domain.JobReady, job: MakeJob("research", 8).TimeLimit(limit), advance: limit * time.Second,
			release: Release{Cause: "time_limit"}, want: domain.JobFailed},
		"time limit not reached": {from: domain.JobRunning, job: MakeJob("research", 8).TimeLimit(limit), advance: (limit - 10) * time.Second,
			release: Release{Cause: "time_limit"}},
		"no time limit":         {from: domain.JobRunning, advance: 300 * 24 * time.Hour, release: Release{Cause: "time_limit"}},
		"time limit of pending": {from: domain.JobPending, job: MakeJob("research", 8).TimeLimit(limit), advance: 2 * limit * time.Second, release: Release{Cause: "time_limit"}},
		// A Preempting job past its limit is released by its deadline.
		"time limit of a preempting job": {from: domain.JobPreempting, job: MakeJob("research", 8).TimeLimit(limit), advance: limit * time.Second, release: Release{Cause: "time_limit"}},
		"unknown cause":                  {from: domain.JobPreempting, advance: time.Hour, release: Release{Cause: "boredom"}},
		"unknown job":                    {from: domain.JobPreempting, advance: time.Hour, release: Release{ID: 42, Cause: "deadline"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := tc.job
			if job == nil {
				job = MakeJob("research", 8)
			}
			h := lifecycleAt(t, tc.from, job)
			h.advance(tc.advance)
			rl := tc.release
			if rl.ID == 0 {
				rl.ID = 1
			}
			cmd := JobsRelease{Jobs: []Release{rl}}
			if tc.want == "" {
				r := h.refusedChangesNothing(CmdJobsRelease, cmd)
				if r.Err != nil || r.Value.(*PlanResult).Rejected[rl.ID] == "" {
					t.Fatalf("got %v %+v, want job %d rejected in the result", r.Err, r.Value, rl.ID)
				}
				return
			}
			res := h.must(CmdJobsRelease, cmd).(*PlanResult)
			j, _ := h.f.Job(1)
			if len(res.Placed) != 1 || j.State != tc.want {
				t.Fatalf("released job is %s (result %+v), want %s", j.State, res, tc.want)
			}
			if es := h.f.Events(EventFilter{Limit: 1}); es[0].Action != "job.release" || !strings.HasPrefix(es[0].Message, rl.Cause) {
				t.Fatalf("last event %+v, want the release", es[0])
			}
			if tc.check != nil {
				tc.check(t, h, j)
			}
			h.replays()
		})
	}
}
