package server

import (
	"net/http"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// principal is the authenticated caller.
type principal struct {
	tok domain.Token
}

func (p *principal) actor() string { return string(p.tok.Role) + ":" + p.tok.ID }

func (p *principal) admin() bool { return p.tok.Role == domain.RoleAdmin }

// seesTenant: admin sees all tenants, tenant-scoped tokens only their own.
// Everything a principal cannot see answers 404, as if it did not exist.
func (p *principal) seesTenant(tenant string) bool {
	return p.admin() || p.tok.Tenant == tenant
}

// seesWorkspace: a member sees only its own workspace.
func (p *principal) seesWorkspace(tenant, ws string) bool {
	switch p.tok.Role {
	case domain.RoleAdmin:
		return true
	case domain.RoleTenantAdmin:
		return p.tok.Tenant == tenant
	default:
		return p.tok.Tenant == tenant && p.tok.Workspace == ws
	}
}

// managesTenant: admin, or the tenant's tenant-admin.
func (p *principal) managesTenant(tenant string) bool {
	return p.admin() || (p.tok.Role == domain.RoleTenantAdmin && p.tok.Tenant == tenant)
}

func (s *Server) authenticate(r *http.Request) (*principal, error) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return nil, errUnauthenticated
	}
	secret = strings.TrimSpace(secret)
	id, ok := parseToken(secret)
	if !ok {
		return nil, errUnauthenticated
	}
	tok, ok := s.fsm.Authenticate(id, secret)
	if !ok {
		return nil, errUnauthenticated
	}
	return &principal{tok: *tok}, nil
}
