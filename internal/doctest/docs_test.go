package doctest

// TestREADMETour and TestDocs run what the pages show, as a person would
// type it, against a fresh server: the README's "A 5-minute tour" section
// whole, and the blocks of docs/*.md marked <!-- runnable --> (or
// <!-- runnable: root -->). Lines "# => TEXT" / "# ~> TEXT" under a command
// are what its output must show; a command ending in & runs in the
// background until the page ends. The conventions are in doc.go.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobfabric/jobfabric/internal/lab"
)

// TestREADMETour runs the README's tour.
func TestREADMETour(t *testing.T) {
	repo := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Extract(src, "A 5-minute tour")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	runPage(t, repo, "README.md", blocks)
}

// TestDocs runs the runnable blocks of each page of docs/, a fresh session
// per page.
func TestDocs(t *testing.T) {
	repo := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, p := range pages {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repo, p)
		blocks, err := Extract(src, "")
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(blocks) == 0 {
			continue
		}
		ran++
		t.Run(filepath.Base(p), func(t *testing.T) {
			for _, b := range blocks {
				if !b.Root {
					continue
				}
				if testing.Short() {
					t.Skipf("%s:%d needs root and the lab's tools: skipped with -short", rel, b.Line)
				}
				if err := lab.Check(); err != nil {
					t.Skipf("%s:%d needs root and the lab's tools: %v", rel, b.Line, err)
				}
			}
			runPage(t, repo, rel, blocks)
		})
	}
	if ran == 0 {
		t.Fatal("no page of docs/ has a runnable block: the convention is unused or the parser lost it")
	}
}

// runPage runs a page's blocks in one session and reports every failure
// with the page's line.
func runPage(t *testing.T, repo, page string, blocks []Block) {
	t.Helper()
	bin := buildBinary(t, repo)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(Config{Repo: repo, Binary: bin, Dir: t.TempDir(), Root: os.Geteuid() == 0})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeSession := func() {
		if closed {
			return
		}
		closed = true
		if err := s.Close(); err != nil {
			t.Errorf("%s: %v", page, err)
		}
	}
	defer closeSession()
	n := 0
	for _, b := range blocks {
		for _, c := range b.Commands {
			if Skip(c) {
				t.Logf("%s:%d: not run (the test built the binary): %s", page, c.Line, c.Text)
				continue
			}
			r, err := s.Run(ctx, c)
			n++
			if err != nil {
				closed = true
				_ = s.Abort()
				t.Fatalf("%s:%d: %s\n  ran: %s\n  %v\n--- stdout\n%s--- stderr\n%s", page, c.Line, c.Text, r.Command, err, clip(r.Stdout), clip(r.Stderr))
			}
		}
	}
	closeSession()
	t.Logf("%s: %d commands ran", page, n)
}

func clip(s string) string {
	const max = 4000
	if len(s) > max {
		return s[:max] + "\n[... clipped]\n"
	}
	return s
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// buildBinary builds cmd/jobfabric once per test binary, as the README does.
func buildBinary(t *testing.T, repo string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot build the binary the docs run")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "doctest-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "jobfabric")
		cmd := exec.Command(goTool, "build", "-o", built, "./cmd/jobfabric")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return built
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}

// repoRoot is the directory holding go.mod above the package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}
