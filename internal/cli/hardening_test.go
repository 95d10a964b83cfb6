package cli

import (
	"strings"
	"testing"
	"time"
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

// TestTokenListShowsScopeExpiryAndUse: a node agent's token is listed and
// introduced by whoami as node-scoped (not "platform"); --ttl sets an
// expiry shown in the list; the last use appears once committed.
func TestTokenListShowsScopeExpiryAndUse(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	node := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "runtime", "--node", "gpu-a1", "--description", "agent"))
	mustRun(t, env, "token", "create", "--role", "runtime", "--ttl", "24h", "--description", "short-lived")
	list := mustRun(t, env, "token", "list")
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.Contains(line, "agent") && (!strings.Contains(line, "node gpu-a1") || strings.Contains(line, "platform")):
			t.Errorf("node token listed as %q, want scope node gpu-a1", line)
		case strings.Contains(line, "short-lived") && (!strings.Contains(line, "platform") || !strings.Contains(line, time.Now().Add(24*time.Hour).Format("2006-01-02"))):
			t.Errorf("platform runtime token with --ttl 24h listed as %q", line)
		}
	}
	if !strings.Contains(list, "EXPIRES") || !strings.Contains(list, "LAST-USED") {
		t.Fatalf("token list lacks expiry and last use:\n%s", list)
	}
	who := mustRun(t, map[string]string{"JOBFABRIC_TOKEN": node}, "whoami")
	if !strings.Contains(who, "runtime node gpu-a1") || strings.Contains(who, "platform") {
		t.Fatalf("whoami of a node token: %q, want it node-scoped", who)
	}
	runErrCases(t, map[string]errCase{
		"negative ttl": {env: env, args: []string{"token", "create", "--role", "runtime", "--ttl", "-1h"}, want: "--ttl -1h0m0s is negative"},
		"zero ttl":     {env: env, args: []string{"token", "create", "--role", "runtime", "--ttl", "0s"}, want: "--ttl 0s"},
		"fractional":   {env: env, args: []string{"token", "create", "--role", "runtime", "--ttl", "1.5s"}, want: "whole number of seconds"},
	})
}
