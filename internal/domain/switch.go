package domain

// SwitchCondition is one fact about a switch that a deploy depends on or
// caused, as the deploy driver found it, by type (like a HostCondition for
// a server): a preparation the switch lacks (a routing template that needs
// a reload), or a disruptive change the deploy applied.
type SwitchCondition struct {
	Type string `json:"type" enum:"SwitchConditionTypes"`
	// OK: the switch is as the configuration needs it (or, for a
	// disruption, nothing was disrupted).
	OK      bool   `json:"ok"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Switch condition types.
const (
	// SwitchSecurityGroupsTemplate: NX-OS refuses `feature security-group`
	// unless `system routing template-security-groups` was configured and
	// the switch reloaded since.
	SwitchSecurityGroupsTemplate = "SecurityGroupsTemplate"
	// SwitchForwardingRestart: the deploy added a line that restarts the
	// forwarding engine (Junos `forwarding-options vxlan-routing
	// overlay-ecmp`): traffic through the switch stops while it restarts.
	SwitchForwardingRestart = "ForwardingRestart"
	// SwitchPortBreakout: the deploy adds or changes a port breakout: the
	// switch re-lays those ports (NX-OS drops the parent port's
	// configuration), so traffic on them stops while it does.
	SwitchPortBreakout = "PortBreakout"
)

// SwitchConditionTypes lists the types, for the API schema.
var SwitchConditionTypes = []string{SwitchForwardingRestart, SwitchPortBreakout, SwitchSecurityGroupsTemplate}
