package doctest

import (
	"strings"
	"testing"
)

const page = "# Title\n" +
	"\n" +
	"```\n" +
	"not-run outside the section\n" +
	"```\n" +
	"\n" +
	"## Tour\n" +
	"\n" +
	"```\n" +
	"echo one   # a comment stays\n" +
	"# => one\n" +
	"# a plain comment\n" +
	"printf 'a\\n' \\\n" +
	"  'b'\n" +
	"# ~> /^a$/\n" +
	"```\n" +
	"\n" +
	"```json\n" +
	"{\"not\": \"a command\"}\n" +
	"```\n" +
	"\n" +
	"### Inside the tour still\n" +
	"```sh\n" +
	"server &\n" +
	"```\n" +
	"\n" +
	"## Elsewhere\n" +
	"\n" +
	"```\n" +
	"not-run: unmarked\n" +
	"```\n" +
	"\n" +
	"<!-- runnable: root -->\n" +
	"\n" +
	"~~~bash\n" +
	"sudo lab up\n" +
	"~~~\n"

func TestExtract(t *testing.T) {
	blocks, err := Extract([]byte(page), "Tour")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		for _, c := range b.Commands {
			got = append(got, c.Text)
		}
	}
	want := []string{"echo one   # a comment stays", "printf 'a\\n' \\\n  'b'", "server &", "sudo lab up"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("commands %q, want %q", got, want)
	}
	if len(blocks) != 3 || !blocks[2].Root || blocks[0].Root || blocks[0].Line != 9 {
		t.Fatalf("blocks %+v", blocks)
	}
	c0, c1 := blocks[0].Commands[0], blocks[0].Commands[1]
	if c0.Line != 10 || len(c0.Expect) != 1 || c0.Expect[0].Text != "one" || c0.Eventually {
		t.Fatalf("first command %+v", c0)
	}
	if c1.Line != 13 || len(c1.Expect) != 1 || c1.Expect[0].Re == nil || !c1.Eventually {
		t.Fatalf("second command %+v", c1)
	}

	// Without a section only marked blocks run.
	blocks, err = Extract([]byte(page), "")
	if err != nil || len(blocks) != 1 || blocks[0].Commands[0].Text != "sudo lab up" {
		t.Fatalf("Extract without section = %+v, %v", blocks, err)
	}
}

func TestExtractErrors(t *testing.T) {
	for name, tc := range map[string]struct{ src, section, want string }{
		"no section":           {"## Other\n```\nx\n```\n", "Tour", `no section "## Tour"`},
		"empty section":        {"## Tour\n```json\n{}\n```\n", "Tour", "holds no command"},
		"unclosed fence":       {"## Tour\n```\nx\n", "Tour", "never closed"},
		"orphan expectation":   {"## Tour\n```\n# => x\n```\n", "Tour", "follows no command"},
		"bad regexp":           {"## Tour\n```\nx\n# => /(/\n```\n", "Tour", "expectation /(/"},
		"empty expectation":    {"## Tour\n```\nx\n# =>\n```\n", "Tour", "empty expectation"},
		"marked but not shell": {"<!-- runnable -->\n```yaml\na: 1\n```\n", "", "must be shell"},
		"unknown marker":       {"<!-- runnable: later -->\n```\nx\n```\n", "", "unknown marker"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Extract([]byte(tc.src), tc.section)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	out := "ID  NAME      STATE\n1   llama-ft  Ready\nPlacement:  s1-gpu001 GPUs 0,1\n"
	exp := func(lines ...string) []Expectation {
		var es []Expectation
		for _, l := range lines {
			e, err := parseExpectation(l, 1)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		return es
	}
	for name, tc := range map[string]struct {
		expect  []Expectation
		missing int
	}{
		"columns move":       {exp("1 llama-ft Ready"), 0},
		"in order":           {exp("llama-ft", "Placement: s1-gpu001"), 0},
		"same line":          {exp("llama-ft", "Ready"), 0},
		"out of order":       {exp("Placement:", "llama-ft"), 1},
		"absent":             {exp("Pending"), 1},
		"regexp":             {exp(`/^Placement: s1-gpu\d+ GPUs/`), 0},
		"regexp not matched": {exp(`/^GPUs/`), 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Missing(tc.expect, out); len(got) != tc.missing {
				t.Fatalf("missing %v, want %d missing", got, tc.missing)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	next := 40000
	r := &rewriter{tmp: "/s/tmp", lab: "/tmp/lab1", root: true, ports: map[string]string{}, alloc: func() (int, error) { next++; return next, nil }}
	for _, tc := range []struct{ in, want string }{
		{"bin/jobfabric server --data-dir /tmp/jf --listen 127.0.0.1:7070 &", "bin/jobfabric server --data-dir /s/tmp/jf --listen 127.0.0.1:40001 &"},
		{"export JOBFABRIC_SERVER=http://127.0.0.1:7070 T=$(cat /tmp/jf/admin.token)", "export JOBFABRIC_SERVER=http://127.0.0.1:40001 T=$(cat /s/tmp/jf/admin.token)"},
		{"sudo jobfabric server --data-dir /tmp/jf --fabric-driver frr &", "jobfabric server --listen 127.0.0.1:40001 --data-dir /s/tmp/jf --fabric-driver frr &"},
		{"jobfabric server --listen localhost:7071 --join http://localhost:7070", "jobfabric server --listen localhost:40002 --join http://localhost:40001"},
		{"cat /var/tmp/x; ls dir/tmp/y", "cat /var/tmp/x; ls dir/tmp/y"},
		{"x && sudo lab down", "x && lab down"},
		{"--frr-targets /run/jobfabric-lab/jfl1/targets.json", "--frr-targets /tmp/lab1/jfl1/targets.json"},
	} {
		got, err := r.rewrite(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("rewrite(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for cmd, bg := range map[string]bool{"server &": true, "server &   # comment": true, "a && b": false, "a & b": false, "echo '&'": false} {
		if background(cmd) != bg {
			t.Errorf("background(%q) = %v", cmd, !bg)
		}
	}
}
