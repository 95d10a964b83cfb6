package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// TestEveryCommandHasExample walks the command tree: every command has an
// Example section, and every example line that runs jobfabric names an
// existing command with flags it has.
func TestEveryCommandHasExample(t *testing.T) {
	root := newRoot(&globals{stdout: io.Discard, stderr: io.Discard})
	walk(root, func(c *cobra.Command) {
		if c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
			return
		}
		for _, line := range strings.Split(c.Example, "\n") {
			args := exampleArgs(line)
			if args == nil {
				continue
			}
			sub, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
				continue
			}
			if err := sub.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
			}
			sub.Flags().VisitAll(func(f *pflag.Flag) { f.Changed = false })
		}
	})
}

// exampleArgs splits an example line running jobfabric into its arguments
// (after sudo, before a comment or redirection); nil for other lines.
func exampleArgs(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "sudo ")
	if !strings.HasPrefix(line, "jobfabric ") {
		return nil
	}
	var args []string
	var cur strings.Builder
	quote := rune(0)
	in := false
	for _, r := range line[len("jobfabric "):] {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ':
			if in {
				args, in = append(args, cur.String()), false
				cur.Reset()
			}
		case (r == '#' || r == '>') && !in:
			return args
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		args = append(args, cur.String())
	}
	return args
}

// TestUnknownSubcommand: an unknown subcommand at any level exits 2 with
// cobra's suggestions; a group alone prints its help and exits 0.
func TestUnknownSubcommand(t *testing.T) {
	tests := map[string]struct {
		args []string
		code int
		want string
	}{
		"root typo":        {[]string{"jobb"}, exitUsage, "Did you mean this?\n\tjob"},
		"group typo":       {[]string{"job", "lst"}, exitUsage, "Did you mean this?\n\tlist"},
		"group unknown":    {[]string{"fabric", "bogus"}, exitUsage, `unknown command "bogus" for "jobfabric fabric"`},
		"nested group":     {[]string{"config", "use-contxt"}, exitUsage, "use-context"},
		"group alone":      {[]string{"job"}, exitOK, "Available Commands"},
		"unknown flag":     {[]string{"job", "list", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		"too many args":    {[]string{"job", "show", "1", "2"}, exitUsage, "accepts 1 arg"},
		"missing required": {[]string{"job", "report", "1"}, exitUsage, `required flag(s) "state" not set`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, errs, code := run(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Fatalf("exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", code, tc.code, out, errs, tc.want)
			}
		})
	}
}

// TestExitCodes: each kind of failure has its own exit status, and no
// message names a source file.
func TestExitCodes(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	admin := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	mustRun(t, admin, "tenant", "create", "acme")
	mustRun(t, admin, "workspace", "create", "acme/r", "--guaranteed", "0")
	member := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": strings.TrimSpace(mustRun(t, admin, "token", "create", "--role", "member", "--workspace", "acme/r"))}
	node := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": strings.TrimSpace(mustRun(t, admin, "token", "create", "--role", "runtime", "--node", "s1-gpu001"))}
	tests := map[string]struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		"usage: bad flag value":      {admin, []string{"job", "list", "--state", "sleeping"}, exitUsage, `--state "sleeping" is not a job state`},
		"usage: server-side invalid": {admin, []string{"job", "submit", "--workspace", "acme/r", "--gpus", "3", "--gpus-per-node", "2"}, exitUsage, "--gpus 3 is not a multiple of --gpus-per-node 2"},
		"usage: workspace required":  {admin, []string{"job", "submit", "--gpus", "1"}, exitUsage, "--workspace is required"},
		"not found":                  {admin, []string{"job", "show", "99"}, exitNotFound, `job "99" not found`},
		"no token":                   {map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": ""}, []string{"job", "list"}, exitDenied, "DATA_DIR/admin.token"},
		"bad token":                  {map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": "jf_0000_wrong"}, []string{"job", "list"}, exitDenied, "unauthenticated"},
		"permission":                 {member, []string{"tenant", "create", "evil"}, exitDenied, "permission_denied"},
		"node agent lists jobs":      {node, []string{"job", "list"}, exitDenied, "node agent"},
		"server unreachable":         {map[string]string{"JOBFABRIC_SERVER": "http://127.0.0.1:1", "JOBFABRIC_TOKEN": "x"}, []string{"job", "list"}, exitServer, "cannot reach"},
		"refused by the rules":       {admin, []string{"tenant", "create", "acme"}, exitFailure, "already_exists"},
	}
	sourceFile := regexp.MustCompile(`\b\w+\.go\b`)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, errs, code := run(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q, want %q", code, tc.code, errs, tc.want)
			}
			if m := sourceFile.FindString(errs); m != "" {
				t.Fatalf("stderr names source file %s: %q", m, errs)
			}
		})
	}
}

// TestDescribeInFlagTerms: API fields become the flags that set them, a
// field no flag sets stays named as a field.
func TestDescribeInFlagTerms(t *testing.T) {
	var gpus, perNode int
	var ws, limit string
	cmd := &cobra.Command{Use: "submit"}
	cmd.Flags().IntVar(&gpus, "gpus", 0, "")
	cmd.Flags().IntVar(&perNode, "gpus-per-node", 0, "")
	cmd.Flags().StringVar(&ws, "workspace", "", "")
	cmd.Flags().StringVar(&limit, "time-limit", "", "")
	setsFields(cmd, "workspace", "tenant", "workspace")
	setsFields(cmd, "time-limit", "timeLimitSeconds")
	tests := map[string]struct {
		err  error
		want string
	}{
		"camel field":    {domain.Invalid("gpusPerNode", "gpus 12 is not a multiple of gpusPerNode 8"), "--gpus 12 is not a multiple of --gpus-per-node 8"},
		"empty tenant":   {domain.Invalid("tenant", "tenant must not be empty"), "--workspace is required"},
		"annotated":      {domain.Invalid("expectedDurationSeconds", "expectedDurationSeconds 10 exceeds timeLimitSeconds 5"), "expectedDurationSeconds 10 exceeds --time-limit 5 [field expectedDurationSeconds]"},
		"plain word":     {domain.Invalid("share", "a share runs on one GPU: gpusPerNode does not apply"), "a share runs on one GPU: --gpus-per-node does not apply [field share]"},
		"prefix":         {domain.Invalid("workspace", "no such thing"), "--workspace: no such thing"},
		"other code":     {domain.Errorf(domain.CodeFailedPrecondition, "job 1 is Succeeded"), "job 1 is Succeeded (failed_precondition)"},
		"not a domain":   {io.EOF, "EOF"},
		"details listed": {&domain.Error{Code: domain.CodeInvalidArgument, Message: "2 problems", Details: []domain.Detail{{Field: "gpusPerNode", Message: "too big"}, {Field: "x.y", Message: "bad", Rule: "r1"}}}, "2 problems\n  - --gpus-per-node: too big\n  - x.y: bad [rule r1]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := describe(cmd, tc.err, true); got != tc.want {
				t.Fatalf("describe = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConfigContexts: with a temp HOME, contexts are written to
// ~/.config/jobfabric/config.yaml (0600), the current one supplies the
// server and token, and flags and the environment win over it.
func TestConfigContexts(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	home := t.TempDir()
	tokFile := filepath.Join(home, "lab.token")
	if err := os.WriteFile(tokFile, []byte(c.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "JOBFABRIC_CONFIG": "", "JOBFABRIC_SERVER": "", "JOBFABRIC_TOKEN": "", "JOBFABRIC_CA": "", "JOBFABRIC_CONTEXT": ""}
	if _, errs, code := run(t, env, "config", "current-context"); code != exitNotFound || !strings.Contains(errs, "no current context") {
		t.Fatalf("current-context without config: exit %d %s", code, errs)
	}
	mustRun(t, env, "config", "set-context", "lab", "--server", url, "--token-file", tokFile)
	mustRun(t, env, "config", "set-context", "other", "--server", "http://127.0.0.1:1")
	path := filepath.Join(home, ".config", "jobfabric", "config.yaml")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v, mode %v; want 0600", path, err, fi)
	}
	if out := mustRun(t, env, "config", "current-context"); out != "lab\n" {
		t.Fatalf("the first context is current: %q", out)
	}
	if out := mustRun(t, env, "config", "get-contexts"); !regexp.MustCompile(`\*\s+lab\s+`+regexp.QuoteMeta(url)).MatchString(out) || !strings.Contains(out, "other") {
		t.Fatalf("get-contexts:\n%s", out)
	}
	if out := mustRun(t, env, "config", "view"); !strings.Contains(out, "token-file: "+tokFile) || strings.Contains(out, c.AdminToken) {
		t.Fatalf("config view shows the token file, never the token:\n%s", out)
	}
	// The context supplies server and token.
	if out := mustRun(t, env, "whoami"); !strings.Contains(out, "admin") {
		t.Fatalf("whoami through the context: %s", out)
	}
	// --context and JOBFABRIC_CONTEXT pick another for one command.
	if _, _, code := run(t, env, "--context", "other", "whoami"); code != exitServer {
		t.Fatalf("--context other: exit %d, want %d (its server is down)", code, exitServer)
	}
	withCtx := map[string]string{"JOBFABRIC_CONTEXT": "other"}
	for k, v := range env {
		if k != "JOBFABRIC_CONTEXT" {
			withCtx[k] = v
		}
	}
	if _, _, code := run(t, withCtx, "whoami"); code != exitServer {
		t.Fatalf("JOBFABRIC_CONTEXT=other: exit %d, want %d", code, exitServer)
	}
	if _, errs, code := run(t, env, "--context", "nope", "whoami"); code != exitUsage || !strings.Contains(errs, "known: lab, other") {
		t.Fatalf("--context nope: exit %d %s", code, errs)
	}
	// The environment wins over the context, a flag over the environment.
	withEnv := map[string]string{}
	for k, v := range env {
		withEnv[k] = v
	}
	withEnv["JOBFABRIC_SERVER"] = "http://127.0.0.1:1"
	if _, _, code := run(t, withEnv, "whoami"); code != exitServer {
		t.Fatalf("JOBFABRIC_SERVER over the context: exit %d, want %d", code, exitServer)
	}
	if out := mustRun(t, withEnv, "--server", url, "whoami"); !strings.Contains(out, "admin") {
		t.Fatalf("--server over JOBFABRIC_SERVER (the context's token goes to its own server): %s", out)
	}
	// The context's token never goes to another server.
	other := strings.Replace(url, "127.0.0.1", "localhost", 1)
	if _, errs, code := run(t, env, "--server", other, "whoami"); code != exitDenied || !strings.Contains(errs, "no token was given") {
		t.Fatalf("the context's token was sent to %s: exit %d %s", other, code, errs)
	}
	if _, errs, code := run(t, env, "--token", "jf_0000_wrong", "whoami"); code != exitDenied || strings.Contains(errs, "no token was given") {
		t.Fatalf("--token over the context's token: exit %d %s", code, errs)
	}
	// use-context switches; an unknown one is not found.
	mustRun(t, env, "config", "use-context", "other")
	if out := mustRun(t, env, "config", "current-context"); out != "other\n" {
		t.Fatalf("after use-context other: %q", out)
	}
	if _, errs, code := run(t, env, "config", "use-context", "nope"); code != exitNotFound || !strings.Contains(errs, `context "nope" is not in`) {
		t.Fatalf("use-context nope: exit %d %s", code, errs)
	}
	// delete-context removes one; the current one leaves none current.
	mustRun(t, env, "config", "delete-context", "other")
	if out := mustRun(t, env, "config", "get-contexts"); strings.Contains(out, "other") || strings.Contains(out, "*") {
		t.Fatalf("after delete-context other:\n%s", out)
	}
	if _, _, code := run(t, env, "config", "delete-context", "other"); code != exitNotFound {
		t.Fatalf("delete-context of a deleted context: exit %d", code)
	}
	// $JOBFABRIC_CONFIG names another file; an unknown key is refused by name.
	bad := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(bad, []byte("contexts:\n- name: x\n  sever: http://a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withBad := map[string]string{}
	for k, v := range env {
		withBad[k] = v
	}
	withBad["JOBFABRIC_CONFIG"] = bad
	if _, errs, code := run(t, withBad, "config", "get-contexts"); code == 0 || !strings.Contains(errs, "sever") {
		t.Fatalf("unknown key: exit %d %s", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"config", "set-context", "Bad Name"}, "context"},
		{[]string{"config", "set-context", "x", "--server", "127.0.0.1:7070"}, "must be a URL"},
		{[]string{"config", "set-context", "x", "--token-file", "/nonexistent/tok"}, "--token-file /nonexistent/tok"},
	} {
		if _, errs, code := run(t, env, tc.args...); code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Fatalf("%v: exit %d %s, want usage error with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestJobListStatesAndPaging: --state takes several states in any case;
// the client reads every page of jobs and events whatever the page size,
// and --limit caps the list.
func TestJobListStatesAndPaging(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	env := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/r", "--guaranteed", "8")
	for i := 0; i < 5; i++ {
		mustRun(t, env, "job", "submit", "--workspace", "acme/r", "--gpus", "4", "--name", "j"+strconv.Itoa(i))
	}
	mustRun(t, env, "job", "cancel", "5")
	ids := func(args ...string) string {
		var js []domain.Job
		if err := json.Unmarshal([]byte(mustRun(t, env, append([]string{"job", "list", "-o", "json"}, args...)...)), &js); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, j := range js {
			s = append(s, strconv.FormatUint(j.ID, 10))
		}
		return strings.Join(s, ",")
	}
	// Jobs 1 and 2 fill the quota of 8 GPUs; 3 and 4 wait; 5 is cancelled.
	waitFor(t, env, "Ready", "job", "show", "2")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "pending"}, "3,4"},
		{[]string{"--state", "PENDING,cancelled"}, "3,4,5"},
		{[]string{"-t", "Pending", "-t", "Cancelled"}, "3,4,5"},
		{[]string{"--state", "ready,running"}, "1,2"},
		{[]string{"--limit", "2"}, "1,2"},
		{[]string{"--limit", "10"}, "1,2,3,4,5"},
		{[]string{"--state", "pending,cancelled", "--limit", "2"}, "3,4"},
	} {
		if got := ids(tc.args...); got != tc.want {
			t.Errorf("job list %v: %s, want %s", tc.args, got, tc.want)
		}
	}

	cl, err := client.New(url, c.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := cl.Jobs(ctx, client.JobQuery{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	allEvents, err := cl.Events(ctx, client.EventQuery{PageSize: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 2, 3, 7} {
		paged, err := cl.Jobs(ctx, client.JobQuery{PageSize: size})
		if err != nil || !sameJSON(t, paged, all) {
			t.Fatalf("jobs in pages of %d differ from one page (%v)", size, err)
		}
		events, err := cl.Events(ctx, client.EventQuery{PageSize: size})
		if err != nil || !sameJSON(t, events, allEvents) {
			t.Fatalf("events in pages of %d differ from one page (%v)", size, err)
		}
		newest, err := cl.Events(ctx, client.EventQuery{PageSize: size, Limit: 5})
		if err != nil || !sameJSON(t, newest, allEvents[len(allEvents)-5:]) {
			t.Fatalf("the newest 5 events in pages of %d differ (%v)", size, err)
		}
	}

	// The API: a limited list carries the next page's token; a token of
	// another list or a made-up one is refused.
	get := func(path string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, _ := get("/v1/jobs?limit=2")
	jobsToken := resp.Header.Get(client.ContinueHeader)
	if jobsToken == "" {
		t.Fatal("GET /v1/jobs?limit=2 of 5 jobs has no continue token")
	}
	if resp, _ := get("/v1/jobs?limit=5"); resp.Header.Get(client.ContinueHeader) != "" {
		t.Fatal("the last page has a continue token")
	}
	for _, path := range []string{"/v1/events?limit=2&continue=" + jobsToken, "/v1/jobs?continue=bogus", "/v1/jobs?state=sleeping", "/v1/jobs?limit=0"} {
		if resp, b := get(path); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %s %s, want 400", path, resp.Status, b)
		}
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

// TestSubmitFileAndWait: -f reads a job spec file that flags override and
// whose unknown fields are named; --wait exits 0 once the job is Ready, 6
// when it ends first, 7 when --timeout passes.
func TestSubmitFileAndWait(t *testing.T) {
	c := startServer(t)
	url := c.Servers[0].URL()
	env := map[string]string{"JOBFABRIC_SERVER": url, "JOBFABRIC_TOKEN": c.AdminToken}
	dir := t.TempDir()
	topo := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/r", "--guaranteed", "8")
	spec := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(spec, []byte("workspace: acme/r\ngpus: 4\ngpusPerNode: 4\nname: from-file\npriority: 3\ntimeLimitSeconds: 3600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var j domain.Job
	if err := json.Unmarshal([]byte(mustRun(t, env, "job", "submit", "-f", spec, "--name", "flag-wins", "--wait", "--timeout", "30s", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Name != "flag-wins" || j.GPUs != 4 || j.GPUsPerNode != 4 || j.Priority != 3 || j.TimeLimitSeconds != 3600 || j.Tenant != "acme" || j.Workspace != "r" || j.State != domain.JobReady {
		t.Fatalf("job from the file with --name and --wait: %+v", j)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("workspace: acme/r\ngpu: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrongType := filepath.Join(dir, "type.yaml")
	if err := os.WriteFile(wrongType, []byte("workspace: acme/r\ngpus: four\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", bad}, `unknown field "gpu"`},
		{[]string{"-f", wrongType}, "job spec field gpus"},
		{[]string{"-f", filepath.Join(dir, "none.yaml")}, "cannot read the job spec"},
		{[]string{"-f", spec, "--dry-run", "--wait"}, "--wait follows a submitted job"},
	} {
		if _, errs, code := run(t, env, append([]string{"job", "submit"}, tc.args...)...); code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Fatalf("job submit %v: exit %d %s, want usage error with %q", tc.args, code, errs, tc.want)
		}
	}

	// 4 of the 8 GPUs are taken: a job of 8 waits, and --timeout ends the wait.
	_, errs, code := run(t, env, "job", "submit", "--workspace", "acme/r", "--gpus", "8", "--gpus-per-node", "8", "--wait", "--timeout", "1s")
	if code != exitTimeout || !strings.Contains(errs, "is still Pending after --timeout 1s") {
		t.Fatalf("--wait --timeout on a waiting job: exit %d %s", code, errs)
	}
	// It is job 2; cancelled while a --wait follows job 3, that wait ends 6.
	go func() {
		cl, err := client.New(url, c.AdminToken, nil)
		if err != nil {
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if j, err := cl.Job(context.Background(), 3); err == nil && j.State == domain.JobPending {
				cl.CancelJob(context.Background(), 3)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	out, errs, code := run(t, env, "job", "submit", "--workspace", "acme/r", "--gpus", "8", "--gpus-per-node", "8", "--wait", "--timeout", "30s")
	if code != exitJobEnded || !strings.Contains(errs, "job 3 ended Cancelled without becoming Ready") || !strings.Contains(out, "Cancelled") {
		t.Fatalf("--wait on a job cancelled meanwhile: exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// TestVersion: version prints the client's and the server's builds, equal
// here (one binary), with no warning; skew lists each difference.
func TestVersion(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": ""}
	out, errs, code := run(t, env, "version", "-o", "json")
	var v versions
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("version: exit %d %s %s", code, out, errs)
	}
	if v.Server == nil || v.Server.Version != v.Client.Version || v.Server.APIRevision != api.Revision || v.APIRevision != api.Revision || errs != "" {
		t.Fatalf("version: %+v, stderr %q", v, errs)
	}
	if out := mustRun(t, env, "version", "--client"); !strings.Contains(out, v.Client.Version) || strings.Contains(out, "Server") {
		t.Fatalf("version --client:\n%s", out)
	}
	if _, errs, code := run(t, map[string]string{"JOBFABRIC_SERVER": "http://127.0.0.1:1"}, "version"); code != exitServer || !strings.Contains(errs, "version unknown") {
		t.Fatalf("version with the server down: exit %d %s", code, errs)
	}
	// Every answer carries the API revision: an older server's draws a
	// warning on any command, the same revision none.
	if _, errs, code := run(t, map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}, "whoami"); code != 0 || errs != "" {
		t.Fatalf("whoami on a server of the same revision: exit %d, stderr %q", code, errs)
	}
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(client.RevisionHeader, strconv.Itoa(api.Revision-1))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"t1","role":"admin"}`)
	}))
	defer old.Close()
	if _, errs, code := run(t, map[string]string{"JOBFABRIC_SERVER": old.URL, "JOBFABRIC_TOKEN": "x"}, "whoami"); code != 0 || !strings.Contains(errs, "warning: the server speaks API revision "+strconv.Itoa(api.Revision-1)) {
		t.Fatalf("whoami on an older server: exit %d, stderr %q", code, errs)
	}
	for _, tc := range []struct {
		h    api.Health
		want []string
	}{
		{api.Health{Version: "v1", APIRevision: api.Revision}, nil},
		{api.Health{Version: "v0.9", APIRevision: api.Revision}, []string{"client version v1 differs from server version v0.9"}},
		{api.Health{APIRevision: 0}, []string{"does not report its version", "older than this client's"}},
		{api.Health{Version: "v2", APIRevision: api.Revision + 1}, []string{"differs", "upgrade this client"}},
	} {
		got := skew("v1", &tc.h)
		if len(got) != len(tc.want) {
			t.Fatalf("skew(%+v) = %q, want %q", tc.h, got, tc.want)
		}
		for i := range got {
			if !strings.Contains(got[i], tc.want[i]) {
				t.Fatalf("skew(%+v) = %q, want %q", tc.h, got, tc.want)
			}
		}
	}
}

// TestCompletion: the shell's __complete request lists the server's job
// ids, tenants, workspaces and nodes, and -o's formats.
func TestCompletion(t *testing.T) {
	c := startServer(t)
	env := map[string]string{"JOBFABRIC_SERVER": c.Servers[0].URL(), "JOBFABRIC_TOKEN": c.AdminToken}
	topo := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(topo, []byte(mustRun(t, env, "topology", "generate", "--stripes", "1", "--servers-per-stripe", "2")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "topology", "apply", "-f", topo)
	mustRun(t, env, "tenant", "create", "acme")
	mustRun(t, env, "workspace", "create", "acme/r", "--guaranteed", "8")
	mustRun(t, env, "job", "submit", "--workspace", "acme/r", "--gpus", "1", "--name", "comp")
	// Devices complete from the fabric's status, which the leader's fabric
	// loop fills after the topology lands: wait for its first revision.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(mustRun(t, env, "fabric", "status"), "s1-leaf0"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no fabric revision 30s after the topology was applied")
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "show", ""}, "1\tcomp "},
		{[]string{"tenant", "show", ""}, "acme"},
		{[]string{"job", "list", "--workspace", ""}, "acme/r"},
		{[]string{"node", "drain", ""}, "s1-gpu001"},
		{[]string{"host", "show", ""}, "s1-gpu002"},
		{[]string{"fabric", "render", "--device", ""}, "s1-leaf0\tleaf"},
		{[]string{"job", "list", "-o", ""}, "json"},
		{[]string{"job", "list", "--state", ""}, "pending"},
	} {
		out := mustRun(t, env, append([]string{cobra.ShellCompRequestCmd}, tc.args...)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("completion of %v:\n%s\nwant %q", tc.args, out, tc.want)
		}
	}
	// A server that cannot be reached completes nothing, without an error.
	out, _, code := run(t, map[string]string{"JOBFABRIC_SERVER": "http://127.0.0.1:1"}, cobra.ShellCompRequestCmd, "job", "show", "")
	if code != 0 || strings.Contains(out, "\t") {
		t.Fatalf("completion without a server: exit %d\n%s", code, out)
	}
}
