package api

import (
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/verify"
)

// Revision numbers the API's shape: it goes up whenever a request or
// answer gains a field, a parameter or an endpoint (12: version in health,
// paginated jobs and events, several states in a job query; 13: telemetry
// push, usage, a job's runs; 14: job path health, GET /v1/jobs/{id}/health,
// GET /v1/fabric/hotspots; 15: GET /v1/queue, the queue in scheduling
// order and workspaces' quota use; a node's leaves by rail; 16: a
// workspace's preemption, requeue or cancel; 17: apply rules in health,
// the cluster's members and a join; 18: GET /v1/cluster/tls, the
// certificates and cluster secret in use).
const Revision = 18

type (
	// Health is the answer of GET /v1/health.
	Health struct {
		Status   string `json:"status"`
		Node     string `json:"node"`
		Leader   string `json:"leader"`
		IsLeader bool   `json:"isLeader"`
		URL      string `json:"url"`
		// Version is the server's build (internal/version); a client
		// warns when it differs from its own.
		Version string `json:"version"`
		// APIRevision is the server's Revision: a client newer than the
		// server may use fields the server does not know.
		APIRevision int `json:"apiRevision"`
		// ApplyRules is the highest version of the state machine's apply
		// rules this member's binary applies (absent: a binary older than
		// versions, which applies 1). The leader reads it to learn that a
		// member was upgraded.
		ApplyRules int `json:"applyRules,omitempty"`
	}
	// ClusterView lists the control-plane members.
	ClusterView struct {
		Leader  string          `json:"leader"`
		Members []ClusterMember `json:"members"`
		// PeerAuth is how the answering server (the leader, since requests
		// are forwarded) authenticates raft peers: "none" (a single server:
		// raft does not listen), "mtls", "secret" (cluster secret) or
		// "insecure" (--insecure-peers: anyone reaching the raft port).
		PeerAuth string `json:"peerAuth"`
		// LogStore is the raft log store of the answering server (the
		// leader): "wal" (raft-wal, one fsync a commit) or "bolt"
		// (raft-boltdb, a data directory made before raft-wal).
		LogStore string `json:"logStore"`
		// ApplyRules is the apply-rules version the leader proposes
		// commands at now: the highest every member applies.
		ApplyRules int `json:"applyRules"`
	}
	ClusterMember struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raftAddr"`
		APIAddr  string `json:"apiAddr,omitempty"`
		Suffrage string `json:"suffrage"`
		Leader   bool   `json:"leader"`
		// ApplyRules is the highest apply-rules version the member's
		// binary applies, as recorded in the state (1 for a member that
		// recorded none: a binary older than versions).
		ApplyRules int `json:"applyRules"`
	}
	TenantCreateRequest struct {
		Name            string              `json:"name" openapi:"required"`
		Isolation       domain.Isolation    `json:"isolation" openapi:"required"`
		Network         domain.NetworkModel `json:"network" openapi:"required"`
		JobSegmentation bool                `json:"jobSegmentation"`
		// Quota bounds the tenant as a whole (optional).
		Quota *domain.TenantQuota `json:"quota,omitempty"`
		// Sites limits where its jobs run (optional, data residency).
		Sites []string `json:"sites,omitempty"`
	}
	// TenantUpdateRequest changes a tenant's quota and sites; unset fields
	// stay.
	TenantUpdateRequest struct {
		Quota       *domain.TenantQuota `json:"quota,omitempty"`
		RemoveQuota bool                `json:"removeQuota,omitempty"`
		Sites       *[]string           `json:"sites,omitempty"`
	}
	WorkspaceCreateRequest struct {
		Name        string `json:"name" openapi:"required"`
		Guaranteed  int    `json:"guaranteed"`
		BorrowLimit int    `json:"borrowLimit"`
		LendLimit   int    `json:"lendLimit"`
		Weight      *int   `json:"weight,omitempty"` // default 1
		Priority    int    `json:"priority"`
		// Models carve the quota per GPU model.
		Models []domain.ModelQuota `json:"models,omitempty"`
		// Preemption is what a runtime bridge does with a preempted job at
		// its grace deadline: requeue (default) or cancel.
		Preemption string `json:"preemption,omitempty"`
	}
	// WorkspaceUpdateRequest changes only the fields it sets.
	WorkspaceUpdateRequest struct {
		Guaranteed  *int `json:"guaranteed,omitempty"`
		BorrowLimit *int `json:"borrowLimit,omitempty"`
		LendLimit   *int `json:"lendLimit,omitempty"`
		Weight      *int `json:"weight,omitempty"`
		Priority    *int `json:"priority,omitempty"`
		// Models, when set, replaces the model quotas (an empty list
		// removes them).
		Models *[]domain.ModelQuota `json:"models,omitempty"`
		// Preemption, when set, is requeue or cancel.
		Preemption *string `json:"preemption,omitempty"`
	}
	TokenCreateRequest struct {
		Role      domain.Role `json:"role" openapi:"required"`
		Tenant    string      `json:"tenant,omitempty"`
		Workspace string      `json:"workspace,omitempty"`
		// Node scopes a runtime token without tenant to one node's agent.
		Node        string `json:"node,omitempty"`
		Description string `json:"description,omitempty"`
		// TTLSeconds, when set, makes the token expire this long after it
		// is created (1 second to a year); 0: it never expires.
		TTLSeconds int64 `json:"ttlSeconds,omitempty"`
	}
	// TokenCreated carries the secret: the only time it is ever shown.
	TokenCreated struct {
		Token  domain.Token `json:"token"`
		Secret string       `json:"secret"`
	}
)

// JoinRequest is the body of POST /v1/cluster/members.
type JoinRequest struct {
	ID       string `json:"id" openapi:"required"`
	RaftAddr string `json:"raftAddr" openapi:"required"`
	APIAddr  string `json:"apiAddr" openapi:"required"`
	// Rules is the highest apply-rules version the joining binary
	// applies (absent: 1). A member below the version the cluster
	// proposes at is refused.
	Rules int `json:"rules,omitempty"`
}

// DryRun is the answer of a dry-run submit: where the job would land now,
// or why it would wait.
type DryRun struct {
	Placement []domain.Placement `json:"placement,omitempty"`
	Level     string             `json:"level,omitempty"`
	Reason    *domain.Reason     `json:"reason,omitempty"`
}

// JobReportRequest is the body of POST /v1/jobs/{id}/report: a runtime's
// word on a job. State is running (also a heartbeat), succeeded, failed,
// stopped (a Preempting job has stopped; its GPUs may go) or rejected (the
// runtime cannot start a Ready job on its placement, a Slurm node down for
// instance: the job is requeued and placed again, not failed; Message,
// required, says why).
type JobReportRequest struct {
	State   string `json:"state" openapi:"required" enum:"state.ReportRunning,state.ReportSucceeded,state.ReportFailed,state.ReportStopped,state.ReportRejected"`
	Message string `json:"message,omitempty"`
}

// JobPoolRequest is the body of POST /v1/jobs/{id}/pool: move a job that
// has not started (Pending, Placed, Ready) to another server pool, as its
// runtime now allows it to run there (the Slurm bridge, when a user moves
// a held job to another partition). A job already placed keeps its
// placement only if the new pool holds every server of it; otherwise the
// move is refused (failed_precondition) and the runtime hands the job
// back first (a rejected report).
type JobPoolRequest struct {
	// Pool is the server pool the job may be placed on from now on; empty:
	// any server.
	Pool string `json:"pool,omitempty"`
}

// FabricDiff is the per-device difference between two fabric revisions.
type FabricDiff struct {
	From    uint64       `json:"from"`
	To      uint64       `json:"to"`
	Devices []DeviceDiff `json:"devices"`
}

// DeviceDiff is one device's changes as a person reads them (Junos:
// delete/set lines; others: unified hunks named by their section).
type DeviceDiff struct {
	Device string `json:"device"`
	Text   string `json:"text"`
}

// FabricVerify is the verifier's answer about the current intent.
type FabricVerify struct {
	OK     bool           `json:"ok"`
	Report *verify.Report `json:"report"` // one check per property, with its failures
	Text   string         `json:"text"`   // the report as a person reads it
	// Reachability maps "leaf/port" to the ports it reaches (with matrix=true).
	Reachability map[string][]string `json:"reachability,omitempty"`
}
