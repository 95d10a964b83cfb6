package state

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// blocked is h.revision committed blocked by the verifier's failures.
func (h *harness) blocked(leaf, conf string, failures ...string) FabricRevisionCmd {
	cmd := h.revision(leaf, conf, nil)
	cmd.Blocked, cmd.Verify = true, failures
	return cmd
}

// deployTarget is the configuration of leaf the devices are to run, and
// the revision it is of.
func (h *harness) deployTarget(leaf string) (string, uint64) {
	cfgs, rev := h.f.DeployTarget()
	dc, ok := cfgs[leaf]
	if !ok || len(dc.Files) == 0 {
		return "", rev
	}
	return dc.Files[0].Content, rev
}

// TestFabricBlockedRevision: a revision the verifier blocked is kept for
// the record and says so, but the devices are given the latest one that
// is not blocked, even after more revisions than are kept; a job it
// carries waits saying why, without the failure (which names other
// tenants); an admin's override, with a reason, unblocks the latest
// revision, in the events; replayed like everything else.
func TestFabricBlockedRevision(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	leaf := "s1-leaf0"
	h.must(CmdFabricRevision, h.revision(leaf, "good", nil))
	h.deployedOK(1, leaf)
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobsPlace, JobsPlace{NetworkGate: true, Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: h.firstServer(), GPUs: eightGPUs}}}}})

	r := h.refusedChangesNothing(CmdFabricRevision, h.blocked(leaf, "leak"))
	if r.Err == nil || r.Err.Field != "blocked" {
		t.Fatalf("a blocked revision without failures: %v, want refused", r.Err)
	}
	failure := `rt-shared s1-leaf0/vrf globex: route target 65000:10000 of tenant "globex" is also exported by tenant "acme"`
	h.must(CmdFabricRevision, h.blocked(leaf, "leak", failure))
	st := h.f.FabricStatus()
	if st.Revision != 2 || st.Deployable != 1 || !strings.HasPrefix(st.Blocked, "verify failed: revision 2 (1 failures): rt-shared") {
		t.Fatalf("status: revision %d, deployable %d, blocked %q", st.Revision, st.Deployable, st.Blocked)
	}
	if conf, rev := h.deployTarget(leaf); conf != "good" || rev != 1 {
		t.Fatalf("deploy target: %q at revision %d, want the verified revision 1's", conf, rev)
	}
	if revs := h.f.FabricRevisions(); !revs[1].Blocked || revs[1].Verify[0] != failure || revs[0].Blocked {
		t.Fatalf("revisions: %+v", revs)
	}
	j := h.f.d.Jobs[1]
	if j.NetworkRev != 2 || j.Reason == nil || !strings.Contains(j.Reason.Message, "the verifier failed") || !strings.Contains(j.Reason.Message, "stay on revision 1") || strings.Contains(j.Reason.Message, "globex") {
		t.Fatalf("job on a blocked revision: network revision %d, reason %+v", j.NetworkRev, j.Reason)
	}

	// More blocked revisions than are kept: the verified one stays.
	for i := range maxRevisions + 6 {
		h.must(CmdFabricRevision, h.blocked(leaf, "leak "+string(rune('a'+i%26)), failure))
	}
	if conf, rev := h.deployTarget(leaf); conf != "good" || rev != 1 {
		t.Fatalf("deploy target after %d blocked revisions: %q at revision %d", maxRevisions+6, conf, rev)
	}
	if n := len(h.f.FabricRevisions()); n != maxRevisions {
		t.Fatalf("%d revisions kept, want %d", n, maxRevisions)
	}
	latest := h.f.FabricStatus().Revision

	// The override: the latest revision only, with a reason.
	for name, cmd := range map[string]FabricOverrideCmd{
		"no reason":  {Rev: latest},
		"not latest": {Rev: latest - 1, Reason: "x"},
	} {
		if r := h.refusedChangesNothing(CmdFabricOverride, cmd); r.Err == nil {
			t.Fatalf("override with %s: accepted", name)
		}
	}
	h.must(CmdFabricOverride, FabricOverrideCmd{Rev: latest, Reason: "INC-7"})
	if conf, rev := h.deployTarget(leaf); rev != latest || !strings.HasPrefix(conf, "leak") {
		t.Fatalf("deploy target after the override: %q at revision %d, want revision %d", conf, rev, latest)
	}
	if st := h.f.FabricStatus(); st.Blocked != "" || st.Deployable != latest {
		t.Fatalf("status after the override: %+v", st)
	}
	if evs := h.events("fabric.override"); len(evs) != 1 || evs[0].Actor != "admin:test" || !strings.Contains(evs[0].Message, "INC-7") {
		t.Fatalf("override events: %+v", evs)
	}
	if r := h.refusedChangesNothing(CmdFabricOverride, FabricOverrideCmd{Rev: latest, Reason: "again"}); r.Err == nil {
		t.Fatal("override of a revision that is not blocked: accepted")
	}
	h.replays()
}

// TestFabricVerifyHold: a job held for the verifier loses the network
// revision of a blocked revision that carried it (or the gate would make
// it Ready when that revision's leaves are deployed, its ports gone), and
// its reason names its port and the rule, never the failure.
func TestFabricVerifyHold(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 8)
	leaf, port := "s1-leaf0", PortKey("s1-leaf0", "swp1")
	h.must(CmdFabricRevision, h.revision(leaf, "good", nil))
	h.must(CmdJobSubmit, MakeJob("research", 8).Obj())
	h.must(CmdJobsPlace, JobsPlace{NetworkGate: true, Jobs: []JobPlacement{{ID: 1, Placements: []domain.Placement{{Server: h.firstServer(), GPUs: eightGPUs}}}}})
	h.must(CmdFabricRevision, h.blocked(leaf, "leak", "rt-shared s1-leaf0/vrf acme: also globex's"))
	if j := h.f.d.Jobs[1]; j.NetworkRev != 2 {
		t.Fatalf("network revision %d, want the blocked revision 2", j.NetworkRev)
	}
	cmd := h.revision(leaf, "without job 1", nil)
	_, ids, _, err := h.f.FabricInput(h.at, []uint64{1})
	if err != nil {
		t.Fatal(err)
	}
	cmd.IDsHash, cmd.Jobs = ids, nil
	cmd.Held = []HeldJob{{Job: 1, Port: port, Why: "verify", Rule: "link-tenant", Reason: `link-tenant s1-leaf0/swp1: names tenant "acme" but is in VRF globex of tenant "globex"`}}
	h.must(CmdFabricRevision, cmd)
	j := h.f.d.Jobs[1]
	if j.NetworkRev != 0 || j.Reason == nil || !strings.Contains(j.Reason.Message, "the verifier refused the configuration port s1-leaf0/swp1 would get (rule link-tenant)") || strings.Contains(j.Reason.Message, "globex") {
		t.Fatalf("held job: network revision %d, reason %+v", j.NetworkRev, j.Reason)
	}
	h.replays()
}

// TestFabricRevisionWithoutBlocked: a revision command of a log written
// before revisions could be blocked (no "blocked" field, failures
// recorded) is deployable, as it was.
func TestFabricRevisionWithoutBlocked(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 0)
	cmd := h.revision("s1-leaf0", "old", nil)
	cmd.Verify = []string{"rt-shared s1-leaf0/vrf acme: ..."}
	raw, _ := json.Marshal(cmd)
	if strings.Contains(string(raw), "blocked") {
		t.Fatalf("an unblocked revision encodes blocked: %s", raw)
	}
	var old map[string]any
	_ = json.Unmarshal(raw, &old)
	h.must(CmdFabricRevision, old)
	if conf, rev := h.deployTarget("s1-leaf0"); conf != "old" || rev != 1 {
		t.Fatalf("deploy target %q at %d, want the old revision", conf, rev)
	}
	h.replays()
}

// TestBlockedRevisionRemovesNoDevice: a device a blocked revision removes
// still runs the deployable revision, so it stays in the state (its
// deploys are recorded, it counts for the pools) until a revision the
// devices are given removes it: a later one (which may configure it
// again) or the blocked one an admin overrides.
func TestBlockedRevisionRemovesNoDevice(t *testing.T) {
	h := newHarness(t).cluster(1, 1, 0)
	leaf, other := "s1-leaf0", "s1-leaf1"
	first := h.revision(leaf, "good", nil)
	first.Changed[other] = first.Changed[leaf]
	h.must(CmdFabricRevision, first)
	h.deployedOK(1, leaf)
	h.deployedOK(1, other)
	device := func(name string) *DeviceState { return h.f.d.Fabric.Devices[name] }

	drop := func(blocked bool, again ...string) FabricRevisionCmd {
		cmd := h.revision(leaf, "good", nil)
		cmd.Removed = []string{other}
		if blocked {
			cmd.Blocked, cmd.Verify = true, []string{"rt-shared s1-leaf0/vrf acme: also globex's"}
		}
		for _, name := range again {
			cmd.Removed = nil
			cmd.Changed[name] = cmd.Changed[leaf]
		}
		return cmd
	}
	h.must(CmdFabricRevision, drop(true))
	if device(other) == nil {
		t.Fatal("a blocked revision removed a device the devices still run revision 1 on")
	}
	h.deployedOK(1, other) // recorded: it is in the state
	// An unblocked revision that does not mention it takes the removal.
	h.must(CmdFabricRevision, h.revision(leaf, "fixed", nil))
	if device(other) != nil {
		t.Fatal("the removal of a blocked revision was lost when the next revision deployed")
	}

	// One that configures it again keeps it.
	again := h.revision(leaf, "fixed", nil)
	again.Changed[other] = again.Changed[leaf]
	h.must(CmdFabricRevision, again)
	h.must(CmdFabricRevision, drop(true))
	h.must(CmdFabricRevision, drop(true, other))
	h.must(CmdFabricRevision, h.revision(leaf, "fixed again", nil))
	if device(other) == nil {
		t.Fatal("a device a blocked revision removed and a later one configured again was removed")
	}

	// The override of a blocked removal removes it.
	h.must(CmdFabricRevision, drop(true))
	if device(other) == nil {
		t.Fatal("a blocked revision removed a device")
	}
	h.must(CmdFabricOverride, FabricOverrideCmd{Rev: h.f.FabricStatus().Revision, Reason: "INC-8"})
	if device(other) != nil {
		t.Fatal("the overridden revision's removal did not take effect")
	}
	h.replays()

	// An entry proposed under the rules before (a log an older leader
	// wrote) is applied as it was: the blocked revision drops the device.
	h = newHarness(t).cluster(1, 1, 0)
	h.rules = RulesTenantExternalID
	h.must(CmdFabricRevision, first)
	h.must(CmdFabricRevision, drop(true))
	if device(other) != nil {
		t.Fatalf("under rules %d a blocked revision's removal kept the device", RulesTenantExternalID)
	}
	h.replays()
}
