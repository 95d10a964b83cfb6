package api

import "github.com/jobfabric/jobfabric/internal/domain"

type (
	// HostReportRequest carries a node agent's facts (PUT /v1/nodes/{name}/facts).
	HostReportRequest struct {
		// Agent names the agent and its host ("jobfabric-agent gpu-a1").
		Agent string           `json:"agent,omitempty"`
		Facts domain.HostFacts `json:"facts"`
	}
	// HeartbeatRequest says the agent is alive and which facts it holds
	// (POST /v1/nodes/{name}/heartbeat).
	HeartbeatRequest struct {
		Agent string `json:"agent,omitempty"`
		// FactsHash is the fingerprint of the agent's last discovery.
		FactsHash string `json:"factsHash"`
	}
	// HeartbeatResponse tells the agent whether to send its facts and how
	// often to beat.
	HeartbeatResponse struct {
		// NeedFacts: the server holds no facts or other ones; PUT them.
		NeedFacts bool `json:"needFacts"`
		// HeartbeatSeconds is the interval the agent should keep (a third
		// of TimeoutSeconds, the policy's heartbeat timeout).
		HeartbeatSeconds int64                  `json:"heartbeatSeconds"`
		TimeoutSeconds   int64                  `json:"timeoutSeconds"`
		Condition        domain.NodeCondition   `json:"condition"`
		Conditions       []domain.HostCondition `json:"conditions,omitempty"`
	}
)
