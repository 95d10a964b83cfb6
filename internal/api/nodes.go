package api

// NodeUpdateRequest changes a server's condition; unset fields stay.
type NodeUpdateRequest struct {
	Cordoned  *bool  `json:"cordoned,omitempty"`
	Draining  *bool  `json:"draining,omitempty"`
	Unhealthy *bool  `json:"unhealthy,omitempty"`
	Reason    string `json:"reason,omitempty"`
}
