package state

import (
	"fmt"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// Lifecycle commands after placement: a runtime's reports, preemption
// (graceful: Preempting with a deadline) and release (at the deadline or
// the time limit). The leader decides when; Apply only checks and records.
// Their command types and payloads are in command.go.

func (f *FSM) applyJobReport(c *Command) (any, *domain.Error) {
	p, derr := decode[JobReport](c)
	if derr != nil {
		return nil, derr
	}
	j, ok := f.d.Jobs[p.ID]
	if !ok {
		return nil, domain.NotFound("job", fmt.Sprint(p.ID))
	}
	if len(p.Message) > 1024 {
		return nil, domain.Invalid("message", "message is %d characters; the limit is 1024", len(p.Message))
	}
	at := c.At
	// The switch decides the transition; it runs after the check line.
	var move func()
	switch {
	case p.State == ReportRunning && j.State == domain.JobReady:
		move = func() {
			j.State, j.StartedAt = domain.JobRunning, &at
			j.Reason = nil
		}
	case p.State == ReportRunning && (j.State == domain.JobRunning || j.State == domain.JobPreempting):
		move = func() {} // a repeated heartbeat: nothing changes but the message
	case (p.State == ReportSucceeded || p.State == ReportFailed) && (j.State == domain.JobReady || j.State == domain.JobRunning || j.State == domain.JobPreempting):
		st := domain.JobSucceeded
		if p.State == ReportFailed {
			st = domain.JobFailed
		}
		move = func() {
			f.end(j, st, &domain.Reason{Code: p.State, Message: "reported " + p.State + " by " + c.Actor}, at)
		}
	case p.State == ReportStopped && j.State == domain.JobPreempting:
		move = func() { f.stopPreempted(j, "stopped before its deadline (reported by "+c.Actor+")", at) }
	case p.State == ReportRejected && c.rules() < RulesRuntimeNodes:
		// Refused as the binaries before it refused an unknown state.
		return nil, domain.Invalid("state", "state %q is not one of running, succeeded, failed, stopped (the cluster applies rules %d: rejected needs %d, once every member runs a binary with it)", p.State, c.rules(), RulesRuntimeNodes)
	case p.State == ReportRejected && p.Message == "":
		return nil, domain.Invalid("message", "a rejected report says why the runtime cannot start the job on its placement")
	case p.State == ReportRejected && j.State == domain.JobReady:
		move = func() { f.requeueRejected(j, p.Message, c.Actor, at) }
	case p.State == ReportRunning || p.State == ReportSucceeded || p.State == ReportFailed || p.State == ReportStopped || p.State == ReportRejected:
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "state",
			Message: fmt.Sprintf("job %d is %s: it cannot be reported %s", j.ID, j.State, p.State)}
	default:
		return nil, domain.Invalid("state", "state %q is not one of running, succeeded, failed, stopped, rejected", p.State)
	}
	if c.check {
		return nil, nil
	}
	move()
	if p.Message != "" {
		j.Message = p.Message
	}
	j.UpdatedAt = at
	f.jobs.touch(j)
	f.event(c, "job.report", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("%s -> %s %s", p.State, j.State, p.Message))
	return CopyJob(j), nil
}

// end makes a job terminal and releases its GPUs.
func (f *FSM) end(j *domain.Job, st domain.JobState, r *domain.Reason, at time.Time) {
	endRun(j, at)
	j.State, j.Reason, j.EndedAt, j.StopDeadline = st, r, &at, nil
	j.Placement, j.PathHealth = nil, nil // no GPUs, no path
	f.jobs.end(j)
}

// stopPreempted releases a preempted job: requeued when preemptible,
// else it ends Preempted.
func (f *FSM) stopPreempted(j *domain.Job, how string, at time.Time) {
	if j.Preemptible {
		endRun(j, at)
		j.State, j.Placement, j.StopDeadline, j.PlacedAt, j.StartedAt = domain.JobPending, nil, nil, nil, nil
		j.PathHealth = nil
		j.Requeues++
		j.Reason = &domain.Reason{Code: "requeued", Message: "preempted and requeued: " + how}
		f.jobs.touch(j)
		return
	}
	f.end(j, domain.JobPreempted, &domain.Reason{Code: "preempted", Message: "preempted: " + how}, at)
}

// requeueRejected puts a Ready job its runtime cannot start on its
// placement back in the queue: Pending, its GPUs freed, one requeue more
// (the runtime tells the placements apart by it). Nothing ran: not a
// failure, and the reason says why.
func (f *FSM) requeueRejected(j *domain.Job, why, actor string, at time.Time) {
	endRun(j, at)
	j.State, j.Placement, j.StopDeadline, j.PlacedAt, j.StartedAt = domain.JobPending, nil, nil, nil, nil
	j.PathHealth = nil
	j.Requeues++
	j.Reason = &domain.Reason{Code: "requeued", Message: "requeued: its runtime could not start it on its placement (" + actor + "): " + why}
}

// applyJobsPreempt and applyJobsRelease apply the commands leaders wrote
// before plan.apply (entries in older logs).
func (f *FSM) applyJobsPreempt(c *Command) (any, *domain.Error) {
	p, derr := decode[JobsPreempt](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	for _, pr := range p.Jobs {
		if why := f.preemptJob(c, sched.Preemption{JobID: pr.ID, Reason: pr.Reason, Deadline: pr.Deadline, ForJob: pr.ForJob, BorrowBackoff: pr.BorrowBackoff}); why != "" {
			res.Rejected[pr.ID] = why
			continue
		}
		res.Placed = append(res.Placed, pr.ID)
	}
	return res, nil
}

// preemptJob tells a job holding GPUs to stop by the deadline, or says why
// it cannot.
func (f *FSM) preemptJob(c *Command, pr sched.Preemption) string {
	j, ok := f.d.Jobs[pr.JobID]
	switch {
	case !ok:
		return "job not found"
	case !j.State.Stoppable():
		return fmt.Sprintf("job is %s", j.State)
	case pr.ForJob != 0 && f.decided(pr.ForJob):
		// The job the GPUs were to be freed for was cancelled or placed
		// since the snapshot: stopping this one would serve no one.
		return fmt.Sprintf("job %d it would free GPUs for is no longer pending", pr.ForJob)
	}
	d, r := pr.Deadline, pr.Reason
	j.State, j.StopDeadline, j.Reason, j.PreemptedFor, j.UpdatedAt = domain.JobPreempting, &d, &r, pr.ForJob, c.At
	if pr.BorrowBackoff != nil {
		b := *pr.BorrowBackoff
		j.BorrowNotBefore = &b
	}
	f.jobs.touch(j)
	f.event(c, "job.preempt", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("%s: stop by %s", r.Message, d.UTC().Format(time.RFC3339)))
	return ""
}

// decided: job id exists and is no longer pending.
func (f *FSM) decided(id uint64) bool {
	j, ok := f.d.Jobs[id]
	return ok && j.State != domain.JobPending
}

func (f *FSM) applyJobsRelease(c *Command) (any, *domain.Error) {
	p, derr := decode[JobsRelease](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	for _, rl := range p.Jobs {
		if why := f.releaseJob(c, sched.Release{JobID: rl.ID, Cause: rl.Cause}); why != "" {
			res.Rejected[rl.ID] = why
			continue
		}
		res.Placed = append(res.Placed, rl.ID)
	}
	return res, nil
}

// releaseJob ends an allocation that is due at the command's time, or says
// why none is.
func (f *FSM) releaseJob(c *Command, rl sched.Release) string {
	j, ok := f.d.Jobs[rl.JobID]
	if !ok {
		return "job not found"
	}
	switch {
	case rl.Cause == "deadline" && j.State == domain.JobPreempting && j.StopDeadline != nil && !c.At.Before(*j.StopDeadline):
		f.stopPreempted(j, "its grace period ended without a stop report; GPUs released", c.At)
	case rl.Cause == "time_limit" && j.State.Stoppable() && j.PlacedAt != nil &&
		j.TimeLimitSeconds > 0 && !c.At.Before(j.PlacedAt.Add(time.Duration(j.TimeLimitSeconds)*time.Second)):
		f.end(j, domain.JobFailed, &domain.Reason{Code: "time_limit", Message: fmt.Sprintf("reached its time limit of %s", time.Duration(j.TimeLimitSeconds)*time.Second)}, c.At)
	default:
		return fmt.Sprintf("job is %s: no %s release due", j.State, rl.Cause)
	}
	j.UpdatedAt = c.At
	f.jobs.touch(j)
	f.event(c, "job.release", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("%s: now %s", rl.Cause, j.State))
	return ""
}
