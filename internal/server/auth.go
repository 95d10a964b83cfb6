package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// principal is the authenticated caller.
type principal struct {
	tok domain.Token
}

func (p *principal) actor() string { return string(p.tok.Role) + ":" + p.tok.ID }

func (p *principal) admin() bool { return p.tok.Role == domain.RoleAdmin }

// platform: an admin, or a runtime token with no tenant and no node (a
// platform-wide runtime), which sees every tenant but changes none. A
// node agent's token sees only its node (hosts.go).
func (p *principal) platform() bool {
	return p.admin() || (p.tok.Role == domain.RoleRuntime && p.tok.Tenant == "" && p.tok.Node == "")
}

// seesTenant: admin and platform runtime see all tenants, tenant-scoped
// tokens only their own. Everything a principal cannot see answers 404, as
// if it did not exist.
func (p *principal) seesTenant(tenant string) bool {
	return p.platform() || p.tok.Tenant == tenant
}

// seesWorkspace: a member sees only its own workspace; tenant admins and
// runtimes every workspace of their tenant.
func (p *principal) seesWorkspace(tenant, ws string) bool {
	switch p.tok.Role {
	case domain.RoleAdmin, domain.RoleTenantAdmin, domain.RoleRuntime:
		return p.seesTenant(tenant)
	default:
		return p.tok.Tenant == tenant && p.tok.Workspace == ws
	}
}

// managesTenant: admin, or the tenant's tenant-admin.
func (p *principal) managesTenant(tenant string) bool {
	return p.admin() || (p.tok.Role == domain.RoleTenantAdmin && p.tok.Tenant == tenant)
}

// reports: a job's progress is its runtime's word (or an admin's); users
// who submit jobs may not claim them running or done.
func (p *principal) reports() bool {
	return p.admin() || p.tok.Role == domain.RoleRuntime
}

// runtime: runtimes read, watch and report; they never submit, cancel or
// manage anything.
func (p *principal) runtime() bool { return p.tok.Role == domain.RoleRuntime }

// denied is the 403 of a caller that may see the object but not do this.
func (p *principal) denied(what string) error {
	return &domain.Error{Code: domain.CodePermissionDenied, Message: fmt.Sprintf("a %s token cannot %s", p.tok.Role, what)}
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
	if !ok && s.catchUp(r.Context()) {
		tok, ok = s.fsm.Authenticate(id, secret)
	}
	if !ok {
		return nil, errUnauthenticated
	}
	now := s.clock.Now()
	if tok.Expired(now) {
		return nil, &domain.Error{Code: domain.CodeTokenExpired,
			Message: fmt.Sprintf("token %s expired at %s; ask for a new one", tok.ID, tok.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	s.uses.record(tok.ID, now)
	return &principal{tok: *tok}, nil
}

// catchUp waits (at most 2 s) until a leader has applied every entry it
// knows committed, and says whether it waited. A server that just won an
// election may not have applied the token a follower already has, and the
// follower forwards its callers to it; a valid token must not be refused
// for that. It writes nothing, so a stream of bad tokens costs no log
// entries: at most a wait for entries already committed.
func (s *Server) catchUp(ctx context.Context) bool {
	if !s.store.IsLeader() {
		return false
	}
	target := s.store.CommitIndex()
	if s.fsm.AppliedIndex() >= target {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		ch := s.fsm.Changed()
		if s.fsm.AppliedIndex() >= target {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return true
		}
	}
}
