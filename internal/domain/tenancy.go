package domain

import (
	"fmt"
	"time"
)

// Isolation is a tenant's isolation mode.
type Isolation string

const (
	// IsolationServer: a server hosts one tenant at a time.
	IsolationServer Isolation = "server"
	// IsolationGPU: GPUs of one server may serve several tenants, never one GPU two.
	IsolationGPU Isolation = "gpu"
)

// NetworkModel is how a tenant's VRF is built on the fabric.
type NetworkModel string

const (
	NetworkPureRT5   NetworkModel = "pure-rt5"
	NetworkVLANAware NetworkModel = "vlan-aware"
)

// Tenant is an organisation sharing the cluster.
type Tenant struct {
	Name      string       `json:"name"`
	Isolation Isolation    `json:"isolation"`
	Network   NetworkModel `json:"network"`
	// JobSegmentation puts each job of the tenant in its own fabric group:
	// jobs of one tenant do not reach each other.
	JobSegmentation bool `json:"jobSegmentation"`
	// Quota, when set, bounds the tenant as a whole: its workspaces'
	// guarantees fit in Quota.Guaranteed, it borrows at most
	// Quota.BorrowLimit from other tenants and lends them at most
	// Quota.LendLimit of its idle guarantee. Nil: the tenant's guarantee is
	// the sum of its workspaces', and its workspaces' limits alone apply.
	Quota *TenantQuota `json:"quota,omitempty"`
	// Sites limits where the tenant's jobs may run (data residency); empty
	// means anywhere.
	Sites     []string  `json:"sites,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
}

// TenantQuota is a tenant's reserved, borrowable and lendable GPUs.
type TenantQuota struct {
	Guaranteed  int `json:"guaranteed"`
	BorrowLimit int `json:"borrowLimit"`
	LendLimit   int `json:"lendLimit"`
}

// Validate checks the numbers; field prefixes the field names.
func (q *TenantQuota) Validate(field string) *Error {
	if err := ValidateRange(field+".guaranteed", int64(q.Guaranteed), 0, MaxGPUs); err != nil {
		return err
	}
	if err := ValidateRange(field+".borrowLimit", int64(q.BorrowLimit), 0, MaxGPUs); err != nil {
		return err
	}
	if err := ValidateRange(field+".lendLimit", int64(q.LendLimit), 0, MaxGPUs); err != nil {
		return err
	}
	if q.LendLimit > q.Guaranteed {
		return Invalid(field+".lendLimit", "lendLimit %d exceeds guaranteed %d: a tenant can only lend what it has reserved", q.LendLimit, q.Guaranteed)
	}
	return nil
}

// Workspace is a quota holder inside a tenant (a team, a project). Quotas are
// in GPU-equivalents (a whole GPU = 1).
type Workspace struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	// Guaranteed GPUs are reserved for the workspace: always obtainable within
	// the reclaim bound.
	Guaranteed int `json:"guaranteed"`
	// BorrowLimit is how much above Guaranteed the workspace may use from idle capacity.
	BorrowLimit int `json:"borrowLimit"`
	// LendLimit is how much of its idle Guaranteed others may borrow.
	LendLimit int `json:"lendLimit"`
	// Models carve the totals above per GPU model: each reserves part of
	// Guaranteed on one model and caps the workspace's use of that model.
	// Models not listed are bounded by the totals alone.
	Models []ModelQuota `json:"models,omitempty"`
	// Weight is the workspace's share of borrowed capacity among borrowers.
	Weight int `json:"weight"`
	// Priority orders the workspace's jobs against other workspaces'.
	Priority int `json:"priority"`
	// Preemption is what a workload runtime's bridge (jobfabric slurm
	// bridge) does with a job of the workspace whose grace deadline passed:
	// "requeue" (the default: the runtime's job waits, held, for its next
	// placement) or "cancel". Jobs a bridge submits are preemptible
	// exactly when it is requeue.
	Preemption string    `json:"preemption,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	CreatedBy  string    `json:"createdBy,omitempty"`
}

// What a bridge does with a preempted job at its grace deadline
// (Workspace.Preemption).
const (
	PreemptRequeue = "requeue"
	PreemptCancel  = "cancel"
)

// Requeues reports whether a bridge requeues the workspace's preempted
// jobs (the default) rather than cancelling them.
func (w *Workspace) Requeues() bool { return w.Preemption != PreemptCancel }

// ModelQuota is a workspace's quota on one GPU model, in GPU-equivalents of
// that model: Guaranteed of them are reserved (part of the workspace's
// Guaranteed), at most Guaranteed + BorrowLimit are used, at most LendLimit
// of the idle reserved ones are lent.
type ModelQuota struct {
	Model       string `json:"model"`
	Guaranteed  int    `json:"guaranteed"`
	BorrowLimit int    `json:"borrowLimit"`
	LendLimit   int    `json:"lendLimit"`
}

// Model returns the workspace's quota on model, nil if it has none.
func (w *Workspace) Model(model string) *ModelQuota {
	for i := range w.Models {
		if w.Models[i].Model == model {
			return &w.Models[i]
		}
	}
	return nil
}

// Ref returns "tenant/workspace".
func (w *Workspace) Ref() string { return w.Tenant + "/" + w.Name }

// Limits on numbers accepted from users: large enough for any real cluster,
// small enough that a typo (or an attack) cannot overflow arithmetic.
const (
	MaxGPUs     = 1_000_000
	MaxWeight   = 10_000
	MaxPriority = 1_000_000
	MaxModels   = 16 // GPU models named by one workspace or job
)

// ValidateTenant checks a tenant's fields (not its relations to state).
func ValidateTenant(t *Tenant) *Error {
	if err := ValidateName("name", t.Name); err != nil {
		return err
	}
	switch t.Isolation {
	case IsolationServer, IsolationGPU:
	default:
		return Invalid("isolation", "isolation %q is not one of server, gpu", t.Isolation)
	}
	switch t.Network {
	case NetworkPureRT5, NetworkVLANAware:
	default:
		return Invalid("network", "network %q is not one of pure-rt5, vlan-aware", t.Network)
	}
	if t.Quota != nil {
		if err := t.Quota.Validate("quota"); err != nil {
			return err
		}
	}
	if len(t.Sites) > 64 {
		return Invalid("sites", "%d sites given; the limit is 64", len(t.Sites))
	}
	for i, s := range t.Sites {
		if err := ValidateName(fmt.Sprintf("sites[%d]", i), s); err != nil {
			return err
		}
	}
	return nil
}

// ValidateWorkspace checks a workspace's fields (not its relations to state).
func ValidateWorkspace(w *Workspace) *Error {
	if err := ValidateName("tenant", w.Tenant); err != nil {
		return err
	}
	if err := ValidateName("name", w.Name); err != nil {
		return err
	}
	if err := ValidateRange("guaranteed", int64(w.Guaranteed), 0, MaxGPUs); err != nil {
		return err
	}
	if err := ValidateRange("borrowLimit", int64(w.BorrowLimit), 0, MaxGPUs); err != nil {
		return err
	}
	if err := ValidateRange("lendLimit", int64(w.LendLimit), 0, MaxGPUs); err != nil {
		return err
	}
	if w.LendLimit > w.Guaranteed {
		return Invalid("lendLimit", "lendLimit %d exceeds guaranteed %d: a workspace can only lend what it has reserved", w.LendLimit, w.Guaranteed)
	}
	if err := ValidateRange("weight", int64(w.Weight), 1, MaxWeight); err != nil {
		return err
	}
	switch w.Preemption {
	case "", PreemptRequeue, PreemptCancel:
	default:
		return Invalid("preemption", "preemption %q is not one of %s, %s", w.Preemption, PreemptRequeue, PreemptCancel)
	}
	if len(w.Models) > MaxModels {
		return Invalid("models", "%d model quotas; the limit is %d", len(w.Models), MaxModels)
	}
	sum := 0
	for i, m := range w.Models {
		f := fmt.Sprintf("models[%d]", i)
		if _, ok := LookupGPUModel(m.Model); !ok {
			return Invalid(f+".model", "GPU model %q is unknown; known models: %v", m.Model, GPUModelNames())
		}
		if w.Model(m.Model) != &w.Models[i] {
			return Invalid(f+".model", "GPU model %s has two quotas", m.Model)
		}
		for _, x := range []struct {
			name string
			v    int
		}{{"guaranteed", m.Guaranteed}, {"borrowLimit", m.BorrowLimit}, {"lendLimit", m.LendLimit}} {
			if err := ValidateRange(f+"."+x.name, int64(x.v), 0, MaxGPUs); err != nil {
				return err
			}
		}
		if m.LendLimit > m.Guaranteed {
			return Invalid(f+".lendLimit", "lendLimit %d exceeds guaranteed %d of %s", m.LendLimit, m.Guaranteed, m.Model)
		}
		sum += m.Guaranteed
	}
	if sum > w.Guaranteed {
		return Invalid("models", "model guarantees total %d GPUs, more than the workspace's guaranteed %d: they carve it, they do not add to it", sum, w.Guaranteed)
	}
	return ValidateRange("priority", int64(w.Priority), -MaxPriority, MaxPriority)
}
