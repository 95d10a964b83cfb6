package api

import (
	"time"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// The fabric's deploy status as the API answers it. The state machine
// keeps its own records (internal/state); the server converts, so the CLI
// and the client read these without linking the state machine.
type (
	// FabricStatus is the fabric as the state knows it.
	FabricStatus struct {
		Revision uint64 `json:"revision"`
		// Deployable is the revision the devices are given: the latest
		// one the verifier did not block (Revision, unless it is blocked).
		Deployable uint64 `json:"deployable"`
		// Blocked, when the latest revision is blocked, says so: "verify
		// failed: " with its first failure. The devices stay on
		// Deployable until a revision verifies or an admin overrides it
		// (POST /v1/fabric/deploy?override=REASON).
		Blocked string        `json:"blocked,omitempty"`
		Devices []DeviceState `json:"devices"`
		// LastDeploy is the latest revision this leader deployed in full
		// (kept in the leader's memory: unset after a failover until the
		// next revision is in sync).
		LastDeploy *RevisionDeploy `json:"lastDeploy,omitempty"`
	}

	// RevisionDeploy is how long a revision took to reach every device.
	RevisionDeploy struct {
		Rev uint64 `json:"rev"`
		// Seconds from the revision's first deploy round to every device
		// running it or a newer one, retries of failed devices included.
		Seconds float64 `json:"seconds"`
		// Rounds is how many deploy rounds started devices on it (1: no
		// retry, and no device was busy with an older revision).
		Rounds int `json:"rounds"`
		// Devices is how many device deploys it took in all.
		Devices int `json:"devices"`
	}

	// DeviceState is what the state knows of one switch.
	DeviceState struct {
		Name        string    `json:"name"`
		NOS         string    `json:"nos"`
		Role        string    `json:"role"`
		DesiredRev  uint64    `json:"desiredRevision"`
		DesiredHash string    `json:"desiredHash"`
		DeployedRev uint64    `json:"deployedRevision"`
		Deployed    string    `json:"deployedHash,omitempty"`
		Error       string    `json:"error,omitempty"`
		UpdatedAt   time.Time `json:"updatedAt,omitzero"`
		// Conditions are what the deploy driver found on the switch at
		// its latest deploy: a preparation it lacks (the NX-OS
		// security-groups routing template and its reload), a disruptive
		// change applied (a forwarding-engine restart).
		Conditions []domain.SwitchCondition `json:"conditions,omitempty"`
	}

	// RevisionInfo summarises a kept revision.
	RevisionInfo struct {
		Rev     uint64    `json:"rev"`
		At      time.Time `json:"at"`
		Cause   string    `json:"cause,omitempty"`
		Changed []string  `json:"changed"`
		Removed []string  `json:"removed,omitempty"`
		// Verify are the verifier's failures on the revision.
		Verify []string `json:"verify,omitempty"`
		// Blocked: the verifier failed on the revision and no device is
		// given it (the devices stay on the latest revision not blocked).
		Blocked bool `json:"blocked,omitempty"`
		// Override is the admin who had a blocked revision deployed
		// anyway, and the reason they gave.
		Override string `json:"override,omitempty"`
	}
)

// FabricOptions are the operator's fabric options (GET and PUT
// /v1/fabric/options). They are replicated state, not server flags: every
// member syncs the fabric's ids by them, so all must read the same ones.
type FabricOptions struct {
	// VRFPlacement is where a tenant's VRF is created: "all" (the default:
	// every leaf of the tenant's sites, so a port changes tenant without a
	// VRF being created) or "used" (only the leaves where the tenant owns
	// a server port: a leaf carries its own tenants' VRFs, so the tenants
	// of a fabric are not bounded by what one leaf holds). A job never
	// becomes Ready before the revision creating its tenant's VRF on its
	// leaves is deployed there.
	VRFPlacement string `json:"vrfPlacement"`
	// L3VLANMin and L3VLANMax bound each leaf's L3 VLANs (one per VRF on a
	// leaf whose NOS carries an L3VNI on a VLAN: NX-OS, SONiC), within
	// 3000-4094 (a leaf's link VLANs take 1000-2999). 0 and 0 in a PUT:
	// 3000-4094. Narrowing the range renumbers nothing already given out.
	L3VLANMin uint32 `json:"l3VLANMin"`
	L3VLANMax uint32 `json:"l3VLANMax"`
}
