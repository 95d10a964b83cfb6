package doctest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says where a session runs.
type Config struct {
	Repo   string // the checkout: its top-level entries are linked into the working directory
	Binary string // the jobfabric binary the test built
	Dir    string // an empty scratch directory, the session's own
	// Timeout bounds each command (and a background command's first line,
	// and an eventual expectation); 0 means 30 s.
	Timeout time.Duration
	// Eventually bounds the retries of a ~> expectation, and the wait for a
	// background command's expectations; 0 means 15 s.
	Eventually time.Duration
	Root       bool // running as root: sudo is dropped
}

// Result is what one command did.
type Result struct {
	Command string // as run, after rewriting
	Code    int
	Stdout  string
	Stderr  string
}

// Output is what a person at a terminal would read: stdout, then stderr.
func (r Result) Output() string { return r.Stdout + r.Stderr }

// Session is one bash process that a page's commands run in, one after the
// other, so that exports and variables carry from one to the next as in a
// terminal. Background commands are its jobs; Close stops them.
type Session struct {
	cfg    Config
	work   string
	labDir string // JOBFABRIC_LAB_DIR: a lab a page brings up is its own
	out    string
	rw     *rewriter
	bash   *exec.Cmd
	stderr *tail
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
	mark   string
	n      int
	bg     []bgJob
	closed bool
	busy   bool // a command did not finish: bash cannot take the last one
}

type bgJob struct {
	cmd    Command
	pid    int
	stdout string // file
	stderr string // file
}

// Start prepares the working directory and starts bash.
func Start(cfg Config) (_ *Session, err error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Eventually == 0 {
		cfg.Eventually = 15 * time.Second
	}
	s := &Session{cfg: cfg, work: filepath.Join(cfg.Dir, "work"), out: filepath.Join(cfg.Dir, "out")}
	tmp, home := filepath.Join(cfg.Dir, "tmp"), filepath.Join(cfg.Dir, "home")
	for _, d := range []string{s.work, s.out, tmp, home, filepath.Join(s.work, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(cfg.Repo)
	if err != nil {
		return nil, fmt.Errorf("read the checkout: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "bin" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := os.Symlink(filepath.Join(cfg.Repo, e.Name()), filepath.Join(s.work, e.Name())); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(cfg.Binary, filepath.Join(s.work, "bin", "jobfabric")); err != nil {
		return nil, err
	}
	// Not under the 0700 scratch directory: the lab's daemons (user frr)
	// write into it.
	if s.labDir, err = os.MkdirTemp("", "jobfabric-doctest-lab-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(s.labDir)
		}
	}()
	if err := os.Chmod(s.labDir, 0o755); err != nil {
		return nil, err
	}
	s.rw = &rewriter{tmp: tmp, lab: s.labDir, root: cfg.Root, ports: map[string]string{}, alloc: freePort}
	def, err := s.rw.port(defaultPort)
	if err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	s.mark = "__doctest_" + hex.EncodeToString(nonce[:]) + "__"

	env := []string{
		"PATH=" + filepath.Join(s.work, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "TMPDIR=" + tmp, "JOBFABRIC_LAB_DIR=" + s.labDir,
		"JOBFABRIC_SERVER=http://127.0.0.1:" + def, // the CLI's default, mapped
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	s.bash = exec.Command("bash", "--noprofile", "--norc")
	s.bash.Dir, s.bash.Env = s.work, env
	// Its own process group: what escapes the final kill is stopped with it.
	s.bash.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.stdin, err = s.bash.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.bash.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.stderr = &tail{max: 4096}
	s.bash.Stderr = s.stderr
	if err := s.bash.Start(); err != nil {
		return nil, fmt.Errorf("start bash: %w", err)
	}
	s.lines, s.exited = make(chan string, 16), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.exited)
	}()
	return s, nil
}

// Skip says whether the command is not run: the test built the binary.
func Skip(c Command) bool { return goBuildRe.MatchString(c.Text) }

// Run runs one command and checks its exit status and its expectations. A
// background command is left running; its expectations are checked by Close.
func (s *Session) Run(ctx context.Context, c Command) (Result, error) {
	text, err := s.rw.rewrite(c.Text)
	if err != nil {
		return Result{Command: c.Text}, err
	}
	if background(text) {
		return s.runBackground(ctx, c, text)
	}
	deadline := time.Now().Add(s.cfg.Eventually)
	for {
		r, _, err := s.exec(ctx, text)
		if err != nil {
			return r, err
		}
		if r.Code != 0 {
			return r, fmt.Errorf("exit status %d", r.Code)
		}
		missing := Missing(c.Expect, r.Output())
		if len(missing) == 0 {
			return r, nil
		}
		if !c.Eventually || time.Now().After(deadline) {
			return r, fmt.Errorf("the output does not show %s", describeMissing(missing))
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describeMissing(m []Expectation) string {
	var b strings.Builder
	for i, e := range m {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q (line %d)", e.String(), e.Line)
	}
	return b.String()
}

// exec sends one command to bash, its output redirected to files, and
// waits for the marker line that carries its status and the pid of the
// shell's last background job.
func (s *Session) exec(ctx context.Context, text string) (Result, int, error) {
	r := Result{Command: text}
	s.n++
	so, se := filepath.Join(s.out, fmt.Sprintf("%03d.out", s.n)), filepath.Join(s.out, fmt.Sprintf("%03d.err", s.n))
	// A brace group runs in the shell itself: exports and variables stay.
	script := fmt.Sprintf("{\n%s\n} >%s 2>%s </dev/null\necho %s $? $!\n", text, shQuote(so), shQuote(se), s.mark)
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return r, 0, fmt.Errorf("bash: %w (stderr: %s)", err, s.stderr)
	}
	timer := time.NewTimer(s.cfg.Timeout)
	defer timer.Stop()
	for {
		select {
		case line := <-s.lines:
			rest, ok := strings.CutPrefix(line, s.mark+" ")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			r.Code, _ = strconv.Atoi(f[0])
			pid := 0
			if len(f) > 1 {
				pid, _ = strconv.Atoi(f[1])
			}
			r.Stdout, r.Stderr = readFile(so), readFile(se)
			return r, pid, nil
		case <-s.exited:
			return r, 0, fmt.Errorf("bash exited (stderr: %s)", s.stderr)
		case <-timer.C:
			s.busy = true
			r.Stdout, r.Stderr = readFile(so), readFile(se)
			return r, 0, fmt.Errorf("did not finish in %s (one that runs until stopped must end in &; an unclosed quote waits too)", s.cfg.Timeout)
		case <-ctx.Done():
			s.busy = true
			return r, 0, ctx.Err()
		}
	}
}

// runBackground starts a command ending in & and waits for its first line
// of output: until then the next command might find it not ready.
func (s *Session) runBackground(ctx context.Context, c Command, text string) (Result, error) {
	prev := s.n
	r, pid, err := s.exec(ctx, text)
	if err != nil {
		return r, err
	}
	if r.Code != 0 || pid == 0 {
		return r, fmt.Errorf("could not start it in the background (exit status %d)", r.Code)
	}
	j := bgJob{cmd: c, pid: pid, stdout: filepath.Join(s.out, fmt.Sprintf("%03d.out", prev+1)), stderr: filepath.Join(s.out, fmt.Sprintf("%03d.err", prev+1))}
	s.bg = append(s.bg, j)
	deadline := time.Now().Add(s.cfg.Timeout)
	for {
		r.Stdout, r.Stderr = readFile(j.stdout), readFile(j.stderr)
		if strings.Contains(r.Stdout, "\n") {
			return r, nil
		}
		if !alive(pid) {
			r.Stdout, r.Stderr = readFile(j.stdout), readFile(j.stderr)
			if strings.Contains(r.Stdout, "\n") {
				return r, nil // done already, having said something
			}
			return r, errors.New("the background command ended without printing a line")
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the background command printed no line in %s", s.cfg.Timeout)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close checks the background commands' expectations (waiting for them as
// for ~>), then stops the background commands (SIGTERM, and bash waits for
// them), and bash; after a command that did not finish, the whole process
// group gets the SIGTERM. Whatever is left of the group is killed.
func (s *Session) Close() error { return s.close(true) }

// Abort stops the session without checking the background commands: a
// command has failed already.
func (s *Session) Abort() error { return s.close(false) }

func (s *Session) close(check bool) error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	deadline := time.Now().Add(s.cfg.Eventually)
	for _, j := range s.bg {
		if !check {
			break
		}
		for {
			missing := Missing(j.cmd.Expect, readFile(j.stdout)+readFile(j.stderr))
			if len(missing) == 0 {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("line %d: %s: its output does not show %s:\n%s%s", j.cmd.Line, j.cmd.Text, describeMissing(missing), readFile(j.stdout), readFile(j.stderr)))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, _ = io.WriteString(s.stdin, "kill $(jobs -p) 2>/dev/null; wait; exit 0\n")
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.bash.Wait() }()
	pgid := s.bash.Process.Pid
	if s.busy {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		errs = append(errs, errors.New("the session's background commands did not stop in 20 s after SIGTERM"))
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // anything that left bash's job table
	if err := s.labDown(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// labDown takes down a lab the page left up (its namespaces and daemons
// outlive the shell) and removes the lab directory.
func (s *Session) labDown() error {
	if entries, _ := os.ReadDir(s.labDir); len(entries) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, s.cfg.Binary, "lab", "down")
		cmd.Env = append(os.Environ(), "JOBFABRIC_LAB_DIR="+s.labDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("jobfabric lab down (the page left a lab up): %w: %s", err, out)
		}
	}
	return os.RemoveAll(s.labDir)
}

// alive says whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tail keeps the last max bytes written to it: bash's own stderr, for errors.
type tail struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
