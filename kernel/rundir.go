package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// A kernel's connection file (its HMAC key), ZMQ sockets, bridge socket and restore report
// live in a run dir of its own: a 0700 directory under a private runtime root, never under the
// repository or the session's state, so no other kernel's sandbox shows them (the sandbox's
// view of the host is default-deny, and the root is in none of the places it gives back), and
// the host reads nothing back from a place another session's code could reach. The path is
// short, for the 108-byte sun_path limit.

// runtimeRoot is where run dirs are made: Options.RuntimeDir, else $XDG_RUNTIME_DIR/arbor-kernels,
// else <temp>/arbor-<uid>/kernels (the daemon's own fallback socket dir's parent).
func runtimeRoot(configured string) string {
	if configured != "" {
		return configured
	}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) && len(rt) < 40 {
		if err := privateDir(rt, false); err == nil {
			return filepath.Join(rt, "arbor-kernels")
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("arbor-%d", os.Getuid()), "kernels")
}

// makeRunDir creates a kernel's run dir. A root that is not a private directory of ours (a
// squatted name in a shared /tmp, a symlink) is refused, and a fresh private directory in the
// temp dir is used instead.
func makeRunDir(configured string) (string, error) {
	root := runtimeRoot(configured)
	ok := true
	for _, d := range []string{filepath.Dir(root), root} {
		if configured != "" && d != root {
			continue
		}
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			ok = false
			break
		}
		if privateDir(d, true) != nil {
			ok = false
			break
		}
	}
	if ok && len(root)+len("/k0123456789/zmq-01234567-5") <= maxIPCPath {
		if d, err := os.MkdirTemp(root, "k"); err == nil {
			return d, nil
		}
	}
	d, err := os.MkdirTemp("", "arbor-k")
	if err != nil {
		return "", fmt.Errorf("kernel run dir: %w", err)
	}
	return d, nil
}

// privateDir reports whether d is a real directory (not a link) owned by us and closed to
// others; with fix, a group- or world-open one of ours is closed first.
func privateDir(d string, fix bool) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st == nil || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory of ours", d)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if !fix {
			return fmt.Errorf("%s is open to others", d)
		}
		return os.Chmod(d, 0o700)
	}
	return nil
}
