package domain

import "time"

// Event is one entry of the audit trail: who changed what, when. Events are
// written by the state machine as part of the change they describe, so the
// trail and the state cannot disagree.
type Event struct {
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	Action    string    `json:"action"`
	Object    string    `json:"object"`
	Tenant    string    `json:"tenant,omitempty"`
	Workspace string    `json:"workspace,omitempty"`
	Message   string    `json:"message,omitempty"`
}
