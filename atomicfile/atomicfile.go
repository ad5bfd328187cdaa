// Package atomicfile replaces files so that a reader, or the next boot after a crash, sees either
// the old content or the new, never a mix or a truncated file.
//
// Call [WriteFile] where you would call os.WriteFile, or [Write] to stream the content:
//
//	err := atomicfile.WriteFile(path, data, 0o600)
//	err = atomicfile.Write(path, 0o600, func(w io.Writer) error {
//		return json.NewEncoder(w).Encode(v)
//	})
//
// Both write a temporary file in the same directory (a rename is atomic only within one
// filesystem), fsync it, rename it over path, and then fsync the directory. The file's fsync
// makes its data durable before the rename can be; the directory's fsync makes the rename itself
// durable: until the directory entry reaches the disk a power cut can bring back the old file,
// or no file at all for a new one, even though the call returned nil. A caller that records
// "written" elsewhere (an event log, a manifest naming this file) needs both.
//
// [WriteFileNoSync] skips both fsyncs for files that matter only until the next boot or can be
// rebuilt: readers still never see a partial file, but a power cut may lose the write.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically and durably, with permissions perm (applied as
// given, not masked by the umask). An existing path that is not a regular file is refused; a
// symlink at path is replaced, not followed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, perm, true, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile for content produced by fill, which gets the temporary file (unbuffered:
// wrap it in a bufio.Writer and flush it for many small writes). If fill fails, path is left
// as it was and the error is returned.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) error {
	return writeFile(path, perm, true, fill)
}

// WriteFileNoSync is WriteFile without the fsyncs: concurrent readers and a crashed process
// never leave a partial file, but after a power cut path may hold the old content, nothing or
// an empty file. Use it only where the write need not outlive the boot.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, perm, false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func writeFile(path string, perm os.FileMode, durable bool, fill func(io.Writer) error) (err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("write %s: exists and is not a regular file (%s)", path, fi.Mode().Type())
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		// Also on a panic in fill: no temporary file is left behind.
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: sync: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	if durable {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("write %s: the new file is in place but may not survive a crash: %w", path, err)
		}
	}
	return nil
}

// syncDir makes the directory's entries, such as a rename into it, durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
