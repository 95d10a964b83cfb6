package datadriven

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, c *Case) string {
	switch c.Cmd {
	case "upper":
		return strings.ToUpper(c.Input)
	case "args":
		var out []string
		for _, a := range c.Args {
			out = append(out, fmt.Sprintf("%s=%v", a.Key, a.Vals))
		}
		return strings.Join(out, " ")
	case "get":
		return fmt.Sprint(c.Get("b", ""), " ", c.Get("z", "default"), " ", c.Has("b"), " ", c.Has("z"))
	}
	t.Fatalf("%s: unknown command %s", c.Pos, c.Cmd)
	return ""
}

func TestRunTest(t *testing.T) {
	Walk(t, "testdata", func(t *testing.T, path string) { RunTest(t, path, run) })
}

// TestRewrite: -rewrite writes the output the code gives now and keeps
// everything else of the file.
func TestRewrite(t *testing.T) {
	want, err := os.ReadFile("testdata/upper.txt")
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(want), "HELLO\nWORLD", "stale", 1)
	p := filepath.Join(t.TempDir(), "upper.txt")
	if err := os.WriteFile(p, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := flag.Set("rewrite", "true"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("rewrite", "false")
	RunTest(t, p, run)
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseLine(t *testing.T) {
	for _, l := range []string{"cmd a=(x", "", "cmd b=y)"} {
		if _, _, err := ParseLine(l); err == nil {
			t.Errorf("ParseLine(%q) gave no error", l)
		}
	}
}
