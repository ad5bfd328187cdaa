//go:build !linux

package gitstate

import (
	"io/fs"
	"os"
	"path/filepath"
)

type dirStater struct{ dir string }

func openDirStater(dir string) (*dirStater, error) { return &dirStater{dir}, nil }

func (d *dirStater) readDir() ([]fs.DirEntry, error) { return os.ReadDir(d.dir) }

func (d *dirStater) lstat(name string) (os.FileInfo, error) {
	return os.Lstat(filepath.Join(d.dir, name))
}

func (d *dirStater) close() {}
