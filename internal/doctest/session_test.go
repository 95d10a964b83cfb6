package doctest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startSession starts a session on a scratch checkout holding one file;
// the "binary" is a shell script, so these tests need bash only.
func startSession(t *testing.T) *Session {
	t.Helper()
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "data.txt"), []byte("from the checkout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "jobfabric")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"jobfabric $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Config{Repo: repo, Binary: bin, Dir: t.TempDir(), Timeout: 3 * time.Second, Eventually: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func cmd(t *testing.T, text string, expect ...string) Command {
	t.Helper()
	c := Command{Line: 1, Text: text}
	for _, e := range expect {
		x, err := parseExpectation(strings.TrimPrefix(e, "~"), 2)
		if err != nil {
			t.Fatal(err)
		}
		c.Expect = append(c.Expect, x)
		c.Eventually = c.Eventually || strings.HasPrefix(e, "~")
	}
	return c
}

func TestSessionCarriesTheShell(t *testing.T) {
	s := startSession(t)
	ctx := context.Background()
	for _, c := range []Command{
		cmd(t, "export A=1 B=$(echo two)"),
		cmd(t, "echo $A $B", "1 two"),
		cmd(t, "cat data.txt", "from the checkout"),
		cmd(t, "bin/jobfabric job list && jobfabric version", "jobfabric job list", "jobfabric version"),
		cmd(t, "echo $JOBFABRIC_SERVER", `/^http://127\.0\.0\.1:\d+$/`),
		cmd(t, "echo hi > /tmp/f && cat $TMPDIR/f", "hi"),
		cmd(t, "! false"),
		cmd(t, "echo to-stderr >&2", "to-stderr"),
	} {
		if r, err := s.Run(ctx, c); err != nil {
			t.Fatalf("%s: %v\n%+v", c.Text, err, r)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionFailures(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		c    func(t *testing.T) Command
		want string
	}{
		"non-zero exit":           {func(t *testing.T) Command { return cmd(t, "false") }, "exit status 1"},
		"unexpected output":       {func(t *testing.T) Command { return cmd(t, "echo Pending", "Ready") }, `does not show "Ready" (line 2)`},
		"never matches":           {func(t *testing.T) Command { return cmd(t, "echo Pending", "~Ready") }, `does not show "Ready"`},
		"runs forever":            {func(t *testing.T) Command { return cmd(t, "sleep 60") }, "must end in &"},
		"background says nothing": {func(t *testing.T) Command { return cmd(t, "true &") }, "ended without printing"},
	} {
		t.Run(name, func(t *testing.T) {
			s := startSession(t)
			_, err := s.Run(ctx, tc.c(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSessionEventually: a ~> expectation is retried until the output shows
// it, as a person runs a command again a moment later.
func TestSessionEventually(t *testing.T) {
	s := startSession(t)
	ctx := context.Background()
	if _, err := s.Run(ctx, cmd(t, "(sleep 0.3; echo Ready > state) & echo Pending > state")); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, cmd(t, "cat state", "~Ready")); err != nil {
		t.Fatalf("%v\n%+v", err, r)
	}
}

// TestSessionBackground: a background command runs on, the runner waits for
// its first line, checks its expectations at Close, and stops it.
func TestSessionBackground(t *testing.T) {
	s := startSession(t)
	ctx := context.Background()
	if _, err := s.Run(ctx, cmd(t, "(echo started; while :; do sleep 0.05; [ -f go ] && echo went && break; done; sleep 600) &   # waits for go", "started", "went")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, cmd(t, "touch go")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Close took %s: the background command was not stopped", d)
	}

	s = startSession(t)
	if _, err := s.Run(ctx, cmd(t, "(echo started; sleep 600) &", "never said")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), `does not show "never said"`) {
		t.Fatalf("Close: %v, want the missing expectation", err)
	}
}
