package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServerSSHDriverRefused: --fabric-driver ssh without a targets file,
// or with one naming a hostile namespace, does not start a server; the
// error names the flag, or the device, field and rule.
func TestServerSSHDriverRefused(t *testing.T) {
	hostile := filepath.Join(t.TempDir(), "ssh-targets.json")
	os.WriteFile(hostile, []byte(`{"leaf1": {"address": "10.0.0.2", "user": "frr", "privateKey": "/nonexistent",
		"hostKey": "SHA256:Kx1mVtH0cZkqQ6Q1l6yP5nI3b9dK8m2v0w4f7g9hJkE", "vtySocket": "/run/frr", "confDir": "/etc/frr", "netns": "x;reboot"}}`), 0o644)
	server := func(extra ...string) []string {
		return append([]string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, extra...)
	}
	runErrCases(t, map[string]errCase{
		"no targets file": {args: server("--fabric-driver", "ssh"), want: "the ssh driver needs --ssh-targets FILE"},
		"hostile netns":   {args: server("--fabric-driver", "ssh", "--ssh-targets", hostile), want: `device leaf1: netns: "x;reboot" must be letters`},
		"unknown driver":  {args: server("--fabric-driver", "telnet"), want: `fabric driver "telnet" is not one of file, frr, ssh, none`},
	})
}
