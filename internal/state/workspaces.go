package state

import (
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Workspace commands: create, update (quotas), delete.

func (f *FSM) applyWorkspaceCreate(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceCreate](c)
	if derr != nil {
		return nil, derr
	}
	w := p.Workspace
	if err := domain.ValidateWorkspace(&w); err != nil {
		return nil, err
	}
	if _, ok := f.d.Tenants[w.Tenant]; !ok {
		return nil, domain.NotFound("tenant", w.Tenant)
	}
	if _, ok := f.d.Workspaces[w.Ref()]; ok {
		return nil, &domain.Error{Code: domain.CodeAlreadyExists, Field: "name", Message: fmt.Sprintf("workspace %q already exists", w.Ref())}
	}
	if err := f.checkGuarantee("guaranteed", w.Tenant, w.Guaranteed); err != nil {
		return nil, err
	}
	if err := f.checkModelGuarantees(&w, f.cap.byModel); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	w.CreatedAt, w.CreatedBy = c.At, c.Actor
	f.d.Workspaces[w.Ref()] = &w
	f.event(c, "workspace.create", "workspace/"+w.Ref(), w.Tenant, w.Name, quotaString(&w))
	cp := w
	return &cp, nil
}
func quotaString(w *domain.Workspace) string {
	s := fmt.Sprintf("guaranteed=%d borrowLimit=%d lendLimit=%d weight=%d priority=%d", w.Guaranteed, w.BorrowLimit, w.LendLimit, w.Weight, w.Priority)
	if w.Preemption != "" {
		s += " preemption=" + w.Preemption
	}
	return s
}
func (f *FSM) applyWorkspaceUpdate(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceUpdate](c)
	if derr != nil {
		return nil, derr
	}
	w := p.Workspace
	if err := domain.ValidateWorkspace(&w); err != nil {
		return nil, err
	}
	old, ok := f.d.Workspaces[w.Ref()]
	if !ok {
		return nil, domain.NotFound("workspace", w.Ref())
	}
	if err := f.checkGuarantee("guaranteed", w.Tenant, w.Guaranteed-old.Guaranteed); err != nil {
		return nil, err
	}
	if err := f.checkModelGuarantees(&w, f.cap.byModel); err != nil {
		return nil, err
	}
	if c.check {
		return nil, nil
	}
	w.CreatedAt, w.CreatedBy = old.CreatedAt, old.CreatedBy
	f.d.Workspaces[w.Ref()] = &w
	f.event(c, "workspace.update", "workspace/"+w.Ref(), w.Tenant, w.Name, quotaString(&w))
	cp := w
	return &cp, nil
}
func (f *FSM) applyWorkspaceDelete(c *Command) (any, *domain.Error) {
	p, derr := decode[WorkspaceDelete](c)
	if derr != nil {
		return nil, derr
	}
	ref := domain.Ref(p.Tenant, p.Name)
	w, ok := f.d.Workspaces[ref]
	if !ok {
		return nil, domain.NotFound("workspace", ref)
	}
	for j := range f.jobs.liveJobs() {
		if j.Tenant == p.Tenant && j.Workspace == p.Name {
			return nil, domain.Errorf(domain.CodeFailedPrecondition, "workspace %q has %s job %d: cancel its jobs first", ref, j.State, j.ID)
		}
	}
	if c.check {
		return nil, nil
	}
	delete(f.d.Workspaces, ref)
	for id, tok := range f.d.Tokens {
		if tok.Tenant == p.Tenant && tok.Workspace == p.Name {
			delete(f.d.Tokens, id)
		}
	}
	f.event(c, "workspace.delete", "workspace/"+ref, p.Tenant, p.Name, "workspace and its member tokens removed")
	return w, nil
}
