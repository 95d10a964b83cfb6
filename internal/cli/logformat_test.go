package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestServerLogFormatJSON: with --log-format json every line the server
// logs is one JSON object, the start line among them.
func TestServerLogFormatJSON(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &syncBuffer{}, &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-format", "json"}, out, errb)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "jobfabric server") {
		select {
		case code := <-done:
			t.Fatalf("server exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("server printed nothing")
		}
	}
	cancel()
	<-done
	started := false
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON (%v): %q", err, line)
		}
		if rec["msg"] == "jobfabric server started" && rec["level"] == "INFO" && rec["node"] != nil {
			started = true
		}
	}
	if !started {
		t.Errorf("no JSON start line in the log:\n%s", errb.String())
	}
}

func TestLogFlagsRefused(t *testing.T) {
	runErrCases(t, map[string]errCase{
		"server bad format": {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-format", "xml"}, want: `log-format "xml" is not one of text, json`},
		"server bad level":  {args: []string{"server", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "loud"}, want: `log-level "loud" is not one of debug, info, warn, error`},
		"demo bad format":   {args: []string{"demo", "--listen", "127.0.0.1:0", "--log-format", "logfmt"}, want: `log-format "logfmt" is not one of text, json`},
	})
}
