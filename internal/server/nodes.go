package server

import (
	"net/http"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
)

func (s *Server) nodeRoutes() []route {
	return []route{
		{method: "GET", path: "/v1/nodes", summary: "Servers with their condition and GPU use (admin)", access: authed, resp: []domain.NodeView{}, h: s.listNodes},
		{method: "PATCH", path: "/v1/nodes/{name}", summary: "Cordon, drain or mark a server unhealthy, or undo it (admin); draining stops its jobs after the preemption grace", access: authed,
			body: api.NodeUpdateRequest{}, resp: domain.NodeCondition{}, h: s.updateNode},
	}
}

func (s *Server) listNodes(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.fsm.Nodes(), nil
}

func (s *Server) updateNode(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.NodeUpdateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Cordoned == nil && req.Draining == nil && req.Unhealthy == nil {
		return nil, domain.Invalid("cordoned", "set at least one of cordoned, draining, unhealthy")
	}
	return s.propose(r.Context(), state.CmdNodeSet, p.actor(), state.NodeSet{
		Server: r.PathValue("name"), Cordoned: req.Cordoned, Draining: req.Draining, Unhealthy: req.Unhealthy, Reason: req.Reason, GraceSeconds: req.GraceSeconds})
}
