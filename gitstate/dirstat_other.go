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

func openDirBeneath(root, rel string) (*dirStater, error) {
	return &dirStater{filepath.Join(root, filepath.FromSlash(rel))}, nil
}

func (d *dirStater) openDir(name string) (*dirStater, error) {
	return &dirStater{filepath.Join(d.dir, name)}, nil
}

func (d *dirStater) readFile(name string) ([]byte, error) {
	p := filepath.Join(d.dir, name)
	if fi, err := os.Lstat(p); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errNotRegular}
	}
	return os.ReadFile(p)
}

func (d *dirStater) readlink(name string) (string, error) {
	return os.Readlink(filepath.Join(d.dir, name))
}
