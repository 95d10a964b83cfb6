package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServerSIGHUPReloadsSecret: `jobfabric server` takes a rewritten
// --cluster-secret-file on SIGHUP (the poll is an hour away), and
// `cluster tls` shows the secret it now accepts.
func TestServerSIGHUPReloadsSecret(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	first := strings.TrimSpace(mustRun(t, nil, "cluster", "secret"))
	if err := os.WriteFile(secretFile, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	var errb bytes.Buffer
	var code int
	done := make(chan struct{}) // closed when the server exits; code is its exit code
	go func() {
		defer close(done)
		code = Run(ctx, []string{"server", "--data-dir", data, "--listen", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--bootstrap",
			"--cluster-secret-file", secretFile, "--reload-interval", "1h", "--log-level", "error"}, out, &errb)
	}()
	defer func() { cancel(); <-done }()
	api := regexp.MustCompile(`API (http://\S+),`)
	deadline := time.Now().Add(30 * time.Second)
	for !api.MatchString(out.String()) {
		select {
		case <-done:
			t.Fatalf("server exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("server printed nothing")
		}
	}
	url := api.FindStringSubmatch(out.String())[1]
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		return mustRun(t, nil, "--server", url, "--token", strings.TrimSpace(string(tok)), "cluster", "tls")
	}
	if got := status(); !strings.Contains(got, "also accepting none, 0 reloads") {
		t.Fatalf("cluster tls before:\n%s", got)
	}
	second := strings.TrimSpace(mustRun(t, nil, "cluster", "secret"))
	if err := os.WriteFile(secretFile, []byte(first+"\n"+second+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`also accepting [0-9a-f]{16}, 1 reloads`)
	for got := status(); !want.MatchString(got); got = status() {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload the secret file:\n%s", got)
		}
		select {
		case <-done:
			t.Fatalf("server exited %d after SIGHUP: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
