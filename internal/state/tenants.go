package state

import (
	"fmt"
	"slices"
	"sort"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Tenant commands: create, update (quota and sites), delete.

func (f *FSM) applyTenantCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantCreate](c)
	if derr != nil {
		return nil, derr
	}
	t := p.Tenant
	if err := domain.ValidateTenant(&t); err != nil {
		return nil, err
	}
	if _, ok := f.d.Tenants[t.Name]; ok {
		return nil, &domain.Error{Code: domain.CodeAlreadyExists, Field: "name", Message: fmt.Sprintf("tenant %q already exists", t.Name)}
	}
	if t.Quota != nil {
		if err := f.checkCapacity("quota.guaranteed", t.Quota.Guaranteed); err != nil {
			return nil, err
		}
	}
	if err := f.checkL3VLANRoom("name", f.d.Topology, &t, c.At); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	t.CreatedAt, t.CreatedBy = c.At, c.Actor
	f.d.Tenants[t.Name] = &t
	f.event(c, "tenant.create", "tenant/"+t.Name, t.Name, "", tenantString(&t))
	cp := t
	return &cp, nil
}
func tenantString(t *domain.Tenant) string {
	s := fmt.Sprintf("isolation=%s network=%s jobSegmentation=%t", t.Isolation, t.Network, t.JobSegmentation)
	if q := t.Quota; q != nil {
		s += fmt.Sprintf(" guaranteed=%d borrowLimit=%d lendLimit=%d", q.Guaranteed, q.BorrowLimit, q.LendLimit)
	}
	if len(t.Sites) > 0 {
		s += fmt.Sprintf(" sites=%v", t.Sites)
	}
	return s
}
func (f *FSM) applyTenantUpdate(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantUpdate](c)
	if derr != nil {
		return nil, derr
	}
	old, ok := f.d.Tenants[p.Name]
	if !ok {
		return nil, domain.NotFound("tenant", p.Name)
	}
	t := *old
	t.Quota, t.Sites = p.Quota, p.Sites
	if err := domain.ValidateTenant(&t); err != nil {
		return nil, err
	}
	newG := f.workspaceGuarantees(t.Name)
	if t.Quota != nil {
		if ws := f.workspaceGuarantees(t.Name); ws > t.Quota.Guaranteed {
			return nil, &domain.Error{Code: domain.CodeFailedPrecondition, Field: "quota.guaranteed",
				Message: fmt.Sprintf("tenant %s's workspaces guarantee %d GPUs; the tenant quota cannot be lower (%d)", t.Name, ws, t.Quota.Guaranteed)}
		}
		newG = t.Quota.Guaranteed
	}
	if err := f.checkCapacity("quota.guaranteed", newG-f.tenantGuarantee(t.Name)); err != nil {
		return nil, err
	}
	if !slices.Equal(t.Sites, old.Sites) {
		if err := f.checkL3VLANRoom("sites", f.d.Topology, &t, c.At); err != nil {
			return nil, err
		}
	}
	if c.check {
		return nil, nil
	}
	f.d.Tenants[t.Name] = &t
	f.event(c, "tenant.update", "tenant/"+t.Name, t.Name, "", tenantString(&t))
	cp := t
	return &cp, nil
}
func (f *FSM) applyTenantDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[TenantDelete](c)
	if derr != nil {
		return nil, derr
	}
	t, ok := f.d.Tenants[p.Name]
	if !ok {
		return nil, domain.NotFound("tenant", p.Name)
	}
	var ws []string
	for _, w := range f.d.Workspaces {
		if w.Tenant == p.Name {
			ws = append(ws, w.Name)
		}
	}
	if len(ws) > 0 {
		sort.Strings(ws)
		return nil, domain.Errorf(domain.CodeFailedPrecondition, "tenant %q still has workspaces %v: delete them first", p.Name, ws)
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Tenants, p.Name)
	for id, tok := range f.d.Tokens {
		if tok.Tenant == p.Name {
			delete(f.d.Tokens, id)
		}
	}
	f.event(c, "tenant.delete", "tenant/"+p.Name, p.Name, "", "tenant and its tokens removed")
	return t, nil
}
