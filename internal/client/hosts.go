package client

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/binding"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// Node agents and bindings.

func nodePath(node, rest string) string { return "/v1/nodes/" + url.PathEscape(node) + rest }

// ReportFacts sends a node's facts (its agent, a platform runtime or admin).
func (c *Client) ReportFacts(ctx context.Context, node string, req api.HostReportRequest) (*domain.HostStatus, error) {
	var out domain.HostStatus
	return &out, c.Do(ctx, "PUT", nodePath(node, "/facts"), req, &out)
}

// Heartbeat tells the server the node's agent is alive.
func (c *Client) Heartbeat(ctx context.Context, node string, req api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	var out api.HeartbeatResponse
	return &out, c.Do(ctx, "POST", nodePath(node, "/heartbeat"), req, &out)
}

// Host returns a node's agent record.
func (c *Client) Host(ctx context.Context, node string) (*domain.HostStatus, error) {
	var out domain.HostStatus
	return &out, c.Do(ctx, "GET", nodePath(node, "/host"), nil, &out)
}

// Hosts lists every agent record.
func (c *Client) Hosts(ctx context.Context) ([]domain.HostStatus, error) {
	var out []domain.HostStatus
	return out, c.Do(ctx, "GET", "/v1/hosts", nil, &out)
}

// AcceptHost pins a node's reported GPUs as its baseline.
func (c *Client) AcceptHost(ctx context.Context, node string) (*domain.HostStatus, error) {
	var out domain.HostStatus
	return &out, c.Do(ctx, "POST", nodePath(node, "/accept"), nil, &out)
}

// HostPolicy returns the host policy.
func (c *Client) HostPolicy(ctx context.Context) (*domain.HostPolicy, error) {
	var out domain.HostPolicy
	return &out, c.Do(ctx, "GET", "/v1/hosts/policy", nil, &out)
}

// SetHostPolicy replaces the host policy.
func (c *Client) SetHostPolicy(ctx context.Context, p domain.HostPolicy) (*domain.HostPolicy, error) {
	var out domain.HostPolicy
	return &out, c.Do(ctx, "PUT", "/v1/hosts/policy", p, &out)
}

// Binding returns what a host applies for a job on a node ("" when the job
// runs on one node, or for a node agent's token, its node).
func (c *Client) Binding(ctx context.Context, job uint64, node string) (*binding.Binding, error) {
	p := fmt.Sprintf("/v1/jobs/%d/binding", job)
	if node != "" {
		p += "?node=" + url.QueryEscape(node)
	}
	var out binding.Binding
	return &out, c.Do(ctx, "GET", p, nil, &out)
}

// JobByExternalID finds tenant's job that a runtime knows by its id
// ("slurm:4242"). Each tenant's ids are its own: tenant "" asks for the
// caller's only tenant with the id, and is refused when the caller sees
// jobs of several tenants with it.
func (c *Client) JobByExternalID(ctx context.Context, ext, tenant string) (*domain.Job, error) {
	p := "/v1/external-jobs/" + url.PathEscape(ext)
	if tenant != "" {
		p += "?tenant=" + url.QueryEscape(tenant)
	}
	var out domain.Job
	return &out, c.Do(ctx, "GET", p, nil, &out)
}

// ReportNodeJob reports on a job placed on a node, as that node's agent.
func (c *Client) ReportNodeJob(ctx context.Context, node string, job uint64, state, message string) (*domain.Job, error) {
	var out domain.Job
	return &out, c.Do(ctx, "POST", nodePath(node, fmt.Sprintf("/jobs/%d/report", job)), api.JobReportRequest{State: state, Message: message}, &out)
}

// Nodes lists the servers with their condition and GPU use (admin).
func (c *Client) Nodes(ctx context.Context) ([]domain.NodeView, error) {
	var out []domain.NodeView
	return out, c.Do(ctx, "GET", "/v1/nodes", nil, &out)
}

// ReportRuntimeNodes tells jobfabric which servers a runtime can and
// cannot use (admin or platform runtime token); it answers the conditions
// that changed.
func (c *Client) ReportRuntimeNodes(ctx context.Context, req api.RuntimeNodesRequest) ([]domain.NodeCondition, error) {
	var out []domain.NodeCondition
	return out, c.Do(ctx, "POST", "/v1/nodes/runtime", req, &out)
}
