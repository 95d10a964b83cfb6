package cli

import (
	"strings"
	"testing"
)

// TestHelpNeverPrintsToken: with JOBFABRIC_TOKEN set, no help output shows
// the secret (cobra prints a flag's default value in --help).
func TestHelpNeverPrintsToken(t *testing.T) {
	const secret = "jf_0123456789ab_supersecretvalue"
	env := map[string]string{"JOBFABRIC_TOKEN": secret}
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"server", "--help"}, {"token", "create", "--help"},
		{"job", "submit", "--help"}, {"agent", "--help"}, {"events", "-h"},
	} {
		out, errs, _ := run(t, env, args...)
		if strings.Contains(out+errs, secret) || strings.Contains(out+errs, "supersecret") {
			t.Errorf("jobfabric %s prints the token:\n%s%s", strings.Join(args, " "), out, errs)
		}
		if !strings.Contains(out, "JOBFABRIC_TOKEN") && args[0] != "agent" {
			t.Errorf("jobfabric %s no longer says where the token comes from:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestTokenFromEnvironment: the token still comes from JOBFABRIC_TOKEN when
// --token is not given, and --token wins over it.
func TestTokenFromEnvironment(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	if out := mustRun(t, env, "whoami"); !strings.Contains(out, "admin") {
		t.Fatalf("whoami with the token from the environment: %s", out)
	}
	_, errs, code := run(t, env, "whoami", "--token", "jf_0000_wrong")
	if code == 0 || !strings.Contains(errs, "unauthenticated") {
		t.Fatalf("--token did not replace the environment's: exit %d %s", code, errs)
	}
}

// TestEventsLimitMustBePositive: like the API, --limit below 1 is an error
// (the client would otherwise drop it and list everything).
func TestEventsLimitMustBePositive(t *testing.T) {
	runErrCases(t, map[string]errCase{
		"zero":     {args: []string{"events", "--limit", "0"}, want: "--limit 0"},
		"negative": {args: []string{"events", "--limit", "-5"}, want: "--limit -5"},
	})
}
