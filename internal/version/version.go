// Package version says which build of jobfabric is running: a release sets
// the version at link time, any other build reports what the Go toolchain
// recorded (module version, VCS revision and time).
package version

import (
	"runtime"
	"runtime/debug"
)

// version is set by a release build:
//
//	go build -ldflags "-X github.com/jobfabric/jobfabric/internal/version.version=v1.2.3" ./cmd/jobfabric
//
// It is the only mutable package state, and only the linker writes it.
var version string

// Info describes one build.
type Info struct {
	// Version is the release version, else the module version the
	// toolchain recorded ("(devel)" for a build from a checkout).
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had local changes; empty when unknown.
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time (RFC 3339), when known.
	Time string `json:"time,omitempty"`
	Go   string `json:"go"`
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "unknown"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && info.Revision != "" {
		info.Revision += "-dirty"
	}
	return info
}

// String is the one-line form: "v1.2.3 (abc1234, go1.24.1)".
func (i Info) String() string {
	s := i.Version + " ("
	if i.Revision != "" {
		r := i.Revision
		if len(r) > 12 {
			r = r[:12]
		}
		s += r + ", "
	}
	return s + i.Go + ")"
}
