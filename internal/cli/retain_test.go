package cli

import (
	"testing"
	"time"
)

// TestRetentionFlags: the --retain-* durations take days; bad values are
// refused naming the flag before the server starts.
func TestRetentionFlags(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * day, "1d12h": 36 * time.Hour, "12h": 12 * time.Hour, "0": 0, "400d": 400 * day} {
		var d days
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, time.Duration(d), err, want)
		}
	}
	for _, in := range []string{"d", "-1h", "30days", "1x"} {
		var d days
		if err := d.Set(in); err == nil {
			t.Errorf("Set(%q) accepted as %v", in, time.Duration(d))
		}
	}
	dir := t.TempDir()
	runErrCases(t, map[string]errCase{
		"negative jobs count":   {args: []string{"server", "--data-dir", dir, "--retain-ended-jobs-per-tenant", "-1"}, want: "--retain-ended-jobs-per-tenant -1"},
		"negative events count": {args: []string{"server", "--data-dir", dir, "--retain-events-per-tenant", "-2"}, want: "--retain-events-per-tenant -2"},
		"archive too short":     {args: []string{"server", "--data-dir", dir, "--retain-ended-jobs", "30d", "--retain-usage", "7d"}, want: "--retain-usage 7d"},
		"days":                  {args: []string{"server", "--data-dir", dir, "--retain-events", "9z"}, want: "retain-events"},
	})
}
