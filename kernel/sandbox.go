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

// sandboxArgv wraps argv in bubblewrap (see package sandbox for what the sandbox is) and
// returns the files the command inherits from fd 3 on (info first, then the binds). Writable:
// the worktree, the run dir (connection file, sockets), and the state dir's tmp (at /tmp),
// cache and snapshot; read-only: the state dir itself (runtime, skills, logs), the system and
// the Python environment, even where it lies under $HOME or a hidden directory. Hidden: $HOME
// (but for Options.SandboxHome), ~/.ssh and Options.SandboxHide. Without a network of its own
// the kernel must use ipc:// transport.
//
// The state dir is the daemon's; the cell sees it read-only, with its writable parts as mount
// points it cannot rename. They are still opened beneath it by descriptor with no symlink
// followed ([sandbox.OpenDir]), so a state dir a cell could once write (or anyone tampered
// with) cannot turn into a mount of something else.
func sandboxArgv(o Options, python string, argv []string, info *os.File) ([]string, []*os.File, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, nil, errors.New("sandbox \"bwrap\" needs bubblewrap: install the Debian package bubblewrap (`sudo apt-get install bubblewrap`)")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	var binds []sandbox.Bind
	fail := func(err error) ([]string, []*os.File, error) {
		for _, b := range binds {
			b.File.Close()
		}
		return nil, nil, fmt.Errorf("start sandboxed kernel: %w", err)
	}
	bind := func(parent, rel, dst string, writable bool) error {
		f, err := sandbox.OpenDir(parent, rel, writable)
		if err != nil {
			return err
		}
		binds = append(binds, sandbox.Bind{File: f, Dst: dst, Writable: writable})
		return nil
	}
	// inState binds p, which lies in the state dir or at a path of its own.
	inState := func(p string, writable bool) error {
		if rel, err := filepath.Rel(o.StateDir, p); err == nil && filepath.IsLocal(rel) {
			return bind(o.StateDir, rel, p, writable)
		}
		return bind(filepath.Dir(p), filepath.Base(p), p, writable)
	}
	if err := bind(o.StateDir, ".", o.StateDir, false); err != nil {
		return fail(err)
	}
	for _, d := range []string{"tmp", "cache"} {
		if err := bind(o.StateDir, d, filepath.Join(o.StateDir, d), true); err != nil {
			return fail(err)
		}
	}
	binds[1].Dst = "/tmp"
	if o.Snapshot != "" {
		if err := inState(o.Snapshot, true); err != nil { // automatic snapshots are written from inside
			return fail(err)
		}
	}
	if o.Restore != "" && o.Restore != o.Snapshot {
		if err := inState(o.Restore, false); err != nil {
			return fail(err)
		}
	}
	for _, d := range append([]string{o.runDir}, o.sandboxBinds...) {
		if err := bind(d, ".", d, true); err != nil { // the daemon's own, made for this kernel
			return fail(err)
		}
	}
	for _, p := range o.SandboxReadOnlyFiles {
		f, err := sandbox.OpenFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		binds = append(binds, sandbox.Bind{File: f, Dst: p})
	}
	spec := sandbox.Spec{
		Dir: dir,
		// Fresh slices: pythonDirs' is shared by every kernel, and Options' are the caller's.
		// The interpreter itself too: a wrapper script may live outside its prefix.
		ReadOnly:  append(append(slices.Clone(pythonDirs(python)), python), o.SandboxReadOnly...),
		Hide:      slices.Clone(o.SandboxHide),
		HomeAllow: o.SandboxHome,
		Binds:     binds,
		Network:   o.AllowNetwork,
		Info:      info,
	}
	spec.Home, _ = os.UserHomeDir()
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) {
		spec.Hide = append(spec.Hide, rt)
	}
	args, files, err := spec.Build()
	if err != nil {
		return fail(err)
	}
	return append(append(append([]string{bwrap}, args...), "--"), argv...), files, nil
}

// sandboxDirs creates the sandbox's own tmp and cache inside StateDir.
func sandboxDirs(stateDir string) error {
	for _, d := range []string{"tmp", "cache"} {
		f, err := sandbox.OpenDir(stateDir, d, true)
		if err != nil {
			return fmt.Errorf("start kernel: sandbox %s dir: %w", d, err)
		}
		f.Close()
	}
	return nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
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
