//go:build !linux

package gitstate

import (
	"os"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func fillStat(e *index.Entry, fi os.FileInfo) {
	e.ModifiedAt = fi.ModTime()
	e.CreatedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
}

func statMatches(e *index.Entry, fi os.FileInfo) bool {
	return e.ModifiedAt.Equal(fi.ModTime()) && e.Size == uint32(fi.Size())
}

func openNoFollow(p string) (*os.File, error) {
	if fi, err := os.Lstat(p); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrInvalid}
	}
	return os.Open(p)
}
