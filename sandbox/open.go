package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenDir opens the directory rel beneath parent for a [Bind], creating missing components
// (0700) when create is set. parent is a path the daemon owns or the user configured: it is
// opened as given. rel is a place sandboxed code may have written, so it is walked one
// component at a time with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a symlink anywhere in
// it, a component that is not a directory, or ".." is refused instead of followed. The result
// is an O_PATH descriptor; bind it by descriptor, never by its path, which may change once the
// check is done.
func OpenDir(parent, rel string, create bool) (*os.File, error) {
	if !filepath.IsAbs(parent) {
		return nil, fmt.Errorf("sandbox: parent %q is not absolute", parent)
	}
	fd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open %s: %w", parent, err)
	}
	cur, where := fd, parent
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			unix.Close(cur)
			return nil, fmt.Errorf("sandbox: %q leaves %s", rel, parent)
		}
		next, err := openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(cur, c, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY)
			}
		}
		unix.Close(cur)
		where = filepath.Join(where, c)
		if err != nil {
			return nil, refusal(where, err)
		}
		cur = next
	}
	f := os.NewFile(uintptr(cur), where)
	if err := isKind(f, unix.S_IFDIR); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenFile opens the regular file path for a read-only [Bind] without following a symlink in
// its last component (the one sandboxed code can replace: the worktree's .git file). Anything
// but a regular file is refused.
func OpenFile(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, refusal(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := isKind(f, unix.S_IFREG); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFileNoFollow reads the regular file path, refusing a symlink in its last component: for
// files the host reads back from a directory sandboxed code can write (a restore report, a
// snapshot's manifest).
func ReadFileNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, refusal(path, err)
	}
	defer f.Close()
	if err := isKind(f, unix.S_IFREG); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

func openBeneath(dir int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(dir, name, &how)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6: one component with O_NOFOLLOW is as safe, the walk being ours.
		fd, err = unix.Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// isKind refuses f unless its type is kind (unix.S_IFDIR, unix.S_IFREG). O_PATH|O_NOFOLLOW
// opens a symlink itself, so the type is what decides.
func isKind(f *os.File, kind uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("sandbox: stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != kind {
		want := "a directory"
		if kind == unix.S_IFREG {
			want = "a regular file"
		}
		return fmt.Errorf("sandbox: %s is not %s (a symlink or something else was put there): refused; remove it and try again", f.Name(), want)
	}
	return nil
}

func refusal(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("sandbox: %s is not a plain directory or file (a symlink was put on its path): refused; remove it and try again", path)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("sandbox: %s: %w", path, os.ErrNotExist)
	}
	return fmt.Errorf("sandbox: open %s: %w", path, err)
}
