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
