package gitstate

import (
	"os"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies the stat data git keeps in an index entry, so `git status` trusts the entry
// without rehashing the file.
func fillStat(e *index.Entry, fi os.FileInfo) {
	e.ModifiedAt = fi.ModTime()
	e.CreatedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
		e.Dev = uint32(st.Dev)
		e.Inode = uint32(st.Ino)
		e.UID = st.Uid
		e.GID = st.Gid
	}
}

// statMatches reports whether fi still matches the stat data recorded in e.
func statMatches(e *index.Entry, fi os.FileInfo) bool {
	if !e.ModifiedAt.Equal(fi.ModTime()) || e.Size != uint32(fi.Size()) {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if e.Inode != uint32(st.Ino) || !e.CreatedAt.Equal(time.Unix(st.Ctim.Sec, st.Ctim.Nsec)) {
			return false
		}
	}
	return true
}

// openNoFollow opens a file for reading without following a final symlink and without
// blocking on a FIFO: for files that code in a sandbox can replace.
func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}
