package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotRepo means a directory is not inside a git repository.
var ErrNotRepo = errors.New("not inside a git repository")

// ErrNoDirectory means a directory given to Arbor does not exist or cannot be used.
var ErrNoDirectory = errors.New("not a usable directory")

// FindRoot returns the top level of the git working tree containing dir, walking up to the
// first directory holding a .git entry (a directory, or a file in a linked worktree). A
// linked worktree — a session's among them — resolves to its main repository: sessions
// belong to the repository, and listing by a worktree must find what creating from it
// made.
func FindRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository of %s: %w", dir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		// Missing, too long, unreadable: the caller's directory, not a fault of ours.
		return "", fmt.Errorf("find repository of %s: %w: %w", dir, ErrNoDirectory, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			if main := mainOfLinked(d); main != "" {
				return main, nil
			}
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s: %w (run `git init` there, or pass a directory inside a repository)", abs, ErrNotRepo)
		}
	}
}

// mainOfLinked returns the main repository's top level when root is a linked worktree
// (.git is a file "gitdir: <main>/.git/worktrees/<name>", whose commondir names <main>/.git),
// else "". A submodule's .git file points into modules/ with no commondir and stays itself.
func mainOfLinked(root string) string {
	data, err := os.ReadFile(filepath.Join(root, ".git"))
	if err != nil {
		return "" // a directory: the main repository itself
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return ""
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(root, gitdir)
	}
	common, err := os.ReadFile(filepath.Join(gitdir, "commondir"))
	if err != nil {
		return ""
	}
	cd := strings.TrimSpace(string(common))
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(gitdir, cd)
	}
	cd = filepath.Clean(cd)
	if filepath.Base(cd) != ".git" {
		return "" // a bare repository's worktree: no main working tree to serve
	}
	return filepath.Dir(cd)
}

// OutsideError is a path that resolves outside the directory it must stay in.
type OutsideError struct {
	Path, Root, Resolved string
}

func (e *OutsideError) Error() string {
	if e.Resolved != "" {
		return fmt.Sprintf("path %s resolves to %s, outside the workspace %s", e.Path, e.Resolved, e.Root)
	}
	return fmt.Sprintf("path %s is outside the workspace %s", e.Path, e.Root)
}

// Confine resolves rel against root and refuses anything that ends up outside root,
// including through symlinks of existing path components.
func Confine(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(root, rel)
		if err != nil {
			return "", &OutsideError{Path: rel, Root: root}
		}
		rel = r
	}
	p := filepath.Join(root, rel)
	if !within(root, p) {
		return "", &OutsideError{Path: rel, Root: root}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", root, err)
	}
	if real := resolveExisting(p); !within(realRoot, real) {
		return "", &OutsideError{Path: rel, Root: root, Resolved: real}
	}
	return p, nil
}

// resolveExisting evaluates symlinks in the longest existing prefix of p, so a path through
// a link that points outside is caught even when its last components do not exist yet.
func resolveExisting(p string) string {
	rest := ""
	for d := p; ; d = filepath.Dir(d) {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(d) == d {
			return p
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

func within(root, p string) bool {
	r, err := filepath.Rel(root, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// Dirs are the per-user locations of DESIGN's on-disk layout.
type Dirs struct {
	Runtime string // socket and lock
	State   string // daemon log, workspace registry
}

// UserDirs computes Dirs from ARBOR_SOCKET, ARBOR_STATE_DIR and the XDG variables.
func UserDirs() Dirs {
	var d Dirs
	if xr := os.Getenv("XDG_RUNTIME_DIR"); xr != "" {
		d.Runtime = filepath.Join(xr, "arbor")
	} else {
		d.Runtime = filepath.Join(os.TempDir(), fmt.Sprintf("arbor-%d", os.Getuid()))
	}
	switch {
	case os.Getenv("ARBOR_STATE_DIR") != "":
		d.State = os.Getenv("ARBOR_STATE_DIR")
	case os.Getenv("XDG_STATE_HOME") != "":
		d.State = filepath.Join(os.Getenv("XDG_STATE_HOME"), "arbor")
	default:
		home, _ := os.UserHomeDir()
		d.State = filepath.Join(home, ".local", "state", "arbor")
	}
	return d
}

// SocketPath is ARBOR_SOCKET, or arbor.sock in the runtime dir.
func SocketPath() string {
	if s := os.Getenv("ARBOR_SOCKET"); s != "" {
		return s
	}
	return filepath.Join(UserDirs().Runtime, "arbor.sock")
}

// DataDir is $XDG_DATA_HOME/arbor (or ~/.local/share/arbor): the user's trust record and global
// harness. "" when there is no home directory to put it in.
func DataDir() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "arbor")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "share", "arbor")
}

// UserConfigPath is $XDG_CONFIG_HOME/arbor/config.json (or ~/.config/arbor/config.json).
func UserConfigPath() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "arbor", "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "arbor", "config.json")
}
