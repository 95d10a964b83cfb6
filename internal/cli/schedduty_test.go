package cli

import "testing"

// TestSchedulerDutyFlag: a duty (regular or quiet) outside (0, 1] is refused before the
// server starts, naming the flag, the value and the rule.
func TestSchedulerDutyFlag(t *testing.T) {
	dir := t.TempDir()
	runErrCases(t, map[string]errCase{
		"zero":           {args: []string{"server", "--data-dir", dir, "--scheduler-duty", "0"}, want: "--scheduler-duty 0 must be greater than 0 and at most 1"},
		"negative":       {args: []string{"server", "--data-dir", dir, "--scheduler-duty", "-0.5"}, want: "--scheduler-duty -0.5 must be greater than 0 and at most 1"},
		"over one":       {args: []string{"server", "--data-dir", dir, "--scheduler-duty", "1.5"}, want: "--scheduler-duty 1.5 must be greater than 0 and at most 1"},
		"NaN":            {args: []string{"server", "--data-dir", dir, "--scheduler-duty", "NaN"}, want: "--scheduler-duty NaN must be greater than 0 and at most 1"},
		"quiet zero":     {args: []string{"server", "--data-dir", dir, "--scheduler-quiet-duty", "0"}, want: "--scheduler-quiet-duty 0 must be greater than 0 and at most 1"},
		"quiet over one": {args: []string{"server", "--data-dir", dir, "--scheduler-quiet-duty", "2"}, want: "--scheduler-quiet-duty 2 must be greater than 0 and at most 1"},
	})
}
