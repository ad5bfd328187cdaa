package gitstate

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// openDirBeneath opens the directory rel (slash-separated, "" for root) below root one name
// at a time, never following a symlink: the worktree below root is written by the code that
// runs in it, which could otherwise swap a directory for a link to anywhere on the host.
func openDirBeneath(root, rel string) (*dirStater, error) {
	d, err := openDirStater(root)
	if err != nil || rel == "" {
		return d, err
	}
	for name := range strings.SplitSeq(rel, "/") {
		next, err := d.openDir(name)
		d.close()
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

// openDir opens the subdirectory name, refusing a symlink (ELOOP) or anything else (ENOTDIR).
func (d *dirStater) openDir(name string) (*dirStater, error) {
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(d.f.Name(), name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.f.Name(), name))
	return &dirStater{f, fd}, nil
}

// readFile reads the regular file name, refusing a symlink and never blocking on a FIFO.
func (d *dirStater) readFile(name string) ([]byte, error) {
	p := filepath.Join(d.f.Name(), name)
	fd, err := openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errNotRegular}
	}
	return io.ReadAll(f)
}

// readlink reads the symlink name.
func (d *dirStater) readlink(name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		l, err := unix.Readlinkat(d.fd, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: filepath.Join(d.f.Name(), name), Err: err}
		}
		if l < n {
			return string(buf[:l]), nil
		}
	}
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
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
