package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad --telemetry-config stops server and demo before they start, naming
// the field, the value and the rule.
func TestTelemetryConfigFlag(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "telemetry.yaml")
	os.WriteFile(bad, []byte("targets: [{name: leaf1, url: 'http://127.0.0.1:9100/metrics', rules: junos}]\n"), 0o600)
	for _, args := range [][]string{
		{"server", "--data-dir", filepath.Join(dir, "d1"), "--listen", "127.0.0.1:0", "--telemetry-config", bad},
		{"demo", "--data-dir", filepath.Join(dir, "d2"), "--listen", "127.0.0.1:0", "--telemetry-config", bad},
	} {
		_, errs, code := run(t, nil, args...)
		if code == 0 || !strings.Contains(errs, `targets[0].rules: "junos" names no rule set`) {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, errs)
		}
	}
	if _, errs, code := run(t, nil, "server", "--data-dir", filepath.Join(dir, "d3"), "--telemetry-config", filepath.Join(dir, "nope.yaml")); code == 0 || !strings.Contains(errs, "telemetry-config") {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
}
