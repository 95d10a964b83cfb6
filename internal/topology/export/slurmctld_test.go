package export

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlurmctldAcceptsTopologyConf runs Debian's slurmctld (22.05) with
// TopologyPlugin=topology/tree on the exported topology.conf: it must start,
// show every exported switch with its nodes, and keep a job of one stripe's
// size inside one stripe and a 2-node job inside one NVLink domain. Nodes
// are State=CLOUD with a no-op ResumeProgram, so no slurmd runs (see
// shared/reference/slurm-facts.md).
func TestSlurmctldAcceptsTopologyConf(t *testing.T) {
	bins := map[string]string{}
	for _, b := range []string{"slurmctld", "scontrol", "sbatch", "squeue", "munged"} {
		p, err := exec.LookPath(b)
		if err != nil {
			for _, dir := range []string{"/usr/sbin", "/sbin"} {
				if _, serr := os.Stat(filepath.Join(dir, b)); serr == nil {
					p, err = filepath.Join(dir, b), nil
				}
			}
		}
		if err != nil {
			t.Skipf("%s not found (Debian packages slurmctld, slurm-client, munge): cannot check topology.conf with a real slurmctld", b)
		}
		bins[b] = p
	}
	if os.Geteuid() != 0 {
		t.Skip("slurmctld runs as SlurmUser=root here: the test needs root")
	}
	// 2 stripes x 4 servers, NVLink domains of 2 servers: three levels.
	tr, err := Build(generated(t, 2, 4, 4, 8))
	if err != nil {
		t.Fatal(err)
	}
	conf := SlurmTree(tr)

	dir, err := os.MkdirTemp("", "jfslurm") // short: the munge socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	logs := &syncBuffer{}
	exited := map[string]chan struct{}{}
	start := func(name string, env []string, args ...string) {
		cmd := exec.CommandContext(ctx, bins[name], args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		done := make(chan struct{})
		exited[name] = done
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}

	// munge with a private key and socket, in the foreground.
	md := filepath.Join(dir, "munge")
	if err := os.Mkdir(md, 0o700); err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte("jobfabric-test-munge-key"), 50)
	if err := os.WriteFile(filepath.Join(md, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(md, "munge.sock")
	start("munged", nil, "-F", "--force", "--key-file="+filepath.Join(md, "munge.key"), "--socket="+sock,
		"--pid-file="+filepath.Join(md, "munged.pid"), "--log-file="+filepath.Join(md, "munged.log"), "--seed-file="+filepath.Join(md, "munged.seed"))

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	var nodes []string
	for _, s := range tr.Servers {
		nodes = append(nodes, s.Name)
	}
	noop := write("noop.sh", "#!/bin/sh\nexit 0\n", 0o755)
	port := freePort(t)
	write("topology.conf", conf, 0o644)
	slurmConf := write("slurm.conf", fmt.Sprintf(`ClusterName=jftest
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
TopologyPlugin=topology/tree
SuspendProgram=%s
ResumeProgram=%s
SuspendTime=36000
ResumeTimeout=60000
ResumeRate=0
SuspendRate=0
TreeWidth=65533
ProctrackType=proctrack/linuxproc
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=%s NodeAddr=127.0.0.1 State=CLOUD CPUs=8 RealMemory=1000
PartitionName=gpu Nodes=ALL Default=YES State=UP MaxTime=INFINITE
`, host, port, sock, filepath.Join(dir, "state"), filepath.Join(dir, "slurmctld.pid"), filepath.Join(dir, "slurmctld.log"),
		noop, noop, Hostlist(nodes)), 0o644)
	env := []string{"SLURM_CONF=" + slurmConf}
	start("slurmctld", env, "-D", "-c", "-f", slurmConf)

	run := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bins[name], args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	slurmLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "slurmctld.log"))
		return logs.String() + string(b)
	}
	// External processes on real time: poll with a deadline.
	poll := func(what string, ok func() (bool, string)) {
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
			case <-exited["slurmctld"]:
				// It refused the configuration: no need to wait.
				deadline = time.Time{}
			}
		}
		t.Fatalf("%s: last answer %s\nslurmctld log:\n%s\ntopology.conf:\n%s", what, last, slurmLog(), conf)
	}
	poll("slurmctld never answered scontrol ping", func() (bool, string) {
		out, _ := run("scontrol", "ping")
		return strings.Contains(out, "UP"), out
	})

	out, err := run("scontrol", "show", "topology")
	if err != nil {
		t.Fatalf("scontrol show topology: %v\n%s", err, out)
	}
	for _, root := range tr.Fabrics {
		walk(root, func(n *Node) {
			if !strings.Contains(out, "SwitchName="+n.Name+" ") {
				t.Errorf("slurmctld does not show switch %s:\n%s", n.Name, out)
			}
		})
	}
	level := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := fields(line)
		level[f["SwitchName"]] = f["Level"]
	}
	for _, root := range tr.Fabrics {
		if level[root.Name] != "2" {
			t.Errorf("fabric switch %s at level %q, want 2 (above leaf groups and NVLink domains):\n%s", root.Name, level[root.Name], out)
		}
	}

	// A stripe-sized job stays in a stripe; a 2-node job in one NVLink domain.
	submit := func(n int) string {
		out, err := run("sbatch", "--parsable", "-N", fmt.Sprint(n), "--exclusive", "--wrap", "true")
		if err != nil {
			t.Fatalf("sbatch -N %d: %v\n%s\n%s", n, err, out, slurmLog())
		}
		return strings.TrimSpace(out)
	}
	wide, pair := submit(4), submit(2)
	alloc := map[string]string{}
	poll("jobs were not allocated", func() (bool, string) {
		out, _ := run("squeue", "-h", "-o", "%i %N")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if id, nl, ok := strings.Cut(l, " "); ok && nl != "" {
				alloc[id] = nl
			}
		}
		return alloc[wide] != "" && alloc[pair] != "", out
	})
	expand := func(hl string) []string {
		out, err := run("scontrol", "show", "hostnames", hl)
		if err != nil {
			t.Fatalf("scontrol show hostnames %s: %v", hl, err)
		}
		return strings.Fields(out)
	}
	under := func(nodes []string, level Level) map[string]bool {
		got := map[string]bool{}
		for _, n := range nodes {
			for _, s := range tr.Servers {
				if s.Name == n {
					got[map[Level]string{LevelLeafGroup: s.LeafGroup, LevelNVLink: s.NVLink}[level]] = true
				}
			}
		}
		return got
	}
	if g := under(expand(alloc[wide]), LevelLeafGroup); len(g) != 1 {
		t.Errorf("4-node job %s on %s spans leaf groups %v, want one stripe", wide, alloc[wide], g)
	}
	if g := under(expand(alloc[pair]), LevelNVLink); len(g) != 1 {
		t.Errorf("2-node job %s on %s spans NVLink domains %v, want one", pair, alloc[pair], g)
	}
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

// fields parses "A=1 B=x y" lines of scontrol into a map (values without
// spaces).
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
