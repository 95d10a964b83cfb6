package state

import (
	"fmt"
	"slices"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// CmdJobsPathHealth records the path health of jobs (internal/health's
// verdicts, debounced by the leader's loop in internal/server).
const CmdJobsPathHealth CommandType = "jobs.path_health"

// JobsPathHealth carries new path verdicts, at most one per job. The
// leader decides them from telemetry; apply only checks and records, so
// replicas agree whatever their own telemetry says.
type JobsPathHealth struct {
	Jobs []JobPathHealth `json:"jobs"`
}

// JobPathHealth is one job's new verdict.
type JobPathHealth struct {
	ID     uint64            `json:"id"`
	Health domain.PathHealth `json:"health"`
}

// PathHealthResult says which updates applied; the others named jobs that
// no longer hold GPUs (they ended between the leader's read and the
// apply) or already carried that verdict.
type PathHealthResult struct {
	Applied []uint64          `json:"applied"`
	Skipped map[uint64]string `json:"skipped,omitempty"`
}

// Path health events. A verdict that turns faulty (or changes fault) is
// job.path_unhealthy; a faulty one that turns healthy or unknown is
// job.path_recovered. A first healthy or unknown verdict is no news.
const (
	EventPathUnhealthy = "job.path_unhealthy"
	EventPathRecovered = "job.path_recovered"
)

// maxPathHealthJobs bounds one command: the leader batches by this many.
const maxPathHealthJobs = 4096

func (f *FSM) applyJobsPathHealth(c *Command) (any, *domain.Error) {
	p, derr := decode[JobsPathHealth](c)
	if derr != nil {
		return nil, derr
	}
	if len(p.Jobs) > maxPathHealthJobs {
		return nil, domain.Invalid("jobs", "%d jobs in one path health command; the limit is %d", len(p.Jobs), maxPathHealthJobs)
	}
	seen := map[uint64]bool{}
	for i, u := range p.Jobs {
		field := fmt.Sprintf("jobs[%d]", i)
		if seen[u.ID] {
			return nil, domain.Invalid(field+".id", "job %d is given twice", u.ID)
		}
		seen[u.ID] = true
		if u.Health.Verdict.Severity() < 0 {
			return nil, domain.Invalid(field+".health.verdict", "verdict %q is not one of %v", u.Health.Verdict, domain.PathVerdicts)
		}
		if len(u.Health.Message) > 1024 {
			return nil, domain.Invalid(field+".health.message", "message is %d characters; the limit is 1024", len(u.Health.Message))
		}
		if u.Health.Since.IsZero() {
			return nil, domain.Invalid(field+".health.since", "since is required")
		}
	}
	if c.check {
		return nil, nil
	}
	res := &PathHealthResult{Applied: []uint64{}}
	skip := func(id uint64, why string) {
		if res.Skipped == nil {
			res.Skipped = map[uint64]string{}
		}
		res.Skipped[id] = why
	}
	for _, u := range p.Jobs {
		j, ok := f.d.Jobs[u.ID]
		switch {
		case !ok:
			skip(u.ID, "job not found")
			continue
		case !j.State.HoldsGPUs():
			skip(u.ID, fmt.Sprintf("job is %s", j.State))
			continue
		case j.PathHealth != nil && j.PathHealth.Verdict == u.Health.Verdict && j.PathHealth.Message == u.Health.Message:
			skip(u.ID, "unchanged")
			continue
		}
		prev := domain.PathVerdict("")
		if j.PathHealth != nil {
			prev = j.PathHealth.Verdict
		}
		h := u.Health
		h.Since = h.Since.UTC()
		j.PathHealth = &h // a new value, never changed in place: copies may share it
		j.UpdatedAt = c.At
		f.jobs.touch(j)
		res.Applied = append(res.Applied, j.ID)
		obj := fmt.Sprintf("job/%d", j.ID)
		switch {
		case h.Verdict.Faulty() && prev != h.Verdict:
			f.event(c, EventPathUnhealthy, obj, j.Tenant, j.Workspace, string(h.Verdict)+": "+h.Message)
		case !h.Verdict.Faulty() && prev.Faulty():
			f.event(c, EventPathRecovered, obj, j.Tenant, j.Workspace, fmt.Sprintf("%s -> %s %s", prev, h.Verdict, h.Message))
		}
	}
	slices.Sort(res.Applied)
	return res, nil
}
