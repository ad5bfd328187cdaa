package gitstate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// AcceptedPrefix holds, per session, the point its remaining diff starts from once part of it
// was accepted: a commit whose tree is the session's base with every accepted file and hunk
// applied. The session's remaining diff is that commit against its branch, so what the user
// took leaves the review; a later accept or reject indexes hunks into that diff.
// AcceptedOntoPrefix holds the commit the latest accept made on the user's branch: the point
// holds only while that branch still contains it (a reset or another branch checked out
// makes the whole change the review again).
const (
	AcceptedPrefix     = "refs/arbor/accepted/"
	AcceptedOntoPrefix = "refs/arbor/accepted-onto/"
)

// Accepted returns the commit a session's remaining diff starts from and the accept commit it
// was recorded with; "" when nothing of it was accepted.
func (r *Repo) Accepted(session string) (point, onto string, err error) {
	read := func(prefix string) (string, error) {
		ref, err := r.git.Storer.Reference(plumbing.ReferenceName(prefix + session))
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read %s%s: %w", prefix, session, err)
		}
		return ref.Hash().String(), nil
	}
	if point, err = read(AcceptedPrefix); err != nil || point == "" {
		return "", "", err
	}
	onto, err = read(AcceptedOntoPrefix)
	return point, onto, err
}

// SetAccepted moves a session's accepted point to point (AcceptResult.Selected), recorded with
// the accept commit onto; expect is the point the accept was reviewed from ("" = none), and a
// point moved meanwhile (another accept) is an error.
func (r *Repo) SetAccepted(ctx context.Context, session, point, onto, expect string) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	p, err := r.resolve(point)
	if err != nil {
		return err
	}
	o, err := r.resolve(onto)
	if err != nil {
		return err
	}
	exp := plumbing.ZeroHash
	if expect != "" {
		if exp, err = r.resolve(expect); err != nil {
			return err
		}
	}
	if err := r.setRef(plumbing.ReferenceName(AcceptedPrefix+session), p, &exp); err != nil {
		return err
	}
	return r.setRef(plumbing.ReferenceName(AcceptedOntoPrefix+session), o, nil)
}

// DropAccepted forgets a session's accepted point (its branch is gone).
func (r *Repo) DropAccepted(ctx context.Context, session string) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for _, prefix := range []string{AcceptedPrefix, AcceptedOntoPrefix} {
		err = r.git.Storer.RemoveReference(plumbing.ReferenceName(prefix + session))
		if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return err
		}
	}
	return nil
}

// DiffFrom is the change from commit from to head as it is, without a merge-base: a
// session's remaining diff from its accepted point.
func (r *Repo) DiffFrom(ctx context.Context, from, head string) (*Diff, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, err := r.resolve(from)
	if err != nil {
		return nil, err
	}
	h, err := r.resolve(head)
	if err != nil {
		return nil, err
	}
	d, err := r.diffCommits(ctx, f, h)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from, head, err)
	}
	return d, nil
}

// RejectOptions say what of a session's change to take back.
type RejectOptions struct {
	Dir    string           // the session's worktree, on its branch
	From   string           // the commit the reviewed diff starts from (Diff.Base)
	Head   string           // the reviewed head (Diff.Head): the branch must still be there
	Files  []string         // whole files to revert (new paths for renames)
	Hunks  map[string][]int // path → indexes into that file's hunks of the From..Head diff
	Reason string           // the commit message
}

// Reject reverts chosen files and hunks of the From..Head change on the session's branch, as
// a new commit on it that the worktree at Dir moves to (files the revert touches must have no
// uncommitted changes there: checkpoint first). Nothing chosen reverts the whole change.
// It returns the new commit and the paths it changed.
func (r *Repo) Reject(ctx context.Context, o RejectOptions) (string, []string, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	dir := filepath.Clean(o.Dir)
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return "", nil, err
	}
	at := r.linkedAt(l.dir, l.admin)
	branch, tip, err := r.headAt(filepath.Join(l.admin, "HEAD"))
	if err != nil {
		return "", nil, err
	}
	if branch == "" {
		return "", nil, fmt.Errorf("%s has a detached HEAD", dir)
	}
	head, err := r.resolve(o.Head)
	if err != nil {
		return "", nil, err
	}
	if head != tip {
		return "", nil, fmt.Errorf("the review is out of date: %s moved from %.10s to %.10s; diff again", branch.Short(), head, tip)
	}
	from, err := r.resolve(o.From)
	if err != nil {
		return "", nil, err
	}
	d, err := r.diffCommits(ctx, from, head)
	if err != nil {
		return "", nil, err
	}
	changes, paths, err := r.revertChanges(d, o.Files, o.Hunks)
	if err != nil {
		return "", nil, err
	}
	if len(paths) == 0 {
		return "", nil, errors.New("the selection changes nothing")
	}
	hc, err := r.git.CommitObject(head)
	if err != nil {
		return "", nil, err
	}
	tree, err := r.buildTree(hc.TreeHash, changes)
	if err != nil {
		return "", nil, err
	}
	if tree.IsZero() {
		if tree, err = r.writeTree(nil); err != nil {
			return "", nil, err
		}
	}
	if err := checkIdentity(ctx, at); err != nil {
		return "", nil, err
	}
	out, err := runGit(ctx, at, []byte(ensureNewline(o.Reason)), "commit-tree", tree.String(), "-p", head.String(), "-F", "-")
	if err != nil {
		return "", nil, err
	}
	commit := strings.TrimSpace(out)
	if err := r.frozen(ctx, l.dir, func() error {
		return r.advance(ctx, at, branch, head, commit, "arbor: reject part of "+branch.Short())
	}); err != nil {
		return "", nil, err
	}
	return commit, paths, nil
}

// revertChanges maps the chosen part of d back to its old content.
func (r *Repo) revertChanges(d *Diff, files []string, hunks map[string][]int) (map[string]*treeFile, []string, error) {
	all := len(files) == 0 && len(hunks) == 0
	byPath := map[string]FileDiff{}
	for _, f := range d.Files {
		byPath[f.Path] = f
	}
	whole := map[string]bool{}
	for _, p := range files {
		if _, ok := byPath[p]; !ok {
			return nil, nil, fmt.Errorf("%s is not in the diff", p)
		}
		whole[p] = true
	}
	for p := range hunks {
		if _, ok := byPath[p]; !ok {
			return nil, nil, fmt.Errorf("%s is not in the diff", p)
		}
	}
	changes := map[string]*treeFile{}
	involved := map[string]bool{}
	// Additions last, so a type change (deleted + added at one path) ends as the old file.
	ordered := append([]FileDiff(nil), d.Files...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Status != Added && ordered[j].Status == Added })
	for _, f := range ordered {
		switch {
		case all || whole[f.Path]:
			if err := oldFile(f, changes); err != nil {
				return nil, nil, err
			}
		case hunks[f.Path] != nil:
			if err := r.withoutHunks(f, hunks[f.Path], changes); err != nil {
				return nil, nil, err
			}
		default:
			continue
		}
		involved[f.Path] = true
		if f.OldPath != "" {
			involved[f.OldPath] = true
		}
	}
	paths := make([]string, 0, len(involved))
	for p := range involved {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return changes, paths, nil
}

// oldFile puts f back as it was before the change.
func oldFile(f FileDiff, changes map[string]*treeFile) error {
	if f.Status == Added {
		if _, set := changes[f.Path]; !set {
			changes[f.Path] = nil
		}
		return nil
	}
	at := f.Path
	if f.OldPath != "" {
		at = f.OldPath
		changes[f.Path] = nil
	}
	mode, err := filemode.New(f.OldMode)
	if err != nil {
		return fmt.Errorf("%s: mode %q: %w", at, f.OldMode, err)
	}
	changes[at] = &treeFile{path: at, mode: mode, hash: plumbing.NewHash(f.OldHash)}
	return nil
}

// withoutHunks rebuilds f from its old content with every hunk but the rejected ones.
func (r *Repo) withoutHunks(f FileDiff, rejected []int, changes map[string]*treeFile) error {
	if f.Binary {
		return fmt.Errorf("%s is binary: reject it whole, not by hunks", f.Path)
	}
	if f.OldPath != "" {
		return fmt.Errorf("%s was renamed from %s: reject the file whole, not by hunks", f.Path, f.OldPath)
	}
	take := map[int]bool{}
	for i := range f.Hunks {
		take[i] = true
	}
	for _, i := range rejected {
		if i < 0 || i >= len(f.Hunks) {
			return fmt.Errorf("%s has %d hunks; hunk %d does not exist", f.Path, len(f.Hunks), i)
		}
		delete(take, i)
	}
	if len(take) == 0 {
		return oldFile(f, changes)
	}
	var old []byte
	if f.OldHash != "" {
		var err error
		if old, err = r.readBlob(plumbing.NewHash(f.OldHash)); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return r.withHunks(f, old, take, changes)
}
