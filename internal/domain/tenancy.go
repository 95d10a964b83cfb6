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
	Name            string       `json:"name"`
	Isolation       Isolation    `json:"isolation"`
	Network         NetworkModel `json:"network"`
	JobSegmentation bool         `json:"jobSegmentation"`
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
	LendLimit int       `json:"lendLimit"`
	Weight    int       `json:"weight"`
	Priority  int       `json:"priority"`
	CreatedAt time.Time `json:"createdAt"`
	CreatedBy string    `json:"createdBy,omitempty"`
}

// Ref returns "tenant/workspace".
func (w *Workspace) Ref() string { return w.Tenant + "/" + w.Name }

// Limits on numbers accepted from users: large enough for any real cluster,
// small enough that a typo (or an attack) cannot overflow arithmetic.
const (
	MaxGPUs     = 1_000_000
	MaxWeight   = 10_000
	MaxPriority = 1_000_000
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
	return ValidateRange("priority", int64(w.Priority), -MaxPriority, MaxPriority)
}
