package server

import (
	"net/http"
	"strconv"
	"time"

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
		{method: "GET", path: "/v1/usage", summary: "GPU-hours and GPU-equivalent-hours over a period, guaranteed and borrowed, per tenant, workspace, job or submitting token, a page of rows at a time (without limit the first " + strconv.Itoa(DefaultPage) + " and, when there are more, the " + ContinueHeader + " header to pass as continue for the next page); a tenant's token sees only its own tenant (a member its workspace)", access: authed,
			query: []param{
				{"tenant", "string", "only this tenant"},
				{"workspace", "string", "only this workspace (with tenant)"},
				{"since", "string", "required: the period's start, a duration back from now (30d, 12h, 1d12h) or an RFC 3339 time"},
				{"until", "string", "the period's end (excluded), as since; default now. Jobs still holding GPUs count up to now"},
				{"by", "string", "group by tenant (default), workspace, job or token"},
				{"limit", "integer", "at most this many rows, by tenant, workspace, job, token (default " + strconv.Itoa(DefaultPage) + ", above " + strconv.Itoa(MaxPage) + " taken as " + strconv.Itoa(MaxPage) + "); the " + ContinueHeader + " answer header then carries the token of the next page; the total is the whole period's on every page"},
				{"continue", "string", "the " + ContinueHeader + " header of the previous page (with the same by); the page counts the first page's period"},
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
	limit, err := s.pageLimit(r)
	if err != nil {
		return nil, err
	}
	// A next page counts the first page's period (its token holds it), so
	// the pages of a report held "until now" add up, and resumes after
	// the last row's key.
	list := "usage-" + string(uq.By)
	after, err := readContinueKey(r, list, 6)
	if err != nil {
		return nil, err
	}
	if after != nil {
		since, err1 := strconv.ParseInt(after[0], 10, 64)
		until, err2 := strconv.ParseInt(after[1], 10, 64)
		job, err3 := strconv.ParseUint(after[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, badContinue(r, list)
		}
		uq.Since, uq.Until = time.Unix(since, 0), time.Unix(until, 0)
		uq.After = &usage.Key{Tenant: after[2], Workspace: after[3], Job: job, Token: after[5]}
	}
	// By job the report keeps the page's rows as it sums, not a row per
	// job (issue 18).
	uq.Limit = limit
	var rep *usage.Report
	s.fsm.Read(func(v state.View) { rep, err = usage.Compute(v, uq) })
	if err != nil {
		return nil, err
	}
	rows := rep.Rows
	out := api.Usage{Since: rep.Since.UTC(), Until: rep.Until.UTC(), By: string(rep.By), Rows: make([]api.UsageRow, len(rows)), Total: usageFigures(rep.Total)}
	for i, r := range rows {
		out.Rows[i] = api.UsageRow{Tenant: r.Tenant, Workspace: r.Workspace, Job: r.Job, JobName: r.JobName, Token: r.Token, UsageFigures: usageFigures(r.Figures)}
	}
	if !rep.More {
		return out, nil
	}
	k := rows[len(rows)-1].Key
	return paged{v: out, next: continueKey(list, strconv.FormatInt(rep.Since.Unix(), 10), strconv.FormatInt(rep.Until.Unix(), 10),
		k.Tenant, k.Workspace, strconv.FormatUint(k.Job, 10), k.Token)}, nil
}

func usageFigures(f usage.Figures) api.UsageFigures {
	return api.UsageFigures{GPUHours: f.GPUHours(), GPUEquivalentHours: f.GPUEquivalentHours(), GuaranteedHours: f.GuaranteedHours(), BorrowedHours: f.BorrowedHours(),
		Jobs: f.Jobs, GPUSeconds: f.GPUSeconds, UnitSeconds: f.UnitSeconds}
}
