package state

import (
	"fmt"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/sched"
)

// The plan applier: plan.apply (and jobs.place from older logs) commits a
// scheduling cycle's plan, re-checking every placement with sched.Fit.

// PlanResult says which entries of a plan were committed and which the
// re-check refused (the job is rescheduled in a later cycle). The older
// jobs.release and jobs.preempt commands list what they committed in
// Placed; plan.apply lists releases and preemptions apart.
type PlanResult struct {
	Placed    []uint64          `json:"placed"`
	Released  []uint64          `json:"released,omitempty"`
	Preempted []uint64          `json:"preempted,omitempty"`
	Rejected  map[uint64]string `json:"rejected,omitempty"`
}

// applyPlan commits one scheduling cycle's plan (PlanApply) in one entry:
// due releases, preemptions, then placements re-checked against the state
// the releases left, then the reasons of the jobs left pending. Each entry
// that no longer holds is refused alone; the rest commits.
func (f *FSM) applyPlan(c *Command) (any, *domain.Error) {
	p, derr := decode[PlanApply](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	for _, r := range p.Releases {
		if why := f.releaseJob(c, r); why != "" {
			res.Rejected[r.JobID] = why
		} else {
			res.Released = append(res.Released, r.JobID)
		}
	}
	for _, pr := range p.Preemptions {
		if why := f.preemptJob(c, pr); why != "" {
			res.Rejected[pr.JobID] = why
		} else {
			res.Preempted = append(res.Preempted, pr.JobID)
		}
	}
	f.placeJobs(c, p.Placements, p.Reasons, p.NetworkGate, res)
	return res, nil
}

// applyJobsPlace applies the placements of a plan committed before
// plan.apply existed (entries in older logs).
func (f *FSM) applyJobsPlace(c *Command) (any, *domain.Error) {
	p, derr := decode[JobsPlace](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	res := &PlanResult{Placed: []uint64{}, Rejected: map[uint64]string{}}
	pls := make([]sched.Placement, len(p.Jobs))
	for i, jp := range p.Jobs {
		pls[i] = sched.Placement{JobID: jp.ID, Placement: jp.Placements}
	}
	f.placeJobs(c, pls, p.Reasons, p.NetworkGate, res)
	return res, nil
}

// placeJobs is the plan applier: it re-checks every placement with the
// scheduler's own fit rule (sched.Fit) against the state it applies to,
// in the plan's order, commits those that hold and refuses the rest one by
// one: a refused job stays Pending with the reason. Until the network gate
// exists a placed job is Ready at once.
func (f *FSM) placeJobs(c *Command, pls []sched.Placement, reasons map[uint64]domain.Reason, networkGate bool, res *PlanResult) {
	if len(pls) > 0 {
		// The scheduler's view of this state at the command's time: the
		// jobs as it sees them (a tenant's minimum driver folded in). Fit
		// only reads them, so a shallow copy serves: the fold changes a
		// field of the copy, never a shared slice.
		snap := sched.SnapshotOf(locked{f}, c.At, func(j *domain.Job) *domain.Job { cp := *j; return &cp })
		fit := sched.NewFit(snap, c.At)
		seen := make(map[uint64]*domain.Job, len(snap.Jobs))
		for _, j := range snap.Jobs {
			seen[j.ID] = j
		}
		for _, jp := range pls {
			f.placeJob(c, fit, seen[jp.JobID], jp, networkGate, res)
		}
	}
	for id, r := range reasons {
		if _, refused := res.Rejected[id]; refused {
			continue // the re-check's reason is the newer one
		}
		if j, ok := f.d.Jobs[id]; ok && j.State == domain.JobPending && !j.Reason.Equal(r) {
			r := r
			j.Reason, j.UpdatedAt = &r, c.At
			f.jobs.touch(j)
		}
	}
}

// placeJob commits one placement if it still fits; seen is the job as the
// scheduler's view of this state has it.
func (f *FSM) placeJob(c *Command, fit *sched.Fit, seen *domain.Job, jp sched.Placement, networkGate bool, res *PlanResult) {
	j, ok := f.d.Jobs[jp.JobID]
	if !ok {
		res.Rejected[jp.JobID] = "job not found"
		return
	}
	if j.State != domain.JobPending {
		res.Rejected[jp.JobID] = fmt.Sprintf("job is %s, not Pending", j.State)
		return
	}
	if r, ok := fit.Place(seen, jp.Placement); !ok {
		res.Rejected[jp.JobID] = r.Message
		j.Reason, j.UpdatedAt = &r, c.At
		f.jobs.touch(j)
		return
	}
	at := c.At
	j.Placement, j.UpdatedAt, j.PlacedAt, j.NetworkRev = jp.Placement, c.At, &at, 0
	f.startRun(j, fit, at)
	f.jobs.touch(j)
	if networkGate {
		// Ready once the fabric revision carrying its network is
		// deployed on its leaves (fabric.go, gate).
		j.State = domain.JobPlaced
		j.Reason = &domain.Reason{Code: domain.ReasonNetwork, Message: "placed; waiting for the fabric to carry its tenant VRF, ports and group rules"}
	} else {
		j.State = domain.JobReady
		j.Reason = &domain.Reason{Code: "ready", Message: "placed; ready for its runtime to start it (no fabric driver: no network gate)"}
	}
	f.event(c, "job.place", fmt.Sprintf("job/%d", j.ID), j.Tenant, j.Workspace, fmt.Sprintf("%s on %s", demandString(&j.JobSpec), placementString(jp.Placement)))
	res.Placed = append(res.Placed, j.ID)
}
func placementString(pls []domain.Placement) string {
	parts := make([]string, len(pls))
	for i, p := range pls {
		parts[i] = fmt.Sprintf("%s%v", p.Server, p.GPUs)
	}
	return strings.Join(parts, " ")
}
