package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshRig is a switch made of real components: a network namespace the
// test created, reached over a veth pair, running Debian's sshd and FRR's
// zebra and bgpd with a vty socket directory of their own.
type sshRig struct {
	t                    testing.TB
	ns, dir, addr        string
	userKey              string
	hostA, hostB         ssh.Signer
	hostAPath, hostBPath string
	knownHosts           string

	mu       sync.Mutex
	sshd     *exec.Cmd
	sshdLog  strings.Builder
	accepted int // "Accepted publickey" lines of the sshd running: one a connection
}

func newSSHRig(t testing.TB) *sshRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace, sshd, FRR daemons)")
	}
	for _, p := range []string{"/usr/sbin/sshd", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/frr-reload.py"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s missing (Debian openssh-server, frr, frr-pythontools)", p)
		}
	}
	for _, c := range []string{"ip", "nft", "vtysh", "python3", "dd"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s missing", c)
		}
	}
	u, err := user.Lookup("frr")
	if err != nil {
		t.Skipf("no frr user: %v", err)
	}
	r := &sshRig{t: t, dir: t.TempDir()}
	// The daemons run as frr: they must reach their directory.
	os.Chmod(filepath.Dir(r.dir), 0o755)
	os.Chmod(r.dir, 0o755)
	n := os.Getpid()%200 + 20
	r.ns = fmt.Sprintf("jf-ssh-%d", os.Getpid())
	va, vb := fmt.Sprintf("jfs%da", os.Getpid()), fmt.Sprintf("jfs%db", os.Getpid())
	r.addr = fmt.Sprintf("10.251.%d.2:2222", n)
	r.sh("ip", "netns", "add", r.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", r.ns).Run() })
	r.sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb, "netns", r.ns)
	t.Cleanup(func() { exec.Command("ip", "link", "del", va).Run() })
	r.sh("ip", "addr", "add", fmt.Sprintf("10.251.%d.1/30", n), "dev", va)
	r.sh("ip", "link", "set", va, "up")
	r.sh("ip", "-n", r.ns, "addr", "add", fmt.Sprintf("10.251.%d.2/30", n), "dev", vb)
	r.sh("ip", "-n", r.ns, "link", "set", vb, "up")
	r.sh("ip", "-n", r.ns, "link", "set", "lo", "up")

	// FRR: its own vty socket and conf directory, owned by frr.
	frr := filepath.Join(r.dir, "frr")
	os.MkdirAll(frr, 0o755)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chown(frr, uid, gid)
	for name, content := range map[string]string{
		"zebra.conf": "frr defaults datacenter\nhostname leaf1\n",
		"bgpd.conf":  "frr defaults datacenter\nhostname leaf1\n",
		"vtysh.conf": "service integrated-vtysh-config\n",
	} {
		os.WriteFile(filepath.Join(frr, name), []byte(content), 0o644)
	}
	for _, daemon := range []string{"zebra", "bgpd"} {
		r.sh("ip", "netns", "exec", r.ns, "/usr/lib/frr/"+daemon, "-d", "-P", "0", "-i", filepath.Join(frr, daemon+".pid"),
			"-z", filepath.Join(frr, "zserv.api"), "--vty_socket", frr, "-f", filepath.Join(frr, daemon+".conf"),
			"--log", "file:"+filepath.Join(frr, daemon+".log"))
		t.Cleanup(func() {
			if b, err := os.ReadFile(filepath.Join(frr, daemon+".pid")); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(pid, syscall.SIGTERM)
				}
			}
		})
		// The daemons answer on vtysh once up: ask until they do.
		if err := r.until(10*time.Second, func() bool {
			return exec.Command("vtysh", "--vty_socket", frr, "-d", daemon, "-c", "show version").Run() == nil
		}); err != nil {
			t.Fatalf("%s did not answer on %s", daemon, frr)
		}
	}

	// Keys: the switch's two host keys (B is the impostor's), the client's.
	r.hostAPath, r.hostBPath = filepath.Join(r.dir, "host_a"), filepath.Join(r.dir, "host_b")
	r.hostA, r.hostB = newKey(t, r.hostAPath, 0o600), newKey(t, r.hostBPath, 0o600)
	r.userKey = filepath.Join(r.dir, "id_client")
	client := newKey(t, r.userKey, 0o600)
	os.WriteFile(filepath.Join(r.dir, "authorized_keys"), ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600)
	r.knownHosts = filepath.Join(r.dir, "known_hosts")
	writeKnownHosts(t, r.knownHosts, r.hostA.PublicKey(), r.addr)
	// sshd wants its privilege separation directory.
	os.MkdirAll("/run/sshd", 0o755)
	r.startSSHD(r.hostAPath)
	t.Cleanup(r.stopSSHD)
	return r
}

func (r *sshRig) sh(name string, args ...string) string {
	r.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// until polls cond (the daemons have no other readiness signal) every
// 50ms for at most d.
func (r *sshRig) until(d time.Duration, cond func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return errors.New("timed out")
		}
	}
	return nil
}

// startSSHD starts sshd in the namespace with hostKey and waits for it
// to listen (it says so on stderr).
func (r *sshRig) startSSHD(hostKey string) {
	r.t.Helper()
	conf := filepath.Join(r.dir, "sshd_config")
	os.WriteFile(conf, []byte(strings.Join([]string{
		"ListenAddress " + r.addr,
		"HostKey " + hostKey,
		"PidFile none",
		"AuthorizedKeysFile " + filepath.Join(r.dir, "authorized_keys"),
		"StrictModes no", // the test's temp dir is not root's home
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"LogLevel INFO",
	}, "\n")+"\n"), 0o600)
	cmd := exec.Command("ip", "netns", "exec", r.ns, "/usr/sbin/sshd", "-D", "-e", "-f", conf)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.sshdLog.WriteString(line + "\n")
			if strings.Contains(line, "Accepted publickey") {
				r.accepted++
			}
			r.mu.Unlock()
			if strings.Contains(line, "Server listening on") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		r.t.Fatalf("sshd did not listen on %s: %s", r.addr, r.log())
	}
	r.mu.Lock()
	r.sshd, r.accepted = cmd, 0
	r.mu.Unlock()
}

func (r *sshRig) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sshdLog.String()
}

func (r *sshRig) connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// stopSSHD stops sshd and every session it forked (they outlive the
// listener otherwise): the clients' connections break.
func (r *sshRig) stopSSHD() {
	r.mu.Lock()
	cmd := r.sshd
	r.sshd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	for _, pid := range descendants(cmd.Process.Pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// sessions lists sshd's children: one a connection.
func (r *sshRig) sessions() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sshd == nil {
		return nil
	}
	return children(r.sshd.Process.Pid)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			p, _ := strconv.Atoi(e.Name())
			out = append(out, p)
		}
	}
	return out
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid: comm may hold spaces, so split after ")".
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], p)
			}
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

func (r *sshRig) target(addr string) SSHTarget {
	frr := filepath.Join(r.dir, "frr")
	return SSHTarget{Address: addr, User: "root", PrivateKey: r.userKey, KnownHosts: r.knownHosts,
		FRRTarget: FRRTarget{VtySocket: frr, ConfDir: frr, Netns: r.ns}}
}

// running is the switch's running config, read by the test's own vtysh.
func (r *sshRig) running() string {
	return r.sh("ip", "netns", "exec", r.ns, "vtysh", "--vty_socket", filepath.Join(r.dir, "frr"), "-c", "show running-config")
}

func (r *sshRig) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(r.dir, "frr", name))
	return string(b)
}

const (
	sshConfV1 = "frr defaults datacenter\nhostname leaf1\n!\nrouter bgp 65101\n bgp router-id 10.0.0.11\n neighbor 10.251.0.1 remote-as 65000\n!\n"
	sshConfV2 = "frr defaults datacenter\nhostname leaf1\n!\nrouter bgp 65101\n bgp router-id 10.0.0.11\n neighbor 10.251.0.5 remote-as 65000\n!\n"
	sshBad    = "frr defaults datacenter\nhostname leaf1\n!\nrouter bgp 65101\n bgp router-id 10.0.0.11\n neighbor 10.251.0.9 remote-as 65000\n this is not frr\n!\n"
	sshGuard  = "table inet jobfabric_guard\ndelete table inet jobfabric_guard\ntable inet jobfabric_guard {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ttcp dport 179 accept\n\t}\n}\n"
)

// TestSSHDriverRealFRR: the ssh driver deploys to a switch made of Debian
// sshd and FRR in a namespace: the config and the guard read back with
// the test's own vtysh and nft; a refused config leaves the previous one
// running; one connection serves several deploys and is dialled again
// when it broke; a switch presenting another host key on the same address
// is refused, naming the device and the key it presented; arguments with
// shell syntax reach the switch literally.
func TestSSHDriverRealFRR(t *testing.T) {
	r := newSSHRig(t)
	ctx := context.Background()
	s := NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, "", 0)
	defer s.Close()

	if err := s.Apply(ctx, dev("leaf1", "h1", "frr.conf", sshConfV1, "guard.nft", sshGuard)); err != nil {
		t.Fatalf("apply v1: %v\nsshd: %s", err, r.log())
	}
	if run := r.running(); !strings.Contains(run, "neighbor 10.251.0.1 remote-as 65000") {
		t.Fatalf("running config after v1:\n%s", run)
	}
	if got := r.file("frr.conf"); got != sshConfV1 {
		t.Fatalf("frr.conf on the switch = %q", got)
	}
	if nft := r.sh("ip", "netns", "exec", r.ns, "nft", "list", "table", "inet", "jobfabric_guard"); !strings.Contains(nft, "tcp dport 179 accept") {
		t.Fatalf("guard in the switch's namespace:\n%s", nft)
	}

	t.Run("refused config keeps the previous", func(t *testing.T) {
		err := s.Apply(ctx, dev("leaf1", "hbad", "frr.conf", sshBad))
		if err == nil || !strings.Contains(err.Error(), "device leaf1: the new config was refused, nothing applied") {
			t.Fatalf("err = %v, want refused, nothing applied", err)
		}
		if run := r.running(); !strings.Contains(run, "neighbor 10.251.0.1 remote-as 65000") || strings.Contains(run, "10.251.0.9") {
			t.Fatalf("running config after a refused one:\n%s", run)
		}
		if got := r.file("frr.conf"); got != sshConfV1 {
			t.Fatalf("frr.conf after a refused config = %q", got)
		}
	})

	t.Run("one connection, dialled again when broken", func(t *testing.T) {
		before := r.connections()
		if err := s.Apply(ctx, dev("leaf1", "h2", "frr.conf", sshConfV2)); err != nil {
			t.Fatalf("apply v2: %v", err)
		}
		if run := r.running(); !strings.Contains(run, "neighbor 10.251.0.5 remote-as 65000") || strings.Contains(run, "10.251.0.1 ") {
			t.Fatalf("running config after v2:\n%s", run)
		}
		if n := r.connections(); n != before {
			t.Fatalf("%d new connections for a deploy, want the kept one reused", n-before)
		}
		r.stopSSHD()
		r.startSSHD(r.hostAPath)
		if err := s.Apply(ctx, dev("leaf1", "h1", "frr.conf", sshConfV1)); err != nil {
			t.Fatalf("apply after sshd restarted: %v", err)
		}
		if n := r.connections(); n != 1 {
			t.Fatalf("%d connections after the restart, want 1", n)
		}
	})

	t.Run("a failed reload restores the previous config", func(t *testing.T) {
		// A reload that applies the new config, then fails (as one cut
		// by a daemon's error half-way): the driver must reload the
		// previous frr.conf with the real frr-reload.
		script := filepath.Join(r.dir, "frr-reload-fails.py")
		os.WriteFile(script, []byte(`import os, subprocess, sys
real = ["python3", "/usr/lib/frr/frr-reload.py"] + sys.argv[1:]
rc = subprocess.call(real)
if "--reload" in sys.argv and sys.argv[-1].endswith("frr.conf.next"):
    sys.exit(1)
sys.exit(rc)
`), 0o755)
		fs := NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, script, 0)
		defer fs.Close()
		err := fs.Apply(ctx, dev("leaf1", "h2", "frr.conf", sshConfV2))
		if err == nil || !strings.Contains(err.Error(), "(previous config restored)") {
			t.Fatalf("err = %v, want the previous config restored", err)
		}
		if run := r.running(); !strings.Contains(run, "neighbor 10.251.0.1 remote-as 65000") || strings.Contains(run, "10.251.0.5") {
			t.Fatalf("running config after a restore:\n%s", run)
		}
		if got := r.file("frr.conf"); got != sshConfV1 {
			t.Fatalf("frr.conf after a restore = %q", got)
		}
	})

	t.Run("closed on shutdown", func(t *testing.T) {
		cs := NewSSH(map[string]SSHTarget{"leaf1": r.target(r.addr)}, "", 0)
		if err := cs.Apply(ctx, dev("leaf1", "h1", "frr.conf", sshConfV1)); err != nil {
			t.Fatal(err)
		}
		// Each connection is a process below sshd: Close ends one.
		before := len(r.sessions())
		cs.Close()
		if err := r.until(10*time.Second, func() bool { return len(r.sessions()) < before }); err != nil {
			t.Fatalf("sshd still serves %d connections after Close, as before it", before)
		}
	})

	t.Run("hostile arguments reach the switch literally", func(t *testing.T) {
		h, err := s.Host("leaf1")
		if err != nil {
			t.Fatal(err)
		}
		canary := filepath.Join(r.dir, "pwned")
		for _, arg := range []string{"$(touch " + canary + ")", "'; touch " + canary + "; '", "`touch " + canary + "`", "a b\nc", "-n"} {
			out, err := h.Run(ctx, "printf", "%s", arg)
			if err != nil || string(out) != arg {
				t.Errorf("printf %q over ssh: %q, %v", arg, out, err)
			}
		}
		// A file name cannot hold the canary's path: its command touches a
		// name in the session's directory, the user's home.
		odd := filepath.Join(r.dir, "it's a $(touch jf-pwned) `touch jf-pwned` ; touch jf-pwned file")
		if err := h.WriteFile(ctx, odd, []byte("content")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(odd); string(b) != "content" {
			t.Fatalf("file with an odd name holds %q", b)
		}
		if u, err := user.Current(); err == nil {
			if _, err := os.Stat(filepath.Join(u.HomeDir, "jf-pwned")); err == nil {
				os.Remove(filepath.Join(u.HomeDir, "jf-pwned"))
				t.Fatal("a file name ran as a command on the switch")
			}
		}
		if _, err := os.Stat(canary); err == nil {
			t.Fatal("an argument ran as a command on the switch")
		}
	})

	t.Run("another host key on the address is refused", func(t *testing.T) {
		r.stopSSHD()
		r.startSSHD(r.hostBPath) // an impostor on the switch's address
		fpB := ssh.FingerprintSHA256(r.hostB.PublicKey())
		err := s.Apply(ctx, dev("leaf1", "h2", "frr.conf", sshConfV2, "guard.nft", sshGuard))
		if err == nil || !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), "device leaf1") || !strings.Contains(err.Error(), fpB) || !strings.Contains(err.Error(), "the host key changed") {
			t.Fatalf("err = %v, want device leaf1 refused naming %s", err, fpB)
		}
		if run := r.running(); !strings.Contains(run, "neighbor 10.251.0.1 remote-as 65000") {
			t.Fatalf("running config changed through an impostor:\n%s", run)
		}
		// Pinned to A's fingerprint: refused too.
		pin := r.target(r.addr)
		pin.KnownHosts, pin.HostKey = "", ssh.FingerprintSHA256(r.hostA.PublicKey())
		ps := NewSSH(map[string]SSHTarget{"leaf1": pin}, "", 0)
		defer ps.Close()
		err = ps.Apply(ctx, dev("leaf1", "h2", "frr.conf", sshConfV2))
		if err == nil || !errors.Is(err, ErrHostKey) || !strings.Contains(err.Error(), fpB) || !strings.Contains(err.Error(), "pinned hostKey is "+pin.HostKey) {
			t.Fatalf("pinned: err = %v, want refused naming %s", err, fpB)
		}
		if n := r.connections(); n != 0 {
			t.Fatalf("the impostor accepted %d logins: the client authenticated to it", n)
		}
		r.stopSSHD()
		r.startSSHD(r.hostAPath)
	})
}

// proxy forwards TCP connections to addr until cut.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, addr string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestSSHDroppedDuringReload: a connection lost while the switch reloads
// is reported as the device's state unknown, never as applied, and no
// restore is tried over a connection that is gone.
func TestSSHDroppedDuringReload(t *testing.T) {
	r := newSSHRig(t)
	p := newProxy(t, r.addr)
	via := p.ln.Addr().String()
	writeKnownHosts(t, r.knownHosts, r.hostA.PublicKey(), r.addr, via)
	// A frr-reload that passes the check, then, reloading, tells the test
	// its pid through a FIFO and takes its time.
	fifo := filepath.Join(r.dir, "reloading")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(r.dir, "frr-reload.py")
	os.WriteFile(script, []byte(fmt.Sprintf(`import os, sys, time
if "--reload" in sys.argv:
    with open(%q, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
`, fifo)), 0o755)
	s := NewSSH(map[string]SSHTarget{"leaf1": r.target(via)}, script, 0)
	defer s.Close()
	applied := make(chan error, 1)
	go func() { applied <- s.Apply(context.Background(), dev("leaf1", "h", "frr.conf", sshConfV2)) }()
	reloading := make(chan int, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // blocks until the reload opens it
		pid, _ := strconv.Atoi(string(b))
		reloading <- pid
	}()
	select {
	case pid := <-reloading:
		p.cut() // the network drops mid-reload
		if pid > 0 {
			defer syscall.Kill(pid, syscall.SIGKILL)
		}
	case err := <-applied:
		if fh, ferr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); ferr == nil {
			fh.Close() // lets the reader go
		}
		t.Fatalf("Apply ended before the reload: %v", err)
	}
	err := <-applied
	if err == nil || !strings.Contains(err.Error(), "device leaf1: state unknown") || !errors.Is(err, ErrHostLost) {
		t.Fatalf("err = %v, want device leaf1: state unknown", err)
	}
	if strings.Contains(err.Error(), "restored") {
		t.Fatalf("a restore claimed over a lost connection: %v", err)
	}
}
