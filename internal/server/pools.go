package server

import (
	"net/http"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

func (s *Server) poolRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/pools", summary: "Server pools (admins and platform runtimes: every pool; a tenant's token: only the pools its own live jobs name)", access: authed, resp: []api.Pool{}, h: s.listPools},
		{method: "PUT", path: "/v1/pools/{pool}", summary: "Set a server pool's servers (admin or platform runtime): jobs naming the pool are placed on them only", access: authed,
			body: api.PoolSetRequest{}, resp: api.Pool{}, h: s.setPool},
		{method: "DELETE", path: "/v1/pools/{pool}", summary: "Delete a server pool (admin or platform runtime): pending jobs naming it wait until it exists again", access: authed, resp: api.Pool{}, h: s.deletePool},
	}
}

// errPoolWrite: a pool decides where every tenant's jobs may run, so
// only a caller that speaks for every tenant may set one.
var errPoolWrite = &domain.Error{Code: domain.CodePermissionDenied,
	Message: "only an admin or a platform runtime token (no tenant, no node) may set or delete server pools"}

func (s *Server) setPool(r *http.Request, p *principal) (any, error) {
	if !p.platform() {
		return nil, errPoolWrite
	}
	name := r.PathValue("pool")
	if err := domain.ValidatePoolName("pool", name); err != nil {
		return nil, err
	}
	var req api.PoolSetRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if len(req.Servers) == 0 {
		return nil, domain.Invalid("servers", "a pool has at least one server; DELETE /v1/pools/%s deletes it", name)
	}
	if err := domain.ValidatePoolServers("servers", req.Servers); err != nil {
		return nil, err
	}
	if cur, ok := s.pool(name); ok && sameSet(cur.Servers, req.Servers) {
		return poolView(cur, true), nil // unchanged: nothing to log
	}
	if _, err := s.propose(r.Context(), state.CmdPoolSet, p.actor(), state.PoolSet{Name: name, Servers: req.Servers}); err != nil {
		return nil, err
	}
	cur, _ := s.pool(name)
	return poolView(cur, true), nil
}

func (s *Server) deletePool(r *http.Request, p *principal) (any, error) {
	if !p.platform() {
		return nil, errPoolWrite
	}
	name := r.PathValue("pool")
	cur, ok := s.pool(name)
	if !ok {
		return nil, notFoundf("pool", name)
	}
	if _, err := s.propose(r.Context(), state.CmdPoolSet, p.actor(), state.PoolSet{Name: name}); err != nil {
		return nil, err
	}
	return poolView(cur, true), nil
}

// listPools answers every pool to a platform caller. A tenant's token
// sees only the pools named by the live jobs it sees (it named them, or
// its runtime did for it): never another tenant's pool, nor who set it.
func (s *Server) listPools(r *http.Request, p *principal) (any, error) {
	all := s.fsm.Pools()
	out := make([]api.Pool, 0, len(all))
	if p.platform() {
		for _, v := range all {
			out = append(out, poolView(v, true))
		}
		return out, nil
	}
	named := s.fsm.PoolsNamed(p.seesWorkspace)
	for _, v := range all {
		if named[v.Name] {
			out = append(out, poolView(v, false))
		}
	}
	return out, nil
}

func (s *Server) pool(name string) (state.PoolView, bool) {
	for _, v := range s.fsm.Pools() {
		if v.Name == name {
			return v, true
		}
	}
	return state.PoolView{}, false
}

func poolView(v state.PoolView, platform bool) api.Pool {
	out := api.Pool{Name: v.Name, Servers: v.Servers, UpdatedAt: v.UpdatedAt}
	if out.Servers == nil {
		out.Servers = []string{}
	}
	if platform {
		out.Unknown, out.UpdatedBy = v.Unknown, v.UpdatedBy
	}
	return out
}

// sameSet: a and b hold the same names (a sorted, b in any order, no
// repeats: both validated).
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}
