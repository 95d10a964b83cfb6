package cli

import (
	"bytes"
	"regexp"
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

// TestFabricStatusShowsRevisionDeployTime: the last revision deployed in
// full, with its time, rounds and device deploys, heads the table; a
// status without one (a new leader) says nothing of it.
func TestFabricStatusShowsRevisionDeployTime(t *testing.T) {
	var b bytes.Buffer
	fabricStatusTable(&b, &api.FabricStatus{Revision: 4, LastDeploy: &api.RevisionDeploy{Rev: 4, Seconds: 85.04, Rounds: 3, Devices: 12}})
	if want := "revision 4 deployed in full in 85.0s (3 rounds, 12 device deploys)\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status without %q:\n%s", want, b.String())
	}
	b.Reset()
	fabricStatusTable(&b, &api.FabricStatus{Revision: 4})
	if strings.Contains(b.String(), "deployed in full") {
		t.Errorf("a status without a timed revision names one:\n%s", b.String())
	}
}

// TestFabricStatusShowsBlockedRevision: a revision the verifier blocked
// heads the table with its failure and what the devices run, and the
// devices it would change say "blocked", not "pending".
func TestFabricStatusShowsBlockedRevision(t *testing.T) {
	var b bytes.Buffer
	fabricStatusTable(&b, &api.FabricStatus{Revision: 7, Deployable: 5, Blocked: "verify failed: revision 7 (3 failures): rt-shared leaf1/vrf b: ...", Devices: []api.DeviceState{
		{Name: "leaf1", DesiredRev: 7, DesiredHash: "b", DeployedRev: 5, Deployed: "a"},
		{Name: "leaf2", DesiredRev: 4, DesiredHash: "c", DeployedRev: 7, Deployed: "c"},
	}})
	out := b.String()
	for _, want := range []string{"BLOCKED: verify failed: revision 7", "the devices stay on revision 5", "--override"} {
		if !strings.Contains(out, want) {
			t.Errorf("status without %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^leaf1\t.*\tblocked\t`).MatchString(out) || !regexp.MustCompile(`(?m)^leaf2\t.*\tin sync\t`).MatchString(out) {
		t.Errorf("device states:\n%s", out)
	}
	b.Reset()
	fabricStatusTable(&b, &api.FabricStatus{Revision: 7, Deployable: 7})
	if strings.Contains(b.String(), "BLOCKED") {
		t.Errorf("an unblocked status says BLOCKED:\n%s", b.String())
	}
}
