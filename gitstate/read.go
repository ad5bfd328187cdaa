package gitstate

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNotFound reports a path absent from a commit.
var ErrNotFound = errors.New("no such file")

// FileAt returns a file's content at a commit (or branch): a blob's bytes, or a symlink's target.
func (r *Repo) FileAt(ctx context.Context, rev, file string) ([]byte, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("file %s at %s: %w", file, rev, err)
	}
	defer unlock()
	b, err := r.fileAt(rev, file)
	if err != nil {
		return nil, fmt.Errorf("file %s at %s: %w", file, rev, err)
	}
	return b, nil
}

func (r *Repo) fileAt(rev, file string) ([]byte, error) {
	p := path.Clean(filepath.ToSlash(file))
	if p == "." || path.IsAbs(p) || p == ".." || len(p) > 2 && p[:3] == "../" {
		return nil, fmt.Errorf("path %q: want a file path relative to the repository root", file)
	}
	h, err := r.resolve(rev)
	if err != nil {
		return nil, err
	}
	c, err := r.git.CommitObject(h)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	e, err := tree.FindEntry(p)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	switch e.Mode {
	case filemode.Dir:
		return nil, fmt.Errorf("%s is a directory", p)
	case filemode.Submodule:
		return []byte("Subproject commit " + e.Hash.String() + "\n"), nil
	}
	return r.readBlob(e.Hash)
}

// MergeBase returns a best common ancestor of two commits or branches.
func (r *Repo) MergeBase(ctx context.Context, a, b string) (string, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", fmt.Errorf("merge-base %s %s: %w", a, b, err)
	}
	defer unlock()
	ha, err := r.resolve(a)
	if err != nil {
		return "", fmt.Errorf("merge-base %s %s: %w", a, b, err)
	}
	hb, err := r.resolve(b)
	if err != nil {
		return "", fmt.Errorf("merge-base %s %s: %w", a, b, err)
	}
	mb, err := r.mergeBase(ha, hb)
	if err != nil {
		return "", fmt.Errorf("merge-base %s %s: %w", a, b, err)
	}
	return mb.String(), nil
}

// DiffCommits diffs two commits directly, without a merge-base: the change of one turn when
// from and to are consecutive checkpoints, or of a range of turns.
func (r *Repo) DiffCommits(ctx context.Context, from, to string) (*Diff, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	defer unlock()
	hf, err := r.resolve(from)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	ht, err := r.resolve(to)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	d, err := r.diffCommits(ctx, hf, ht)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", from, to, err)
	}
	return d, nil
}
