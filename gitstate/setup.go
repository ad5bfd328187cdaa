package gitstate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/arborhq/arbor/workspace"
)

// Setup prepares a fresh worktree with what a checkout lacks: untracked files the project needs
// (.env, node_modules, build caches) copied or linked from the main worktree, then a command.
type Setup struct {
	Copy    []string      // paths relative to the main worktree root, copied (files or directories)
	Link    []string      // paths relative to the main worktree root, symlinked (large, shared, read-mostly)
	Command string        // run with `sh -c` in the new worktree after copying; "" for none
	Env     []string      // extra environment for Command, "KEY=value"
	Timeout time.Duration // for Command; 0 means 10 minutes
	// Exec builds the command that runs Command in dir with Env (agents: in the session's
	// sandbox, with the kernels' environment rules); nil runs `sh -c` with the daemon's
	// environment.
	Exec func(ctx context.Context, dir, command string, env []string) (*exec.Cmd, error)
}

// Validate reports paths that are absolute or leave the worktree.
func (s Setup) Validate() error {
	for _, p := range append(append([]string(nil), s.Copy...), s.Link...) {
		c := path.Clean(filepath.ToSlash(p))
		if p == "" || path.IsAbs(c) || c == "." || c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") {
			return fmt.Errorf("setup path %q: want a path inside the worktree, relative to its root", p)
		}
	}
	return nil
}

// SetupError is a failed setup step, with the command's output when it was the command.
type SetupError struct {
	Step   string // "copy", "link" or "command"
	Path   string // the path or the command
	Output string // the command's output, last 8 KB
	Err    error
}

func (e *SetupError) Error() string {
	msg := fmt.Sprintf("worktree setup: %s %s: %v", e.Step, e.Path, e.Err)
	if e.Output != "" {
		msg += "\n" + e.Output
	}
	return msg
}

func (e *SetupError) Unwrap() error { return e.Err }

// setupPaths confines one copy or link path at the time of use: its source must resolve inside
// the main worktree and its destination inside the session worktree, so a committed symlink
// (vendor -> ~) can neither bring the user's files in nor make the setup write outside.
func (r *Repo) setupPaths(dir, p string) (src, dst string, err error) {
	rel := filepath.FromSlash(p)
	if src, err = workspace.Confine(r.root, rel); err != nil {
		return "", "", err
	}
	if dst, err = workspace.Confine(dir, rel); err != nil {
		return "", "", err
	}
	return src, dst, nil
}

// SetupWorktree runs s in the linked worktree at dir. Copied and linked paths are recorded as
// excluded for that worktree, so checkpoints never commit them (a copied .env must not end up
// on a branch) even when the project's .gitignore does not list them. It does not hold the
// repository lock while copying or running the command.
func (r *Repo) SetupWorktree(ctx context.Context, dir string, s Setup) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if err := r.excludeInWorktree(ctx, dir, append(append([]string(nil), s.Copy...), s.Link...)); err != nil {
		return fmt.Errorf("worktree setup %s: %w", dir, err)
	}
	for _, p := range s.Copy {
		src, dst, err := r.setupPaths(dir, p)
		if err != nil {
			return &SetupError{Step: "copy", Path: p, Err: err}
		}
		if err := copyTree(src, dst); err != nil {
			return &SetupError{Step: "copy", Path: p, Err: err}
		}
	}
	for _, p := range s.Link {
		src, dst, err := r.setupPaths(dir, p)
		if err != nil {
			return &SetupError{Step: "link", Path: p, Err: err}
		}
		if _, err := os.Lstat(src); err != nil {
			return &SetupError{Step: "link", Path: p, Err: err}
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
			return &SetupError{Step: "link", Path: p, Err: err}
		}
		if err := os.Symlink(src, dst); err != nil {
			return &SetupError{Step: "link", Path: p, Err: err}
		}
	}
	if s.Command == "" {
		return nil
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "sh", "-c", s.Command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), s.Env...)
	if s.Exec != nil {
		var err error
		if cmd, err = s.Exec(cctx, dir, s.Command, s.Env); err != nil {
			return &SetupError{Step: "command", Path: s.Command, Err: err}
		}
	}
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if cctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("timed out after %s: %w", timeout, err)
		}
		return &SetupError{Step: "command", Path: s.Command, Output: out.String(), Err: err}
	}
	// What the command made (node_modules, a build dir, generated files) is the setup's, not
	// the session's work: it stays out of checkpoints like the copies do.
	made, err := r.untrackedPaths(ctx, dir)
	if err != nil {
		return &SetupError{Step: "command", Path: s.Command, Err: fmt.Errorf("list what it created: %w", err)}
	}
	if err := r.excludeInWorktree(ctx, dir, made); err != nil {
		return fmt.Errorf("worktree setup %s: %w", dir, err)
	}
	r.logger.Info("worktree set up", "dir", dir, "copied", len(s.Copy), "linked", len(s.Link), "command", s.Command != "")
	return nil
}

// untrackedPaths lists the untracked, not ignored, paths of the worktree at dir as git shows
// them: a new directory as one entry.
func (r *Repo) untrackedPaths(ctx context.Context, dir string) ([]string, error) {
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return nil, err
	}
	out, err := runGit(ctx, r.linkedAt(l.dir, l.admin), nil, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--no-renames", "--ignore-submodules=all")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range strings.Split(string(out), "\x00") {
		if p, ok := strings.CutPrefix(e, "?? "); ok {
			paths = append(paths, strings.TrimSuffix(p, "/"))
		}
	}
	return paths, nil
}

// excludeInWorktree adds paths to the worktree's record; the checkpoint scan treats them as
// ignored.
func (r *Repo) excludeInWorktree(ctx context.Context, dir string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return err
	}
	if l.rec == nil {
		return fmt.Errorf("%s was not made by gitstate (it has no record of it)", dir)
	}
	rec := *l.rec
	for _, p := range paths {
		rec.Exclude = append(rec.Exclude, path.Clean(filepath.ToSlash(p)))
	}
	return r.writeRecord(rec)
}

// copyTree copies a file, symlink or directory tree, keeping permission bits.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(to), 0o777); err != nil {
				return err
			}
			return os.Symlink(target, to)
		case info.Mode().IsRegular():
			if err := os.MkdirAll(filepath.Dir(to), 0o777); err != nil {
				return err
			}
			return copyFile(p, to, info.Mode().Perm())
		}
		return nil // sockets and devices are not copied
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// tailBuffer keeps the last 8 KB written to it.
type tailBuffer struct{ b bytes.Buffer }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if over := t.b.Len() - 8<<10; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(t.b.String()) }
