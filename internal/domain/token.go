package domain

import "time"

// Role is what a token may do.
type Role string

const (
	// RoleAdmin operates the platform: inventory, tenants, everything.
	RoleAdmin Role = "admin"
	// RoleTenantAdmin manages one tenant: its workspaces, jobs and tokens.
	RoleTenantAdmin Role = "tenant-admin"
	// RoleMember submits and manages jobs of one workspace.
	RoleMember Role = "member"
	// RoleRuntime is a workload runtime (Slurm, Kubernetes, a launcher) or
	// node agent: it reads jobs and reports their progress, for one tenant
	// or (unscoped) the platform.
	RoleRuntime Role = "runtime"
)

// Token is a bearer token as stored: only the SHA-256 of its secret is kept.
type Token struct {
	// ID names the token (jf_ID_SECRET is its secret); it is not a secret.
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Tenant and Workspace scope the token: a tenant-admin's tenant, a
	// member's workspace, a tenant runtime's tenant.
	Tenant    string `json:"tenant,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Node scopes a runtime token to one server's agent (host facts,
	// heartbeats, the bindings of jobs placed there).
	Node        string    `json:"node,omitempty"`
	Description string    `json:"description,omitempty"`
	Hash        string    `json:"-"`
	CreatedAt   time.Time `json:"createdAt"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	// ExpiresAt, when set, is when the token stops authenticating: a
	// request with it answers 401 token_expired.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// LastUsedAt is when the token last authenticated a request. The
	// leader keeps it in memory and commits it at most once a minute per
	// token, so it may be up to a minute behind (and a minute of it is lost
	// when the leader changes).
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
}

// Scope names what a token reaches, for people: TENANT/WORKSPACE, TENANT,
// "node NAME" (a node agent's token), "platform" (an unscoped runtime) or
// "" (an admin, which reaches everything).
func (t *Token) Scope() string {
	switch {
	case t.Workspace != "":
		return t.Tenant + "/" + t.Workspace
	case t.Tenant != "":
		return t.Tenant
	case t.Node != "":
		return "node " + t.Node
	case t.Role == RoleRuntime:
		return "platform"
	}
	return ""
}

// Expired reports whether the token no longer authenticates at now.
func (t *Token) Expired(now time.Time) bool {
	return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)
}

// ValidateTokenScope checks that the role and scope fit together.
func ValidateTokenScope(role Role, tenant, workspace string) *Error {
	switch role {
	case RoleAdmin:
		if tenant != "" || workspace != "" {
			return Invalid("tenant", "an admin token is not scoped to a tenant or workspace")
		}
	case RoleTenantAdmin:
		if err := ValidateName("tenant", tenant); err != nil {
			return err
		}
		if workspace != "" {
			return Invalid("workspace", "a tenant-admin token is scoped to a whole tenant, not a workspace")
		}
	case RoleMember:
		if err := ValidateName("tenant", tenant); err != nil {
			return err
		}
		if err := ValidateName("workspace", workspace); err != nil {
			return err
		}
	case RoleRuntime:
		if tenant != "" {
			if err := ValidateName("tenant", tenant); err != nil {
				return err
			}
		}
		if workspace != "" {
			return Invalid("workspace", "a runtime token is scoped to a tenant or the platform, not a workspace")
		}
	default:
		return Invalid("role", "role %q is not one of admin, tenant-admin, member, runtime", role)
	}
	return nil
}
