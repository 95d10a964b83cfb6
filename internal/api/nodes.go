package api

// NodeUpdateRequest changes a server's condition; unset fields stay.
type NodeUpdateRequest struct {
	Cordoned  *bool  `json:"cordoned,omitempty"`
	Draining  *bool  `json:"draining,omitempty"`
	Unhealthy *bool  `json:"unhealthy,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// GraceSeconds, with draining true, gives the server's jobs this long
	// to stop (0: the scheduler's preemption grace).
	GraceSeconds int64 `json:"graceSeconds,omitempty"`
}
