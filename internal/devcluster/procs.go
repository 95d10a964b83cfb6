package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/store"
)

// ProcOptions tunes a cluster of server processes.
type ProcOptions struct {
	// Binary is the jobfabric binary to run (default: os.Executable(), the
	// running one; a test passes its own binary, which runs the CLI).
	Binary string
	// Env is added to every member's environment (after this process's,
	// which GOGC, GOMEMLIMIT and GODEBUG reach the members through).
	Env []string
	// Args are added to every member's `server` arguments (flags).
	Args []string
	// LogStore is every member's raft log store (empty: the server's default).
	LogStore string
	// StopTimeout is how long Close waits for a member to exit after
	// SIGTERM before it kills it (default 20 s).
	StopTimeout time.Duration
}

// Procs is a cluster of `jobfabric server` processes on loopback, each with
// its data directory under Dir: what production runs (one member a
// process: its own heap, collector and scheduler of goroutines), where
// Start shares one process among the members.
type Procs struct {
	Dir        string
	URLs       []string // each member's API URL
	PIDs       []int
	AdminToken string
	members    []*member
	opts       ProcOptions
}

// member is one server process and what it said.
type member struct {
	cmd    *exec.Cmd
	log    string        // its stderr and stdout, after the start line
	exited chan struct{} // closed once reaped
	err    error         // Wait's, once exited is closed
}

// StartProcs launches n server processes under dir: the first with
// --bootstrap (n > 1) and a cluster secret made as `jobfabric cluster
// secret` makes one, the others joining it with the admin token. Each
// listens on free loopback ports (port 0, read back from its start line).
// The members stop when ctx is done or at Close; a member that fails to
// start is reported with the end of its log.
func StartProcs(ctx context.Context, dir string, n int, o ProcOptions) (*Procs, error) {
	if n < 1 {
		return nil, fmt.Errorf("devcluster: need at least one server, got %d", n)
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("devcluster: the binary to run: %w", err)
		}
		o.Binary = exe
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 20 * time.Second
	}
	p := &Procs{Dir: dir, opts: o}
	var secretFile string
	if n > 1 {
		secret, err := store.NewSecret()
		if err != nil {
			return nil, err
		}
		secretFile = filepath.Join(dir, "cluster.secret")
		if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
			return nil, fmt.Errorf("devcluster: cluster secret: %w", err)
		}
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("node%d", i+1)
		args := []string{"server", "--data-dir", filepath.Join(dir, id), "--node-id", id,
			"--listen", "127.0.0.1:0", "--log-level", "error"}
		if n > 1 {
			args = append(args, "--raft-addr", "127.0.0.1:0", "--cluster-secret-file", secretFile)
			if i == 0 {
				args = append(args, "--bootstrap")
			} else {
				args = append(args, "--join", p.URLs[0])
			}
		}
		if o.LogStore != "" {
			args = append(args, "--log-store", o.LogStore)
		}
		args = append(args, o.Args...)
		// The token reaches a joiner by its environment, not its command
		// line (which every local user can read).
		env := append(os.Environ(), o.Env...)
		env = append(env, "JOBFABRIC_TOKEN="+p.AdminToken)
		url, err := p.start(ctx, id, args, env)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("start server %d: %w", i+1, err)
		}
		p.URLs = append(p.URLs, url)
		if i == 0 {
			tok, err := os.ReadFile(filepath.Join(dir, id, "admin.token"))
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("server 1's admin token: %w", err)
			}
			p.AdminToken = strings.TrimSpace(string(tok))
		}
	}
	return p, nil
}

// start runs one member and waits for its start line, which names the API
// URL it listens on.
func (p *Procs) start(ctx context.Context, id string, args, env []string) (string, error) {
	logPath := filepath.Join(p.Dir, id+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("member log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	pr, pw := io.Pipe()
	cmd := exec.Command(p.opts.Binary, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, pw, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run %s: %w", p.opts.Binary, err)
	}
	m := &member{cmd: cmd, log: logPath, exited: make(chan struct{})}
	p.members = append(p.members, m)
	p.PIDs = append(p.PIDs, cmd.Process.Pid)
	go func() {
		m.err = cmd.Wait()
		pw.Close()
		close(m.exited)
	}()
	started := make(chan string, 1)
	go func() {
		// The start line, then the rest of stdout drained (the member
		// must never block on a full pipe).
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if _, rest, ok := strings.Cut(line, ": API "); ok && strings.HasPrefix(line, "jobfabric server ") {
				url, _, _ := strings.Cut(rest, ",")
				started <- url
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.stop(m)
		case <-m.exited:
		}
	}()
	select {
	case url := <-started:
		return url, nil
	case <-m.exited:
		return "", fmt.Errorf("%s exited before it started (%v): %s", id, m.err, tail(logPath))
	case <-ctx.Done():
		return "", fmt.Errorf("%s not started: %w", id, ctx.Err())
	}
}

// tail is the end of a member's log, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// Client returns an admin client of member i.
func (p *Procs) Client(i int) *client.Client {
	cl, err := client.New(p.URLs[i], p.AdminToken, nil)
	if err != nil {
		panic(err) // URLs come from the members' start lines: http://host:port
	}
	return cl
}

// WaitLeader waits until a member leads with every member a voter, as the
// cluster view of member 1 shows it, and returns the leader's index.
func (p *Procs) WaitLeader(ctx context.Context) (int, error) {
	cl := p.Client(0)
	var last error
	for {
		v, err := cl.Cluster(ctx)
		if err == nil {
			voters := 0
			for _, m := range v.Members {
				if m.Suffrage == "voter" {
					voters++
				}
			}
			for i := range p.URLs {
				if v.Leader == fmt.Sprintf("node%d", i+1) && voters == len(p.URLs) {
					return i, nil
				}
			}
			last = fmt.Errorf("leader %q, %d voters of %d", v.Leader, voters, len(p.URLs))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader elected (%v): %w", last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops every member (SIGTERM, then SIGKILL after StopTimeout) and
// reaps it. A member that exited on its own before is reported.
func (p *Procs) Close() error {
	var errs []error
	for i, m := range p.members {
		select {
		case <-m.exited:
			errs = append(errs, fmt.Errorf("server %d exited before the cluster was closed (%v): %s", i+1, m.err, tail(m.log)))
			continue
		default:
		}
		if err := p.stop(m); err != nil {
			errs = append(errs, fmt.Errorf("server %d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}

// stop asks m to shut down and waits until it is reaped, killing it if it
// takes longer than StopTimeout.
func (p *Procs) stop(m *member) error {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
		return nil
	case <-time.After(p.opts.StopTimeout):
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	return fmt.Errorf("did not stop within %s of SIGTERM: killed", p.opts.StopTimeout)
}
