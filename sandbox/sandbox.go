// Package sandbox confines the processes that run model-written code — kernels and worktree
// setup commands — with bubblewrap, and builds the environment they inherit.
//
// Call [Probe] once at daemon start to learn whether bubblewrap works here (it may be missing,
// user namespaces may be disabled, or a container may refuse to make / a slave mount), then
// [Spec.Build] for each process to get bwrap's arguments and the descriptors it inherits, and
// [Env] for its environment:
//
//	st := sandbox.Probe(ctx)
//	tmp, err := sandbox.OpenDir(stateDir, "tmp", true)
//	args, files, err := sandbox.Spec{Dir: worktree, Hide: []string{repoRoot},
//		Binds: []sandbox.Bind{{File: tmp, Dst: "/tmp", Writable: true}}}.Build()
//	cmd := exec.Command(st.Path, append(append(args, "--"), argv...)...)
//	cmd.ExtraFiles, cmd.Env = files, sandbox.Env(declared, deny)
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
// of sight) and a minimal /dev. The filesystem is default-deny: an empty root with the system
// and toolchain dirs of the host read-only (/usr, /etc, /opt, …) — less what in /etc not
// everyone may read (shadow passwords, TLS and SSH host keys), which is absent: a sandbox as
// root owns what root owns even without capabilities —, private empty /tmp, /var/tmp
// and /dev/shm, $HOME an empty scratch dir but the read-only allowlist (never ~/.ssh), and no
// /run, /srv, /mnt or other home. Then Spec.ReadOnly and Spec.Dir put back what the process
// needs, Spec.Hide masks what must stay invisible inside those, and Spec.Binds mount by
// descriptor what sandboxed code itself can write. Mounts are applied shallowest path first, so
// a path given back inside a hidden one always lands on top of its mask, whatever order the
// caller listed them in.
//
// # What the host may trust
//
// Nothing sandboxed code can write is resolved by path on the host: a cell can rename its
// scratch dir and leave a symlink to $HOME in its place, and a sandbox built from that path
// would mount $HOME. The daemon keeps such dirs beneath a parent the sandbox sees read-only (a
// mount point cannot be renamed from inside), opens them with [OpenDir] (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, directories only) and binds the descriptor
// (--bind-fd). [ReadFileNoFollow] reads what the host reads back from such a place.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Spec describes one sandboxed process. Paths are absolute. Dir, ReadOnly, Hide, Home and
// HomeAllow name places the user configured or the daemon made, which sandboxed code cannot
// write: their symlinks are resolved, so a mask applies to what a link points to. Whatever
// sandboxed code can write (its scratch, its state, its worktree's .git file) comes as Binds:
// descriptors opened with [OpenDir] or [OpenFile], never resolved by path.
type Spec struct {
	Dir string // working directory, writable (the session's worktree)
	// ReadOnly directories are visible read-only even inside hidden ones (the repository's git
	// common dir, the Python environment).
	ReadOnly []string
	Hide     []string // directories made invisible where a visible tree holds them
	// Home becomes an empty scratch directory but for HomeAllow (paths relative to it,
	// read-only); ~/.ssh stays hidden whatever the allowlist says. "" leaves no home.
	Home      string
	HomeAllow []string
	// Writable directories and Tmp (bound at /tmp; "" = an empty tmpfs) are bound by path: only
	// for directories made fresh for this one process, which no sandbox has had (a symlink in
	// their last component is refused all the same). Anything a sandbox could have written
	// goes in Binds.
	Writable []string
	Tmp      string
	// Binds are mounted by descriptor, after everything above; one at /tmp replaces the empty
	// tmpfs there.
	Binds   []Bind
	Network bool     // share the host's network namespace
	Info    *os.File // non-nil: bwrap writes its JSON info (host "child-pid") to it
}

// A Bind is one directory or file given to the sandbox by descriptor: bwrap mounts what the
// descriptor names, so nothing done to the path after it was opened changes what is mounted.
type Bind struct {
	File     *os.File // from OpenDir or OpenFile; the caller closes it once bwrap has started
	Dst      string   // absolute path inside the sandbox
	Writable bool
}

// systemDirs are what every sandbox sees of the host, read-only: the system and its toolchains.
// Everything else (home directories, /srv, /mnt, /media, /var, /run, other repositories, the
// daemon's runtime dir) is absent unless a Spec gives it. /sys is there for libraries that read
// the CPU topology from it.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys"}

type mountKind int

const (
	mountHide mountKind = iota + 1
	mountRO
	mountRW
	mountBind // Spec.Binds
)

type mount struct {
	kind     mountKind
	src, dst string
	fd       int  // mountBind: the descriptor's number in bwrap
	rw       bool // mountBind
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
// Only for paths no sandbox can write (see Spec).
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

// Args returns bwrap's arguments for a spec without descriptors (no Binds, no Info), up to but
// not including the "--" before the command.
func (s Spec) Args() ([]string, error) {
	if len(s.Binds) > 0 || s.Info != nil {
		return nil, errors.New("sandbox: a spec with Binds or Info needs Build, which returns the files to pass")
	}
	args, _, err := s.Build()
	return args, err
}

// Build returns bwrap's arguments for s, up to but not including the "--" before the command,
// and the files the command must inherit as fds 3, 4, … (exec.Cmd.ExtraFiles), in that order.
func (s Spec) Build() ([]string, []*os.File, error) {
	dir, ok, err := resolve(s.Dir)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("sandbox: working directory %q does not exist", s.Dir)
	}
	var ms []mount
	var masks []string
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
			return nil, nil, err
		}
		if ok && home != "/" {
			homeMask = home
			if err := add(mountHide, home, false); err != nil {
				return nil, nil, err
			}
			if r, ok, _ := resolve(filepath.Join(home, ".ssh")); ok {
				ssh = r
			}
			for _, rel := range s.HomeAllow {
				if err := CheckHomeAllow(rel); err != nil {
					return nil, nil, err
				}
				if err := add(mountRO, filepath.Join(home, rel), false); err != nil {
					return nil, nil, err
				}
			}
			if err := add(mountHide, filepath.Join(home, ".ssh"), false); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, p := range s.Hide {
		if err := add(mountHide, p, false); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range s.ReadOnly {
		if err := add(mountRO, p, false); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range append(slices.Clone(s.Writable), s.Tmp) {
		if fi, err := os.Lstat(p); p != "" && err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, nil, fmt.Errorf("sandbox: %s is a symlink, not a fresh directory: refused", p)
		}
	}
	for _, p := range append([]string{dir}, s.Writable...) {
		if err := add(mountRW, p, true); err != nil {
			return nil, nil, err
		}
	}
	var files []*os.File
	if s.Info != nil {
		files = append(files, s.Info)
	}
	tmpBound := false
	for _, b := range s.Binds {
		if b.File == nil || !filepath.IsAbs(b.Dst) || filepath.Clean(b.Dst) != b.Dst {
			return nil, nil, fmt.Errorf("sandbox: bind at %q: want an open file and a clean absolute destination", b.Dst)
		}
		tmpBound = tmpBound || b.Dst == "/tmp"
		files = append(files, b.File)
		ms = append(ms, mount{kind: mountBind, dst: b.Dst, fd: 2 + len(files), rw: b.Writable})
	}
	if s.Tmp != "" && !tmpBound {
		r, ok, err := resolve(s.Tmp)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("sandbox: temp directory %q does not exist", s.Tmp)
		}
		tmpBound = true
		ms = append(ms, mount{kind: mountRW, src: r, dst: "/tmp"})
	}
	// Shallowest first; for one path, mask before read-only before writable before a bind by
	// descriptor. A path given back inside a mask thus always lands on top of it.
	sort.SliceStable(ms, func(i, j int) bool {
		if di, dj := depth(ms[i].dst), depth(ms[j].dst); di != dj {
			return di < dj
		}
		return ms[i].kind < ms[j].kind
	})
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
		"--cap-drop", "ALL", "--die-with-parent", "--new-session",
	}
	if !s.Network {
		args = append(args, "--unshare-net")
	}
	// Default deny: the root is an empty tmpfs; only the system comes from the host.
	var visible []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", t, d)
			}
		case fi.IsDir():
			args = append(args, systemView(d)...)
			visible = append(visible, d)
		}
	}
	if s.Network {
		// /etc/resolv.conf often points into /run (systemd-resolved, resolvconf,
		// NetworkManager), which is otherwise absent: its directory comes along, read-only.
		if r, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && within(r, "/run") {
			d := filepath.Dir(r)
			args = append(args, "--ro-bind", d, d)
		}
	}
	// Shared writable places of the host are private, empty ones here.
	args = append(args, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm", "--tmpfs", "/var/tmp")
	if !tmpBound {
		args = append(args, "--tmpfs", "/tmp")
	}
	for _, m := range ms {
		if m.kind != mountHide {
			visible = append(visible, m.dst)
		}
	}
	hidden := map[string]bool{}
	for _, m := range ms {
		switch m.kind {
		case mountHide:
			// A mask is needed only where something visible would show the directory; elsewhere
			// it is absent already, and a mask would only make an empty directory appear.
			if m.dst != homeMask && !covered(m.dst, visible) {
				continue
			}
			hidden[m.dst] = true
			args = append(args, "--tmpfs", m.dst)
		case mountRO:
			args = append(args, "--ro-bind", m.src, m.dst)
		case mountRW:
			args = append(args, "--bind", m.src, m.dst)
		case mountBind:
			op := "--ro-bind-fd"
			if m.rw {
				op = "--bind-fd"
			}
			args = append(args, op, fmt.Sprint(m.fd), m.dst)
		}
	}
	// Masks other than $HOME's become read-only last, once bwrap has made the mount points
	// inside them, and so does the root: a write outside what was given then fails loudly
	// instead of landing in a scratch copy that vanishes. $HOME stays writable scratch: tools
	// expect to write ~/.cache, ~/.ipython and the like.
	for _, m := range ms {
		if m.kind == mountHide && hidden[m.dst] && m.dst != homeMask {
			args = append(args, "--remount-ro", m.dst)
		}
	}
	args = append(args, "--remount-ro", "/", "--chdir", dir)
	if s.Info != nil {
		args = append(args, "--info-fd", "3")
	}
	return args, files, nil
}

func covered(p string, masks []string) bool {
	for _, m := range masks {
		if within(p, m) {
			return true
		}
	}
	return false
}
