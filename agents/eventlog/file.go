package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/arborhq/arbor/atomicfile"
)

// createFile opens path for reading and writing. A new file and any new directories above it are
// fsynced into their parents, so a log that Open returned still exists after a crash.
func createFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := mkdirAllSync(dir); err != nil {
		return nil, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// mkdirAllSync is os.MkdirAll (mode 0700) that fsyncs each parent whose entries it changed.
func mkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// copyAside writes the bytes [from, to) of f to a new file path.<tag>-<time> with
// atomicfile (temp, fsync, rename, fsync dir), so the copy is durable before the caller cuts
// or rewrites the log, and returns its name.
func copyAside(f *os.File, path, tag string, from, to int64) (string, error) {
	name := fmt.Sprintf("%s.%s-%s", path, tag, time.Now().UTC().Format("20060102T150405.000000000Z"))
	err := atomicfile.Write(name, 0o600, func(w io.Writer) error {
		_, err := io.Copy(w, io.NewSectionReader(f, from, to-from))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("copy %s aside: %w", path, err)
	}
	return name, nil
}

// cutTail copies the bytes from validEnd to size aside, then truncates f to validEnd. The copy is
// durable before the truncation, so a crash between the two loses nothing.
func cutTail(f *os.File, path string, validEnd, size int64) (string, error) {
	aside, err := copyAside(f, path, "torn", validEnd, size)
	if err != nil {
		return "", err
	}
	if err := f.Truncate(validEnd); err != nil {
		return aside, err
	}
	return aside, f.Sync()
}

// removeStaleTemps deletes temporary copies that a crash in the middle of copyAside left behind:
// atomicfile's (.<name>.tmp-*) and those of earlier versions (<name>.tmp). The caller holds the
// log's lock, so no copy is in progress.
func removeStaleTemps(path string) {
	dir, base := filepath.Split(path)
	for _, tag := range []string{"torn", "orig"} {
		stale, _ := filepath.Glob(filepath.Join(dir, "."+base+"."+tag+"-*.tmp-*"))
		old, _ := filepath.Glob(path + "." + tag + "-*.tmp")
		for _, name := range append(stale, old...) {
			os.Remove(name)
		}
	}
}
