package domain

import "time"

// Event is one entry of the audit trail: who changed what, when. Events are
// written by the state machine as part of the change they describe, so the
// trail and the state cannot disagree.
type Event struct {
	// Seq orders events; it grows by one per event.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// Actor is who made the change: ROLE:TOKEN-ID, or scheduler or system.
	Actor string `json:"actor"`
	// Action is what happened (job.submit, tenant.create, ...).
	Action string `json:"action"`
	// Object is what it happened to (job/12, tenant/acme, ...).
	Object    string `json:"object"`
	Tenant    string `json:"tenant,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Message   string `json:"message,omitempty"`
}
