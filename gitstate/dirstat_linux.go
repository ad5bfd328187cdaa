package gitstate

import (
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// dirStater lstats the entries of one directory through its file descriptor (fstatat), so the
// kernel resolves one name per file instead of the whole path from the root: on a deep
// worktree path that was half of a full-scan checkpoint.
// Its lstat may be called from several goroutines at once.
type dirStater struct {
	f  *os.File
	fd int
}

func openDirStater(dir string) (*dirStater, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &dirStater{f, int(f.Fd())}, nil
}

func (d *dirStater) readDir() ([]fs.DirEntry, error) { return d.f.ReadDir(-1) }

func (d *dirStater) lstat(name string) (os.FileInfo, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		break
	}
	return &statInfo{name: name, st: syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
		Size: st.Size, Mtim: syscall.Timespec(st.Mtim), Ctim: syscall.Timespec(st.Ctim),
	}}, nil
}

func (d *dirStater) close() { d.f.Close() }

// statInfo is an os.FileInfo over a raw stat, with the same Sys() type os.Lstat gives.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Sec, s.st.Mtim.Nsec) }
func (s *statInfo) IsDir() bool        { return s.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFREG:
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	default:
		m |= fs.ModeDevice
	}
	return m
}
