package api

type (
	// TelemetryPushResult counts what a push of exposition text brought
	// (POST /v1/telemetry/push).
	TelemetryPushResult struct {
		// Accepted samples were mapped to an inventory entity and stored.
		Accepted int `json:"accepted"`
		// Ignored samples matched no rule of the push source (or were
		// histograms and summaries).
		Ignored int `json:"ignored"`
		// Dropped samples were refused: a new series beyond the
		// cardinality limit, or a device the pushing node may not speak for.
		Dropped int `json:"dropped"`
	}
)
