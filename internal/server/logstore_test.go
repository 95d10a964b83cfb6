package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobfabric/jobfabric/internal/client"
	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/server"
)

// TestLogStoreFlag: --log-store chooses the raft log store of a new data
// directory and GET /v1/cluster says which one the server runs; a
// restart keeps it without the flag; naming the other store for a data
// directory that holds one, or a store that does not exist, fails Start
// as invalid_argument naming the flag, and changes nothing on disk.
func TestLogStoreFlag(t *testing.T) {
	start := func(t *testing.T, dir, kind string) (*server.Server, error) {
		t.Helper()
		return server.Start(ctxT(t), server.Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger(), FabricDriver: "none", LogStore: kind})
	}
	runs := func(t *testing.T, s *server.Server, dir string) string {
		t.Helper()
		tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(s.URL(), strings.TrimSpace(string(tok)), nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Cluster(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return v.LogStore
	}
	refused := func(t *testing.T, err error, says string) {
		t.Helper()
		var e *domain.Error
		if !errors.As(err, &e) || e.Code != domain.CodeInvalidArgument || e.Field != "log-store" || !strings.Contains(err.Error(), says) {
			t.Errorf("Start = %v, want invalid_argument on log-store saying %q", err, says)
		}
	}

	t.Run("not a store", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		s, err := start(t, dir, "leveldb")
		if err == nil {
			s.Close()
			t.Fatal("Start succeeded")
		}
		refused(t, err, `"leveldb" is not one of wal, bolt`)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused Start created the data dir (%v)", err)
		}
	})
	for _, tc := range []struct{ kind, other, want string }{
		{kind: "", other: "bolt", want: "wal"},
		{kind: "wal", other: "bolt", want: "wal"},
		{kind: "bolt", other: "wal", want: "bolt"},
	} {
		t.Run("new dir as "+tc.want, func(t *testing.T) {
			dir := t.TempDir()
			s, err := start(t, dir, tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if got := runs(t, s, dir); got != tc.want {
				t.Errorf("GET /v1/cluster logStore = %q, want %q", got, tc.want)
			}
			s.Close()

			s, err = start(t, dir, tc.other)
			if err == nil {
				s.Close()
				t.Fatalf("restart as %s over a %s data dir succeeded", tc.other, tc.want)
			}
			refused(t, err, `"`+tc.other+`" asked for, but`)

			s, err = start(t, dir, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := runs(t, s, dir); got != tc.want {
				t.Errorf("after a restart without the flag: logStore = %q, want %q", got, tc.want)
			}
		})
	}
}
