package state

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// CommandType names a command in the log. Values are stable: they are in
// every persisted log and snapshot.
type CommandType string

const (
	CmdTopologyApply   CommandType = "topology.apply"
	CmdTenantCreate    CommandType = "tenant.create"
	CmdTenantDelete    CommandType = "tenant.delete"
	CmdWorkspaceCreate CommandType = "workspace.create"
	CmdWorkspaceUpdate CommandType = "workspace.update"
	CmdWorkspaceDelete CommandType = "workspace.delete"
	CmdTokenCreate     CommandType = "token.create"
	CmdTokenDelete     CommandType = "token.delete"
	CmdJobSubmit       CommandType = "job.submit"
	CmdJobCancel       CommandType = "job.cancel"
	CmdJobsPlace       CommandType = "jobs.place"
	CmdMemberSet       CommandType = "member.set"
)

// Command is the envelope of every log entry. At and Actor are decided by the
// proposer (the API server) so that apply stays deterministic.
type Command struct {
	Type    CommandType     `json:"type"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	Payload json.RawMessage `json:"payload"`
}

// Payloads.
type (
	TopologyApply struct {
		Topology domain.Topology `json:"topology"`
	}
	TenantCreate struct {
		Tenant domain.Tenant `json:"tenant"`
	}
	TenantDelete struct {
		Name string `json:"name"`
	}
	WorkspaceCreate struct {
		Workspace domain.Workspace `json:"workspace"`
	}
	// WorkspaceUpdate replaces the quota fields of an existing workspace.
	WorkspaceUpdate struct {
		Workspace domain.Workspace `json:"workspace"`
	}
	WorkspaceDelete struct {
		Tenant string `json:"tenant"`
		Name   string `json:"name"`
	}
	TokenCreate struct {
		Token domain.Token `json:"token"`
		// Hash is carried separately because Token.Hash is never serialised to clients.
		Hash string `json:"hash"`
	}
	TokenDelete struct {
		ID string `json:"id"`
	}
	JobSubmit struct {
		Spec domain.JobSpec `json:"spec"`
		// IdempotencyKey, when set, makes a retried submit return the job
		// the first attempt created instead of a second job.
		IdempotencyKey string `json:"idempotencyKey,omitempty"`
	}
	JobCancel struct {
		ID uint64 `json:"id"`
	}
	// JobsPlace commits a scheduler plan: each job gets its placements and
	// becomes Placed. The FSM re-checks every GPU is free (the plan applier).
	JobsPlace struct {
		Jobs []JobPlacement `json:"jobs"`
		// Reasons explain pending jobs the plan did not place.
		Reasons map[uint64]domain.Reason `json:"reasons,omitempty"`
		// NetworkGate: placed jobs wait (Placed) for the fabric revision
		// carrying their network to be deployed before they are Ready.
		NetworkGate bool `json:"networkGate,omitempty"`
	}
	JobPlacement struct {
		ID         uint64             `json:"id"`
		Placements []domain.Placement `json:"placements"`
	}
	// MemberSet records a server of the cluster and where its API listens, so
	// followers can forward requests to the leader.
	MemberSet struct {
		Member Member `json:"member"`
	}
)

// Member is one server of the control-plane cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr"`
}

// Encode builds the log entry for a command payload.
func Encode(t CommandType, at time.Time, actor string, payload any) ([]byte, error) {
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", t, err)
	}
	return json.Marshal(Command{Type: t, At: at.UTC(), Actor: actor, Payload: p})
}

// Result is what Apply returns for every command: the created or changed
// object, or the typed error that refused the command (state unchanged).
type Result struct {
	Value any
	Err   *domain.Error
}
