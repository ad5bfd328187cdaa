package gitstate

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Diff is a session's change: Head against the merge-base of the base and head revisions, so
// commits that land on the user's branch later never show up as the session's work.
type Diff struct {
	Base  string     `json:"base"`  // the merge-base commit the diff starts from
	Head  string     `json:"head"`  // the head commit
	Files []FileDiff `json:"files"` // sorted by path
}

// FileDiff is one file's change. Status is added, modified, deleted or renamed; a file that
// changed type (file ↔ symlink) appears as a deletion and an addition, as in `git diff`.
type FileDiff struct {
	Path      string `json:"path"`
	OldPath   string `json:"oldPath,omitempty"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary"`
	Hunks     []Hunk `json:"hunks,omitempty"`
	OldMode   string `json:"oldMode,omitempty"` // octal git mode, "" when absent (added)
	NewMode   string `json:"newMode,omitempty"` // octal git mode, "" when absent (deleted)
	OldHash   string `json:"oldHash,omitempty"` // blob ids, for fetching content and for `git apply`
	NewHash   string `json:"newHash,omitempty"`
}

// Hunk is one region of change with up to three lines of context around it. Header is the whole
// "@@ -a,b +c,d @@ context" line. Each of Lines starts with ' ', '+' or '-', except the marker
// `\ No newline at end of file`, which follows the line it qualifies, as in git.
type Hunk struct {
	OldStart int      `json:"oldStart"`
	OldLines int      `json:"oldLines"`
	NewStart int      `json:"newStart"`
	NewLines int      `json:"newLines"`
	Header   string   `json:"header"`
	Lines    []string `json:"lines"`
}

// File statuses.
const (
	Added    = "added"
	Modified = "modified"
	Deleted  = "deleted"
	Renamed  = "renamed"
)

// Diff returns head's change against merge-base(base, head). base and head are commits or
// branch names.
func (r *Repo) Diff(ctx context.Context, base, head string) (*Diff, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("diff %s...%s: %w", base, head, err)
	}
	defer unlock()
	d, err := r.diff(ctx, base, head)
	if err != nil {
		return nil, fmt.Errorf("diff %s...%s: %w", base, head, err)
	}
	return d, nil
}

func (r *Repo) diff(ctx context.Context, base, head string) (*Diff, error) {
	b, err := r.resolve(base)
	if err != nil {
		return nil, err
	}
	h, err := r.resolve(head)
	if err != nil {
		return nil, err
	}
	mb, err := r.mergeBase(b, h)
	if err != nil {
		return nil, err
	}
	return r.diffCommits(ctx, mb, h)
}

// mergeBase returns a best common ancestor of two commits. Callers hold the lock.
func (r *Repo) mergeBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	if a == b {
		return a, nil
	}
	ca, err := r.git.CommitObject(a)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", a, err)
	}
	cb, err := r.git.CommitObject(b)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("commit %s: %w", b, err)
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("merge-base of %s and %s: %w", a, b, err)
	}
	if len(bases) == 0 {
		return plumbing.ZeroHash, fmt.Errorf("%s and %s have no common ancestor", a, b)
	}
	return bases[0].Hash, nil
}

// diffCommits diffs two commits directly (no merge-base). Callers hold the lock.
func (r *Repo) diffCommits(ctx context.Context, from, to plumbing.Hash) (*Diff, error) {
	var trees [2]plumbing.Hash
	for i, c := range []plumbing.Hash{from, to} {
		commit, err := r.git.CommitObject(c)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c, err)
		}
		trees[i] = commit.TreeHash
	}
	var changes []pathChange
	if err := r.diffTrees(ctx, trees[0], trees[1], "", &changes); err != nil {
		return nil, fmt.Errorf("compare trees: %w", err)
	}
	changes = r.detectRenames(changes)
	d := &Diff{Base: from.String(), Head: to.String(), Files: []FileDiff{}} // [] not null in JSON
	for _, c := range changes {
		fds, err := r.fileDiffs(c)
		if err != nil {
			return nil, err
		}
		d.Files = append(d.Files, fds...)
	}
	sort.SliceStable(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	if why, err := r.diffReason(ctx); err != nil {
		return nil, err
	} else if why != "" && len(d.Files) > 0 {
		if err := r.binaryFromGit(ctx, d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// fileDiffs turns one path change into file diffs (two for a change of type between file and
// symlink, as git shows it).
func (r *Repo) fileDiffs(c pathChange) ([]FileDiff, error) {
	if c.from.Mode != 0 && c.to.Mode != 0 && isLink(c.from.Mode) != isLink(c.to.Mode) {
		del, err := r.fileDiff(c.fromPath, c.from, c.toPath, object.TreeEntry{})
		if err != nil {
			return nil, err
		}
		add, err := r.fileDiff(c.fromPath, object.TreeEntry{}, c.toPath, c.to)
		return []FileDiff{del, add}, err
	}
	fd, err := r.fileDiff(c.fromPath, c.from, c.toPath, c.to)
	return []FileDiff{fd}, err
}

func isLink(m filemode.FileMode) bool { return m == filemode.Symlink }

func (r *Repo) fileDiff(fromPath string, from object.TreeEntry, toPath string, to object.TreeEntry) (FileDiff, error) {
	fd := FileDiff{Path: toPath}
	switch {
	case from.Mode == 0:
		fd.Status = Added
	case to.Mode == 0:
		fd.Status, fd.Path = Deleted, fromPath
	case fromPath != toPath:
		fd.Status, fd.OldPath = Renamed, fromPath
	default:
		fd.Status = Modified
	}
	old, err := r.sideContent(from, &fd.OldMode, &fd.OldHash)
	if err != nil {
		return fd, fmt.Errorf("%s: %w", fromPath, err)
	}
	cur, err := r.sideContent(to, &fd.NewMode, &fd.NewHash)
	if err != nil {
		return fd, fmt.Errorf("%s: %w", toPath, err)
	}
	if isBinary(old) || isBinary(cur) {
		fd.Binary = true
		return fd, nil
	}
	if fd.OldHash != fd.NewHash {
		fd.Hunks, fd.Additions, fd.Deletions = hunks(string(old), string(cur))
	}
	return fd, nil
}

// sideContent reads one side of a change: blob content, a symlink's target, or a gitlink's
// "Subproject commit" line as git prints it.
func (r *Repo) sideContent(e object.TreeEntry, mode, hash *string) ([]byte, error) {
	if e.Mode == 0 {
		return nil, nil
	}
	*mode = fmt.Sprintf("%06o", uint32(e.Mode))
	*hash = e.Hash.String()
	if e.Mode == filemode.Submodule {
		return []byte("Subproject commit " + e.Hash.String() + "\n"), nil
	}
	return r.readBlob(e.Hash)
}

// isBinary uses git's rule: a NUL byte in the first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}
