package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMigrateLogStoreCommand: a server made with --log-store bolt, stopped,
// migrated with `server migrate-log-store --to wal`, starts again on the
// WAL without the flag; a second migration to the same store and a store
// that does not exist fail naming --to; -o json says what was moved.
func TestMigrateLogStoreCommand(t *testing.T) {
	dir := t.TempDir()
	serve := func(extra ...string) string {
		return serveBriefly(t, append([]string{"server", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "error"}, extra...))
	}
	if out := serve("--log-store", "bolt"); !strings.Contains(out, "log store bolt") {
		t.Fatalf("server --log-store bolt printed:\n%s", out)
	}
	out := mustRun(t, nil, "server", "migrate-log-store", "--data-dir", dir, "--to", "wal")
	if !strings.Contains(out, "migrated bolt to wal: log entries 1 to ") || !strings.Contains(out, "raft.db.migrated") {
		t.Errorf("migrate-log-store printed:\n%s", out)
	}
	if out := serve(); !strings.Contains(out, "log store wal") {
		t.Fatalf("server after the migration printed:\n%s", out)
	}
	// And back, as JSON.
	var m struct {
		From, To, Kept string
		First, Last    uint64
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "server", "migrate-log-store", "--data-dir", dir, "--to", "bolt", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	if m.From != "wal" || m.To != "bolt" || m.First != 1 || m.Last < 3 || !strings.HasSuffix(m.Kept, "wal.migrated") {
		t.Errorf("migrate-log-store -o json = %+v", m)
	}
	if out := serve(); !strings.Contains(out, "log store bolt") {
		t.Fatalf("server after the migration back printed:\n%s", out)
	}
	for _, tc := range []struct{ to, says string }{
		{"bolt", "already runs bolt"},
		{"rocks", `--to "rocks" is not one of wal, bolt`},
	} {
		_, errs, code := run(t, nil, "server", "migrate-log-store", "--data-dir", dir, "--to", tc.to)
		if code == 0 || !strings.Contains(errs, tc.says) || !strings.Contains(errs, "to") {
			t.Errorf("migrate-log-store --to %s: exit %d, stderr %q; want a failure saying %q", tc.to, code, errs, tc.says)
		}
	}
}
