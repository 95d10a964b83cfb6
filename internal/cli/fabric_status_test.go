package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestFabricStatusShowsSwitchConditions: a switch that needs a person says
// so under the status table; met conditions stay out of the way.
func TestFabricStatusShowsSwitchConditions(t *testing.T) {
	st := &api.FabricStatus{Revision: 3, Devices: []api.DeviceState{
		{Name: "leaf1", NOS: "nxos", Error: "not prepared", Conditions: []domain.SwitchCondition{
			{Type: domain.SwitchSecurityGroupsTemplate, Reason: "ReloadRequired", Message: "save and reload the switch"}}},
		{Name: "leaf2", NOS: "nxos", Conditions: []domain.SwitchCondition{
			{Type: domain.SwitchSecurityGroupsTemplate, OK: true, Reason: "Applied", Message: "applied"}}},
	}}
	var b bytes.Buffer
	fabricStatusTable(&b, st)
	out := b.String()
	if !strings.Contains(out, "leaf1: SecurityGroupsTemplate (ReloadRequired): save and reload the switch\n") {
		t.Errorf("the unprepared switch is not reported:\n%s", out)
	}
	if strings.Contains(out, "leaf2: ") {
		t.Errorf("a met condition is reported:\n%s", out)
	}
}
