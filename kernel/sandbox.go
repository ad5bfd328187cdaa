package kernel

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
)

// sandboxArgv wraps argv in bubblewrap: the whole filesystem read-only, the worktree and the
// state directory (connection sockets, bridge socket, snapshots) read-write, a private /tmp,
// and no network namespace access unless allowed. Kernels must then use ipc:// transport: a
// kernel in its own network namespace cannot reach loopback TCP ports of the daemon.
func sandboxArgv(o Options, argv []string) ([]string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("sandbox \"bwrap\" needs bubblewrap: install the Debian package bubblewrap (`sudo apt-get install bubblewrap`)")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	args := []string{bwrap,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--bind", dir, dir,
		"--bind", o.StateDir, o.StateDir,
		// The sandbox dies with the daemon: no orphan kernels even on a crash.
		"--die-with-parent",
		"--chdir", dir,
	}
	if o.Snapshot != "" {
		args = append(args, "--bind", o.Snapshot, o.Snapshot) // automatic snapshots are written from inside
	}
	for _, extra := range o.sandboxBinds {
		args = append(args, "--bind", extra, extra)
	}
	if !o.AllowNetwork {
		args = append(args, "--unshare-net")
	}
	return append(append(args, "--"), argv...), nil
}
