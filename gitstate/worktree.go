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
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// WorktreeSpec describes a new session branch and its linked worktree.
type WorktreeSpec struct {
	Name   string // admin name under <common>/worktrees/<Name> (the session id)
	Branch string // short branch name, e.g. "arbor/rename-foo-1a2b3c4d"; created at Base, error if it exists
	Base   string // commit hash (or any revision) the branch starts at
	Dir    string // absolute path of the new linked worktree, e.g. <common>/arbor/worktrees/<id>
}

// Validate reports the first field that cannot work.
func (s WorktreeSpec) Validate() error {
	if s.Name == "" || s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, "/\\ \t\n") {
		return fmt.Errorf("worktree name %q: want a non-empty name without slashes or spaces", s.Name)
	}
	if err := plumbing.NewBranchReferenceName(s.Branch).Validate(); err != nil || s.Branch == "" {
		return fmt.Errorf("branch name %q is not a valid git branch name", s.Branch)
	}
	if s.Base == "" {
		return errors.New("base commit is empty: want the commit the branch starts at")
	}
	if !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("worktree dir %q: want an absolute path", s.Dir)
	}
	return nil
}

// AddWorktree creates branch spec.Branch at spec.Base and checks it out in a new linked worktree
// at spec.Dir, registered as <common>/worktrees/<spec.Name> exactly as `git worktree add` would.
// The user's main worktree and index are not touched. On failure nothing is left behind.
func (r *Repo) AddWorktree(ctx context.Context, spec WorktreeSpec) error {
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	if err := r.addBranchWorktree(ctx, spec); err != nil {
		return fmt.Errorf("add worktree %s: %w", spec.Name, err)
	}
	r.logger.Info("worktree added", "name", spec.Name, "branch", spec.Branch, "base", spec.Base, "dir", spec.Dir)
	return nil
}

// Fork starts a new session branch at a checkpoint commit (spec.Base) with its own worktree.
// The parent's branch and worktree are untouched.
func (r *Repo) Fork(ctx context.Context, spec WorktreeSpec) error {
	return r.AddWorktree(ctx, spec)
}

// RestoreWorktree checks an existing branch out into a new linked worktree, e.g. to bring back
// a session whose worktree was removed to save space.
func (r *Repo) RestoreWorktree(ctx context.Context, name, branch, dir string) error {
	spec := WorktreeSpec{Name: name, Branch: branch, Base: "-", Dir: dir}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("restore worktree: %w", err)
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	defer unlock()
	ref, err := r.git.Storer.Reference(plumbing.NewBranchReferenceName(branch))
	if err != nil {
		return fmt.Errorf("restore worktree %s: branch %s: %w", name, branch, err)
	}
	if wt := r.checkedOutIn(ref.Name()); wt != "" {
		return fmt.Errorf("restore worktree %s: branch %s is already checked out in %s", name, branch, wt)
	}
	rec := record{Name: name, Branch: branch, Dir: filepath.Clean(dir), Base: ref.Hash().String()}
	if err := r.writeRecord(rec); err != nil {
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	if err := r.linkWorktree(ctx, name, ref.Name(), ref.Hash(), dir); err != nil {
		r.removeRecord(name)
		return fmt.Errorf("restore worktree %s: %w", name, err)
	}
	return nil
}

// addBranchWorktree registers the branch and worktree under the lock, writes the files without
// it (from an object store of its own), and takes the lock again to write the index. Other
// sessions' checkpoints and diffs, and other forks, proceed meanwhile; the worktree stays
// "initializing" and pending, which Checkpoint, RemoveWorktree and Reconcile respect.
func (r *Repo) addBranchWorktree(ctx context.Context, spec WorktreeSpec) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	p, base, err := r.beginBranchWorktree(ctx, spec)
	if err == nil {
		r.pending[spec.Name] = true
	}
	unlock()
	if err != nil {
		return err
	}
	registered := time.Now()
	entries, err := p.fill(ctx, r)
	r.logger.Debug("worktree files written", "name", spec.Name, "files", len(p.files), "took", time.Since(registered))
	unlock, lerr := r.lock(context.WithoutCancel(ctx)) // finishing or rolling back must happen
	if lerr != nil {
		return lerr
	}
	defer unlock()
	delete(r.pending, spec.Name)
	if err == nil {
		err = r.finishWorktree(p, entries)
	}
	if err != nil {
		p.abort()
		branch := plumbing.NewBranchReferenceName(spec.Branch)
		if ref, rerr := r.git.Storer.Reference(branch); rerr == nil && ref.Hash() == base {
			r.git.Storer.RemoveReference(branch)
		}
		r.removeRecord(spec.Name)
		return err
	}
	return nil
}

// beginBranchWorktree writes the record, creates the branch and registers the worktree.
// Callers hold the lock.
func (r *Repo) beginBranchWorktree(ctx context.Context, spec WorktreeSpec) (*pendingWorktree, plumbing.Hash, error) {
	base, err := r.resolve(spec.Base)
	if err != nil {
		return nil, base, err
	}
	branch := plumbing.NewBranchReferenceName(spec.Branch)
	if _, err := r.git.Storer.Reference(branch); err == nil {
		return nil, base, fmt.Errorf("branch %s already exists", spec.Branch)
	}
	if _, err := os.Stat(r.recordPath(spec.Name)); err == nil {
		return nil, base, fmt.Errorf("worktree name %q is taken (record %s exists)", spec.Name, r.recordPath(spec.Name))
	}
	// The record goes first: if the process dies anywhere below, Reconcile finds it and
	// either finishes the worktree or cleans it up.
	rec := record{Name: spec.Name, Branch: spec.Branch, Dir: filepath.Clean(spec.Dir), Base: base.String()}
	if err := r.writeRecord(rec); err != nil {
		return nil, base, err
	}
	if err := r.setRef(branch, base, &plumbing.ZeroHash); err != nil {
		r.removeRecord(spec.Name)
		return nil, base, fmt.Errorf("create branch %s: %w", spec.Branch, err)
	}
	p, err := r.prepareWorktree(ctx, spec.Name, branch, base, spec.Dir)
	if err != nil {
		r.git.Storer.RemoveReference(branch)
		r.removeRecord(spec.Name)
		return nil, base, err
	}
	return p, base, nil
}

// adminDir is where git keeps a linked worktree's HEAD, index and back-pointer.
func (r *Repo) adminDir(name string) string { return filepath.Join(r.common, "worktrees", name) }

// pendingWorktree is a linked worktree being made: registered and marked "initializing", its
// files not yet all written.
type pendingWorktree struct {
	admin, dir string
	files      []treeFile
	withGit    string // why git itself checks the files out (see doc.go), or ""
}

// fill writes the worktree's files, without the lock: from an object store of its own, or by
// git. It returns the index entries to write, or nil when git wrote the index.
func (p *pendingWorktree) fill(ctx context.Context, r *Repo) ([]*index.Entry, error) {
	if p.withGit != "" {
		return nil, checkoutWithGit(ctx, p.dir)
	}
	read, closeReader := r.privateReader()
	defer closeReader()
	return checkout(ctx, read, r.common, p.dir, p.files)
}

// abort removes what was made.
func (p *pendingWorktree) abort() {
	os.RemoveAll(p.dir)
	os.RemoveAll(p.admin)
}

// linkWorktree checks out an existing branch (at commit) into a new linked worktree, all under
// the lock. Callers hold the lock.
func (r *Repo) linkWorktree(ctx context.Context, name string, branch plumbing.ReferenceName, commit plumbing.Hash, dir string) error {
	p, err := r.prepareWorktree(ctx, name, branch, commit, dir)
	if err != nil {
		return err
	}
	var entries []*index.Entry
	if p.withGit != "" {
		err = checkoutWithGit(ctx, p.dir)
	} else {
		entries, err = checkout(ctx, r.readBlob, r.common, p.dir, p.files)
	}
	if err == nil {
		err = r.finishWorktree(p, entries)
	}
	if err != nil {
		p.abort()
	}
	return err
}

// prepareWorktree registers a linked worktree the way `git worktree add` does, holding a
// "locked: initializing" marker until finishWorktree, so neither `git worktree prune` nor
// Reconcile mistakes a half-made worktree for a dead one; it lists the files to check out.
// Callers hold the lock.
func (r *Repo) prepareWorktree(ctx context.Context, name string, branch plumbing.ReferenceName, commit plumbing.Hash, dir string) (_ *pendingWorktree, err error) {
	dir = filepath.Clean(dir)
	admin := r.adminDir(name)
	if _, err := os.Lstat(admin); err == nil {
		return nil, fmt.Errorf("worktree name %q is taken (%s exists)", name, admin)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("worktree dir %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("worktree dir %s: %w", dir, err)
	}
	c, err := r.git.CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	if err := os.MkdirAll(admin, 0o777); err != nil {
		return nil, err
	}
	p := &pendingWorktree{admin: admin, dir: dir}
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	files := map[string]string{
		"locked":    "initializing\n",
		"commondir": "../..\n",
		"gitdir":    filepath.Join(dir, ".git") + "\n",
		"HEAD":      "ref: " + branch.String() + "\n",
	}
	for _, f := range []string{"locked", "commondir", "gitdir", "HEAD"} {
		if err := os.WriteFile(filepath.Join(admin, f), []byte(files[f]), 0o666); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+admin+"\n"), 0o666); err != nil {
		return nil, err
	}
	if p.files, err = r.listTree(c.TreeHash, "", nil); err != nil {
		return nil, err
	}
	if p.withGit, err = r.treeReason(ctx, p.files); err != nil {
		return nil, err
	}
	return p, nil
}

// finishWorktree writes the index (unless git did) and lifts the "initializing" marker.
// Callers hold the lock.
func (r *Repo) finishWorktree(p *pendingWorktree, entries []*index.Entry) error {
	if p.withGit == "" {
		if err := writeIndexBytes(filepath.Join(p.admin, "index"), encodeIndex(entries).data); err != nil {
			return err
		}
	}
	return os.Remove(filepath.Join(p.admin, "locked"))
}

// worktreeAdmin returns the admin dir of the linked worktree at dir.
func (r *Repo) worktreeAdmin(dir string) (string, error) {
	admin, err := readGitFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", fmt.Errorf("%s is not a linked worktree: %w", dir, err)
	}
	if filepath.Dir(admin) != filepath.Join(r.common, "worktrees") {
		return "", fmt.Errorf("%s is not a linked worktree of %s (its git dir is %s)", dir, r.root, admin)
	}
	return admin, nil
}
