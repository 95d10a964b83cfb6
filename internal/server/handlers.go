package server

import (
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/state"
	"github.com/jobfabric/jobfabric/internal/store"
	"github.com/jobfabric/jobfabric/internal/topology"
	"github.com/jobfabric/jobfabric/internal/version"
)

func (s *Server) buildRoutes() []route {
	tenantQ := param{"tenant", "string", "only this tenant"}
	wsQ := param{"workspace", "string", "only this workspace (with tenant)"}
	return []route{
		{method: "GET", path: "/v1/health", summary: "Liveness and leadership of this member", access: public, local: true, resp: api.Health{}, h: s.health},
		{method: "GET", path: "/v1/openapi.json", summary: "This API's OpenAPI 3 document", access: public, local: true, resp: map[string]any{}, h: s.openapi},
		{method: "GET", path: "/v1/whoami", summary: "The calling token", access: authed, resp: domain.Token{}, h: s.whoami},
		{method: "GET", path: "/v1/cluster", summary: "Control-plane members and leader (admin)", access: authed, resp: api.ClusterView{}, h: s.cluster},
		{method: "GET", path: "/v1/cluster/tls", summary: "The certificates and cluster secret this member uses now (serial, expiry, secret fingerprints) and the last refused reload of each; each member answers for itself (admin)", access: authed, local: true, resp: api.TLSStatus{}, h: s.tlsStatus},
		{method: "POST", path: "/v1/cluster/members", summary: "Add a server to the cluster as a voter (admin)", access: authed, body: api.JoinRequest{}, resp: api.ClusterView{}, h: s.joinMember},
		{method: "DELETE", path: "/v1/cluster/members/{id}", summary: "Remove a server from the cluster (admin)", access: authed, resp: api.ClusterView{}, h: s.removeMember},
		{method: "GET", path: "/v1/topology", summary: "The applied topology with its revision and summary (admin)", access: authed, resp: domain.TopologyView{}, h: s.getTopology},
		{method: "PUT", path: "/v1/topology", summary: "Apply a topology (YAML or JSON), all or nothing; the same file again is a no-op (admin)", access: authed,
			query: []param{{"dryRun", "boolean", "validate and report without applying"}}, body: domain.Topology{}, yaml: true, resp: domain.TopologyResult{}, h: s.putTopology},
		{method: "GET", path: "/v1/tenants", summary: "Tenants the caller can see", access: authed, resp: []domain.Tenant{}, h: s.listTenants},
		{method: "POST", path: "/v1/tenants", summary: "Create a tenant (admin)", access: authed, body: api.TenantCreateRequest{}, resp: domain.Tenant{}, status: http.StatusCreated, h: s.createTenant},
		{method: "GET", path: "/v1/tenants/{tenant}", summary: "One tenant", access: authed, resp: domain.Tenant{}, h: s.getTenant},
		{method: "PATCH", path: "/v1/tenants/{tenant}", summary: "Change a tenant's quota and sites (admin)", access: authed, body: api.TenantUpdateRequest{}, resp: domain.Tenant{}, h: s.updateTenant},
		{method: "DELETE", path: "/v1/tenants/{tenant}", summary: "Delete a tenant without workspaces (admin)", access: authed, resp: domain.Tenant{}, h: s.deleteTenant},
		{method: "GET", path: "/v1/tenants/{tenant}/workspaces", summary: "A tenant's workspaces the caller can see", access: authed, resp: []domain.Workspace{}, h: s.listWorkspaces},
		{method: "POST", path: "/v1/tenants/{tenant}/workspaces", summary: "Create a workspace (admin)", access: authed, body: api.WorkspaceCreateRequest{}, resp: domain.Workspace{}, status: http.StatusCreated, h: s.createWorkspace},
		{method: "GET", path: "/v1/tenants/{tenant}/workspaces/{workspace}", summary: "One workspace", access: authed, resp: domain.Workspace{}, h: s.getWorkspace},
		{method: "PATCH", path: "/v1/tenants/{tenant}/workspaces/{workspace}", summary: "Change a workspace's quota (admin)", access: authed, body: api.WorkspaceUpdateRequest{}, resp: domain.Workspace{}, h: s.updateWorkspace},
		{method: "DELETE", path: "/v1/tenants/{tenant}/workspaces/{workspace}", summary: "Delete a workspace without active jobs (admin)", access: authed, resp: domain.Workspace{}, h: s.deleteWorkspace},
		{method: "GET", path: "/v1/tokens", summary: "Tokens the caller can see (never their secrets)", access: authed, resp: []domain.Token{}, h: s.listTokens},
		{method: "POST", path: "/v1/tokens", summary: "Create a token; the secret is returned once", access: authed, body: api.TokenCreateRequest{}, resp: api.TokenCreated{}, status: http.StatusCreated, h: s.createToken},
		{method: "DELETE", path: "/v1/tokens/{id}", summary: "Revoke a token", access: authed, resp: domain.Token{}, h: s.deleteToken},
		{method: "GET", path: "/v1/jobs", summary: "Jobs the caller can see, by ID, a page at a time: without limit the first " + strconv.Itoa(DefaultPage) + " and, when there are more, the " + ContinueHeader + " header to pass as continue for the next page", access: authed,
			query: []param{tenantQ, wsQ, {"state", "string", "only jobs in these states: one or a comma-separated list, any case (pending,running); may repeat"},
				{"limit", "integer", "at most this many, by ID (default " + strconv.Itoa(DefaultPage) + ", above " + strconv.Itoa(MaxPage) + " taken as " + strconv.Itoa(MaxPage) + "); the " + ContinueHeader + " answer header then carries the token of the next page"},
				{"continue", "string", "the " + ContinueHeader + " header of the previous page"}}, resp: []domain.Job{}, h: s.listJobs},
		{method: "POST", path: "/v1/jobs", summary: "Submit a job; with an Idempotency-Key header a retry returns the first attempt's job; with dryRun=true answer where it would land now, or why not, and change nothing", access: authed, dedup: true,
			query: []param{{"dryRun", "boolean", "place against the current state without submitting (answers a DryRun)"}}, body: domain.JobSpec{}, resp: domain.Job{}, status: http.StatusCreated, h: s.submitJob},
		{method: "GET", path: "/v1/jobs/{id}", summary: "One job", access: authed, resp: domain.Job{}, h: s.getJob},
		{method: "POST", path: "/v1/jobs/{id}/cancel", summary: "Cancel a job", access: authed, resp: domain.Job{}, h: s.cancelJob},
		{method: "POST", path: "/v1/jobs/{id}/pool", summary: "Move a job that has not started to another server pool (admin, or a runtime for a job a runtime submitted: the Slurm bridge when a user moves a held job to another partition)", access: authed,
			body: api.JobPoolRequest{}, resp: domain.Job{}, h: s.setJobPool},
		{method: "POST", path: "/v1/jobs/{id}/report", summary: "Report a job's progress as its runtime (runtime or admin): running (also a heartbeat), succeeded, failed, or stopped (a Preempting job has let its GPUs go)", access: authed,
			body: api.JobReportRequest{}, resp: domain.Job{}, h: s.reportJob},
		{method: "GET", path: "/v1/jobs/{id}/watch", summary: "Stream a job as Server-Sent Events: `event: job` with the job as `data` now and after every change, until it ends (Succeeded, Failed, Cancelled, Preempted); a `: heartbeat` comment every 15s", access: authed,
			resp: domain.Job{}, sse: s.watchJob},
		{method: "GET", path: "/v1/events", summary: "The audit trail: who changed what, when, newest page first: without limit the newest " + strconv.Itoa(DefaultPage) + " and, when there are older ones, the " + ContinueHeader + " header to pass as continue for the page before", access: authed,
			query: []param{tenantQ, wsQ, {"since", "string", "a duration (1h, 30m) back from now, or an RFC 3339 time"}, {"limit", "integer", "at most this many, newest (default " + strconv.Itoa(DefaultPage) + ", above " + strconv.Itoa(MaxPage) + " taken as " + strconv.Itoa(MaxPage) + "); the " + ContinueHeader + " answer header then carries the token of the page before"},
				{"continue", "string", "the " + ContinueHeader + " header of the previous page"}}, resp: []domain.Event{}, h: s.events},
	}
}

func (s *Server) health(r *http.Request, _ *principal) (any, error) {
	id, _ := s.store.Leader()
	return api.Health{Status: "ok", Node: s.nodeID, Leader: id, IsLeader: s.store.IsLeader(), URL: s.url,
		Version: version.Get().Version, APIRevision: api.Revision, ApplyRules: s.fsm.MaxRules()}, nil
}

func (s *Server) whoami(r *http.Request, p *principal) (any, error) { return p.tok, nil }

func (s *Server) clusterView() (api.ClusterView, error) {
	ms, err := s.store.Members()
	if err != nil {
		return api.ClusterView{}, domain.Errorf(domain.CodeUnavailable, "read raft configuration: %v", err)
	}
	leader, _ := s.store.Leader()
	v := api.ClusterView{Leader: leader, Members: []api.ClusterMember{}, PeerAuth: s.store.PeerAuth(), LogStore: s.store.LogStore()}
	for _, m := range ms {
		cm := api.ClusterMember{ID: m.ID, RaftAddr: m.Addr, Suffrage: m.Suffrage, Leader: m.Leader, ApplyRules: state.RulesGlobalExternalID}
		if sm, ok := s.fsm.Member(m.ID); ok {
			cm.APIAddr, cm.ApplyRules = sm.APIAddr, sm.MaxRules()
		}
		if m.ID == s.nodeID {
			cm.ApplyRules = s.fsm.MaxRules() // its own binary, recorded or not yet
		}
		v.Members = append(v.Members, cm)
	}
	v.ApplyRules = s.proposeRules()
	return v, nil
}

func (s *Server) cluster(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.clusterView()
}

func (s *Server) joinMember(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.JoinRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if err := domain.ValidateName("id", req.ID); err != nil {
		return nil, err
	}
	if req.RaftAddr == "" {
		return nil, domain.Invalid("raftAddr", "raftAddr is required")
	}
	if req.Rules < 0 {
		return nil, domain.Invalid("rules", "rules %d is not a version (1 or more; 0 or absent: 1)", req.Rules)
	}
	if !strings.HasPrefix(req.APIAddr, "http://") && !strings.HasPrefix(req.APIAddr, "https://") {
		return nil, domain.Invalid("apiAddr", "apiAddr %q must be an http:// or https:// URL", req.APIAddr)
	}
	if err := s.checkJoinRules(req.ID, req.Rules); err != nil {
		return nil, err
	}
	// The leader's own address first, so a member that has applied its
	// own record (server.caughtUp) forwards to where the leader is now,
	// not where it was before a restart.
	if err := s.publishSelf(r.Context()); err != nil {
		return nil, err
	}
	if err := s.store.AddVoter(r.Context(), req.ID, req.RaftAddr); err != nil {
		if errors.Is(err, store.ErrNoListener) || errors.Is(err, store.ErrPeerUnreachable) {
			return nil, domain.Errorf(domain.CodeFailedPrecondition, "add voter %s: %v", req.ID, err)
		}
		return nil, domain.Errorf(domain.CodeUnavailable, "add voter %s: %v", req.ID, err)
	}
	if _, err := s.propose(r.Context(), state.CmdMemberSet, p.actor(), state.MemberSet{Member: state.Member{ID: req.ID, RaftAddr: req.RaftAddr, APIAddr: req.APIAddr, Rules: req.Rules}}); err != nil {
		return nil, err
	}
	return s.clusterView()
}

func (s *Server) removeMember(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	id := r.PathValue("id")
	if id == s.nodeID {
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "%s is the leader; stop it (a new leader is elected) and remove it from another member", id)
	}
	if err := s.store.RemoveServer(r.Context(), id); err != nil {
		return nil, domain.Errorf(domain.CodeUnavailable, "remove %s: %v", id, err)
	}
	return s.clusterView()
}

func (s *Server) getTopology(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	v := s.fsm.Topology()
	if v == nil {
		return nil, domain.Errorf(domain.CodeNotFound, "no topology has been applied yet (jobfabric topology apply -f FILE)")
	}
	return v, nil
}

func (s *Server) putTopology(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	select {
	case s.topoSem <- struct{}{}:
	case <-r.Context().Done():
		return nil, domain.Errorf(domain.CodeUnavailable, "gave up waiting for another topology upload to finish: %v", r.Context().Err())
	}
	var size int
	defer func() {
		<-s.topoSem
		// Parsing a large file leaves hundreds of MB of garbage that the
		// runtime would hand back to the OS only minutes later; a
		// topology apply is rare, so return it now.
		if size >= 1<<20 {
			debug.FreeOSMemory()
		}
	}()
	b, err := readBody(r, maxTopologyBody)
	if err != nil {
		return nil, err
	}
	size = len(b)
	t, err := topology.Parse(b)
	if err != nil {
		return nil, err
	}
	if r.URL.Query().Get("dryRun") != "true" {
		// As parsed: the state machine fills in what the file leaves out
		// (link addresses), which would double the log entry; propose
		// checks it against the state first.
		return s.propose(r.Context(), state.CmdTopologyApply, p.actor(), state.TopologyApply{Topology: *t})
	}
	var prev *domain.Topology
	if cur := s.fsm.Topology(); cur != nil {
		prev = cur.Topology
	}
	// The state machine's own checks first (running jobs, guarantees).
	cmd, _, err := state.EncodeCommand(state.CmdTopologyApply, s.proposeRules(), s.clock.Now(), p.actor(), state.TopologyApply{Topology: *t})
	if err != nil {
		return nil, err
	}
	if derr := s.fsm.CheckCommand(cmd); derr != nil {
		return nil, derr
	}
	if err := topology.Normalize(t, prev); err != nil {
		return nil, err
	}
	fp := topology.Fingerprint(t)
	cur := s.fsm.Topology()
	res := domain.TopologyResult{Changed: cur == nil || cur.Fingerprint != fp, Fingerprint: fp, Summary: t.Summary()}
	if cur != nil {
		res.Revision = cur.Revision
	}
	return res, nil
}

func (s *Server) listTenants(r *http.Request, p *principal) (any, error) {
	return s.fsm.Tenants(func(t *domain.Tenant) bool { return p.seesTenant(t.Name) }), nil
}

func (s *Server) createTenant(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.TenantCreateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	t := domain.Tenant{Name: req.Name, Isolation: req.Isolation, Network: req.Network, JobSegmentation: req.JobSegmentation, Quota: req.Quota, Sites: req.Sites}
	if err := domain.ValidateTenant(&t); err != nil {
		return nil, err
	}
	return s.propose(r.Context(), state.CmdTenantCreate, p.actor(), state.TenantCreate{Tenant: t})
}

func (s *Server) updateTenant(r *http.Request, p *principal) (any, error) {
	t, err := s.visibleTenant(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.TenantUpdateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.RemoveQuota && req.Quota != nil {
		return nil, domain.Invalid("removeQuota", "give either a quota or removeQuota, not both")
	}
	upd := state.TenantUpdate{Name: t.Name, Quota: t.Quota, Sites: t.Sites}
	if req.Quota != nil {
		upd.Quota = req.Quota
	}
	if req.RemoveQuota {
		upd.Quota = nil
	}
	if req.Sites != nil {
		upd.Sites = *req.Sites
	}
	cand := *t
	cand.Quota, cand.Sites = upd.Quota, upd.Sites
	if err := domain.ValidateTenant(&cand); err != nil {
		return nil, err
	}
	return s.propose(r.Context(), state.CmdTenantUpdate, p.actor(), upd)
}

// visibleTenant returns the tenant named in the path if the caller may see it.
func (s *Server) visibleTenant(r *http.Request, p *principal) (*domain.Tenant, error) {
	name := r.PathValue("tenant")
	t, ok := s.fsm.Tenant(name)
	if !ok || !p.seesTenant(name) {
		return nil, notFoundf("tenant", name)
	}
	return t, nil
}

func (s *Server) getTenant(r *http.Request, p *principal) (any, error) { return s.visibleTenant(r, p) }

func (s *Server) deleteTenant(r *http.Request, p *principal) (any, error) {
	t, err := s.visibleTenant(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.propose(r.Context(), state.CmdTenantDelete, p.actor(), state.TenantDelete{Name: t.Name})
}

func (s *Server) listWorkspaces(r *http.Request, p *principal) (any, error) {
	t, err := s.visibleTenant(r, p)
	if err != nil {
		return nil, err
	}
	return s.fsm.Workspaces(t.Name, func(w *domain.Workspace) bool { return p.seesWorkspace(w.Tenant, w.Name) }), nil
}

func (s *Server) createWorkspace(r *http.Request, p *principal) (any, error) {
	t, err := s.visibleTenant(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.WorkspaceCreateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	w := domain.Workspace{Tenant: t.Name, Name: req.Name, Guaranteed: req.Guaranteed, BorrowLimit: req.BorrowLimit, LendLimit: req.LendLimit, Weight: 1, Priority: req.Priority, Models: req.Models, Preemption: req.Preemption}
	if req.Weight != nil {
		w.Weight = *req.Weight
	}
	if err := domain.ValidateWorkspace(&w); err != nil {
		return nil, err
	}
	return s.propose(r.Context(), state.CmdWorkspaceCreate, p.actor(), state.WorkspaceCreate{Workspace: w})
}

func (s *Server) visibleWorkspace(r *http.Request, p *principal) (*domain.Workspace, error) {
	t, ws := r.PathValue("tenant"), r.PathValue("workspace")
	w, ok := s.fsm.Workspace(t, ws)
	if !ok || !p.seesWorkspace(t, ws) {
		return nil, notFoundf("workspace", domain.Ref(t, ws))
	}
	return w, nil
}

func (s *Server) getWorkspace(r *http.Request, p *principal) (any, error) {
	return s.visibleWorkspace(r, p)
}

func (s *Server) updateWorkspace(r *http.Request, p *principal) (any, error) {
	w, err := s.visibleWorkspace(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() {
		return nil, errAdminOnly
	}
	var req api.WorkspaceUpdateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		v   *int
		dst *int
	}{{req.Guaranteed, &w.Guaranteed}, {req.BorrowLimit, &w.BorrowLimit}, {req.LendLimit, &w.LendLimit}, {req.Weight, &w.Weight}, {req.Priority, &w.Priority}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if req.Models != nil {
		w.Models = *req.Models
	}
	if req.Preemption != nil {
		w.Preemption = *req.Preemption
	}
	if err := domain.ValidateWorkspace(w); err != nil {
		return nil, err
	}
	return s.propose(r.Context(), state.CmdWorkspaceUpdate, p.actor(), state.WorkspaceUpdate{Workspace: *w})
}

func (s *Server) deleteWorkspace(r *http.Request, p *principal) (any, error) {
	w, err := s.visibleWorkspace(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() {
		return nil, errAdminOnly
	}
	return s.propose(r.Context(), state.CmdWorkspaceDelete, p.actor(), state.WorkspaceDelete{Tenant: w.Tenant, Name: w.Name})
}

func (s *Server) listTokens(r *http.Request, p *principal) (any, error) {
	return s.fsm.Tokens(func(t *domain.Token) bool { return seesToken(p, t) }), nil
}

// seesToken: admins see all tokens, tenant admins their tenant's, members
// and runtimes only themselves.
func seesToken(p *principal, t *domain.Token) bool {
	switch p.tok.Role {
	case domain.RoleAdmin:
		return true
	case domain.RoleTenantAdmin:
		return t.Tenant == p.tok.Tenant
	default:
		return t.ID == p.tok.ID
	}
}

func (s *Server) createToken(r *http.Request, p *principal) (any, error) {
	var req api.TokenCreateRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if err := domain.ValidateTokenScope(req.Role, req.Tenant, req.Workspace); err != nil {
		return nil, err
	}
	if err := domain.ValidateTokenNode(req.Role, req.Tenant, req.Node); err != nil {
		return nil, err
	}
	if !p.admin() {
		switch {
		case req.Tenant == "": // an admin or platform runtime token
			return nil, &domain.Error{Code: domain.CodePermissionDenied, Message: "a token without a tenant (admin, platform runtime) needs an admin token to create"}
		case !p.seesTenant(req.Tenant):
			return nil, notFoundf("tenant", req.Tenant)
		case !p.managesTenant(req.Tenant):
			return nil, p.denied("create tokens")
		}
	}
	if len(req.Description) > 200 {
		return nil, domain.Invalid("description", "description is %d characters; the limit is 200", len(req.Description))
	}
	tok, secret, hash, err := newToken(req.Role, req.Tenant, req.Workspace, req.Description)
	if err != nil {
		return nil, err
	}
	tok.Node = req.Node // a node agent's token (hosts.go)
	if req.TTLSeconds != 0 {
		if err := domain.ValidateRange("ttlSeconds", req.TTLSeconds, 1, domain.MaxSeconds); err != nil {
			return nil, err
		}
		exp := s.clock.Now().Add(time.Duration(req.TTLSeconds) * time.Second).UTC()
		tok.ExpiresAt = &exp
	}
	v, err := s.propose(r.Context(), state.CmdTokenCreate, p.actor(), state.TokenCreate{Token: tok, Hash: hash})
	if err != nil {
		return nil, err
	}
	return api.TokenCreated{Token: *v.(*domain.Token), Secret: secret}, nil
}

func (s *Server) deleteToken(r *http.Request, p *principal) (any, error) {
	id := r.PathValue("id")
	found, ok := s.fsm.Token(id)
	if !ok || !seesToken(p, found) {
		return nil, notFoundf("token", id)
	}
	if p.runtime() {
		return nil, p.denied("revoke tokens")
	}
	return s.propose(r.Context(), state.CmdTokenDelete, p.actor(), state.TokenDelete{ID: id})
}

func (s *Server) listJobs(r *http.Request, p *principal) (any, error) {
	var f state.JobFilter
	var err error
	if f.States, err = jobStates(r.URL.Query()["state"]); err != nil {
		return nil, err
	}
	if f.Tenant, f.Workspace, err = scope(r, p); err != nil {
		return nil, err
	}
	if f.Limit, err = s.pageLimit(r); err != nil {
		return nil, err
	}
	if f.AfterID, err = readContinue(r, "jobs"); err != nil {
		return nil, err
	}
	js, more := s.fsm.JobsPage(f)
	if !more {
		return js, nil
	}
	return paged{v: js, next: continueToken("jobs", js[len(js)-1].ID)}, nil
}

// jobStates reads state filters: each value one state or a comma-separated
// list, in any case (running, Running, RUNNING), as squeue -t takes them.
func jobStates(values []string) ([]domain.JobState, error) {
	var out []domain.JobState
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			st, ok := domain.ParseJobState(name)
			if !ok {
				return nil, domain.Invalid("state", "state %q is not one of %v", name, domain.JobStates)
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// scope reads the tenant and workspace query filters and narrows them to
// what the caller may see: naming an invisible tenant or workspace is "not
// found"; a tenant admin always gets its tenant, a member its workspace.
func scope(r *http.Request, p *principal) (tenant, ws string, err error) {
	if p.nodeAgent() != "" {
		return "", "", p.denied("list tenants' jobs or events: a node agent's token reads only its own node's jobs (jobfabric job env ID --node NODE)")
	}
	q := r.URL.Query()
	tenant, ws = q.Get("tenant"), q.Get("workspace")
	if ws != "" && tenant == "" {
		return "", "", domain.Invalid("tenant", "filtering by workspace needs tenant too")
	}
	if tenant != "" && !p.seesTenant(tenant) {
		return "", "", notFoundf("tenant", tenant)
	}
	if ws != "" && !p.seesWorkspace(tenant, ws) {
		return "", "", notFoundf("workspace", domain.Ref(tenant, ws))
	}
	switch p.tok.Role {
	case domain.RoleTenantAdmin:
		tenant = p.tok.Tenant
	case domain.RoleRuntime:
		if p.tok.Tenant != "" {
			tenant = p.tok.Tenant
		}
	case domain.RoleMember:
		tenant, ws = p.tok.Tenant, p.tok.Workspace
	}
	return tenant, ws, nil
}

func (s *Server) submitJob(r *http.Request, p *principal) (any, error) {
	var spec domain.JobSpec
	if err := decodeJSON(r, &spec); err != nil {
		return nil, err
	}
	// A member's jobs go to its workspace; naming another is "not found".
	if p.tok.Role == domain.RoleMember {
		if spec.Tenant == "" {
			spec.Tenant = p.tok.Tenant
		}
		if spec.Workspace == "" {
			spec.Workspace = p.tok.Workspace
		}
	}
	if err := domain.ValidateJobSpec(&spec); err != nil {
		return nil, err
	}
	if !p.seesWorkspace(spec.Tenant, spec.Workspace) {
		return nil, &domain.Error{Code: domain.CodeNotFound, Field: "workspace", Message: "workspace " + strconv.Quote(domain.Ref(spec.Tenant, spec.Workspace)) + " not found"}
	}
	dry := r.URL.Query().Get("dryRun") == "true"
	if p.runtime() && !dry && !p.mirrorsSubmit(&spec) {
		// Runtimes run what users submit; they do not add work
		// (auth_bridge.go: a bridge mirrors a user's job by its externalId).
		return nil, p.denied("submit jobs without an externalId (a runtime submits only its users' jobs, by the runtime's id for them)")
	}
	if dry {
		d, err := s.dryRun(spec)
		if err != nil {
			return nil, err
		}
		return withStatus{http.StatusOK, d}, nil
	}
	key := r.Header.Get(idempotencyHeader)
	if len(key) > 128 {
		return nil, domain.Invalid(idempotencyHeader, "%s is %d characters; the limit is 128", idempotencyHeader, len(key))
	}
	return s.propose(r.Context(), state.CmdJobSubmit, p.actor(), state.JobSubmit{Spec: spec, IdempotencyKey: key})
}

func (s *Server) visibleJob(r *http.Request, p *principal) (*domain.Job, error) {
	return s.pathJob(r, func(j *domain.Job) bool { return p.seesWorkspace(j.Tenant, j.Workspace) })
}

// pathJob reads the job whose id is in the path; a job the caller does not
// see is not found.
func (s *Server) pathJob(r *http.Request, sees func(*domain.Job) bool) (*domain.Job, error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return nil, domain.Invalid("id", "job id %q is not a positive integer", raw)
	}
	j, ok := s.fsm.Job(id)
	if !ok || !sees(j) {
		return nil, notFoundf("job", id)
	}
	return j, nil
}

func (s *Server) getJob(r *http.Request, p *principal) (any, error) {
	j, err := s.visibleJob(r, p)
	if err != nil {
		return nil, err
	}
	return s.withLastReport(j), nil
}

func (s *Server) cancelJob(r *http.Request, p *principal) (any, error) {
	j, err := s.visibleJob(r, p)
	if err != nil {
		return nil, err
	}
	if p.runtime() && !p.mirrorsCancel(j) {
		// A runtime ends a job by reporting it failed or stopped; a bridge
		// cancels only the mirrors runtimes submitted (auth_bridge.go).
		return nil, p.denied("cancel jobs a runtime did not submit (report the job failed instead)")
	}
	return s.propose(r.Context(), state.CmdJobCancel, p.actor(), state.JobCancel{ID: j.ID})
}

// setJobPool moves a job that has not started to another pool: an
// admin's, or a runtime bridge's for the mirrors runtimes submitted (a
// tenant's runtime token: its own tenant's; another tenant's job is 404,
// as everywhere).
func (s *Server) setJobPool(r *http.Request, p *principal) (any, error) {
	j, err := s.visibleJob(r, p)
	if err != nil {
		return nil, err
	}
	if !p.admin() && !p.mirrorsCancel(j) {
		return nil, p.denied("move a job to another pool: an admin's, or a runtime's for a job a runtime submitted")
	}
	var req api.JobPoolRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Pool != "" {
		if err := domain.ValidatePoolName("pool", req.Pool); err != nil {
			return nil, err
		}
	}
	return s.propose(r.Context(), state.CmdJobPool, p.actor(), state.JobPool{ID: j.ID, Pool: req.Pool})
}

func (s *Server) reportJob(r *http.Request, p *principal) (any, error) {
	j, err := s.visibleJob(r, p)
	if err != nil {
		return nil, err
	}
	if !p.reports() {
		return nil, p.denied("report on jobs: a report is the runtime's word (use a runtime token)")
	}
	return s.proposeReport(r, p, j)
}

// proposeReport reads a report on job j from the request body, checks it
// and proposes it.
func (s *Server) proposeReport(r *http.Request, p *principal, j *domain.Job) (any, error) {
	var req api.JobReportRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	switch req.State {
	case state.ReportRunning, state.ReportSucceeded, state.ReportFailed, state.ReportStopped:
	case state.ReportRejected:
		if req.Message == "" {
			return nil, domain.Invalid("message", "a rejected report says why the runtime cannot start the job on its placement")
		}
	default:
		return nil, domain.Invalid("state", "state %q is not one of running, succeeded, failed, stopped, rejected", req.State)
	}
	if len(req.Message) > maxReportMessage {
		return nil, domain.Invalid("message", "message is %d characters; the limit is %d", len(req.Message), maxReportMessage)
	}
	now := s.clock.Now()
	if unchanged(j, &req) {
		// A heartbeat: the leader's memory, not the log (liveness.go).
		s.runtimes.beat(j.ID, now, s.jobLive)
		return s.withLastReport(j), nil
	}
	v, err := s.propose(r.Context(), state.CmdJobReport, p.actor(), state.JobReport{ID: j.ID, State: req.State, Message: req.Message})
	if err != nil {
		return nil, err
	}
	s.runtimes.beat(j.ID, now, s.jobLive)
	return s.withLastReport(v.(*domain.Job)), nil
}

// maxReportMessage matches the state machine's limit, checked here first so
// an oversized report never reaches the log.
const maxReportMessage = 1024

func (s *Server) events(r *http.Request, p *principal) (any, error) {
	q := r.URL.Query()
	var f state.EventFilter
	var err error
	if f.Tenant, f.Workspace, err = scope(r, p); err != nil {
		return nil, err
	}
	// A platform runtime reads tenants' events; the platform's own
	// (topology, members, admin tokens) stay with admins.
	f.TenantsOnly = p.runtime()
	if since := q.Get("since"); since != "" {
		if d, err := time.ParseDuration(since); err == nil && d >= 0 {
			f.Since = s.clock.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			f.Since = t
		} else {
			return nil, domain.Invalid("since", "since %q is neither a non-negative duration (1h, 30m) nor an RFC 3339 time", since)
		}
	}
	if f.Limit, err = s.pageLimit(r); err != nil {
		return nil, err
	}
	// Pages go back in time: the first is the newest limit events, each
	// next one the limit before it.
	if f.BeforeSeq, err = readContinue(r, "events"); err != nil {
		return nil, err
	}
	es, more := s.fsm.EventsPage(f)
	if !more {
		return es, nil
	}
	return paged{v: es, next: continueToken("events", es[0].Seq)}, nil
}
