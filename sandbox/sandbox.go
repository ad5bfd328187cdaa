// Package sandbox confines the processes that run model-written code — kernels and worktree
// setup commands — with bubblewrap, and builds the environment they inherit.
//
// Call [Probe] once at daemon start to learn whether bubblewrap works here (it may be missing,
// user namespaces may be disabled, or a container may refuse to make / a slave mount), then
// [Spec.Args] for each process to get bwrap's arguments, and [Env] for its environment:
//
//	st := sandbox.Probe(ctx)
//	args, err := sandbox.Spec{Dir: worktree, Writable: []string{stateDir}, Hide: []string{repoRoot}}.Args()
//	cmd := exec.Command(st.Path, append(append(args, "--"), argv...)...)
//	cmd.Env = sandbox.Env(declared, deny)
//
// It is a top-level leaf package, like atomicfile, because both kernel (kernels) and agents (the
// worktree setup command) must confine processes in exactly the same way, and neither may import
// the other's side: agents imports kernel, and kernel knows nothing of sessions or
// repositories. It imports nothing of Arbor's.
//
// # What the sandbox is
//
// New user, pid, ipc, uts and cgroup namespaces (and net unless Spec.Network), every capability
// dropped — also when the daemon runs as root, where bwrap would otherwise keep them inside the
// user namespace — a new session (no TIOCSTI into the daemon's terminal), death with the parent,
// its own /proc (pid 1 is the sandbox's init, so the host's processes and their environ are out
// of sight) and a minimal /dev. The filesystem is the host's, read-only, with masks on top:
// $HOME (except the read-only allowlist, never ~/.ssh), /tmp (replaced by Spec.Tmp) and every
// Spec.Hide directory become empty; then Spec.ReadOnly and Spec.Writable put back what the
// process needs. Mounts are applied shallowest path first, so a path given back inside a hidden
// one always lands on top of its mask, whatever order the caller listed them in.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Spec describes one sandboxed process. Paths are absolute; symlinks in them are resolved, so a
// mask applies to what a link points to.
type Spec struct {
	Dir      string   // working directory, writable (the session's worktree)
	Writable []string // more writable directories (kernel state, sockets)
	// ReadOnly directories are visible read-only even inside hidden ones (the repository's git
	// common dir, the Python environment). One that no mask covers is already read-only and is
	// skipped.
	ReadOnly []string
	Hide     []string // directories made invisible: an empty tmpfs over each
	// Home is hidden except HomeAllow (paths relative to it, read-only); ~/.ssh stays hidden
	// whatever the allowlist says. "" leaves no home to hide.
	Home      string
	HomeAllow []string
	Tmp       string // host directory bound at /tmp; "" = an empty tmpfs
	Network   bool   // share the host's network namespace
	InfoFD    int    // > 0: bwrap writes its JSON info (host "child-pid") to this fd
}

type mountKind int

const (
	mountHide mountKind = iota + 1
	mountRO
	mountRW
	mountTmp // Spec.Tmp at /tmp
)

type mount struct {
	kind     mountKind
	src, dst string
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// resolve makes p absolute and resolves its symlinks; ok is false when it does not exist.
func resolve(p string) (string, bool, error) {
	if !filepath.IsAbs(p) {
		return "", false, fmt.Errorf("sandbox: path %q is not absolute", p)
	}
	r, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("sandbox: %w", err)
	}
	return r, true, nil
}

// CheckHomeAllow reports an allowlist entry that cannot work: absolute, leaving $HOME, $HOME
// itself, or inside ~/.ssh.
func CheckHomeAllow(rel string) error {
	c := filepath.Clean(rel)
	switch {
	case rel == "" || filepath.IsAbs(rel):
		return fmt.Errorf("sandboxHome %q: want a path relative to $HOME", rel)
	case c == "." || c == ".." || strings.HasPrefix(c, "../"):
		return fmt.Errorf("sandboxHome %q: want a path inside $HOME, not $HOME itself or outside it", rel)
	case c == ".ssh" || strings.HasPrefix(c, ".ssh/"):
		return fmt.Errorf("sandboxHome %q: ~/.ssh always stays hidden from sandboxed code", rel)
	}
	return nil
}

// Args returns bwrap's arguments for s, up to but not including the "--" before the command.
func (s Spec) Args() ([]string, error) {
	dir, ok, err := resolve(s.Dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("sandbox: working directory %q does not exist", s.Dir)
	}
	var ms []mount
	masks := []string{"/tmp"}
	ssh := "" // resolved ~/.ssh: nothing is given back inside it
	homeMask := ""
	add := func(kind mountKind, p string, required bool) error {
		r, ok, err := resolve(p)
		if err != nil {
			return err
		}
		if !ok {
			if required {
				return fmt.Errorf("sandbox: %q does not exist", p)
			}
			return nil
		}
		if ssh != "" && kind != mountHide && within(r, ssh) {
			if required {
				return fmt.Errorf("sandbox: %q is inside ~/.ssh, which stays hidden", p)
			}
			return nil
		}
		if kind == mountHide {
			if r == "/" {
				return errors.New("sandbox: cannot hide /")
			}
			if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
				return nil // only directories are masked; a file has nothing to list
			}
			masks = append(masks, r)
		}
		ms = append(ms, mount{kind: kind, src: r, dst: r})
		return nil
	}
	if s.Home != "" {
		home, ok, err := resolve(s.Home)
		if err != nil {
			return nil, err
		}
		if ok && home != "/" {
			homeMask = home
			if err := add(mountHide, home, false); err != nil {
				return nil, err
			}
			if r, ok, _ := resolve(filepath.Join(home, ".ssh")); ok {
				ssh = r
			}
			for _, rel := range s.HomeAllow {
				if err := CheckHomeAllow(rel); err != nil {
					return nil, err
				}
				if err := add(mountRO, filepath.Join(home, rel), false); err != nil {
					return nil, err
				}
			}
			if err := add(mountHide, filepath.Join(home, ".ssh"), false); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range s.Hide {
		if err := add(mountHide, p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range s.ReadOnly {
		if err := add(mountRO, p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range append([]string{dir}, s.Writable...) {
		if err := add(mountRW, p, true); err != nil {
			return nil, err
		}
	}
	tmp := mount{kind: mountTmp, dst: "/tmp"}
	if s.Tmp != "" {
		r, ok, err := resolve(s.Tmp)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("sandbox: temp directory %q does not exist", s.Tmp)
		}
		tmp.src = r
	}
	ms = append(ms, tmp)
	// Shallowest first; for one path, mask before read-only before writable. A read-only path
	// no mask covers is already read-only under the root bind.
	sort.SliceStable(ms, func(i, j int) bool {
		if di, dj := depth(ms[i].dst), depth(ms[j].dst); di != dj {
			return di < dj
		}
		return ms[i].kind < ms[j].kind
	})
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
		"--cap-drop", "ALL", "--die-with-parent", "--new-session",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	if !s.Network {
		args = append(args, "--unshare-net")
	}
	for _, m := range ms {
		switch m.kind {
		case mountHide:
			args = append(args, "--tmpfs", m.dst)
		case mountRO:
			if !covered(m.dst, masks) {
				continue
			}
			args = append(args, "--ro-bind", m.src, m.dst)
		case mountRW:
			args = append(args, "--bind", m.src, m.dst)
		case mountTmp:
			if m.src == "" {
				args = append(args, "--tmpfs", "/tmp")
			} else {
				args = append(args, "--bind", m.src, "/tmp")
			}
		}
	}
	// Masks other than $HOME's become read-only last, once bwrap has made the mount points
	// inside them: a write to the user's tree then fails loudly instead of landing in a
	// scratch copy that vanishes. $HOME stays writable scratch: tools expect to write
	// ~/.cache, ~/.ipython and the like.
	for _, m := range ms {
		if m.kind == mountHide && m.dst != homeMask {
			args = append(args, "--remount-ro", m.dst)
		}
	}
	args = append(args, "--chdir", dir)
	if s.InfoFD > 0 {
		args = append(args, "--info-fd", fmt.Sprint(s.InfoFD))
	}
	return args, nil
}

func covered(p string, masks []string) bool {
	for _, m := range masks {
		if within(p, m) {
			return true
		}
	}
	return false
}
