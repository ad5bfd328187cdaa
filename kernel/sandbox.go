package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/arborhq/arbor/sandbox"
)

// sandboxArgv wraps argv in bubblewrap (see package sandbox for what the sandbox is): writable
// the worktree, the state directory (connection sockets, bridge socket, snapshots) and its tmp
// (bound at /tmp) and cache; read-only the system and the Python environment, even where it
// lies under $HOME or a hidden directory; hidden $HOME (but for Options.SandboxHome), ~/.ssh,
// $XDG_RUNTIME_DIR (where the daemon's control socket lives) and Options.SandboxHide. bwrap's
// info (the host pid of the sandbox's init) is written to fd 3. Without a network of its own
// the kernel must use ipc:// transport.
func sandboxArgv(o Options, python string, argv []string) ([]string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("sandbox \"bwrap\" needs bubblewrap: install the Debian package bubblewrap (`sudo apt-get install bubblewrap`)")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	spec := sandbox.Spec{
		Dir:      dir,
		Writable: append([]string{o.StateDir}, o.sandboxBinds...),
		// Fresh slices: pythonDirs' is shared by every kernel, and Options' are the caller's.
		// The interpreter itself too: a wrapper script may live outside its prefix.
		ReadOnly:  append(append(slices.Clone(pythonDirs(python)), python), o.SandboxReadOnly...),
		Hide:      slices.Clone(o.SandboxHide),
		HomeAllow: o.SandboxHome,
		Tmp:       filepath.Join(o.StateDir, "tmp"),
		Network:   o.AllowNetwork,
		InfoFD:    3,
	}
	spec.Home, _ = os.UserHomeDir()
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		spec.Hide = append(spec.Hide, rt)
	}
	if o.Snapshot != "" {
		spec.Writable = append(spec.Writable, o.Snapshot) // automatic snapshots are written from inside
	}
	if o.Restore != "" {
		spec.ReadOnly = append(spec.ReadOnly, o.Restore)
	}
	args, err := spec.Args()
	if err != nil {
		return nil, err
	}
	return append(append(append([]string{bwrap}, args...), "--"), argv...), nil
}

// sandboxDirs creates the sandbox's own tmp and cache inside StateDir.
func sandboxDirs(stateDir string) error {
	for _, d := range []string{"tmp", "cache"} {
		if err := os.MkdirAll(filepath.Join(stateDir, d), 0o700); err != nil {
			return fmt.Errorf("start kernel: sandbox %s dir: %w", d, err)
		}
	}
	return nil
}

var pyDirs sync.Map // interpreter path → []string

// pythonDirs lists the interpreter's prefixes and import path: what a sandboxed kernel must
// read even when it lies under $HOME (a venv, pyenv, ~/.local) or in the repository.
func pythonDirs(python string) []string {
	if v, ok := pyDirs.Load(python); ok {
		return v.([]string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const script = `import json, site, sys
d = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix] + sys.path
try:
    d += site.getsitepackages() + [site.getusersitepackages()]
except Exception:
    pass
print(json.dumps([p for p in d if p]))`
	cmd := exec.CommandContext(ctx, python, "-c", script)
	cmd.Env = sandbox.Env(nil, nil)
	out, err := cmd.Output()
	var dirs []string
	if err == nil {
		var all []string
		json.Unmarshal(out, &all)
		for _, p := range all {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() && filepath.IsAbs(p) {
				dirs = append(dirs, p)
			}
		}
		pyDirs.Store(python, dirs)
	}
	return dirs
}

// readInfo reads bwrap's --info-fd JSON; bwrap closes the fd once written, or exits.
func readInfo(r io.Reader, timeout time.Duration) (int, error) {
	c := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		c <- b
	}()
	select {
	case b := <-c:
		return sandbox.ChildPID(b)
	case <-time.After(timeout):
		return 0, errors.New("bwrap wrote no info")
	}
}
