package state

import (
	"maps"
	"slices"
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Token commands: create, delete, and the leader's last-use batch.

type storedToken struct {
	domain.Token
	Hash string `json:"hash"`
}

func (f *FSM) applyTokenCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[TokenCreate](c)
	if derr != nil {
		return nil, derr
	}
	t := p.Token
	if err := domain.ValidateTokenScope(t.Role, t.Tenant, t.Workspace); err != nil {
		return nil, err
	}
	if err := domain.ValidateTokenNode(t.Role, t.Tenant, t.Node); err != nil {
		return nil, err
	}
	if len(p.Hash) != 64 {
		return nil, domain.Errorf(domain.CodeInternal, "token hash must be a hex SHA-256")
	}
	if t.Tenant != "" {
		if _, ok := f.d.Tenants[t.Tenant]; !ok {
			return nil, domain.NotFound("tenant", t.Tenant)
		}
	}
	if t.Workspace != "" {
		if _, ok := f.d.Workspaces[domain.Ref(t.Tenant, t.Workspace)]; !ok {
			return nil, domain.NotFound("workspace", domain.Ref(t.Tenant, t.Workspace))
		}
	}
	if _, ok := f.d.Tokens[t.ID]; ok {
		return nil, domain.Errorf(domain.CodeAlreadyExists, "token %q already exists", t.ID)
	}
	if t.ExpiresAt != nil && !t.ExpiresAt.After(c.At) {
		return nil, domain.Invalid("ttlSeconds", "token would expire at %s, not after its creation at %s", t.ExpiresAt.UTC().Format(time.RFC3339), c.At.UTC().Format(time.RFC3339))
	}
	t.LastUsedAt = nil
	if c.check {
		return nil, nil
	}
	t.CreatedAt, t.CreatedBy = c.At, c.Actor
	f.d.Tokens[t.ID] = &storedToken{Token: t, Hash: p.Hash}
	f.event(c, "token.create", "token/"+t.ID, t.Tenant, t.Workspace, "role="+string(t.Role))
	return &t, nil
}
func (f *FSM) applyTokenDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[TokenDelete](c)
	if derr != nil {
		return nil, derr
	}
	t, ok := f.d.Tokens[p.ID]
	if !ok {
		return nil, domain.NotFound("token", p.ID)
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Tokens, p.ID)
	f.event(c, "token.delete", "token/"+p.ID, t.Tenant, t.Workspace, "role="+string(t.Role))
	tok := t.Token
	return &tok, nil
}

// applyTokensUsed records last-use times; no audit event (a use is not a
// change anyone needs to review, and one per minute per token would bury
// the trail).
func (f *FSM) applyTokensUsed(c *Command) (any, *domain.Error) {
	p, derr := decode[TokensUsed](c)
	if derr != nil {
		return nil, derr
	}
	if c.check {
		return nil, nil
	}
	n := 0
	for _, id := range slices.Sorted(maps.Keys(p.Used)) {
		t, ok := f.d.Tokens[id]
		at := p.Used[id].UTC()
		if !ok || (t.LastUsedAt != nil && !at.After(*t.LastUsedAt)) {
			continue
		}
		t.LastUsedAt = &at
		n++
	}
	return n, nil
}
