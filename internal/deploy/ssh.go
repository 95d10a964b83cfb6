package deploy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// SSHTarget says how to reach one device over SSH and where its FRR runs
// there (the FRRTarget fields, paths and namespaces on the device).
type SSHTarget struct {
	// Address is the device's SSH address, host or host:port (port 22 by
	// default).
	Address string `json:"address"`
	// User is the login user; its login shell must be a POSIX shell
	// (every argument is single-quoted for it).
	User string `json:"user"`
	// PrivateKey is the client key file (OpenSSH or PEM, no passphrase),
	// readable by its owner only.
	PrivateKey string `json:"privateKey"`
	// KnownHosts is an OpenSSH known_hosts file listing the device's host
	// key. Exactly one of KnownHosts and HostKey is given.
	KnownHosts string `json:"knownHosts,omitempty"`
	// HostKey pins the device's host key by its SHA256 fingerprint
	// ("SHA256:..." as ssh-keygen -l prints it).
	HostKey string `json:"hostKey,omitempty"`
	// Sudo runs every command on the device with sudo -n (the user needs
	// password-less sudo for ip, nft, python3, dd, test, mv).
	Sudo bool `json:"sudo,omitempty"`
	FRRTarget
}

// LoadSSHTargets reads a JSON object of device name -> SSHTarget and checks
// every field: a name or path that reaches a remote command line is
// refused unless it is plain, the private key unless only its owner can
// read it, the host key unless it is pinned or listed.
func LoadSSHTargets(path string) (map[string]SSHTarget, error) {
	if path == "" {
		return nil, domain.Invalid("ssh-targets", "the ssh driver needs --ssh-targets FILE (device -> address, user, key, host key, FRR paths)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, domain.Invalid("ssh-targets", "cannot read %s: %v", path, err)
	}
	var ts map[string]SSHTarget
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		return nil, domain.Invalid("ssh-targets", "%s is not a JSON object of device -> ssh target: %v", path, err)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range ts {
			if !yield(n) {
				return
			}
		}
	}) {
		if err := ts[name].check(name); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

var (
	// plainName is what a namespace, VRF or user name may hold: it is
	// quoted anyway, but a name like "-x" or "a b" is a mistake or an attack.
	plainName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	plainPath = regexp.MustCompile(`^/[A-Za-z0-9_./+-]*$`)
	sha256FP  = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)
)

func invalidTarget(device, field, format string, args ...any) error {
	return domain.Invalid("ssh-targets", "device %s: %s: %s", device, field, fmt.Sprintf(format, args...))
}

func (t SSHTarget) check(device string) error {
	if !plainName.MatchString(device) {
		return invalidTarget(device, "name", "%q must be letters, digits, _ . - (at most 64, not starting with . or -)", device)
	}
	if _, _, err := splitAddress(t.Address); err != nil {
		return invalidTarget(device, "address", "%q: %v", t.Address, err)
	}
	if !plainName.MatchString(t.User) {
		return invalidTarget(device, "user", "%q must be letters, digits, _ . - (at most 64, not starting with . or -)", t.User)
	}
	for field, p := range map[string]string{"vtySocket": t.VtySocket, "confDir": t.ConfDir} {
		if !plainPath.MatchString(p) || filepath.Clean(p) != p || strings.Contains(p, "/..") {
			return invalidTarget(device, field, "%q must be a clean absolute path of letters, digits, _ . / + -", p)
		}
	}
	if t.Netns != "" && !plainName.MatchString(t.Netns) {
		return invalidTarget(device, "netns", "%q must be letters, digits, _ . - (at most 64, not starting with . or -)", t.Netns)
	}
	for vrf, ns := range t.VRFNetns {
		if !plainName.MatchString(vrf) || !plainName.MatchString(ns) {
			return invalidTarget(device, "vrfNetns", "%q: %q: a VRF and its namespace must be letters, digits, _ . - (at most 64, not starting with . or -)", vrf, ns)
		}
	}
	if _, err := loadPrivateKey(t.PrivateKey); err != nil {
		return invalidTarget(device, "privateKey", "%v", err)
	}
	switch {
	case t.KnownHosts == "" && t.HostKey == "":
		return invalidTarget(device, "knownHosts", "give knownHosts (a known_hosts file) or hostKey (a SHA256 fingerprint): the host key is always verified, never trusted on first use")
	case t.KnownHosts != "" && t.HostKey != "":
		return invalidTarget(device, "hostKey", "give knownHosts or hostKey, not both")
	case t.HostKey != "" && !sha256FP.MatchString(t.HostKey):
		return invalidTarget(device, "hostKey", "%q is not a SHA256 fingerprint (SHA256: and 43 base64 characters, as ssh-keygen -lf prints)", t.HostKey)
	case t.KnownHosts != "":
		if _, _, err := knownHostsCheck(device, t); err != nil {
			return invalidTarget(device, "knownHosts", "%v", err)
		}
	}
	return nil
}

// splitAddress returns host and port of host or host:port.
func splitAddress(a string) (host, port string, err error) {
	if a == "" {
		return "", "", errors.New("empty: give host or host:port")
	}
	host, port, err = net.SplitHostPort(a)
	if err != nil {
		host, port = strings.Trim(a, "[]"), "22"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q is not 1-65535", port)
	}
	if host == "" || strings.ContainsAny(host, " /\\@'\"$`;|&") {
		return "", "", fmt.Errorf("host %q is not a host name or address", host)
	}
	return host, port, nil
}

func (t SSHTarget) dialAddress() string {
	h, p, _ := splitAddress(t.Address)
	return net.JoinHostPort(h, p)
}

// loadPrivateKey reads a client key, refusing one that others than its
// owner can read: whoever reads it logs into the switch.
func loadPrivateKey(path string) (ssh.Signer, error) {
	if path == "" {
		return nil, errors.New("empty: give the client key file")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (a key without a passphrase is needed)", path, err)
	}
	return s, nil
}

// ErrHostKey is wrapped by every refusal of a device's host key.
var ErrHostKey = errors.New("host key refused")

// knownHostsCheck returns the callback checking a device's host key
// against its known_hosts file, and the key algorithms listed there for
// the device (so that the device is asked for a key the file can check).
func knownHostsCheck(device string, t SSHTarget) (ssh.HostKeyCallback, []string, error) {
	cb, err := knownhosts.New(t.KnownHosts)
	if err != nil {
		return nil, nil, err
	}
	addr := t.dialAddress()
	// Ask the file for the device with a key it cannot hold: the error
	// lists the keys it has.
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var ke *knownhosts.KeyError
	if err := cb(addr, &net.TCPAddr{}, probe); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil, nil, fmt.Errorf("%s lists no key for %s (%s): collect it with ssh-keyscan, verify its fingerprint out of band, then add it", t.KnownHosts, knownhosts.Normalize(addr), addr)
	}
	var algos []string
	for _, k := range ke.Want {
		switch typ := k.Key.Type(); typ {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, typ)
		}
	}
	check := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		if err == nil {
			return nil
		}
		seen := key.Type() + " " + ssh.FingerprintSHA256(key)
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &re):
			return fmt.Errorf("%w: device %s: %s presented %s, revoked in %s", ErrHostKey, device, hostname, seen, t.KnownHosts)
		case errors.As(err, &ke) && len(ke.Want) > 0:
			var want []string
			for _, k := range ke.Want {
				want = append(want, k.Key.Type()+" "+ssh.FingerprintSHA256(k.Key))
			}
			return fmt.Errorf("%w: device %s: %s presented %s, but %s lists %s: the host key changed (a new switch, or someone between us and it)", ErrHostKey, device, hostname, seen, t.KnownHosts, strings.Join(want, ", "))
		}
		return fmt.Errorf("%w: device %s: %s presented %s, unknown to %s: %v", ErrHostKey, device, hostname, seen, t.KnownHosts, err)
	}
	return check, slices.Compact(algos), nil
}

// pinnedCheck accepts only the host key whose fingerprint is pinned.
func pinnedCheck(device string, fp string) ssh.HostKeyCallback {
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		if seen := ssh.FingerprintSHA256(key); seen != fp {
			return fmt.Errorf("%w: device %s: %s presented %s %s, but its pinned hostKey is %s", ErrHostKey, device, hostname, key.Type(), seen, fp)
		}
		return nil
	}
}

// SSH deploys to FRR on remote Linux switches (white-box leaves running
// FRR: Cumulus-style, or any Debian switch): the frr driver's sequence
// (guard first, frr.conf.next written and synced, frr-reload --test,
// --reload, the previous config restored on failure, the VRFs' rulesets)
// run on the device over SSH. One connection per device is kept and
// reused across deploys, dialled again when broken. The host key is
// always verified: pinned or listed in known_hosts, never trusted on
// first use.
type SSH struct {
	frr     FRR
	targets map[string]SSHTarget
	// DialTimeout bounds the TCP connect and the SSH handshake of one dial
	// (0: 15s).
	DialTimeout time.Duration

	mu    sync.Mutex
	conns map[string]*sshHost
}

// NewSSH returns the ssh driver for targets (from LoadSSHTargets).
// reload is the path of frr-reload.py on the devices ("" for FRR's).
func NewSSH(targets map[string]SSHTarget, reload string, reloadTimeout time.Duration) *SSH {
	s := &SSH{targets: targets, conns: map[string]*sshHost{}}
	ft := map[string]FRRTarget{}
	for n, t := range targets {
		ft[n] = t.FRRTarget
	}
	s.frr = FRR{Targets: ft, Reload: reload, ReloadTimeout: reloadTimeout, Hosts: s.host}
	return s
}

// Name implements Driver.
func (s *SSH) Name() string { return "ssh" }

// Apply implements Driver.
func (s *SSH) Apply(ctx context.Context, d Device) error { return s.frr.Apply(ctx, d) }

// Host returns the device's remote host (dialled on first use).
func (s *SSH) Host(device string) (Host, error) { return s.host(context.Background(), device) }

func (s *SSH) host(_ context.Context, device string) (Host, error) {
	t, ok := s.targets[device]
	if !ok {
		return nil, fmt.Errorf("device %s: no ssh target configured", device)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.conns[device]
	if h == nil {
		h = &sshHost{device: device, t: t, dialTimeout: s.DialTimeout}
		s.conns[device] = h
	}
	return h, nil
}

// Close closes every device's connection.
func (s *SSH) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.conns {
		h.close()
	}
	return nil
}

// sshHost is one device reached over SSH; its client is dialled on first
// use and again after it broke.
type sshHost struct {
	device      string
	t           SSHTarget
	dialTimeout time.Duration

	mu     sync.Mutex
	client *ssh.Client
}

func (h *sshHost) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		h.client.Close()
		h.client = nil
	}
}

// drop forgets c if it is still the client in use (it broke).
func (h *sshHost) drop(c *ssh.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client == c {
		h.client = nil
	}
	c.Close()
}

// conn returns the client in use, dialling one if there is none; fresh
// says it was just dialled.
func (h *sshHost) conn(ctx context.Context) (c *ssh.Client, fresh bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return h.client, false, nil
	}
	c, err = h.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	h.client = c
	go func() {
		c.Wait() // the connection ended: the next command dials again
		h.drop(c)
	}()
	return c, true, nil
}

// session opens a session, on a new connection if the one kept broke
// since the last deploy (nothing has run yet: trying again is safe).
func (h *sshHost) session(ctx context.Context) (*ssh.Client, *ssh.Session, error) {
	for {
		c, fresh, err := h.conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		// NewSession waits for the peer: a dead peer whose TCP connection
		// still looks open must not hold the caller past ctx.
		type opened struct {
			s   *ssh.Session
			err error
		}
		ch := make(chan opened, 1)
		go func() {
			s, err := c.NewSession()
			ch <- opened{s, err}
		}()
		var o opened
		select {
		case o = <-ch:
		case <-ctx.Done():
			h.drop(c)
			return nil, nil, fmt.Errorf("open a session: %w", ctx.Err())
		}
		if o.err == nil {
			return c, o.s, nil
		}
		h.drop(c)
		if fresh {
			return nil, nil, fmt.Errorf("open a session: %w: %v", ErrHostLost, o.err)
		}
	}
}

func (h *sshHost) dial(ctx context.Context) (*ssh.Client, error) {
	signer, err := loadPrivateKey(h.t.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("privateKey: %w", err)
	}
	cfg := &ssh.ClientConfig{User: h.t.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}}
	if h.t.HostKey != "" {
		cfg.HostKeyCallback = pinnedCheck(h.device, h.t.HostKey)
	} else {
		// Read again at each dial: a key fixed in the file is taken
		// without a restart.
		cb, algos, err := knownHostsCheck(h.device, h.t)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrHostKey, err)
		}
		cfg.HostKeyCallback, cfg.HostKeyAlgorithms = cb, algos
	}
	timeout := h.dialTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := h.t.dialAddress()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	// The handshake is bounded too: a peer that accepts and says nothing
	// does not hold the deploy.
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	cc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	stop()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("ssh %s@%s: %w", h.t.User, addr, err)
	}
	nc.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// shellQuote quotes s for a POSIX shell: the remote user's shell reads
// the command line, and no name or path may be read as shell syntax.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+@%-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine is argv as one quoted command line, under sudo -n when
// the target says so.
func (h *sshHost) commandLine(argv []string) string {
	if h.t.Sudo {
		argv = append([]string{"sudo", "-n", "--"}, argv...)
	}
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// run runs argv on the device with stdin; the output is stdout and
// stderr together. A connection that ends before the command's exit
// status arrived returns an error wrapping ErrHostLost. ctx ending
// closes the session (the caller bounds what must not be cut).
func (h *sshHost) run(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	c, sess, err := h.session(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	var out lockedBuffer
	sess.Stdout, sess.Stderr = &out, &out
	if stdin != nil {
		sess.Stdin = bytes.NewReader(stdin)
	}
	done := make(chan error, 1)
	if err := sess.Start(h.commandLine(argv)); err != nil {
		return nil, fmt.Errorf("start %s: %w: %v", argv[0], ErrHostLost, err)
	}
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		return nil, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return out.Bytes(), nil
	case errors.As(err, &exit):
		return out.Bytes(), err
	}
	h.drop(c)
	return out.Bytes(), fmt.Errorf("%s: %w: %v", argv[0], ErrHostLost, err)
}

// lockedBuffer takes stdout and stderr together. It is not a
// bytes.Buffer: io.Copy would use its ReadFrom from both streams at once,
// and one stream's ReadFrom cuts the buffer back to its own length,
// dropping what the other wrote meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// Run implements Host.
func (h *sshHost) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return h.run(ctx, nil, append([]string{name}, args...)...)
}

// WriteFile implements Host: dd writes and fsyncs the file; its size is
// then checked, so that a connection cut mid-stream never leaves a short
// file taken for the whole one.
func (h *sshHost) WriteFile(ctx context.Context, path string, data []byte) error {
	if out, err := h.run(ctx, data, "dd", "of="+path, "conv=fsync", "status=none"); err != nil {
		return fmt.Errorf("write %s: %w: %s", path, err, lastLines(out, 3))
	}
	out, err := h.run(ctx, nil, "stat", "-c", "%s", "--", path)
	if err != nil {
		return fmt.Errorf("write %s: %w: %s", path, err, lastLines(out, 3))
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n != len(data) {
		return fmt.Errorf("write %s: %d bytes on the device, %d sent (stat: %q)", path, n, len(data), out)
	}
	return nil
}

// Exists implements Host.
func (h *sshHost) Exists(ctx context.Context, path string) (bool, error) {
	out, err := h.run(ctx, nil, "test", "-e", path)
	var exit *ssh.ExitError
	if errors.As(err, &exit) && exit.ExitStatus() == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("test -e %s: %w: %s", path, err, lastLines(out, 3))
	}
	return true, nil
}

// Copy implements Host.
func (h *sshHost) Copy(ctx context.Context, from, to string) error {
	if out, err := h.run(ctx, nil, "dd", "if="+from, "of="+to, "conv=fsync", "status=none"); err != nil {
		return fmt.Errorf("copy %s to %s: %w: %s", from, to, err, lastLines(out, 3))
	}
	return nil
}

// Rename implements Host (mv in one directory is a rename(2)).
func (h *sshHost) Rename(ctx context.Context, from, to string) error {
	if out, err := h.run(ctx, nil, "mv", "-f", "--", from, to); err != nil {
		return fmt.Errorf("mv %s %s: %w: %s", from, to, err, lastLines(out, 3))
	}
	return nil
}
