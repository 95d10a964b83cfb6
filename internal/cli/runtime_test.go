package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRuntimeTour: what a runtime integration does with the CLI: a runtime
// token, a job with a time limit, the runtime watching it and reporting
// its progress, and the errors that guard all of that.
func TestRuntimeTour(t *testing.T) {
	c := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := c.Servers[0].URL()
	env := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}

	topo := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "4", "--gpus-per-server", "8")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/research", "--guaranteed", "16")
	rtTok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "runtime", "--tenant", "acme", "--description", "slurm"))
	rt := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": rtTok}
	if out := mustRun(t, rt, "whoami"); !strings.Contains(out, "runtime acme") {
		t.Fatalf("whoami as the runtime: %s", out)
	}
	platformTok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "runtime"))
	if out := mustRun(t, map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": platformTok}, "whoami"); !strings.Contains(out, "runtime platform") {
		t.Fatalf("whoami as a platform runtime: %s", out)
	}
	userTok := strings.TrimSpace(mustRun(t, env, "token", "create", "--role", "member", "--tenant", "acme", "--workspace", "research"))
	user := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": userTok}

	var job struct {
		ID                uint64
		State             string
		TimeLimitSeconds  int64
		MinRuntimeSeconds int64
	}
	out := mustRun(t, user, "job", "submit", "--gpus", "8", "--time-limit", "2h", "--min-runtime", "10m", "--preemptible", "-o", "json")
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	if job.TimeLimitSeconds != 7200 || job.MinRuntimeSeconds != 600 {
		t.Fatalf("submitted %+v: want timeLimitSeconds 7200, minRuntimeSeconds 600", job)
	}
	id := strconv.FormatUint(job.ID, 10)
	if out := mustRun(t, user, "job", "show", id); !strings.Contains(out, "2h0m0s") || !strings.Contains(out, "10m0s") {
		t.Fatalf("job show without the limits:\n%s", out)
	}

	// The runtime watches the job (one JSON object per line) while it
	// reports on it.
	pr, pw := io.Pipe()
	watchDone := make(chan int, 1)
	go func() {
		code := Run(ctx, []string{"--server", url, "--token", rtTok, "job", "watch", id, "-o", "json"}, pw, io.Discard)
		pw.Close()
		watchDone <- code
	}()
	lines := make(chan map[string]any, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var j map[string]any
			if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
				t.Errorf("watch printed a line that is not one JSON object: %q", sc.Text())
				continue
			}
			lines <- j
		}
	}()
	var states []string
	await := func(state string) {
		t.Helper()
		for {
			select {
			case j, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended before %s; saw %v", state, states)
				}
				states = append(states, j["state"].(string))
				if j["state"] == state {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s from job watch; saw %v", state, states)
			}
		}
	}
	await("Ready")
	if out := mustRun(t, rt, "job", "report", id, "--state", "running", "--message", "step 1"); !strings.Contains(out, "Running") || !strings.Contains(out, "step 1") {
		t.Fatalf("job report running:\n%s", out)
	}
	await("Running")
	mustRun(t, rt, "job", "report", id, "--state", "succeeded")
	await("Succeeded")
	select {
	case code := <-watchDone:
		if code != 0 {
			t.Fatalf("job watch exited %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job watch did not exit when the job ended")
	}
	// Placed (waiting for the network) may show more than once: its
	// reason changes as the fabric revision is committed and deployed.
	states = slices.Compact(states)
	for len(states) > 0 && (states[0] == "Pending" || states[0] == "Placed") {
		states = states[1:]
	}
	if strings.Join(states, " ") != "Ready Running Succeeded" {
		t.Fatalf("job watch showed %v, want [Pending] [Placed] Ready Running Succeeded", states)
	}
	// Of an ended job, the table form prints one line and exits.
	if out := mustRun(t, user, "job", "watch", id); strings.Count(out, "\n") != 1 || !strings.Contains(out, "Succeeded") || !strings.Contains(out, "(succeeded)") {
		t.Fatalf("job watch of an ended job:\n%s", out)
	}
	if out := mustRun(t, env, "token", "list"); !strings.Contains(out, "platform") || !strings.Contains(out, "slurm") {
		t.Fatalf("token list does not show the runtime tokens' scopes:\n%s", out)
	}

	errCases := map[string]errCase{
		"negative time limit":   {user, []string{"job", "submit", "--gpus", "1", "--time-limit", "-1h"}, "--time-limit "},
		"sub-second limit":      {user, []string{"job", "submit", "--gpus", "1", "--time-limit", "500ms"}, "--time-limit "},
		"fractional min":        {user, []string{"job", "submit", "--gpus", "1", "--min-runtime", "1.5s"}, "--min-runtime "},
		"negative min runtime":  {user, []string{"job", "submit", "--gpus", "1", "--min-runtime", "-10m"}, "--min-runtime "},
		"limit beyond a year":   {user, []string{"job", "submit", "--gpus", "1", "--time-limit", "9000h"}, "--time-limit "},
		"not a duration":        {user, []string{"job", "submit", "--gpus", "1", "--time-limit", "2 hours"}, "time-limit"},
		"runtime submits":       {rt, []string{"job", "submit", "--workspace", "acme/research", "--gpus", "1"}, "permission_denied"},
		"runtime cancels":       {rt, []string{"job", "cancel", id}, "permission_denied"},
		"runtime makes a token": {rt, []string{"token", "create", "--role", "runtime", "--tenant", "acme"}, "permission_denied"},
		"member reports":        {user, []string{"job", "report", id, "--state", "running"}, "permission_denied"},
		"report after the end":  {rt, []string{"job", "report", id, "--state", "running"}, "--state"},
		"unknown report state":  {rt, []string{"job", "report", id, "--state", "exploded"}, "--state"},
		"report without state":  {rt, []string{"job", "report", id}, `"state" not set`},
		"watch a missing job":   {rt, []string{"job", "watch", "999"}, "not found"},
		"watch a bad id":        {rt, []string{"job", "watch", "x"}, "field id"},
	}
	runErrCases(t, errCases)
}
