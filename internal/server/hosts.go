package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/hostfacts"
	"github.com/jobfabric/jobfabric/internal/state"
)

// Hosts: node agents report facts and heartbeats; jobs' bindings are
// served to agents, launchers and the Slurm integration.
//
// Who may do what:
//   - a node agent's token (runtime, scoped to a node) reports facts and
//     heartbeats for its node only, and reads the bindings of, and reports
//     on, the jobs placed on that node; it sees nothing else;
//   - a platform runtime token (runtime, no tenant) may do so for every
//     node; admins too, and they set the host policy and accept baselines;
//   - users read the bindings of the jobs they can see.

// hostWatch is the leader's memory of heartbeats. It is not replicated: a
// new leader gives every node a full timeout from its election.
type hostWatch struct {
	mu          sync.Mutex
	seen        map[string]time.Time
	leaderSince time.Time
}

func newHostWatch() *hostWatch { return &hostWatch{seen: map[string]time.Time{}} }

func (w *hostWatch) beat(node string, at time.Time) {
	w.mu.Lock()
	w.seen[node] = at
	w.mu.Unlock()
}

func (w *hostWatch) last(node string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[node]
	return t, ok
}

func (s *Server) hostRoutes() []route {
	s.hosts = newHostWatch()
	nodeQ := param{"node", "string", "the node (default: the job's only node)"}
	return []route{
		{method: "PUT", path: "/v1/nodes/{name}/facts", summary: "Report the node's GPUs, NICs and topology as its agent found them (the node's agent, a platform runtime or admin); drift from the inventory becomes node conditions and events, and the host policy may cordon the node", access: authed,
			body: api.HostReportRequest{}, resp: domain.HostStatus{}, h: s.reportFacts},
		{method: "POST", path: "/v1/nodes/{name}/heartbeat", summary: "The node's agent is alive; the answer says whether the server needs its facts again and how often to beat. A node not heard for the policy's timeout is marked unhealthy", access: authed,
			body: api.HeartbeatRequest{}, resp: api.HeartbeatResponse{}, h: s.heartbeat},
		{method: "GET", path: "/v1/nodes/{name}/host", summary: "The node's agent record: last facts, GPU baseline, drift and heartbeat conditions (admin, platform runtime, the node's agent)", access: authed,
			resp: domain.HostStatus{}, h: s.getHost},
		{method: "POST", path: "/v1/nodes/{name}/accept", summary: "Accept the node's reported GPUs as its baseline after a deliberate replacement (admin)", access: authed,
			resp: domain.HostStatus{}, h: s.acceptHost},
		{method: "POST", path: "/v1/nodes/{name}/jobs/{id}/report", summary: "Report on a job placed on the node, as the node's agent or a platform runtime (running, succeeded, failed, stopped)", access: authed,
			body: api.JobReportRequest{}, resp: domain.Job{}, h: s.reportNodeJob},
		{method: "GET", path: "/v1/hosts", summary: "Every node agent record (admin, platform runtime)", access: authed, resp: []domain.HostStatus{}, h: s.listHosts},
		{method: "GET", path: "/v1/hosts/policy", summary: "The host policy: heartbeat timeout, which drift cordons, tenants' minimum drivers", access: authed, resp: domain.HostPolicy{}, h: s.getHostPolicy},
		{method: "PUT", path: "/v1/hosts/policy", summary: "Replace the host policy (admin)", access: authed, body: domain.HostPolicy{}, resp: domain.HostPolicy{}, h: s.putHostPolicy},
		{method: "GET", path: "/v1/jobs/{id}/binding", summary: "What a host applies for the job on a node: visible GPUs and MIG devices by UUID, rail NICs for NCCL and UCX, CPU/NUMA affinity, device files, fabric identity; rendered by the CLI as export lines, a Slurm TaskProlog or a CDI spec", access: authed,
			query: []param{nodeQ}, resp: binding.Binding{}, h: s.getBinding},
		{method: "GET", path: "/v1/external-jobs/{externalId}", summary: "The job a workload runtime knows by its own id (slurm:4242), as the job's readers or the agent of a node it is placed on see it; each tenant's ids are its own, so a caller that sees several tenants names one", access: authed,
			query: []param{{"tenant", "string", "the job's tenant (needed when the caller sees jobs of several tenants with the id)"}}, resp: domain.Job{}, h: s.externalJob},
	}
}

// nodeAgent is the node a node-scoped token acts for, "" for other tokens.
func (p *principal) nodeAgent() string {
	if p.tok.Role == domain.RoleRuntime {
		return p.tok.Node
	}
	return ""
}

// actsFor: admins and platform runtimes act for every node, a node's agent
// for its own.
func (p *principal) actsFor(node string) bool {
	return p.platform() || (p.nodeAgent() != "" && p.nodeAgent() == node)
}

func placedOn(j *domain.Job, node string) bool {
	return slices.ContainsFunc(j.Placement, func(pl domain.Placement) bool { return pl.Server == node })
}

// seesJob: the job's readers, or the agent of a node the job is placed on.
func (p *principal) seesJob(j *domain.Job) bool {
	return p.seesWorkspace(j.Tenant, j.Workspace) || (p.nodeAgent() != "" && placedOn(j, p.nodeAgent()))
}

func (s *Server) nodeFor(r *http.Request, p *principal) (string, error) {
	node := r.PathValue("name")
	if !p.actsFor(node) {
		if p.nodeAgent() != "" {
			return "", &domain.Error{Code: domain.CodePermissionDenied, Field: "name", Message: "this token is node " + p.nodeAgent() + "'s agent: it cannot act for node " + node}
		}
		return "", p.denied("act for nodes (use a node agent's or platform runtime token)")
	}
	return node, nil
}

func (s *Server) reportFacts(r *http.Request, p *principal) (any, error) {
	node, err := s.nodeFor(r, p)
	if err != nil {
		return nil, err
	}
	var req api.HostReportRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if err := domain.ValidateHostFacts(&req.Facts); err != nil {
		return nil, err
	}
	s.hosts.beat(node, s.clock.Now())
	hash := hostfacts.Fingerprint(&req.Facts)
	if cur, ok := s.fsm.Host(node); ok && cur.FactsHash == hash && cur.Agent == req.Agent {
		if _, lost := cur.Condition(domain.CondHeartbeat); !lost {
			return s.withHeartbeat(cur), nil // the same facts again: nothing to log
		}
	}
	v, err := s.propose(r.Context(), state.CmdHostReport, p.actor(), state.HostReport{Node: node, Agent: req.Agent, Facts: req.Facts, Hash: hash})
	if err != nil {
		return nil, err
	}
	return s.withHeartbeat(v.(*domain.HostStatus)), nil
}

func (s *Server) withHeartbeat(h *domain.HostStatus) *domain.HostStatus {
	if t, ok := s.hosts.last(h.Node); ok {
		h.LastHeartbeat = &t
	}
	return h
}

func (s *Server) heartbeat(r *http.Request, p *principal) (any, error) {
	node, err := s.nodeFor(r, p)
	if err != nil {
		return nil, err
	}
	var req api.HeartbeatRequest
	if err := decodeJSON(r, &req); err != nil {
		return nil, err
	}
	if !s.fsm.HasServer(node) {
		return nil, notFoundf("server", node)
	}
	s.hosts.beat(node, s.clock.Now())
	pol := s.fsm.HostPolicy()
	resp := api.HeartbeatResponse{TimeoutSeconds: pol.HeartbeatTimeoutSeconds, HeartbeatSeconds: max(1, pol.HeartbeatTimeoutSeconds/3), NeedFacts: true}
	cur, ok := s.fsm.Host(node)
	if ok {
		resp.NeedFacts = cur.FactsHash != req.FactsHash || cur.Agent != req.Agent
		if _, lost := cur.Condition(domain.CondHeartbeat); lost && !resp.NeedFacts {
			if _, err := s.propose(r.Context(), state.CmdHostHeartbeat, p.actor(), state.HostHeartbeat{Nodes: []string{node}}); err != nil {
				return nil, err
			}
			cur, _ = s.fsm.Host(node)
		}
		resp.Conditions = cur.Conditions
	}
	resp.Condition = s.fsm.NodeCondition(node)
	return resp, nil
}

func (s *Server) getHost(r *http.Request, p *principal) (any, error) {
	node, err := s.nodeFor(r, p)
	if err != nil {
		return nil, err
	}
	h, ok := s.fsm.Host(node)
	if !ok {
		return nil, &domain.Error{Code: domain.CodeNotFound, Field: "name", Message: "node " + strconv.Quote(node) + " has no agent report"}
	}
	return s.withHeartbeat(h), nil
}

func (s *Server) acceptHost(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	v, err := s.propose(r.Context(), state.CmdHostAccept, p.actor(), state.HostAccept{Node: r.PathValue("name")})
	if err != nil {
		return nil, err
	}
	return s.withHeartbeat(v.(*domain.HostStatus)), nil
}

func (s *Server) listHosts(r *http.Request, p *principal) (any, error) {
	if !p.platform() {
		return nil, p.denied("list node agents")
	}
	hs := s.fsm.Hosts()
	for i := range hs {
		s.withHeartbeat(&hs[i])
	}
	return hs, nil
}

func (s *Server) getHostPolicy(r *http.Request, p *principal) (any, error) {
	if !p.platform() {
		return nil, p.denied("read the host policy")
	}
	return s.fsm.HostPolicy(), nil
}

func (s *Server) putHostPolicy(r *http.Request, p *principal) (any, error) {
	if !p.admin() {
		return nil, errAdminOnly
	}
	var pol domain.HostPolicy
	if err := decodeJSON(r, &pol); err != nil {
		return nil, err
	}
	if err := domain.ValidateHostPolicy(&pol); err != nil {
		return nil, err
	}
	return s.propose(r.Context(), state.CmdHostPolicy, p.actor(), state.HostPolicySet{Policy: pol})
}

// jobFor reads the job in the path, visible to its readers and to the
// agents of the nodes it is placed on.
func (s *Server) jobFor(r *http.Request, p *principal) (*domain.Job, error) {
	return s.pathJob(r, p.seesJob)
}

func (s *Server) getBinding(r *http.Request, p *principal) (any, error) {
	j, err := s.jobFor(r, p)
	if err != nil {
		return nil, err
	}
	node := r.URL.Query().Get("node")
	if node == "" {
		switch {
		case p.nodeAgent() != "":
			node = p.nodeAgent()
		case len(j.Placement) == 1:
			node = j.Placement[0].Server
		default:
			return nil, domain.Invalid("node", "job %d runs on %d nodes: name one with ?node=", j.ID, len(j.Placement))
		}
	}
	if a := p.nodeAgent(); a != "" && a != node && !p.seesWorkspace(j.Tenant, j.Workspace) {
		return nil, notFoundf("job", j.ID)
	}
	in, derr := bindingInput(s.fsm, j.ID, node)
	if derr != nil {
		return nil, derr
	}
	return binding.Bind(in)
}

func (s *Server) externalJob(r *http.Request, p *principal) (any, error) {
	ext := r.PathValue("externalId")
	if err := domain.ValidateExternalID("externalId", ext); err != nil {
		return nil, err
	}
	tenant := r.URL.Query().Get("tenant")
	// Each tenant names its own jobs: the id a runtime gives one tenant's
	// job may be another tenant's too (one that guessed it). Only the jobs
	// the caller sees count, and one that sees several tenants' must say
	// which it means.
	jobs := slices.DeleteFunc(s.fsm.JobsByExternalID(ext), func(j *domain.Job) bool {
		return !p.seesJob(j) || (tenant != "" && j.Tenant != tenant)
	})
	if tenant == "" {
		var tenants []string
		for _, j := range jobs {
			if !slices.Contains(tenants, j.Tenant) {
				tenants = append(tenants, j.Tenant)
			}
		}
		if len(tenants) > 1 {
			slices.Sort(tenants)
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "tenant",
				Message: fmt.Sprintf("externalId %s names jobs of %d tenants (%s): name one with ?tenant=", ext, len(tenants), strings.Join(tenants, ", "))}
		}
	}
	j := state.PickExternal(jobs, func(*domain.Job) bool { return true })
	if j == nil {
		return nil, notFoundf("job with externalId", ext)
	}
	return j, nil
}

func (s *Server) reportNodeJob(r *http.Request, p *principal) (any, error) {
	node, err := s.nodeFor(r, p)
	if err != nil {
		return nil, err
	}
	j, err := s.jobFor(r, p)
	if err != nil {
		return nil, err
	}
	if !placedOn(j, node) {
		return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "name", Message: "job " + strconv.FormatUint(j.ID, 10) + " holds nothing on node " + node + " (it is " + string(j.State) + ")"}
	}
	return s.proposeReport(r, p, j)
}

// hostLoop, on the leader, marks nodes whose agent went silent for the
// policy's timeout (and clears the mark when they are heard again). It
// checks four times per timeout.
func (s *Server) hostLoop(ctx context.Context) {
	for {
		timeout := s.fsm.HostPolicy().HeartbeatTimeout()
		t, fire := s.clock.NewTimer(min(max(timeout/4, 50*time.Millisecond), 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop() // a fake clock would wait for this tick forever
			return
		case <-fire:
		}
		if !s.store.IsLeader() {
			s.hosts.mu.Lock()
			s.hosts.leaderSince = time.Time{}
			s.hosts.mu.Unlock()
			continue
		}
		if err := s.checkHeartbeats(ctx, timeout); err != nil {
			s.log.Warn("heartbeat check", "err", err)
		}
	}
}

// checkHeartbeats proposes the nodes that went silent and those heard
// again. A node never heard by this leader counts from its election.
func (s *Server) checkHeartbeats(ctx context.Context, timeout time.Duration) error {
	now := s.clock.Now()
	s.hosts.mu.Lock()
	if s.hosts.leaderSince.IsZero() {
		s.hosts.leaderSince = now
	}
	since := s.hosts.leaderSince
	seen := make(map[string]time.Time, len(s.hosts.seen))
	for k, v := range s.hosts.seen {
		seen[k] = v
	}
	s.hosts.mu.Unlock()
	lost := state.HostHeartbeat{Lost: true, LastSeen: map[string]time.Time{}, TimeoutSeconds: int64(timeout / time.Second)}
	back := state.HostHeartbeat{}
	for node, isLost := range s.fsm.HeartbeatState() {
		last, heard := seen[node]
		basis := last
		if !heard || last.Before(since) {
			basis = since
		}
		silent := now.Sub(basis) >= timeout
		switch {
		case silent && !isLost:
			lost.Nodes = append(lost.Nodes, node)
			if heard {
				lost.LastSeen[node] = last
			}
		case !silent && isLost && heard && !last.Before(since):
			back.Nodes = append(back.Nodes, node)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cmd := range []state.HostHeartbeat{lost, back} {
		if len(cmd.Nodes) == 0 {
			continue
		}
		slices.Sort(cmd.Nodes)
		if _, err := s.propose(cctx, state.CmdHostHeartbeat, "system", cmd); err != nil {
			return err
		}
	}
	return nil
}
