package server

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

func (s *Server) queueRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/queue", summary: "Pending jobs the caller can see in the order the scheduler considers them, with their reasons, and the quota use (guaranteed, used, borrowed, lent) of the workspaces it can see",
			access: authed, query: []param{{"tenant", "string", "only this tenant"}, {"workspace", "string", "only this workspace (with tenant)"}}, resp: api.Queue{}, h: s.queue},
	}
}

// queueOrder is a scheduling cycle's queue: job ID -> rank.
type queueOrder struct {
	at   time.Time
	rank map[uint64]int
}

func rankOf(order []uint64) map[uint64]int {
	m := make(map[uint64]int, len(order))
	for i, id := range order {
		m[id] = i
	}
	return m
}

func (s *Server) queue(r *http.Request, p *principal) (any, error) {
	tenant, ws, err := scope(r, p)
	if err != nil {
		return nil, err
	}
	pending, _ := s.fsm.JobsPage(state.JobFilter{Tenant: tenant, Workspace: ws, State: domain.JobPending})
	out := api.Queue{Pending: make([]domain.Job, 0, len(pending)), Workspaces: []api.WorkspaceUse{}}
	for _, j := range pending {
		if p.seesWorkspace(j.Tenant, j.Workspace) {
			out.Pending = append(out.Pending, j)
		}
	}
	// Ranked jobs in the cycle's order, then the ones it has not seen
	// yet, by ID: the caller's jobs keep their relative order, and their
	// ranks among others' jobs are not shown.
	rank := map[uint64]int{}
	if o := s.queueOrder.Load(); o != nil {
		out.OrderedAt, rank = o.at, o.rank
	}
	slices.SortStableFunc(out.Pending, func(a, b domain.Job) int {
		ra, oka := rank[a.ID]
		rb, okb := rank[b.ID]
		switch {
		case oka && okb:
			return cmp.Compare(ra, rb)
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	s.fsm.Read(func(v state.View) {
		// The counts apply keeps (state.WorkspaceTally), not a walk of
		// every live job under the lock.
		counts := map[string][2]int{}
		for t := range v.Tallies() {
			counts[domain.Ref(t.Tenant, t.Workspace)] = [2]int{t.Pending, t.Placed}
		}
		for _, u := range quotaUse(v) {
			w := u.w
			if (tenant != "" && w.Tenant != tenant) || (ws != "" && w.Name != ws) || !p.seesWorkspace(w.Tenant, w.Name) {
				continue
			}
			c := counts[w.Ref()]
			out.Workspaces = append(out.Workspaces, api.WorkspaceUse{Tenant: w.Tenant, Workspace: w.Name,
				Guaranteed: w.Guaranteed, BorrowLimit: w.BorrowLimit, LendLimit: w.LendLimit,
				Used: u.guaranteed + u.borrowed, Borrowed: u.borrowed, Lent: u.lent, Pending: c[0], Running: c[1]})
		}
	})
	return out, nil
}
