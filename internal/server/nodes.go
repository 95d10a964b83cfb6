package server

import (
	"fmt"
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
		{method: "POST", path: "/v1/nodes/runtime", summary: "A runtime's word on its servers (admin or platform runtime): cordon those it cannot use, uncordon those it cordoned and can use again; answers the conditions it changed", access: authed,
			body: api.RuntimeNodesRequest{}, resp: []domain.NodeCondition{}, h: s.runtimeNodes},
	}
}

// maxRuntimeName matches the state machine's limit on a runtime's name.
const maxRuntimeName = 128

// runtimeNodes records a runtime's word on its servers. Only a caller
// that speaks for every tenant may: a server carries other tenants' jobs,
// so a tenant's token (or a node agent's) is refused.
func (s *Server) runtimeNodes(r *http.Request, p *principal) (any, error) {
	if !p.platform() {
		return nil, &domain.Error{Code: domain.CodePermissionDenied,
			Message: "only an admin or a platform runtime token (no tenant, no node) may report a runtime's servers"}
	}
	var req api.RuntimeNodesRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Runtime == "" || len(req.Runtime) > maxRuntimeName {
		return nil, domain.Invalid("runtime", "runtime %q must be 1 to %d characters (slurm:CLUSTER)", clip(req.Runtime, 40), maxRuntimeName)
	}
	cmd := state.NodeRuntime{Runtime: req.Runtime, Usable: req.Usable, Unusable: make(map[string]string, len(req.Unusable))}
	for i, n := range req.Unusable {
		field := fmt.Sprintf("unusable[%d]", i)
		switch _, dup := cmd.Unusable[n.Server]; {
		case n.Server == "":
			return nil, domain.Invalid(field+".server", "a server name is required")
		case dup:
			return nil, domain.Invalid(field+".server", "server %q is listed twice", clip(n.Server, 64))
		case n.Reason == "" || len(n.Reason) > 256:
			return nil, domain.Invalid(field+".reason", "reason is %d characters; it must be 1 to 256", len(n.Reason))
		}
		cmd.Unusable[n.Server] = n.Reason
	}
	for i, u := range req.Usable {
		if _, both := cmd.Unusable[u]; both {
			return nil, domain.Invalid(fmt.Sprintf("usable[%d]", i), "server %q is both usable and unusable", clip(u, 64))
		}
	}
	if !s.runtimeChanges(&cmd) {
		return []domain.NodeCondition{}, nil // a pass that found nothing new writes nothing
	}
	return s.propose(r.Context(), state.CmdNodeRuntime, p.actor(), cmd)
}

// runtimeChanges: cmd would change a server's condition (what the state
// machine decides, read first so an unchanged report is not logged).
func (s *Server) runtimeChanges(cmd *state.NodeRuntime) bool {
	for srv, why := range cmd.Unusable {
		if !s.fsm.HasServer(srv) {
			continue
		}
		c := s.fsm.NodeCondition(srv)
		if c.Runtime == cmd.Runtime && c.Reason != why || c.Runtime != cmd.Runtime && c.Schedulable() {
			return true
		}
	}
	for _, srv := range cmd.Usable {
		if s.fsm.NodeCondition(srv).Runtime == cmd.Runtime {
			return true
		}
	}
	return false
}

// clip shortens a value quoted in an error.
func clip(v string, n int) string {
	if len(v) <= n {
		return v
	}
	return v[:n] + "..."
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
