package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The socket's directory is what makes the socket the user's: in a directory only the user
// can enter, nobody else can put a socket there, or replace ours. The fallback directory
// (/tmp/arbor-<uid>, when XDG_RUNTIME_DIR is unset) lies in a directory everyone can write,
// so another local user can create it first, or plant a symlink there to a directory of the
// user's. Both client and daemon therefore open the directory without following a symlink,
// check the opened directory's owner, and tighten its mode only through that descriptor
// and only when it is the user's. A squatted directory is reported and not used.

// UnsafeSocketDirError is a socket directory that is not the user's own.
type UnsafeSocketDirError struct {
	Dir     string
	Problem string // what is wrong, e.g. "it belongs to uid 1001"
	UID     int    // owner of the directory (or of the symlink)
	Mode    fs.FileMode
}

func (e *UnsafeSocketDirError) Error() string {
	return fmt.Sprintf("refusing the arbor socket directory %s: %s (owner uid %d, mode %v); it must be a directory owned by you (uid %d) with mode 0700. "+
		"Someone else may have created it to intercept your sessions: remove it, or set XDG_RUNTIME_DIR or ARBOR_SOCKET to a directory of yours",
		e.Dir, e.Problem, e.UID, e.Mode, os.Getuid())
}

// prepareSocketDir checks dir, creating it (mode 0700) first when create is set. It refuses
// a symlink, anything but a directory, and a directory another user owns; a directory of
// ours that others may enter is made 0700 through its descriptor.
func prepareSocketDir(dir string, create bool) error {
	if create {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return fmt.Errorf("create socket directory %s: %w", dir, err)
		}
		if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create socket directory %s: %w", dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return describeNonDir(dir)
		}
		return fmt.Errorf("open socket directory %s: %w", dir, &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat socket directory %s: %w", dir, err)
	}
	mode := fs.ModeDir | fs.FileMode(st.Mode&0o777)
	if int(st.Uid) != os.Getuid() {
		return &UnsafeSocketDirError{Dir: dir, Problem: fmt.Sprintf("it belongs to uid %d, not to you", st.Uid), UID: int(st.Uid), Mode: mode}
	}
	if mode&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return &UnsafeSocketDirError{Dir: dir, Problem: fmt.Sprintf("others may enter it and it cannot be made 0700: %v", err), UID: int(st.Uid), Mode: mode}
		}
	}
	return nil
}

// describeNonDir explains why dir could not be opened as a directory without following a
// link.
func describeNonDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	problem := "it is not a directory"
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		problem = fmt.Sprintf("it is a symlink to %s", target)
	}
	return &UnsafeSocketDirError{Dir: dir, Problem: problem, UID: uid, Mode: fi.Mode()}
}

// ForeignDaemonError is a socket served by a process of another user.
type ForeignDaemonError struct {
	Socket string
	UID    int
}

func (e *ForeignDaemonError) Error() string {
	return fmt.Sprintf("refusing the arbor daemon at %s: it runs as uid %d, not as you (uid %d); someone else may be impersonating it. Stop it, or set ARBOR_SOCKET elsewhere",
		e.Socket, e.UID, os.Getuid())
}

// checkServer refuses a connection whose peer runs as another user.
func checkServer(nc net.Conn, socket string) error {
	cred, err := peerCred(nc)
	if err != nil {
		return fmt.Errorf("peer credentials of %s: %w", socket, err)
	}
	if cred != nil && int(cred.Uid) != os.Getuid() {
		return &ForeignDaemonError{Socket: socket, UID: int(cred.Uid)}
	}
	return nil
}
