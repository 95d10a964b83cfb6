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
	ID        string `json:"id"`
	Role      Role   `json:"role"`
	Tenant    string `json:"tenant,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Node scopes a runtime token to one server's agent (host facts,
	// heartbeats, the bindings of jobs placed there).
	Node        string    `json:"node,omitempty"`
	Description string    `json:"description,omitempty"`
	Hash        string    `json:"-"`
	CreatedAt   time.Time `json:"createdAt"`
	CreatedBy   string    `json:"createdBy,omitempty"`
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
