// Package datadriven runs tests written as files of commands and their
// expected output, as etcd's raft and CockroachDB do: a case is a command
// line with arguments, optional input lines, a "----" line, and the
// expected output up to the next blank line. Lines starting with # are
// comments. With -rewrite, the files are written back with the output the
// code gives now; review the diff.
//
//	schedule
//	----
//	1: s1-gpu001:0-7 (server)
package datadriven

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven test files with the output the code gives now")

// Arg is one argument of a command: a key and its values ("k=v", "k=(a,b)"
// or a bare "k").
type Arg struct {
	Key  string
	Vals []string
}

// Args are the arguments of a command line.
type Args []Arg

// Case is one command of a file.
type Case struct {
	// Pos is "file:line" of the command, for error messages.
	Pos string
	Cmd string
	Args
	Input string
	// Want is the expected output.
	Want string
}

// Has reports whether an argument is given.
func (as Args) Has(key string) bool {
	for _, a := range as {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Get returns the first value of an argument, or def when it is absent.
func (as Args) Get(key, def string) string {
	for _, a := range as {
		if a.Key == key && len(a.Vals) > 0 {
			return a.Vals[0]
		}
	}
	return def
}

// Walk runs f on every file of a directory, each as a subtest named by the
// file.
func Walk(t *testing.T, dir string, f func(t *testing.T, path string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no test files in %s", dir)
	}
	sort.Strings(files)
	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) { f(t, p) })
	}
}

// RunTest runs every case of a file through f and compares (or, with
// -rewrite, replaces) its expected output. f returns the output; it fails
// the test itself on errors that are no output.
func RunTest(t *testing.T, path string, f func(t *testing.T, c *Case) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			if i < len(lines)-1 || l != "" {
				out.WriteString(l + "\n")
			}
			i++
			continue
		}
		c := &Case{Pos: fmt.Sprintf("%s:%d", path, i+1)}
		c.Cmd, c.Args, err = ParseLine(l)
		if err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		out.WriteString(l + "\n")
		i++
		var in []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			if strings.TrimSpace(lines[i]) == "" {
				t.Fatalf("%s: blank line before ----", c.Pos)
			}
			in = append(in, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the command", c.Pos)
		}
		i++ // ----
		var want []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		c.Input, c.Want = strings.Join(in, "\n"), strings.Join(want, "\n")
		got := strings.TrimRight(f(t, c), "\n")
		if strings.Contains(got, "\n\n") {
			t.Fatalf("%s: output has a blank line, which ends a case:\n%s", c.Pos, got)
		}
		for _, s := range in {
			out.WriteString(s + "\n")
		}
		out.WriteString("----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		if !*rewrite && got != c.Want {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.Pos, l, got, c.Want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ParseLine splits "cmd a=1 b=(x,y) c" into the command and its
// arguments; tests parse their input lines with it too.
func ParseLine(l string) (string, Args, error) {
	fields := strings.Fields(l)
	if len(fields) == 0 {
		return "", nil, fmt.Errorf("empty line")
	}
	var args Args
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		a := Arg{Key: k}
		if ok {
			if strings.HasPrefix(v, "(") != strings.HasSuffix(v, ")") {
				return "", nil, fmt.Errorf("argument %q: unbalanced parentheses", f)
			}
			a.Vals = strings.Split(strings.TrimSuffix(strings.TrimPrefix(v, "("), ")"), ",")
		}
		args = append(args, a)
	}
	return fields[0], args, nil
}
