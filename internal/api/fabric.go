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
		Revision uint64        `json:"revision"`
		Devices  []DeviceState `json:"devices"`
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
		Verify  []string  `json:"verify,omitempty"`
	}
)
