package state

import (
	"fmt"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Guarantee accounting shared by the topology, tenant and workspace
// commands: guarantees are never overcommitted.

// totalGuaranteed is the GPUs reserved cluster-wide: per tenant its quota's
// guarantee when it has one, else the sum of its workspaces'.
func (f *FSM) totalGuaranteed() int {
	n := 0
	for _, t := range f.d.Tenants {
		n += f.tenantGuarantee(t.Name)
	}
	return n
}
func (f *FSM) tenantGuarantee(tenant string) int {
	if t, ok := f.d.Tenants[tenant]; ok && t.Quota != nil {
		return t.Quota.Guaranteed
	}
	return f.workspaceGuarantees(tenant)
}
func (f *FSM) workspaceGuarantees(tenant string) int {
	n := 0
	for _, w := range f.d.Workspaces {
		if w.Tenant == tenant {
			n += w.Guaranteed
		}
	}
	return n
}

// checkGuarantee refuses a workspace guarantee change of delta GPUs in
// tenant that would overcommit the tenant's quota or the inventory.
func (f *FSM) checkGuarantee(field, tenant string, delta int) *domain.Error {
	if delta <= 0 {
		return nil
	}
	if t := f.d.Tenants[tenant]; t != nil && t.Quota != nil {
		if ws := f.workspaceGuarantees(tenant) + delta; ws > t.Quota.Guaranteed {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
				Message: fmt.Sprintf("tenant %s guarantees %d GPUs; its workspaces' guarantees would total %d", tenant, t.Quota.Guaranteed, ws)}
		}
		return nil // inside the tenant's reservation
	}
	return f.checkCapacity(field, delta)
}
func (f *FSM) checkCapacity(field string, delta int) *domain.Error {
	if g := f.totalGuaranteed() + delta; delta > 0 && g > f.cap.total {
		return &domain.Error{Code: domain.CodeFailedPrecondition, Field: field,
			Message: fmt.Sprintf("guarantees would total %d GPUs but the inventory has %d: guarantees are never overcommitted", g, f.cap.total)}
	}
	return nil
}

// checkModelGuarantees refuses model quotas whose guarantees, with every
// other workspace's on the same model, exceed that model's GPUs in the
// inventory (replacing the workspace's own when it exists).
func (f *FSM) checkModelGuarantees(w *domain.Workspace, byModel map[string]int) *domain.Error {
	for i, q := range w.Models {
		total := q.Guaranteed
		for ref, o := range f.d.Workspaces {
			if ref == w.Ref() {
				continue
			}
			if oq := o.Model(q.Model); oq != nil {
				total += oq.Guaranteed
			}
		}
		if have := byModel[q.Model]; total > have {
			return &domain.Error{Code: domain.CodeFailedPrecondition, Field: fmt.Sprintf("models[%d].guaranteed", i),
				Message: fmt.Sprintf("guarantees on %s would total %d GPUs but the inventory has %d: guarantees are never overcommitted", q.Model, total, have)}
		}
	}
	return nil
}
