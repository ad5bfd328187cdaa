package gitstate

import (
	"fmt"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// createFile writes a new file with raw system calls — open, write, fstat, close — and
// records its stat data in e. os.OpenFile adds an fstat of its own to decide about the
// poller, and a checkout makes tens of thousands of files.
func createFile(p string, data []byte, perm uint32, e *index.Entry) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	for len(data) > 0 && err == nil {
		var n int
		n, err = syscall.Write(fd, data)
		if err == syscall.EINTR {
			err = nil
			continue
		}
		data = data[max(n, 0):]
	}
	var st syscall.Stat_t
	if err == nil {
		err = syscall.Fstat(fd, &st)
	}
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	e.ModifiedAt = time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	e.CreatedAt = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	e.Dev, e.Inode = uint32(st.Dev), uint32(st.Ino)
	e.UID, e.GID = st.Uid, st.Gid
	e.Size = uint32(st.Size)
	return nil
}
