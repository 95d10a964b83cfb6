package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBootstrapToken: the first start writes the admin token to
// DATA_DIR/admin.token with mode 0600, the token works, and neither the
// snapshot nor the raft log holds the secret (only its hash).
func TestBootstrapToken(t *testing.T) {
	c := startCluster(t, 1)
	tok := c.AdminToken
	if !strings.HasPrefix(tok, "jf_") {
		t.Fatalf("bootstrap token %q", tok)
	}
	path := filepath.Join(c.Dir, "node1", "admin.token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != tok {
		t.Fatal("admin.token does not hold the printed token")
	}
	if _, err := c.Client(0).WhoAmI(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Servers[0].Snapshot(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	secret := tok[strings.LastIndex(tok, "_")+1:]
	err = filepath.Walk(filepath.Join(c.Dir, "node1", "raft"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s contains the token secret", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
