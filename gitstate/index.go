package gitstate

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// readIndex decodes an index file; a missing file is an empty index. It also returns the
// file's mtime, which decides which entries are "racily clean" and must be rehashed.
func readIndex(path string) (*index.Index, time.Time, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &index.Index{Version: 2}, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	idx := &index.Index{}
	if err := index.NewDecoder(bufio.NewReaderSize(f, 1<<16)).Decode(idx); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode index %s: %w", path, err)
	}
	return idx, fi.ModTime(), nil
}

// writeIndex writes idx the way git does: into <path>.lock (created exclusively, so a
// concurrent git command fails instead of racing) and then renamed over path.
func writeIndex(path string, idx *index.Index) error {
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("index is locked by another git process (%s exists; remove it if no git command is running)", lock)
	}
	if err != nil {
		return err
	}
	if idx.Version == 0 || idx.Version > 3 {
		idx.Version = 2
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = index.NewEncoder(w).Encode(idx)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
		return fmt.Errorf("write index %s: %w", path, err)
	}
	return nil
}
