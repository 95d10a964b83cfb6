package cli

import "testing"

// The lab commands say what is wrong without a lab; the lab itself is
// exercised end to end in internal/lab (as root).
func TestLabCommandsWithoutALab(t *testing.T) {
	dir := t.TempDir()
	runErrCases(t, map[string]errCase{
		"status":      {args: []string{"lab", "status", "--lab-dir", dir}, want: "no lab is up in " + dir},
		"ping":        {args: []string{"lab", "ping", "--lab-dir", dir, "a/nic0", "b/nic0"}, want: "no lab is up"},
		"down":        {args: []string{"lab", "down", "--lab-dir", dir}, want: "no lab is up"},
		"wait":        {args: []string{"lab", "wait", "--lab-dir", dir}, want: "no lab is up"},
		"up needs -f": {args: []string{"lab", "up", "--lab-dir", dir}, want: `"topology" not set`},
		"ping 2 args": {args: []string{"lab", "ping", "--lab-dir", dir, "a/nic0"}, want: "accepts 2 arg(s)"},
		"env lab dir": {env: map[string]string{"JOBFABRIC_LAB_DIR": dir}, args: []string{"lab", "status"}, want: "no lab is up in " + dir},
	})
}
