package server

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
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

// queueOrder is a scheduling cycle's queue, as the cycle ordered it. The
// loop stores one every cycle and GET /v1/queue reads it now and then, so
// the rank of each job (a map of every pending job: 100,000 entries a
// cycle for the collector, issue 18) is built by the first read only.
type queueOrder struct {
	at    time.Time
	order []uint64 // the plan's (sched.Plan.Order), never changed after
	once  sync.Once
	rank  map[uint64]int // job ID -> its index in order; built by ranks
}

func newQueueOrder(at time.Time, order []uint64) *queueOrder {
	return &queueOrder{at: at, order: order}
}

// ranks is job ID -> rank in the cycle's order.
func (o *queueOrder) ranks() map[uint64]int {
	o.once.Do(func() {
		o.rank = make(map[uint64]int, len(o.order))
		for i, id := range o.order {
			o.rank[id] = i
		}
	})
	return o.rank
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
		out.OrderedAt, rank = o.at, o.ranks()
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
		counts := map[string][2]int{}
		for j := range v.LiveJobs() {
			c := counts[j.Tenant+"/"+j.Workspace]
			if j.State == domain.JobPending {
				c[0]++
			} else if len(j.Placement) > 0 {
				c[1]++
			}
			counts[j.Tenant+"/"+j.Workspace] = c
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
