package gitstate

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// checkpointAuthor signs checkpoint commits: the agent's work, not the user's.
var checkpointAuthor = object.Signature{Name: "Arbor", Email: "arbor@localhost"}

// Checkpoint commits everything changed in the linked worktree at dir onto its branch, as
// `git add -A && git commit` would (respecting .gitignore; deletions, executable bits, symlinks
// and binaries included), and refreshes the worktree's index so `git status` stays clean.
// touched lists the paths (relative to dir, files or directories) that may have changed, for a
// checkpoint that costs what changed; nil means scan everything. With nothing changed it
// returns the current commit and changed=false without committing.
func (r *Repo) Checkpoint(ctx context.Context, dir, message string, touched []string) (commit string, changed bool, err error) {
	scopes, err := scopesOf(touched)
	if err != nil {
		return "", false, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", false, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	defer unlock()
	h, changed, err := r.checkpoint(ctx, dir, message, scopes)
	if err != nil {
		return "", false, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	return h.String(), changed, nil
}

// scopesOf cleans touched paths into non-nested, slash-separated scopes ("" = everything).
func scopesOf(touched []string) ([]string, error) {
	if touched == nil {
		return []string{""}, nil
	}
	var out []string
	for _, t := range touched {
		if filepath.IsAbs(t) {
			return nil, fmt.Errorf("touched path %q: want a path relative to the worktree", t)
		}
		p := path.Clean(filepath.ToSlash(t))
		if p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("touched path %q is outside the worktree", t)
		}
		if p == "." {
			return []string{""}, nil
		}
		if p == ".git" || strings.HasPrefix(p, ".git/") {
			continue
		}
		if path.Base(p) == ".gitignore" {
			// A changed .gitignore can un-ignore (or ignore) files that did not change
			// themselves: its whole directory is in scope.
			if p = path.Dir(p); p == "." {
				return []string{""}, nil
			}
		}
		out = append(out, p)
	}
	sort.Strings(out)
	kept := out[:0]
	for _, p := range out {
		if n := len(kept); n > 0 && under(p, kept[n-1]) {
			continue
		}
		kept = append(kept, p)
	}
	return kept, nil
}

func (r *Repo) checkpoint(ctx context.Context, dir, message string, scopes []string) (plumbing.Hash, bool, error) {
	l, branch, parent, err := r.checkpointTarget(dir)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	head := parent.Hash
	if len(scopes) == 0 {
		return head, false, nil
	}
	indexPath := filepath.Join(l.admin, "index")
	x, err := loadIndex(indexPath)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	why, err := r.indexReason(ctx, x)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	var s *scan
	if why == "" {
		if s, err = r.scanned(ctx, l, parent.TreeHash, x, scopes); err != nil {
			return plumbing.ZeroHash, false, err
		}
		why = r.newAttrsReason(s)
	}
	var newTree plumbing.Hash
	if why == "" {
		newTree, err = r.scannedTree(parent.TreeHash, s)
	} else {
		// git transforms this worktree's content: it stages it, into the worktree's own index.
		r.logger.Debug("checkpoint through git", "dir", dir, "because", why)
		s = nil
		err = r.frozen(ctx, l.dir, func() (err error) {
			newTree, err = r.stageWithGit(ctx, r.linkedAt(l.dir, l.admin), l.exclude())
			return err
		})
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	commit := head
	if newTree != parent.TreeHash {
		if commit, err = r.commit(newTree, message, head); err != nil {
			return plumbing.ZeroHash, false, err
		}
		if err := r.setRef(branch, commit, &head); err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("move %s from %s to %s (did someone commit in the worktree meanwhile?): %w", branch.Short(), head, commit, err)
		}
	}
	if s != nil && s.dirty() {
		if err := writeIndexBytes(indexPath, x.with(s.entries)); err != nil {
			return commit, commit != head, err
		}
	}
	if commit != head {
		r.logger.Debug("checkpoint", "dir", dir, "branch", branch.Short(), "commit", commit)
	}
	return commit, commit != head, nil
}

// checkpointTarget finds the worktree, its branch and the commit at its tip, refusing what a
// checkpoint cannot commit onto. Callers hold the lock.
func (r *Repo) checkpointTarget(dir string) (linked, plumbing.ReferenceName, *object.Commit, error) {
	var none linked
	if r.pendingAt(dir) {
		return none, "", nil, fmt.Errorf("worktree %s is still being created", dir)
	}
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return none, "", nil, err
	}
	if _, ok := r.pending[l.name()]; ok {
		return none, "", nil, fmt.Errorf("worktree %s is still being created", dir)
	}
	branch, head, err := r.headAt(filepath.Join(l.admin, "HEAD"))
	if errors.Is(err, ErrNoCommits) {
		return none, "", nil, fmt.Errorf("branch %s of this worktree no longer exists (deleted outside Arbor?); recreate it with `git branch %s <commit>` or discard the session", branch.Short(), branch.Short())
	}
	if err != nil {
		return none, "", nil, err
	}
	if branch == "" {
		return none, "", nil, fmt.Errorf("HEAD is detached at %s; check out the session's branch first (git -C %s switch <branch>)", head, dir)
	}
	if err := r.ownBranch(l, branch); err != nil {
		return none, "", nil, err
	}
	parent, err := r.git.CommitObject(head)
	if err != nil {
		return none, "", nil, fmt.Errorf("commit %s: %w", head, err)
	}
	return l, branch, parent, nil
}

// scanned runs gitstate's own scan of scopes of the worktree at dir. Callers hold the lock.
func (r *Repo) scanned(ctx context.Context, l linked, tree plumbing.Hash, x *rawIndex, scopes []string) (*scan, error) {
	t, err := object.GetTree(r.git.Storer, tree)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", tree, err)
	}
	s := r.newScan(l.dir, l.exclude(), t, x, scopes[0] == "")
	if err := s.run(ctx, scopes); err != nil {
		return nil, err
	}
	return s, nil
}

// scannedTree applies a scan's changes to tree. Callers hold the lock.
func (r *Repo) scannedTree(tree plumbing.Hash, s *scan) (plumbing.Hash, error) {
	if len(s.changes) == 0 {
		return tree, nil
	}
	h, err := r.buildTree(tree, s.changes)
	if err == nil && h.IsZero() {
		h, err = r.writeTree(nil)
	}
	return h, err
}

// commit stores a commit object. Callers hold the lock.
func (r *Repo) commit(tree plumbing.Hash, message string, parents ...plumbing.Hash) (plumbing.Hash, error) {
	if message == "" {
		message = "checkpoint"
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	sig := checkpointAuthor
	sig.When = time.Now()
	c := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: tree, ParentHashes: parents}
	obj := r.git.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	h, err := r.git.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit: %w", err)
	}
	return h, nil
}
