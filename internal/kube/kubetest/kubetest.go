// Package kubetest starts a real Kubernetes API server (kube-apiserver
// with etcd, no kubelet, no scheduler) for tests, the way envtest does:
// the binary is built from the k8s.io/kubernetes module by
// tools/kubeapiserver/build.sh and etcd comes from Debian (etcd-server).
// Tests skip with the command that builds what is missing. Kubelet plays
// the nodes' kubelets: bound pods run, end on demand and are removed after
// their grace.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Version is the kube-apiserver tools/kubeapiserver pins.
const Version = "v1.34.3"

// BuildCommand builds the binary Binary looks for.
const BuildCommand = "tools/kubeapiserver/build.sh"

// Binary returns the path of kube-apiserver: $JOBFABRIC_KUBE_APISERVER, or
// the cache directory build.sh writes to ($JOBFABRIC_KUBE_CACHE, else
// $XDG_CACHE_HOME/jobfabric, else ~/.cache/jobfabric), or "" when neither
// holds it.
func Binary() string {
	if p := os.Getenv("JOBFABRIC_KUBE_APISERVER"); p != "" {
		return p
	}
	dir := os.Getenv("JOBFABRIC_KUBE_CACHE")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "jobfabric")
	}
	p := filepath.Join(dir, "kube-apiserver-"+Version, "kube-apiserver")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Cluster is a running API server. Config authenticates as a member of
// system:masters (cluster-admin).
type Cluster struct {
	Config *rest.Config
	Client kubernetes.Interface
	// UserConfig authenticates as user "alice" of no group: RBAC grants
	// her nothing until a test binds her a role.
	UserConfig *rest.Config
	dir        string
	etcd       *exec.Cmd
	api        *exec.Cmd
	apiLog     *bytes.Buffer
	// apiArgs start kube-apiserver again (Restart) on the same etcd and port.
	apiArgs []string
}

// Start starts etcd and kube-apiserver in a temporary directory on free
// ports, waits until /readyz answers and stops both when the test ends.
// It skips the test when either binary is missing.
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiBin := Binary()
	if apiBin == "" {
		t.Skipf("kube-apiserver %s is not built: run %s (about 10 minutes of CPU; cached afterwards)", Version, BuildCommand)
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not installed: apt-get install etcd-server")
	}
	c := &Cluster{dir: t.TempDir(), apiLog: new(bytes.Buffer)}
	t.Cleanup(c.stop)
	ports := freePorts(t, 3)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.etcd = exec.Command(etcdBin, "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1]))
	c.etcd.Stdout, c.etcd.Stderr = new(bytes.Buffer), new(bytes.Buffer)
	// etcd 3.4 refuses to run on arm64 unless told it is supported there.
	c.etcd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	if err := c.etcd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	token, userToken := randomHex(t), randomHex(t)
	if err := os.WriteFile(filepath.Join(c.dir, "tokens.csv"), []byte(token+",admin,admin,system:masters\n"+userToken+",alice,alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeServiceAccountKey(t, c.dir)
	port := ports[2]
	c.apiArgs = []string{apiBin, "--etcd-servers=" + etcdURL, "--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(c.dir, "certs"), "--token-auth-file=" + filepath.Join(c.dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(c.dir, "sa.pub"), "--service-account-signing-key-file=" + filepath.Join(c.dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller-manager makes namespaces' default service
		// accounts, which the admission plugin would require of pods.
		"--disable-admission-plugins=ServiceAccount"}
	c.startAPI(t)
	c.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(port), BearerToken: token,
		// The server's certificate is self-signed into cert-dir at start.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200, Burst: 400,
	}
	c.UserConfig = rest.CopyConfig(c.Config)
	c.UserConfig.BearerToken = userToken
	c.Client, err = kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.waitReady(t)
	return c
}

func (c *Cluster) startAPI(t testing.TB) {
	t.Helper()
	c.api = exec.Command(c.apiArgs[0], c.apiArgs[1:]...)
	c.api.Stdout, c.api.Stderr = c.apiLog, c.apiLog
	if err := c.api.Start(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
}

// waitReady waits until /readyz answers ok, for at most 60s.
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kube-apiserver not ready within 60s: %v\n%s", err, tail(c.apiLog.String(), 3000))
		case <-time.After(100 * time.Millisecond): // the server has no readiness watch to wait on
		}
	}
}

// StopAPIServer stops kube-apiserver (etcd keeps running): clients see
// connection errors until StartAPIServer.
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	stopProcess(c.api)
	c.api = nil
}

// StartAPIServer starts kube-apiserver again on the same etcd, port and
// certificates, and waits until it is ready.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	c.startAPI(t)
	c.waitReady(t)
}

func (c *Cluster) stop() {
	stopProcess(c.api)
	stopProcess(c.etcd)
}

// stopProcess ends p with SIGTERM, or SIGKILL after 10s.
func stopProcess(p *exec.Cmd) {
	if p == nil || p.Process == nil {
		return
	}
	p.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.Process.Kill()
		<-done
	}
}

// freePorts returns n ports free now (the kernel may hand one out again
// before the server binds it; tests accept that small race, as envtest does).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func randomHex(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// writeServiceAccountKey writes sa.key and sa.pub: the API server needs a
// signing key for service account tokens even when nothing uses them.
func writeServiceAccountKey(t testing.TB, dir string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, blk := range map[string]*pem.Block{
		"sa.key": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)},
		"sa.pub": {Type: "PUBLIC KEY", Bytes: pub},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
