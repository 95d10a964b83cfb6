package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jobfabric/jobfabric/internal/domain"
	"github.com/jobfabric/jobfabric/internal/fabric/render"
)

// Device is one device's configuration to apply.
type Device struct {
	Name  string
	NOS   string
	Rev   uint64
	Hash  string
	Files []render.File
	// Previous are the files the device runs now (nil: unknown or none),
	// to tell what a deploy changes (Disruptions).
	Previous []render.File
	// Switch is the device's inventory entry (nil: unknown): its platform
	// gives the lint its rules on port names and release features.
	Switch *domain.Switch
}

// Driver applies device configurations.
type Driver interface {
	// Name is the driver's name (file, frr).
	Name() string
	// Apply applies d whole, or returns an error and leaves the device as
	// it was.
	Apply(ctx context.Context, d Device) error
}

// New returns the driver called name: "file" writes into dir; "frr" reads
// its targets from targetsFile (see LoadFRRTargets), "ssh" too (see
// LoadSSHTargets; the driver is an io.Closer: its connections). Other drivers (the lab's,
// internal/lab/labdeploy) are built by their owner and handed to the
// server as a Driver.
func New(name, dir, targetsFile string) (Driver, error) {
	switch name {
	case "file":
		if dir == "" {
			return nil, domain.Invalid("fabric-dir", "the file driver needs a directory")
		}
		return &File{Dir: dir}, nil
	case "frr":
		ts, err := LoadFRRTargets(targetsFile)
		if err != nil {
			return nil, err
		}
		return &FRR{Targets: ts, Run: ExecRunner}, nil
	case "ssh":
		ts, err := LoadSSHTargets(targetsFile)
		if err != nil {
			return nil, err
		}
		return NewSSH(ts, "", 0), nil
	}
	return nil, domain.Invalid("fabric-driver", "fabric driver %q is not one of file, frr, ssh, none", name)
}

// File writes each device's files into Dir/<device>/, a symlink to
// Dir/.rev/<device>-<hash>/: the new directory is written and synced first,
// then the link is swapped by a rename, so a reader sees the old files or
// the new ones, never a mix.
type File struct {
	Dir string
	// Keep is how many older versions of a device stay in .rev (default 2).
	Keep int
	// Private makes every directory 0700 and file 0600 (the server sets it
	// when Dir is inside its data dir); otherwise 0755 and 0644, for a
	// deploy tool running as another user.
	Private bool
}

func (f *File) modes() (dir, file os.FileMode) {
	if f.Private {
		return 0o700, 0o600
	}
	return 0o755, 0o644
}

// Name implements Driver.
func (f *File) Name() string { return "file" }

// Apply implements Driver.
func (f *File) Apply(ctx context.Context, d Device) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := safeName(d.Name); err != nil {
		return err
	}
	dirMode, fileMode := f.modes()
	revDir := filepath.Join(f.Dir, ".rev")
	if err := os.MkdirAll(revDir, dirMode); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	target := d.Name + "-" + d.Hash
	final := filepath.Join(revDir, target)
	if _, err := os.Stat(final); err != nil {
		tmp, err := os.MkdirTemp(revDir, ".tmp-"+d.Name+"-")
		if err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
		defer os.RemoveAll(tmp)
		for _, file := range d.Files {
			if err := safeName(file.Name); err != nil {
				return fmt.Errorf("device %s: %w", d.Name, err)
			}
			if err := writeSynced(filepath.Join(tmp, file.Name), []byte(file.Content), fileMode); err != nil {
				return fmt.Errorf("device %s: %w", d.Name, err)
			}
		}
		if err := os.Rename(tmp, final); err != nil {
			return fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	link := filepath.Join(f.Dir, d.Name)
	tmpLink := link + ".tmp-link"
	os.Remove(tmpLink)
	if err := os.Symlink(filepath.Join(".rev", target), tmpLink); err != nil {
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	if err := os.Rename(tmpLink, link); err != nil {
		os.Remove(tmpLink)
		return fmt.Errorf("device %s: %w", d.Name, err)
	}
	f.prune(revDir, d.Name, target)
	return nil
}

// prune keeps the current version of a device and the Keep newest others.
func (f *File) prune(revDir, device, current string) {
	keep := f.Keep
	if keep <= 0 {
		keep = 2
	}
	entries, err := os.ReadDir(revDir)
	if err != nil {
		return
	}
	type old struct {
		name string
		mod  int64
	}
	var olds []old
	for _, e := range entries {
		n := e.Name()
		if n == current || !strings.HasPrefix(n, device+"-") || strings.ContainsRune(strings.TrimPrefix(n, device+"-"), '-') {
			continue
		}
		if info, err := e.Info(); err == nil {
			olds = append(olds, old{n, info.ModTime().UnixNano()})
		}
	}
	slices.SortFunc(olds, func(a, b old) int { return int(b.mod - a.mod) })
	for i, o := range olds {
		if i >= keep {
			os.RemoveAll(filepath.Join(revDir, o.name))
		}
	}
}

func writeSynced(path string, b []byte, mode os.FileMode) error {
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// safeName refuses names that could escape the directory.
func safeName(n string) error {
	if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\\\x00") || strings.HasPrefix(n, ".") {
		return domain.Invalid("name", "%q is not a safe file name for a device or config file", n)
	}
	return nil
}
