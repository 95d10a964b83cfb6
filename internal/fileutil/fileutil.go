package fileutil

import (
	"io/fs"
	"os"
)

// WriteAtomic writes b to path with the given mode so that readers never
// see the file half-written: it writes path+".tmp" (setting the mode even
// if that file existed), then renames it over path.
func WriteAtomic(path string, b []byte, mode fs.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
