package server

import (
	"net/http"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/usage"
)

// Usage accounting: the figures come from the jobs' runs in the replicated
// state (internal/usage), so any member answers what every other would,
// before and after restarts and failovers.

func (s *Server) usageRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/usage", summary: "GPU-hours and GPU-equivalent-hours over a period, guaranteed and borrowed, per tenant, workspace, job or submitting token; a tenant's token sees only its own tenant (a member its workspace)", access: authed,
			query: []param{
				{"tenant", "string", "only this tenant"},
				{"workspace", "string", "only this workspace (with tenant)"},
				{"since", "string", "required: the period's start, a duration back from now (30d, 12h, 1d12h) or an RFC 3339 time"},
				{"until", "string", "the period's end (excluded), as since; default now. Jobs still holding GPUs count up to now"},
				{"by", "string", "group by tenant (default), workspace, job or token"},
			}, resp: api.Usage{}, h: s.usage},
	}
}

func (s *Server) usage(r *http.Request, p *principal) (any, error) {
	tenant, ws, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	now := s.clock.Now()
	uq := usage.Query{Tenant: tenant, Workspace: ws, Until: now, Now: now}
	if q.Get("since") == "" {
		return nil, domain.Invalid("since", "since is required: a duration back from now (30d, 12h) or an RFC 3339 time")
	}
	if uq.Since, err = usage.ParseTime("since", q.Get("since"), now); err != nil {
		return nil, err
	}
	if v := q.Get("until"); v != "" {
		if uq.Until, err = usage.ParseTime("until", v, now); err != nil {
			return nil, err
		}
	}
	if uq.By, err = usage.ParseBy(q.Get("by")); err != nil {
		return nil, err
	}
	var rep *usage.Report
	s.fsm.Read(func(v state.View) { rep, err = usage.Compute(v, uq) })
	if err != nil {
		return nil, err
	}
	out := api.Usage{Since: rep.Since.UTC(), Until: rep.Until.UTC(), By: string(rep.By), Rows: make([]api.UsageRow, len(rep.Rows)), Total: usageFigures(rep.Total)}
	for i, r := range rep.Rows {
		out.Rows[i] = api.UsageRow{Tenant: r.Tenant, Workspace: r.Workspace, Job: r.Job, JobName: r.JobName, Token: r.Token, UsageFigures: usageFigures(r.Figures)}
	}
	return out, nil
}

func usageFigures(f usage.Figures) api.UsageFigures {
	return api.UsageFigures{GPUHours: f.GPUHours(), GPUEquivalentHours: f.GPUEquivalentHours(), GuaranteedHours: f.GuaranteedHours(), BorrowedHours: f.BorrowedHours(),
		Jobs: f.Jobs, GPUSeconds: f.GPUSeconds, UnitSeconds: f.UnitSeconds}
}
