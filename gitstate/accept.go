package gitstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// AcceptOptions says what of a session to bring onto a branch, and how.
type AcceptOptions struct {
	// Head is the session's branch or the commit that was reviewed (Diff.Head).
	Head string
	// Into is the worktree whose current branch receives the change: "" for the user's main
	// worktree, or a session's linked worktree (a child merged into its parent).
	Into string
	// Files limits the change to these paths (new paths for renames); nil with no Hunks takes all.
	Files []string
	// Hunks takes only some hunks of a file: path → indexes into that file's Diff hunks.
	Hunks map[string][]int
	// Base, when set, is the merge-base the review saw (Diff.Base); Accept refuses if it moved,
	// since hunk indexes would then point at different hunks.
	Base string
	// From, when set, is the session's accepted point (see [AcceptedPrefix]): the review was
	// of From..Head, so files and hunks are chosen from that diff; Base is not checked.
	From string
	// Merge records a merge commit with the session as second parent instead of one squashed
	// commit. Only for whole sessions.
	Merge bool
	// Message is the commit message; required for a squash.
	Message string
	// Resolutions settle a merge's conflicts: path → the content the user resolved it to.
	// Every conflicted file needs one, or a Take (those left are a ConflictError again); one
	// for a path that does not conflict, or that still has conflict markers, is refused.
	Resolutions map[string][]byte
	// Take settles a conflicted file by taking one side whole: "ours" (the receiving branch's
	// version) or "theirs" (the merged one's); a side without the file deletes it. For binary
	// files, deletions and symlinks, which content cannot say.
	Take map[string]string

	expectInto, expectHead string // Merge's Resolutions.ParentHead and ChildHead
}

// Validate reports options that cannot work.
func (o AcceptOptions) Validate() error {
	if o.Head == "" {
		return errors.New("accept: no session head given")
	}
	if o.Merge && (o.Files != nil || o.Hunks != nil) {
		return errors.New("accept: a merge takes the whole session; choose files or hunks with a squash")
	}
	if !o.Merge && strings.TrimSpace(o.Message) == "" {
		return errors.New("accept: a squash needs a commit message")
	}
	return nil
}

// AcceptResult is what Accept committed.
type AcceptResult struct {
	Commit string   // the new commit on the target branch
	Branch string   // the target branch
	Files  []string // paths the commit changed
	// Selected is the commit holding the reviewed diff's start with the accepted part
	// applied: the session's next accepted point.
	Selected string
}

// ConflictError lists the files a three-way merge could not reconcile. Nothing was changed.
type ConflictError struct {
	Into  string
	Files []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merging into %s conflicts in %d file(s): %s; nothing was changed", e.Into, len(e.Files), strings.Join(e.Files, ", "))
}

// Accept brings a session's change (whole, some files, or some hunks) onto the current branch
// of the user's worktree (or of another session's worktree, see [Repo.Merge]) as one squashed
// commit or a merge commit. The change is merged three-way against the target's tip, so work
// that landed there meanwhile is kept. It refuses with a [DirtyError] when the target has
// uncommitted changes in the files involved, and with a [ConflictError] listing files when the
// merge conflicts; in both cases the target's files, index and branch are left as they were.
// With no git identity to sign the commit it fails first, with [ErrNoIdentity].
func (r *Repo) Accept(ctx context.Context, o AcceptOptions) (*AcceptResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("accept %s: %w", o.Head, err)
	}
	defer unlock()
	// Into a session's worktree, accept reads it (git status) and writes it (git read-tree -u)
	// by path.
	var res *AcceptResult
	err = r.frozen(ctx, o.Into, func() (err error) {
		res, err = r.accept(ctx, o)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("accept %s: %w", o.Head, err)
	}
	r.logger.Info("accepted", "head", o.Head, "into", res.Branch, "commit", res.Commit, "files", len(res.Files), "merge", o.Merge)
	return res, nil
}

// Resolutions settle a merge's conflicts as the user resolved them (see AcceptOptions), for
// the versions they saw: when ParentHead or ChildHead is set and that branch has moved since,
// the merge is refused (the conflicts may be others now).
type Resolutions struct {
	Content               map[string][]byte
	Take                  map[string]string
	ParentHead, ChildHead string
}

// Merge brings a child session's branch into the parent session's worktree at parentDir as a
// merge commit, its conflicts settled by res (zero when there are none). Checkpoint the parent
// first: uncommitted changes in involved files refuse it.
func (r *Repo) Merge(ctx context.Context, child, parentDir, message string, res Resolutions) (*AcceptResult, error) {
	if message == "" {
		message = "Merge " + child
	}
	return r.Accept(ctx, AcceptOptions{Head: child, Into: parentDir, Merge: true, Message: message,
		Resolutions: res.Content, Take: res.Take, expectInto: res.ParentHead, expectHead: res.ChildHead})
}

func (r *Repo) accept(ctx context.Context, o AcceptOptions) (*AcceptResult, error) {
	at := r.mainAt()
	if o.Into != "" {
		l, err := r.linkedWorktree(o.Into)
		if err != nil {
			return nil, err
		}
		at = r.linkedAt(l.dir, l.admin)
	}
	dir, headFile := at.work, filepath.Join(at.gitDir, "HEAD")
	if err := checkIdentity(ctx, at); err != nil {
		return nil, err
	}
	if err := r.checkNoOperation(dir, filepath.Dir(headFile)); err != nil {
		return nil, err
	}
	branch, target, err := r.headAt(headFile)
	if err != nil {
		return nil, err
	}
	if branch == "" {
		return nil, fmt.Errorf("%s has a detached HEAD; check out the branch to accept onto", dir)
	}
	head, err := r.resolve(o.Head)
	if err != nil {
		return nil, err
	}
	if o.expectInto != "" && o.expectInto != target.String() {
		return nil, fmt.Errorf("%w: %s moved since the conflicts you resolved (%.10s, now %.10s); look at them again", ErrBadResolution, branch.Short(), o.expectInto, target)
	}
	if o.expectHead != "" && o.expectHead != head.String() {
		return nil, fmt.Errorf("%w: %s moved since the conflicts you resolved (%.10s, now %.10s); look at them again", ErrBadResolution, o.Head, o.expectHead, head)
	}
	mb, err := r.mergeBase(target, head)
	if err != nil {
		return nil, err
	}
	from := mb
	if o.From != "" {
		if from, err = r.resolve(o.From); err != nil {
			return nil, err
		}
	} else if o.Base != "" && o.Base != mb.String() {
		return nil, fmt.Errorf("the review is out of date: the merge-base moved from %s to %s; diff again", o.Base, mb)
	}
	if mb == head {
		return nil, fmt.Errorf("%s has nothing to accept: it is already contained in %s", o.Head, branch.Short())
	}
	selected, files, err := r.selectChange(ctx, from, head, o)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("the selection changes nothing")
	}
	if dirty, err := r.dirtyAmong(ctx, at, files); err != nil {
		return nil, err
	} else if len(dirty) > 0 {
		return nil, &DirtyError{Dir: dir, Files: dirty}
	}
	var tree string
	if o.From != "" && from != mb {
		// Merge over the accepted point, not the old merge-base: what the user took before
		// is the common ground, so their edits since and the agent's new edits of those lines
		// merge as changes from there.
		tree, err = r.mergeOver(ctx, at, from, target, selected)
	} else {
		tree, err = r.mergeTrees(ctx, at, target, mb, selected, o.Resolutions, o.Take)
	}
	if err != nil {
		return nil, err
	}
	args := []string{"commit-tree", tree, "-p", target.String()}
	if o.Merge {
		args = append(args, "-p", head.String())
	}
	out, err := runGit(ctx, at, []byte(ensureNewline(o.Message)), append(args, "-F", "-")...)
	if err != nil {
		return nil, err
	}
	commit := strings.TrimSpace(out)
	if err := r.advance(ctx, at, branch, target, commit, "arbor: accept "+o.Head); err != nil {
		return nil, err
	}
	return &AcceptResult{Commit: commit, Branch: branch.Short(), Files: files, Selected: selected.String()}, nil
}

func ensureNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// checkNoOperation refuses while a merge, rebase, cherry-pick or revert is in progress in the
// target worktree: its index then holds the user's half-finished work.
func (r *Repo) checkNoOperation(dir, gitDir string) error {
	for _, f := range []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(filepath.Join(gitDir, f)); err == nil {
			return fmt.Errorf("%s is in the middle of a git operation (%s exists); finish or abort it first", dir, f)
		}
	}
	return nil
}

// dirtyAmong returns which of files have uncommitted changes (staged, unstaged or untracked) in
// the worktree at dir, or exist there as ignored files — the user's, which checking the change
// out would overwrite.
func (r *Repo) dirtyAmong(ctx context.Context, at gitAt, files []string) ([]string, error) {
	dir := at.work
	out, err := runGit(ctx, at, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching", "--no-renames", "--ignore-submodules=all")
	if err != nil {
		return nil, err
	}
	involved := map[string]bool{}
	for _, f := range files {
		involved[f] = true
	}
	found := map[string]bool{}
	for _, rec := range strings.Split(out, "\x00") {
		if len(rec) < 4 {
			continue
		}
		p := rec[3:]
		if involved[p] {
			found[p] = true
		}
		if strings.HasPrefix(rec, "!! ") && strings.HasSuffix(p, "/") {
			// An ignored directory: the involved files inside it that exist are the user's.
			for _, f := range files {
				if strings.HasPrefix(f, p) {
					if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
						found[f] = true
					}
				}
			}
		}
	}
	dirty := make([]string, 0, len(found))
	for p := range found {
		dirty = append(dirty, p)
	}
	sort.Strings(dirty)
	return dirty, nil
}

// mergeTrees merges selected into target three-way over base and returns the tree, or a
// ConflictError naming the conflicted files that resolutions do not settle. When target is
// base the selection applies as it is.
func (r *Repo) mergeTrees(ctx context.Context, at gitAt, target, base, selected plumbing.Hash, resolutions map[string][]byte, take map[string]string) (string, error) {
	if target == base && len(resolutions) == 0 && len(take) == 0 {
		c, err := r.git.CommitObject(selected)
		if err != nil {
			return "", err
		}
		return c.TreeHash.String(), nil
	}
	tree, conflicted, err := r.mergeTree(ctx, at, target, selected)
	if err != nil {
		return "", err
	}
	inConflict := map[string]bool{}
	for _, f := range conflicted {
		inConflict[f] = true
	}
	var paths []string
	for p := range resolutions {
		paths = append(paths, p)
	}
	for p := range take {
		if _, both := resolutions[p]; both {
			return "", fmt.Errorf("%w: %s is given both a resolution and a side to take", ErrBadResolution, p)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !inConflict[p] {
			return "", fmt.Errorf("%w: a resolution for %s, which does not conflict (conflicted: %s)", ErrBadResolution, p, orNone(conflicted))
		}
		if side, ok := take[p]; ok && side != "ours" && side != "theirs" {
			return "", fmt.Errorf("%w: take %q for %s: want \"ours\" or \"theirs\"", ErrBadResolution, side, p)
		}
		if hasConflictMarkers(resolutions[p]) {
			return "", fmt.Errorf("%w: the resolution of %s still has conflict markers (<<<<<<<, =======, >>>>>>>)", ErrBadResolution, p)
		}
	}
	var left []string
	for _, f := range conflicted {
		_, resolved := resolutions[f]
		_, taken := take[f]
		if !resolved && !taken {
			left = append(left, f)
		}
	}
	if len(left) > 0 {
		return "", &ConflictError{Into: at.work, Files: left}
	}
	if len(paths) == 0 {
		return tree, nil
	}
	// Every conflict is resolved: the merged tree with the user's versions of those files.
	changes := map[string]*treeFile{}
	for _, p := range paths {
		if side, ok := take[p]; ok {
			from := target
			if side == "theirs" {
				from = selected
			}
			e, err := r.entryAt(from, p)
			if err != nil {
				return "", err
			}
			changes[p] = e // nil: that side has no such file
			continue
		}
		h, err := r.writeBlob(resolutions[p])
		if err != nil {
			return "", err
		}
		mode := filemode.Regular
		if m, err := r.modeIn(plumbing.NewHash(tree), p); err == nil && (m == filemode.Executable || m == filemode.Symlink) {
			mode = m
		}
		changes[p] = &treeFile{path: p, mode: mode, hash: h}
	}
	t, err := r.buildTree(plumbing.NewHash(tree), changes)
	if err != nil {
		return "", err
	}
	return t.String(), nil
}

// ErrBadResolution is a merge resolution that cannot be taken (the message says why).
var ErrBadResolution = errors.New("bad merge resolution")

// mergeTree runs git's three-way merge of two commits without touching a worktree: the
// merged tree (with conflict markers in the conflicted files) and the conflicted paths.
func (r *Repo) mergeTree(ctx context.Context, at gitAt, ours, theirs plumbing.Hash) (string, []string, error) {
	out, err := runGit(ctx, at, nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours.String(), theirs.String())
	fields := strings.Split(out, "\x00")
	if err != nil && exitCode(err) == 1 {
		seen := map[string]bool{}
		var files []string
		for _, f := range fields[1:] {
			if f != "" && !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
		return fields[0], files, nil
	}
	if err != nil {
		return "", nil, err
	}
	return fields[0], nil, nil
}

func hasConflictMarkers(b []byte) bool {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") {
			return true
		}
	}
	return false
}

func orNone(files []string) string {
	if len(files) == 0 {
		return "none"
	}
	return strings.Join(files, ", ")
}

// testHookAdvanced runs between the worktree update and the branch move of an advance.
var testHookAdvanced func()

// advance moves branch from old to new and brings the worktree's files and index along, the way
// a fast-forward does: read-tree refuses before writing anything if a local change would be
// overwritten. The branch moves by compare-and-swap; if that fails the files are put back.
//
// Cancelling ctx stops an advance only before it starts: once the files begin to change it
// goes through (or puts them back) whatever happens to ctx, since a client's cancel must never
// leave the user's worktree half-updated with the branch where it was.
func (r *Repo) advance(ctx context.Context, at gitAt, branch plumbing.ReferenceName, old plumbing.Hash, commit, reason string) error {
	dir := at.work
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("update %s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if _, err := runGit(ctx, at, nil, "read-tree", "-m", "-u", old.String(), commit); err != nil {
		return fmt.Errorf("update %s: %w", dir, err)
	}
	if testHookAdvanced != nil {
		testHookAdvanced()
	}
	if _, err := runGit(ctx, at, nil, "update-ref", "-m", reason, branch.String(), commit, old.String()); err != nil {
		if _, rerr := runGit(ctx, at, nil, "read-tree", "-m", "-u", commit, old.String()); rerr != nil {
			return fmt.Errorf("%w (and restoring the worktree failed: %v)", err, rerr)
		}
		return err
	}
	return nil
}

// modeIn is the mode of path in tree.
func (r *Repo) modeIn(tree plumbing.Hash, p string) (filemode.FileMode, error) {
	t, err := object.GetTree(r.git.Storer, tree)
	if err != nil {
		return 0, err
	}
	e, err := t.FindEntry(p)
	if err != nil {
		return 0, err
	}
	return e.Mode, nil
}

// ConflictFile is one file of a conflicted merge in its versions: Base at the merge-base, Ours
// in the receiving branch, Theirs in the merged one, Merged as git merges it, with conflict
// markers. A version that does not exist is nil.
type ConflictFile struct {
	Path                       string
	Base, Ours, Theirs, Merged []byte
	Binary                     bool
}

// Conflicts lists the files merging child into the branch of the worktree at dir would
// conflict in, each in its versions; none when the merge is clean. Nothing is changed. The
// heads are the commits compared: pass them back in Resolutions.
func (r *Repo) Conflicts(ctx context.Context, child, dir string) (files []ConflictFile, parentHead, childHead string, err error) {
	files, ph, ch, err := r.conflicts(ctx, child, dir)
	return files, ph.String(), ch.String(), err
}

func (r *Repo) conflicts(ctx context.Context, child, dir string) ([]ConflictFile, plumbing.Hash, plumbing.Hash, error) {
	z := plumbing.ZeroHash
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, z, z, err
	}
	defer unlock()
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return nil, z, z, err
	}
	_, target, err := r.headAt(filepath.Join(l.admin, "HEAD"))
	if err != nil {
		return nil, z, z, err
	}
	head, err := r.resolve(child)
	if err != nil {
		return nil, z, z, err
	}
	mb, err := r.mergeBase(target, head)
	if err != nil {
		return nil, z, z, err
	}
	tree, files, err := r.mergeTree(ctx, r.linkedAt(l.dir, l.admin), target, head)
	if err != nil {
		return nil, z, z, err
	}
	read := func(t plumbing.Hash, p string) []byte {
		tr, err := object.GetTree(r.git.Storer, t)
		if err != nil {
			return nil
		}
		f, err := tr.File(p)
		if err != nil {
			return nil
		}
		s, err := f.Contents()
		if err != nil {
			return nil
		}
		return []byte(s)
	}
	treeOf := func(c plumbing.Hash) plumbing.Hash {
		co, err := r.git.CommitObject(c)
		if err != nil {
			return plumbing.ZeroHash
		}
		return co.TreeHash
	}
	var out []ConflictFile
	for _, p := range files {
		cf := ConflictFile{Path: p, Base: read(treeOf(mb), p), Ours: read(treeOf(target), p),
			Theirs: read(treeOf(head), p), Merged: read(plumbing.NewHash(tree), p)}
		for _, v := range [][]byte{cf.Base, cf.Ours, cf.Theirs} {
			if bytes.IndexByte(v, 0) >= 0 {
				cf.Binary = true
			}
		}
		out = append(out, cf)
	}
	return out, target, head, nil
}

// entryAt is path's entry in commit c's tree, nil when it has none.
func (r *Repo) entryAt(c plumbing.Hash, p string) (*treeFile, error) {
	co, err := r.git.CommitObject(c)
	if err != nil {
		return nil, err
	}
	t, err := object.GetTree(r.git.Storer, co.TreeHash)
	if err != nil {
		return nil, err
	}
	e, err := t.FindEntry(p)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &treeFile{path: p, mode: e.Mode, hash: e.Hash}, nil
}

// mergeOver merges selected into target three-way over base's tree, whatever their history
// says: stand-in commits with base's tree as their one parent carry target's and selected's
// trees to git's merge. Conflicts are a ConflictError.
func (r *Repo) mergeOver(ctx context.Context, at gitAt, base, target, selected plumbing.Hash) (string, error) {
	treeOf := func(c plumbing.Hash) (plumbing.Hash, error) {
		co, err := r.git.CommitObject(c)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return co.TreeHash, nil
	}
	bt, err := treeOf(base)
	if err != nil {
		return "", err
	}
	tt, err := treeOf(target)
	if err != nil {
		return "", err
	}
	st, err := treeOf(selected)
	if err != nil {
		return "", err
	}
	x, err := r.commit(bt, "arbor: accepted point")
	if err != nil {
		return "", err
	}
	o, err := r.commit(tt, "arbor: target", x)
	if err != nil {
		return "", err
	}
	t, err := r.commit(st, "arbor: selection", x)
	if err != nil {
		return "", err
	}
	tree, conflicted, err := r.mergeTree(ctx, at, o, t)
	if err != nil {
		return "", err
	}
	if len(conflicted) > 0 {
		return "", &ConflictError{Into: at.work, Files: conflicted}
	}
	return tree, nil
}
