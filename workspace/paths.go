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

// FindRoot returns the top level of the git working tree containing dir, walking up to the
// first directory holding a .git entry (a directory, or a file in a linked worktree).
func FindRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("find repository of %s: %w", dir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("find repository of %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s: %w (run `git init` there, or pass a directory inside a repository)", abs, ErrNotRepo)
		}
	}
}

// Confine resolves rel against root and refuses anything that ends up outside root,
// including through symlinks of existing path components.
func Confine(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		r, err := filepath.Rel(root, rel)
		if err != nil {
			return "", fmt.Errorf("path %s is outside the workspace %s", rel, root)
		}
		rel = r
	}
	p := filepath.Join(root, rel)
	if !within(root, p) {
		return "", fmt.Errorf("path %s is outside the workspace %s", rel, root)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", root, err)
	}
	if real := resolveExisting(p); !within(realRoot, real) {
		return "", fmt.Errorf("path %s resolves to %s, outside the workspace %s", rel, real, root)
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
