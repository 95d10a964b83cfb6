// Package slurmtest runs a real slurmctld (Debian's 22.05) for tests: a
// private munged, a slurm.conf with State=CLOUD nodes and power saving
// configured but off, so jobs are allocated on the powered-down nodes
// without any slurmd and stay in CONFIGURING (see
// shared/reference/slurm-facts.md; the nodes are never booted, which
// keeps them usable over a slurmctld restart). Tests skip with a message
// when the binaries or root are missing.
package slurmtest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options describe the cluster.
type Options struct {
	// Nodes is the NodeName expression (a hostlist such as gpu[0-7]).
	Nodes string
	// TopologyConf, when set, is written as topology.conf and enables
	// TopologyPlugin=topology/tree.
	TopologyConf string
	// GPUsPerNode, when above 0, gives every node Gres=gpu:N.
	GPUsPerNode int
	// CPUs per node; default 8.
	CPUs int
	// Cluster is ClusterName; default jftest.
	Cluster string
	// Extra lines for slurm.conf (SchedulerParameters=..., for instance).
	Extra string
	// TopologyYAML, when set, is written as topology.yaml (Slurm 24.11+
	// reads it in place of topology.conf).
	TopologyYAML string
	// JobSubmitLua, when set, is written as job_submit.lua and enables
	// JobSubmitPlugins=lua (the test skips when the plugin is missing).
	JobSubmitLua string
	// Plugins the configuration needs (topology_block, for instance):
	// the test skips when one is not installed.
	Plugins []string
	// Partitions, when set, are the PartitionName lines of slurm.conf in
	// place of the one partition gpu of every node.
	Partitions string
	// OpenToUsers lets other users than root run the Slurm commands (As):
	// the cluster's directory (slurm.conf) and munge's socket are opened
	// to them (munge's key is not).
	OpenToUsers bool
	// Slurmd runs a real slurmd per node (slurmd -N NODE, each on a port
	// of its own), so that jobs run here: their scripts start, and
	// signals reach them. Nodes is then a comma-separated list of names
	// (no brackets), declared as ordinary nodes, not CLOUD ones. The test
	// skips when slurmd is not installed.
	Slurmd bool
}

// PluginInstalled reports whether a Slurm plugin (job_submit_lua,
// topology_block...) is installed where Debian and others put them.
func PluginInstalled(name string) bool {
	for _, pat := range []string{"/usr/lib/*/slurm-wlm/", "/usr/lib/slurm-wlm/", "/usr/lib/slurm/", "/usr/lib64/slurm/", "/usr/local/lib/slurm/"} {
		if m, _ := filepath.Glob(pat + name + ".so"); len(m) > 0 {
			return true
		}
	}
	return false
}

// Cluster is a running slurmctld with its munged.
type Cluster struct {
	Dir  string
	Env  []string // SLURM_CONF for the Slurm commands
	Name string   // ClusterName
	bins map[string]string
	logs *syncBuffer
	done chan struct{} // closed when slurmctld exits
	// ctld is the running slurmctld; restart starts it again.
	ctld    *exec.Cmd
	restart func()
}

var binaries = []string{"slurmctld", "scontrol", "sbatch", "squeue", "scancel", "sinfo", "munged"}

// Start runs munged and slurmctld until the test ends and waits until
// scontrol ping answers UP. It skips the test without the binaries or root.
// With $JOBFABRIC_SLURMTEST_KEEP set, the cluster's directory (slurm.conf,
// slurmctld.log, the saved state) is copied there when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	bins := map[string]string{}
	for _, b := range binaries {
		p, err := exec.LookPath(b)
		if err != nil {
			for _, dir := range []string{"/usr/sbin", "/sbin"} {
				if _, serr := os.Stat(filepath.Join(dir, b)); serr == nil {
					p, err = filepath.Join(dir, b), nil
				}
			}
		}
		if err != nil {
			t.Skipf("%s not found (Debian packages slurmctld, slurm-client, munge): cannot run a real slurmctld", b)
		}
		bins[b] = p
	}
	if os.Geteuid() != 0 {
		t.Skip("slurmctld runs as SlurmUser=root here: the test needs root")
	}
	if o.JobSubmitLua != "" {
		o.Plugins = append(o.Plugins, "job_submit_lua")
	}
	for _, p := range o.Plugins {
		if !PluginInstalled(p) {
			t.Skipf("Slurm plugin %s is not installed (this slurmctld build lacks it)", p)
		}
	}
	if o.Slurmd {
		p, err := exec.LookPath("slurmd")
		if err != nil {
			p = "/usr/sbin/slurmd"
			if _, serr := os.Stat(p); serr != nil {
				t.Skip("slurmd not found (Debian package slurmd): cannot run jobs")
			}
		}
		bins["slurmd"] = p
	}
	if o.CPUs == 0 {
		o.CPUs = 8
	}
	if o.Cluster == "" {
		o.Cluster = "jftest"
	}
	dir, err := os.MkdirTemp("", "jfslurm") // short: the munge socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if keep := os.Getenv("JOBFABRIC_SLURMTEST_KEEP"); keep != "" {
		// Evidence of runs that pass too (a flake's passing runs are the
		// comparison). Registered after RemoveAll, so it runs before it,
		// and after slurmctld has stopped.
		t.Cleanup(func() {
			to := filepath.Join(keep, fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
			if err := copyRegular(dir, to); err != nil {
				t.Logf("keep %s: %v", dir, err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &Cluster{Dir: dir, Name: o.Cluster, bins: bins, logs: &syncBuffer{}}
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := func(name string, env []string, args ...string) (*exec.Cmd, chan struct{}) {
		cmd := exec.CommandContext(ctx, bins[name], args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = c.logs, c.logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return cmd, done
	}

	// munge with a private key and socket, in the foreground.
	md := filepath.Join(dir, "munge")
	if err := os.Mkdir(md, 0o700); err != nil {
		t.Fatal(err)
	}
	if o.OpenToUsers {
		for _, d := range []string{dir, md} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	key := bytes.Repeat([]byte("jobfabric-test-munge-key"), 50)
	if err := os.WriteFile(filepath.Join(md, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(md, "munge.sock")
	_, _ = start("munged", nil, "-F", "--force", "--key-file="+filepath.Join(md, "munge.key"), "--socket="+sock,
		"--pid-file="+filepath.Join(md, "munged.pid"), "--log-file="+filepath.Join(md, "munged.log"), "--seed-file="+filepath.Join(md, "munged.seed"))

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	noop := write("noop.sh", "#!/bin/sh\nexit 0\n", 0o755)
	topo, gres, nodeGres := "", "", ""
	if o.TopologyConf != "" {
		write("topology.conf", o.TopologyConf, 0o644)
		topo = "TopologyPlugin=topology/tree\n"
	}
	if o.TopologyYAML != "" {
		write("topology.yaml", o.TopologyYAML, 0o644)
	}
	if o.JobSubmitLua != "" {
		write("job_submit.lua", o.JobSubmitLua, 0o644)
		topo += "JobSubmitPlugins=lua\n"
	}
	state := filepath.Join(dir, "state")
	if o.GPUsPerNode > 0 {
		gres = "GresTypes=gpu\n"
		nodeGres = fmt.Sprintf(" Gres=gpu:%d", o.GPUsPerNode)
		gresConf := fmt.Sprintf("NodeName=%s Name=gpu Count=%d\n", o.Nodes, o.GPUsPerNode)
		if o.Slurmd {
			// slurmd reports no GPU it has no device file for: plain
			// files stand in for them (no cgroup confines devices here).
			for i := range o.GPUsPerNode {
				write(fmt.Sprintf("gpu%d", i), "", 0o644)
			}
			gresConf = fmt.Sprintf("NodeName=%s Name=gpu File=%s/gpu[0-%d]\n", o.Nodes, dir, o.GPUsPerNode-1)
		}
		write("gres.conf", gresConf, 0o644)
	}
	nodeLines := fmt.Sprintf("NodeName=%s NodeAddr=127.0.0.1 State=CLOUD CPUs=%d RealMemory=1000%s", o.Nodes, o.CPUs, nodeGres)
	var slurmds []string
	if o.Slurmd {
		// The configured CPUs and memory stand over what slurmd finds
		// (config_overrides): the nodes are not drained as smaller than
		// declared. No cgroups: processes are tracked by parent.
		var lines []string
		for _, n := range strings.Split(o.Nodes, ",") {
			lines = append(lines, fmt.Sprintf("NodeName=%s NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=1000%s", n, freePort(t), o.CPUs, nodeGres))
			slurmds = append(slurmds, n)
			if err := os.Mkdir(filepath.Join(dir, "slurmd-"+n), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		nodeLines = strings.Join(lines, "\n") + fmt.Sprintf("\nSlurmdSpoolDir=%s\nSlurmdPidFile=%s\nSlurmdLogFile=%s\nSlurmdParameters=config_overrides\nReturnToService=2\nKillWait=1\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none",
			filepath.Join(dir, "slurmd-%n"), filepath.Join(dir, "slurmd-%n.pid"), filepath.Join(dir, "slurmd-%n.log"))
	}
	if o.Partitions == "" {
		o.Partitions = "PartitionName=gpu Nodes=ALL Default=YES State=UP MaxTime=INFINITE"
	}
	// Power saving is configured (the programs) but off (SuspendTime=-1):
	// slurmctld allocates the CLOUD nodes as they are, POWERED_DOWN, their
	// jobs wait in CONFIGURING for a boot that never starts, and the nodes
	// keep that state over a restart. With it on, the power-save thread
	// booted an allocated node within a second (ResumeProgram, then
	// POWERING_UP and NOT_RESPONDING until a slurmd registers: none does
	// here); a restarted slurmctld leaves not-responding nodes out of the
	// nodes it allocates until they register, so a node freed after a
	// restart was never allocated again (TestBridgeSurvivesSlurmctldRestart
	// in CI, TestFreedNodeRunsTheNextJobAfterRestart). A real node
	// registers once booted. PrivateData=cloud: sinfo and scontrol show
	// powered-down CLOUD nodes (they hide them otherwise).
	conf := write("slurm.conf", fmt.Sprintf(`ClusterName=%s
SlurmctldHost=%s(127.0.0.1)
SlurmctldPort=%d
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=%s
StateSaveLocation=%s
SlurmctldPidFile=%s
SlurmctldLogFile=%s
SlurmctldDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
%s%sSuspendProgram=%s
ResumeProgram=%s
SuspendTime=-1
ResumeTimeout=60000
ResumeRate=0
SuspendRate=0
TreeWidth=65533
ProctrackType=proctrack/linuxproc
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
PrivateData=cloud
%s
%s
%s
`, o.Cluster, host, freePort(t), sock, state, filepath.Join(dir, "slurmctld.pid"), filepath.Join(dir, "slurmctld.log"),
		topo, gres, noop, noop, nodeLines, o.Partitions, o.Extra), 0o644)
	c.Env = []string{"SLURM_CONF=" + conf}
	c.ctld, c.done = start("slurmctld", c.Env, "-D", "-c", "-f", conf)
	c.up(t)
	for _, n := range slurmds {
		_, _ = start("slurmd", c.Env, "-D", "-N", n, "-f", conf)
	}
	if len(slurmds) > 0 {
		// The jobs' processes (slurmstepd and the scripts) outlive
		// slurmd: they are cancelled, and awaited, while it still runs.
		t.Cleanup(func() {
			_, _ = c.Run("scancel", "--full", "--state=RUNNING")
			_, _ = c.Run("scancel", "--state=PENDING")
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				out, err := c.Run("squeue", "-h", "-a", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%i")
				if err != nil || strings.TrimSpace(out) == "" {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("slurmtest: jobs still running at the end of the test")
		})
		c.Poll(t, "the slurmd nodes did not register", func() (bool, string) {
			out, _ := c.Run("sinfo", "-h", "-a", "-N", "-o", "%N %T")
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) != 2 || f[1] != "idle" {
					return false, out
				}
			}
			return true, out
		})
	}
	c.restart = func() {
		// -R: recover the jobs saved in StateSaveLocation (-c, the first
		// start's flag, would discard them).
		c.ctld, c.done = start("slurmctld", c.Env, "-D", "-R", "-f", conf)
	}
	return c
}

func (c *Cluster) up(t testing.TB) {
	t.Helper()
	c.Poll(t, "slurmctld never answered scontrol ping", func() (bool, string) {
		out, _ := c.Run("scontrol", "ping")
		return strings.Contains(out, "UP"), out
	})
}

// Restart stops slurmctld with SIGTERM (it saves its state in
// StateSaveLocation), calls whileDown (if not nil), starts it again on the
// same configuration and state and waits until it answers.
func (c *Cluster) Restart(t testing.TB, whileDown func()) {
	t.Helper()
	if err := c.ctld.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("stop slurmctld: %v", err)
	}
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatalf("slurmctld did not stop within a minute of SIGTERM:\n%s", c.Log())
	}
	if whileDown != nil {
		whileDown()
	}
	c.restart()
	c.up(t)
}

// AwaitRunTime waits until every allocated job (CONFIGURING or RUNNING)
// has run at least d by slurmctld's clock (squeue %M). A restart test
// waits so: slurmctld acts on an allocation in passes of about a second
// (the power-save thread, the scheduler), and restarting within the first
// one hid what a later restart finds.
func (c *Cluster) AwaitRunTime(t testing.TB, d time.Duration) {
	t.Helper()
	c.Poll(t, "the allocated jobs did not run "+d.String(), func() (bool, string) {
		out, err := c.Run("squeue", "-h", "-t", "CONFIGURING,RUNNING", "-o", "%i %M")
		if err != nil {
			return false, out
		}
		lines := strings.Fields(strings.TrimSpace(out))
		if len(lines) == 0 {
			return false, "no job allocated"
		}
		for i := 1; i < len(lines); i += 2 {
			ran, err := ParseRunTime(lines[i])
			if err != nil || ran < d {
				return false, out
			}
		}
		return true, ""
	})
}

// ParseRunTime reads squeue's %M ("0:03", "1:02:03", "2-01:02:03").
func ParseRunTime(s string) (time.Duration, error) {
	var days time.Duration
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, fmt.Errorf("run time %q: days %q: %w", s, d, err)
		}
		days, s = time.Duration(n)*24*time.Hour, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("run time %q: want [D-][H:]M:SS", s)
	}
	var total time.Duration
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("run time %q: field %q is not a count", s, p)
		}
		total = total*60 + time.Duration(n)
	}
	return days + total*time.Second, nil
}

// Command runs a Slurm command with this cluster's configuration; it is
// the bridge's command runner.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) ([]byte, error) {
	return c.Pipe(ctx, "", name, args...)
}

// Pipe runs a Slurm command with stdin as its standard input.
func (c *Cluster) Pipe(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	return c.pipe(ctx, nil, stdin, name, args...)
}

// User runs the Slurm commands as a user who is neither root nor
// SlurmUser: what slurmctld shows and allows such a user (hidden
// partitions are hidden from it, for one). It is a bridge's command
// runner too.
type User struct {
	c        *Cluster
	UID, GID uint32
}

// As is a runner of the Slurm commands as uid and gid; the cluster must
// have been started with OpenToUsers.
func (c *Cluster) As(uid, gid uint32) User { return User{c: c, UID: uid, GID: gid} }

// Command runs a Slurm command as the user.
func (u User) Command(ctx context.Context, name string, args ...string) ([]byte, error) {
	return u.Pipe(ctx, "", name, args...)
}

// Pipe runs a Slurm command as the user with stdin as its standard input.
func (u User) Pipe(ctx context.Context, stdin string, name string, args ...string) ([]byte, error) {
	return u.c.pipe(ctx, &syscall.Credential{Uid: u.UID, Gid: u.GID}, stdin, name, args...)
}

func (c *Cluster) pipe(ctx context.Context, cred *syscall.Credential, stdin string, name string, args ...string) ([]byte, error) {
	bin, ok := c.bins[name]
	if !ok {
		return nil, fmt.Errorf("slurmtest: %s is not a command this cluster runs", name)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = "/" // the test's directory may be closed to the user
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Run runs a Slurm command and returns its combined output.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	cmd := exec.Command(c.bins[name], args...)
	cmd.Env = append(os.Environ(), c.Env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Log is what munged and slurmctld wrote, for failure messages.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "slurmctld.log"))
	return c.logs.String() + string(b)
}

// Poll calls ok until it reports done, for up to a minute: slurmctld runs
// on real time. It fails the test with the last answer and the log.
func (c *Cluster) Poll(t testing.TB, what string, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var done bool
		if done, last = ok(); done {
			return
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-c.done:
			// It refused the configuration: no need to wait.
			deadline = time.Time{}
		}
	}
	t.Fatalf("%s: last answer %s\nslurmctld log:\n%s", what, last, c.Log())
}

// Fields parses "A=1 B=x y" lines of scontrol into a map (values without
// spaces).
func Fields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// syncBuffer collects the output of several processes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// copyRegular copies the regular files under from to to (munged's socket
// is not one).
func copyRegular(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}
