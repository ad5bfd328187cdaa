package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DirtyError lists the paths that hold uncommitted work and so stopped an operation.
type DirtyError struct {
	Dir   string
	Files []string
}

func (e *DirtyError) Error() string {
	const show = 10
	files := e.Files
	more := ""
	if len(files) > show {
		more = fmt.Sprintf(" and %d more", len(files)-show)
		files = files[:show]
	}
	return fmt.Sprintf("%s has uncommitted changes in %s%s", e.Dir, strings.Join(files, ", "), more)
}

// RemoveWorktree deletes the linked worktree at dir, its registration and gitstate's record of
// it. It refuses, naming the
// files, when the worktree holds uncommitted changes (untracked, non-ignored files included) or
// is locked, unless force. The branch is kept.
func (r *Repo) RemoveWorktree(ctx context.Context, dir string, force bool) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", dir, err)
	}
	defer unlock()
	if err := r.removeWorktree(ctx, dir, force); err != nil {
		return fmt.Errorf("remove worktree %s: %w", dir, err)
	}
	r.logger.Info("worktree removed", "dir", dir, "force", force)
	return nil
}

func (r *Repo) removeWorktree(ctx context.Context, dir string, force bool) error {
	dir = filepath.Clean(dir)
	if r.pendingAt(dir) {
		return fmt.Errorf("worktree is still being created")
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		// The directory is gone already: drop the registration that still points at it.
		if admin := r.adminFor(dir); admin != "" {
			r.removeRecord(filepath.Base(admin))
			return os.RemoveAll(admin)
		}
		return fmt.Errorf("no such worktree")
	}
	// Found from the records, not restored: nothing below reads the .git file, and one a
	// `git init` in the worktree replaced by a directory must not stop a removal.
	l, ok := r.findLinked(dir)
	if !ok {
		return fmt.Errorf("%s is not a linked worktree of %s", dir, r.root)
	}
	admin := l.admin
	if _, ok := r.pending[l.name()]; ok {
		return fmt.Errorf("worktree is still being created")
	}
	if !force {
		if b, err := os.ReadFile(filepath.Join(admin, "locked")); err == nil {
			return fmt.Errorf("worktree is locked (%s); unlock it with git worktree unlock, or force", strings.TrimSpace(string(b)))
		}
		files, err := r.uncommitted(ctx, l)
		if err != nil {
			return err
		}
		if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
			// A repository made in the worktree's own .git: its commits exist only there.
			files = append(files, ".git/ (a git repository of its own)")
		}
		if len(files) > 0 {
			return &DirtyError{Dir: dir, Files: files}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(admin); err != nil {
		return err
	}
	r.removeRecord(filepath.Base(admin))
	return nil
}

// uncommitted lists paths whose worktree or index content differs from HEAD. Callers hold the
// lock.
func (r *Repo) uncommitted(ctx context.Context, l linked) ([]string, error) {
	_, head, err := r.headAt(filepath.Join(l.admin, "HEAD"))
	if err != nil {
		return nil, err
	}
	c, err := r.git.CommitObject(head)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	x, err := loadIndex(filepath.Join(l.admin, "index"))
	if err != nil {
		return nil, err
	}
	if why, err := r.indexReason(ctx, x); err != nil {
		return nil, err
	} else if why != "" {
		var files []string
		err := r.frozen(ctx, l.dir, func() (err error) {
			files, err = uncommittedWithGit(ctx, r.linkedAt(l.dir, l.admin), l.exclude())
			return err
		})
		return files, err
	}
	s := r.newScan(l.dir, l.exclude(), tree, x, true)
	if err := s.run(ctx, []string{""}); err != nil {
		return nil, err
	}
	files := make([]string, 0, len(s.changes))
	for p := range s.changes {
		files = append(files, p)
	}
	// A repository made inside the worktree (git init, git clone) is never checkpointed: its
	// files and commits exist only there, so removing the worktree would lose them.
	for _, p := range s.nested {
		files = append(files, p+"/ (a git repository of its own)")
	}
	sort.Strings(files)
	return files, nil
}

// adminFor finds the admin dir whose gitdir file points at dir/.git, or "".
func (r *Repo) adminFor(dir string) string {
	ents, _ := os.ReadDir(filepath.Join(r.common, "worktrees"))
	for _, e := range ents {
		admin := filepath.Join(r.common, "worktrees", e.Name())
		b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == filepath.Join(dir, ".git") {
			return admin
		}
	}
	return ""
}
