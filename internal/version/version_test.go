package version

import (
	"strings"
	"testing"
)

// TestGet: a test binary has build info; the version is never empty and
// the one-line form names the Go release.
func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Go == "" {
		t.Fatalf("Get() = %+v: empty version or Go release", i)
	}
	if !strings.Contains(i.String(), i.Go) || !strings.HasPrefix(i.String(), i.Version) {
		t.Fatalf("String() = %q for %+v", i.String(), i)
	}
}

// TestLinkerVersionWins: a version set at link time replaces the module's.
func TestLinkerVersionWins(t *testing.T) {
	saved := version
	t.Cleanup(func() { version = saved })
	version = "v9.9.9"
	if got := Get().Version; got != "v9.9.9" {
		t.Fatalf("Version = %q, want the linker's v9.9.9", got)
	}
	i := Info{Version: "v1", Revision: "0123456789abcdef0123", Go: "go1.24"}
	if got := i.String(); got != "v1 (0123456789ab, go1.24)" {
		t.Fatalf("String() = %q", got)
	}
}
