package fileutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of a private tree: only the owner reads, writes or lists.
const (
	PrivateDir  fs.FileMode = 0o700
	PrivateFile fs.FileMode = 0o600
)

// Private makes every directory under root (root too) PrivateDir and every
// other file PrivateFile, for trees some of whose files a library creates
// with its own modes. Symbolic links are left alone: chmod would change
// their target. A missing root is not an error.
func Private(root string) error {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking (an old snapshot reaped)
			}
			return err
		}
		want := PrivateFile
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			want = PrivateDir
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if info.Mode().Perm() == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("make %s private: %w", root, err)
	}
	return nil
}
