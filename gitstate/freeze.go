package gitstate

import (
	"context"
	"fmt"
)

// FreezeFunc stops everything that can change the files of the worktree at dir — the
// sandbox of the session working there — until thaw is called. It returns a nil thaw (and no
// error) when nothing needs stopping: an unknown dir, a session without a sandbox.
type FreezeFunc func(ctx context.Context, dir string) (thaw func(), err error)

// FreezeWith has gitstate call f around each git command it runs on a linked worktree's
// files by path: the CLI staging of a checkpoint (`git ls-files --others`, `git add -A`), the
// `git status` of a discard's check, and an accept's or reject's status and `git read-tree -u`.
// git lstat()s a path and then opens it, following a symlink, so code in the worktree that
// swaps a file for a link to a host file between the two would have git store the host's
// file in a blob (or write through a swapped directory); frozen, that code cannot run
// in between. gitstate's own scan opens every name through its parent's descriptor without
// following a link, so the fast path needs no freeze, and neither do the commands that read
// only objects (merge-tree, commit-tree, diff of two commits). Set it before the Repo is used.
func (r *Repo) FreezeWith(f FreezeFunc) { r.freeze = f }

// frozen runs fn with the worktree at dir frozen (see FreezeWith): never with it running, so
// a freeze that fails fails the operation; the thaw is deferred, so fn's failing or
// panicking never leaves the worktree's code stopped.
func (r *Repo) frozen(ctx context.Context, dir string, fn func() error) error {
	if r.freeze == nil || dir == "" {
		return fn()
	}
	thaw, err := r.freeze(ctx, dir)
	if err != nil {
		return fmt.Errorf("stop what runs in %s before git reads it there: %w", dir, err)
	}
	if thaw != nil {
		defer thaw()
	}
	return fn()
}
