package state

import (
	"encoding/json"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// deepCopy copies a topology through JSON: it is read rarely and is a tree of
// slices, where a hand-written copy would silently miss new fields.
func deepCopy(t *domain.Topology) *domain.Topology {
	b, err := json.Marshal(t)
	if err != nil {
		panic("topology is not serialisable: " + err.Error())
	}
	var out domain.Topology
	if err := json.Unmarshal(b, &out); err != nil {
		panic("topology does not round-trip: " + err.Error())
	}
	return &out
}
