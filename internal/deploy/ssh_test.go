package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/jobfabric/jobfabric/internal/domain"
)

// newKey writes a fresh ed25519 private key (OpenSSH format) to path with
// mode and returns its signer.
func newKey(t testing.TB, path string, mode os.FileMode) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeKnownHosts writes a known_hosts file listing key for addresses.
func writeKnownHosts(t testing.TB, path string, key ssh.PublicKey, addrs ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(knownhosts.Line(addrs, key)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadSSHTargets: a bad targets file is refused naming the device, the
// field and the rule; names that would reach a remote command line as
// shell syntax, a key others can read and a host key left unverified are
// among them.
func TestLoadSSHTargets(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	newKey(t, key, 0o600)
	loose := filepath.Join(dir, "id-loose")
	newKey(t, loose, 0o640)
	host := newKey(t, filepath.Join(dir, "host"), 0o600)
	kh := filepath.Join(dir, "known_hosts")
	writeKnownHosts(t, kh, host.PublicKey(), "[10.0.0.2]:2222")
	fp := ssh.FingerprintSHA256(host.PublicKey())
	good := func() map[string]any {
		return map[string]any{"address": "10.0.0.2:2222", "user": "frr", "privateKey": key, "knownHosts": kh,
			"vtySocket": "/var/run/frr", "confDir": "/etc/frr", "netns": "default-ns", "vrfNetns": map[string]string{"tenant-a": "vrf-a"}}
	}
	// with is good() with pairs of field, value (nil deletes the field).
	with := func(kv ...any) map[string]any {
		m := good()
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	cases := map[string]struct {
		device string
		target map[string]any
		want   string // "" accepted
	}{
		"known_hosts":               {"leaf1", good(), ""},
		"pinned, default port":      {"leaf1", with("knownHosts", nil, "hostKey", fp, "address", "leaf1.example"), ""},
		"hostile netns":             {"leaf1", with("netns", "x; touch /tmp/pwned"), "device leaf1: netns: \"x; touch /tmp/pwned\" must be"},
		"netns as an option":        {"leaf1", with("netns", "-all"), "device leaf1: netns"},
		"hostile vrf netns":         {"leaf1", with("vrfNetns", map[string]string{"a": "$(reboot)"}), "device leaf1: vrfNetns"},
		"hostile conf dir":          {"leaf1", with("confDir", "/etc/frr'; reboot; '"), "device leaf1: confDir"},
		"conf dir escapes":          {"leaf1", with("confDir", "/etc/frr/../shadow"), "device leaf1: confDir"},
		"relative vty socket":       {"leaf1", with("vtySocket", "run/frr"), "device leaf1: vtySocket"},
		"hostile user":              {"leaf1", with("user", "root -oProxyCommand=x"), "device leaf1: user"},
		"no address":                {"leaf1", with("address", nil), "device leaf1: address: \"\": empty"},
		"bad port":                  {"leaf1", with("address", "10.0.0.2:99999"), "device leaf1: address: \"10.0.0.2:99999\": port \"99999\" is not 1-65535"},
		"hostile device":            {"leaf1;id", good(), "device leaf1;id: name"},
		"key readable by group":     {"leaf1", with("privateKey", loose), "device leaf1: privateKey: " + loose + " is readable by group or others (mode 0640)"},
		"no key":                    {"leaf1", with("privateKey", nil), "device leaf1: privateKey: empty"},
		"no host key":               {"leaf1", with("knownHosts", nil), "device leaf1: knownHosts: give knownHosts"},
		"both host keys":            {"leaf1", with("hostKey", fp), "device leaf1: hostKey: give knownHosts or hostKey, not both"},
		"host key not a sha256":     {"leaf1", with("knownHosts", nil, "hostKey", "MD5:aa:bb"), "device leaf1: hostKey: \"MD5:aa:bb\" is not a SHA256 fingerprint"},
		"known_hosts lacks address": {"leaf1", with("address", "10.0.0.3:2222"), "device leaf1: knownHosts: " + kh + " lists no key for [10.0.0.3]:2222"},
		"unknown field":             {"leaf1", with("password", "hunter2"), "unknown field \"password\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{tc.device: tc.target})
			path := filepath.Join(t.TempDir(), "targets.json")
			os.WriteFile(path, b, 0o644)
			ts, err := LoadSSHTargets(path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := ts[tc.device]; got.ConfDir != "/etc/frr" || got.VRFNetns["tenant-a"] != "vrf-a" || got.User != "frr" {
					t.Fatalf("target read as %+v", ts[tc.device])
				}
				return
			}
			var de *domain.Error
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &de) || de.Field != "ssh-targets" {
				t.Fatalf("err = %v, want an invalid ssh-targets saying %q", err, tc.want)
			}
		})
	}
	if _, err := LoadSSHTargets(""); err == nil || !strings.Contains(err.Error(), "--ssh-targets") {
		t.Fatalf("no file: %v", err)
	}
	if d, err := New("ssh", "", ""); err == nil {
		t.Fatalf("New(ssh) without targets: %T", d)
	}
}

// TestShellQuote: arguments read by a real POSIX shell come out as they
// went in, and none of their shell syntax runs.
func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	canary := filepath.Join(dir, "pwned")
	for _, arg := range []string{
		"plain", "", "two words", "it's", `"double"`, "$(touch " + canary + ")", "`touch " + canary + "`",
		"; touch " + canary, "a\nb", "'; touch " + canary + "; '", "-n", "*", "~", "$HOME", `back\slash`, "%s",
	} {
		h := &sshHost{t: SSHTarget{}}
		line := h.commandLine([]string{"printf", "%s", arg})
		out, err := exec.Command(sh, "-c", line).CombinedOutput()
		if err != nil || string(out) != arg {
			t.Errorf("%q as %s: got %q, %v", arg, line, out, err)
		}
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("a quoted argument ran a command")
	}
	h := &sshHost{t: SSHTarget{Sudo: true}}
	if got := h.commandLine([]string{"ip", "netns", "exec", "a b", "nft", "-f", "/etc/frr/guard.nft"}); got != "sudo -n -- ip netns exec 'a b' nft -f /etc/frr/guard.nft" {
		t.Fatalf("sudo line: %s", got)
	}
}

// TestSSHUnreachableAppliesNothing: a device whose address does not
// answer is refused before anything runs, within the dial timeout, and
// the error names the device.
func TestSSHUnreachableAppliesNothing(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	newKey(t, key, 0o600)
	host := newKey(t, filepath.Join(dir, "host"), 0o600)
	// A closed port on loopback: the dial fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := NewSSH(map[string]SSHTarget{"leaf1": {Address: addr, User: "frr", PrivateKey: key, HostKey: ssh.FingerprintSHA256(host.PublicKey()),
		FRRTarget: FRRTarget{VtySocket: "/run/frr", ConfDir: "/etc/frr"}}}, "", 0)
	defer s.Close()
	err = s.Apply(context.Background(), dev("leaf1", "h", "frr.conf", "x"))
	if err == nil || !strings.Contains(err.Error(), "device leaf1") || !strings.Contains(err.Error(), "dial "+addr) || strings.Contains(err.Error(), "state unknown") {
		t.Fatalf("err = %v, want device leaf1 refused at the dial", err)
	}
	if err := s.Apply(context.Background(), dev("leaf2", "h", "frr.conf", "x")); err == nil {
		t.Fatal("a device without a target was applied")
	}
}

// TestDocsSSHTargetsExample: the targets file shown in docs/fabric.md is
// read by the loader's decoder and its names pass the loader's rules (its
// key files are the reader's, so only the fields are checked).
func TestDocsSSHTargetsExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/fabric.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "The ssh targets file is")
	if !ok {
		t.Fatal("docs/fabric.md lost its ssh targets section")
	}
	_, rest, _ = strings.Cut(rest, "```json\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no json block in the ssh targets section")
	}
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	var ts map[string]SSHTarget
	if err := dec.Decode(&ts); err != nil || len(ts) == 0 {
		t.Fatalf("the example does not decode: %v", err)
	}
	for name, tg := range ts {
		if !plainName.MatchString(name) || !plainName.MatchString(tg.User) || !plainPath.MatchString(tg.ConfDir) || !plainPath.MatchString(tg.VtySocket) {
			t.Errorf("%s: a name of the example breaks the rules: %+v", name, tg)
		}
		if _, _, err := splitAddress(tg.Address); err != nil {
			t.Errorf("%s: address: %v", name, err)
		}
		if (tg.KnownHosts == "") == (tg.HostKey == "") || tg.HostKey != "" && !sha256FP.MatchString(tg.HostKey) {
			t.Errorf("%s: host key fields: %q %q", name, tg.KnownHosts, tg.HostKey)
		}
	}
}

// TestSSHHandshakeBounded: a peer that accepts the TCP connection and
// never speaks SSH does not hold the deploy past the dial timeout.
func TestSSHHandshakeBounded(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	newKey(t, key, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // accepted, never answered
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	s := NewSSH(map[string]SSHTarget{"leaf1": {Address: ln.Addr().String(), User: "frr", PrivateKey: key, HostKey: "SHA256:Kx1mVtH0cZkqQ6Q1l6yP5nI3b9dK8m2v0w4f7g9hJkE",
		FRRTarget: FRRTarget{VtySocket: "/run/frr", ConfDir: "/etc/frr"}}}, "", 0)
	s.DialTimeout = 50 * time.Millisecond
	defer s.Close()
	err = s.Apply(context.Background(), dev("leaf1", "h", "frr.conf", "x"))
	if err == nil || !strings.Contains(err.Error(), "device leaf1") || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want the handshake cut at the dial timeout", err)
	}
}

// TestNoHostKeyBypass: no code of the module accepts any host key; the
// ssh driver's trust rules (docs/security.md) hold only while nothing
// builds a client config around them.
func TestNoHostKeyBypass(t *testing.T) {
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "InsecureIgnoreHostKey") || strings.Contains(string(b), "FixedHostKey") {
			t.Errorf("%s builds an SSH client that does not verify host keys against known_hosts or a pinned fingerprint", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
