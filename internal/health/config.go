package health

import (
	"bytes"
	"encoding/json"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// Config is the server's --health-config file (YAML or JSON):
//
//	thresholds:          # Thresholds' fields; those left out keep the defaults
//	  pfcPausePerSec: 5000
//	  require: [port, uplink, nic]
//	debounce:
//	  raise: 0s          # a worse verdict is committed once it held this long
//	  settle: 30s        # a better one (or unknown) once it held this long
type Config struct {
	Thresholds Thresholds
	Debounce   Debounce
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Thresholds: DefaultThresholds(), Debounce: DefaultDebounce()}
}

// ParseConfig reads a config file over the defaults; unknown fields and
// bad values are refused, naming the field.
func ParseConfig(b []byte) (Config, error) {
	cfg := DefaultConfig()
	raw := struct {
		Thresholds *Thresholds `json:"thresholds"`
		Debounce   struct {
			Raise  *string `json:"raise"`
			Settle *string `json:"settle"`
		} `json:"debounce"`
	}{Thresholds: &cfg.Thresholds}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return cfg, domain.Invalid("health-config", "not YAML or JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return cfg, domain.Invalid("health-config", "%v", err)
	}
	for _, d := range []struct {
		name string
		s    *string
		dst  *time.Duration
	}{{"debounce.raise", raw.Debounce.Raise, &cfg.Debounce.Raise}, {"debounce.settle", raw.Debounce.Settle, &cfg.Debounce.Settle}} {
		if d.s == nil {
			continue
		}
		v, err := time.ParseDuration(*d.s)
		if err != nil || v < 0 || v > 24*time.Hour {
			return cfg, domain.Invalid(d.name, "%s %q is not a duration between 0s and 24h", d.name, *d.s)
		}
		*d.dst = v
	}
	if err := cfg.Thresholds.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}
