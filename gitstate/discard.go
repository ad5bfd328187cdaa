package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// ArchivePrefix is where Discard keeps branches whose work no other branch holds.
const ArchivePrefix = "refs/arbor/archive/"

// DiscardResult says what Discard did with the worktree and the branch.
type DiscardResult struct {
	Removed  bool   `json:"removed"`            // the worktree was removed
	Deleted  bool   `json:"deleted"`            // the branch was deleted
	Archived string `json:"archived,omitempty"` // the ref now holding the branch's commits
}

// Discard removes a session's worktree (refusing, like [Repo.RemoveWorktree], when it holds
// uncommitted work, unless force) and then its branch: deleted when its tip is reachable from
// another branch, otherwise moved to refs/arbor/archive/<branch> so no work is lost — unless
// force, which deletes it. dir may be "" (no worktree) and branch may be "" (the worktree's).
func (r *Repo) Discard(ctx context.Context, dir, branch string, force bool) (*DiscardResult, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("discard %s: %w", or(branch, dir), err)
	}
	defer unlock()
	res, err := r.discard(ctx, dir, branch, force)
	if err != nil {
		return res, fmt.Errorf("discard %s: %w", or(branch, dir), err)
	}
	r.logger.Info("discarded", "dir", dir, "branch", branch, "deleted", res.Deleted, "archived", res.Archived)
	return res, nil
}

func (r *Repo) discard(ctx context.Context, dir, branch string, force bool) (*DiscardResult, error) {
	res := &DiscardResult{}
	name, unwritten := "", ""
	if dir != "" {
		dir = filepath.Clean(dir)
		if r.pendingAt(dir) {
			return res, fmt.Errorf("the worktree %s is being written; wait for it (or drop its hold) first", dir)
		}
		if l, ok := r.findLinked(dir); ok {
			name = l.name()
			if b, _, err := r.headAt(filepath.Join(l.admin, "HEAD")); branch == "" && err == nil {
				branch = b.Short()
			}
		} else if admin := r.adminFor(dir); admin != "" {
			name = filepath.Base(admin)
		}
		if name != "" {
			if err := r.removeWorktree(ctx, dir, force); err != nil {
				return res, err
			}
			res.Removed = true
		} else if _, err := os.Stat(dir); err == nil {
			return res, fmt.Errorf("%s is not a linked worktree of %s", dir, r.root)
		} else if rec, ok := r.recordAt(dir); ok {
			// Released, or held and never written: a branch and a record, no files.
			unwritten = rec.Name
			if branch == "" {
				branch = rec.Branch
			}
		}
	}
	if branch == "" {
		return res, errors.New("no branch to discard: give the branch, or the dir of a worktree on a branch")
	}
	if err := r.dropBranch(plumbing.NewBranchReferenceName(branch), force, res); err != nil {
		return res, err
	}
	if name != "" {
		r.removeRecord(name)
	}
	if unwritten != "" {
		os.RemoveAll(releasedAside(dir)) // what a release cut short left; it held nothing uncommitted
		r.removeRecord(unwritten)
	}
	return res, nil
}

// recordAt returns the record of the session worktree meant to be at dir. Callers hold the lock.
func (r *Repo) recordAt(dir string) (record, bool) {
	recs, _ := r.records()
	for _, rec := range recs {
		if filepath.Clean(rec.Dir) == dir {
			return rec, true
		}
	}
	return record{}, false
}

// dropBranch deletes a branch whose tip another branch contains, and archives it otherwise
// (or deletes it anyway when force). Callers hold the lock.
func (r *Repo) dropBranch(name plumbing.ReferenceName, force bool, res *DiscardResult) error {
	ref, err := r.git.Storer.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil // deleted already, by the user or an earlier attempt
	}
	if err != nil {
		return err
	}
	if wt := r.checkedOutIn(name); wt != "" {
		return fmt.Errorf("branch %s is checked out in %s; switch that worktree to another branch first", name.Short(), wt)
	}
	reachable, err := r.reachableFromOthers(ref.Hash(), name)
	if err != nil {
		return err
	}
	if !reachable && !force {
		archive := plumbing.ReferenceName(ArchivePrefix + name.Short())
		if old, err := r.git.Storer.Reference(archive); err == nil && old.Hash() != ref.Hash() {
			archive = plumbing.ReferenceName(fmt.Sprintf("%s-%d", archive, time.Now().Unix()))
		}
		if err := r.setRef(archive, ref.Hash(), nil); err != nil {
			return fmt.Errorf("archive %s: %w", name.Short(), err)
		}
		res.Archived = archive.String()
	}
	// Through the git CLI, as a compare-and-swap that honours packed-refs.lock: go-git rewrites
	// packed-refs without that lock, which a concurrent `git gc` or `git pack-refs` can lose
	// branches to.
	if _, err := runGit(context.Background(), r.mainAt(), nil, "update-ref", "-d", name.String(), ref.Hash().String()); err != nil {
		return fmt.Errorf("delete branch %s: %w", name.Short(), err)
	}
	res.Deleted = true
	return nil
}

// checkedOutIn returns the worktree (main or linked) that has branch checked out, or "".
func (r *Repo) checkedOutIn(branch plumbing.ReferenceName) string {
	heads := map[string]string{filepath.Join(r.common, "HEAD"): r.root}
	ents, _ := os.ReadDir(filepath.Join(r.common, "worktrees"))
	for _, e := range ents {
		admin := filepath.Join(r.common, "worktrees", e.Name())
		gitdir, _ := os.ReadFile(filepath.Join(admin, "gitdir"))
		heads[filepath.Join(admin, "HEAD")] = filepath.Dir(strings.TrimSpace(string(gitdir)))
	}
	for head, wt := range heads {
		b, err := os.ReadFile(head)
		if err == nil && strings.TrimSpace(string(b)) == "ref: "+branch.String() {
			return wt
		}
	}
	return ""
}

// SessionBranchPrefix is where session branches live (arbor/<slug>-<id8>).
const SessionBranchPrefix = "refs/heads/arbor/"

// reachableFromOthers reports whether any branch other than self and the session branches
// contains commit. It walks back from the other tips together, not past commits a day older
// than commit (a descendant cannot predate it by more than clock skew). Callers hold the lock.

func (r *Repo) reachableFromOthers(commit plumbing.Hash, self plumbing.ReferenceName) (bool, error) {
	c, err := r.git.CommitObject(commit)
	if err != nil {
		return false, err
	}
	horizon := c.Committer.When.Add(-24 * time.Hour)
	var queue []plumbing.Hash
	for name, h := range r.branches() {
		// Another session's branch does not keep work safe: it is discarded the same way, and
		// then nothing would hold these commits (a fork's branch holds its source's tip).
		if name != self && !strings.HasPrefix(name.String(), SessionBranchPrefix) {
			queue = append(queue, h)
		}
	}
	seen := map[plumbing.Hash]bool{}
	for len(queue) > 0 {
		h := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if h == commit {
			return true, nil
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		cc, err := r.git.CommitObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if cc.Committer.When.Before(horizon) {
			continue
		}
		queue = append(queue, cc.ParentHashes...)
	}
	return false, nil
}

// branches lists every branch: loose refs under refs/heads (skipping *.lock files, which a
// killed git process can leave behind and go-git would try to read as refs) over packed ones.
// Callers hold the lock.
func (r *Repo) branches() map[plumbing.ReferenceName]plumbing.Hash {
	out := map[plumbing.ReferenceName]plumbing.Hash{}
	if b, err := os.ReadFile(filepath.Join(r.common, "packed-refs")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			h, name, ok := strings.Cut(line, " ")
			if ok && plumbing.IsHash(h) && strings.HasPrefix(name, "refs/heads/") {
				out[plumbing.ReferenceName(name)] = plumbing.NewHash(h)
			}
		}
	}
	heads := filepath.Join(r.common, "refs", "heads")
	filepath.WalkDir(heads, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		b, err := os.ReadFile(p)
		if h := strings.TrimSpace(string(b)); err == nil && plumbing.IsHash(h) {
			rel, _ := filepath.Rel(heads, p)
			out[plumbing.NewBranchReferenceName(filepath.ToSlash(rel))] = plumbing.NewHash(h)
		}
		return nil
	})
	return out
}
