package gitstate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// selectChange returns a commit on top of base holding the chosen part of head's change (head
// itself for a whole session), and the paths it touches.
func (r *Repo) selectChange(ctx context.Context, base, head plumbing.Hash, o AcceptOptions) (plumbing.Hash, []string, error) {
	d, err := r.diffCommits(ctx, base, head)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	whole := o.Files == nil && o.Hunks == nil
	wanted := map[string]bool{}
	for _, f := range o.Files {
		wanted[f] = true
	}
	known := map[string]bool{}
	for _, f := range d.Files {
		known[f.Path] = true
	}
	for f := range wanted {
		if !known[f] {
			return plumbing.ZeroHash, nil, fmt.Errorf("%s is not changed by the session", f)
		}
	}
	for f := range o.Hunks {
		if !known[f] {
			return plumbing.ZeroHash, nil, fmt.Errorf("%s is not changed by the session", f)
		}
	}
	// Deletions first, so a type change (deleted + added at one path) ends as the addition.
	files := append([]FileDiff(nil), d.Files...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Status == Deleted && files[j].Status != Deleted })
	changes := map[string]*treeFile{}
	involved := map[string]bool{}
	for _, f := range files {
		switch {
		case whole || wanted[f.Path]:
			if err := wholeFile(f, changes); err != nil {
				return plumbing.ZeroHash, nil, err
			}
		case o.Hunks[f.Path] != nil:
			if err := r.someHunks(f, o.Hunks[f.Path], changes); err != nil {
				return plumbing.ZeroHash, nil, err
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
	if whole {
		return head, paths, nil
	}
	baseCommit, err := r.git.CommitObject(base)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	tree, err := r.buildTree(baseCommit.TreeHash, changes)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if tree.IsZero() {
		if tree, err = r.writeTree(nil); err != nil {
			return plumbing.ZeroHash, nil, err
		}
	}
	c, err := r.commit(tree, "arbor: selected changes of "+head.String(), base)
	return c, paths, err
}

func wholeFile(f FileDiff, changes map[string]*treeFile) error {
	if f.OldPath != "" {
		changes[f.OldPath] = nil
	}
	if f.Status == Deleted {
		changes[f.Path] = nil
		return nil
	}
	mode, err := filemode.New(f.NewMode)
	if err != nil {
		return fmt.Errorf("%s: mode %q: %w", f.Path, f.NewMode, err)
	}
	changes[f.Path] = &treeFile{path: f.Path, mode: mode, hash: plumbing.NewHash(f.NewHash)}
	return nil
}

// someHunks applies the chosen hunks of f to its old content.
func (r *Repo) someHunks(f FileDiff, chosen []int, changes map[string]*treeFile) error {
	if f.Binary {
		return fmt.Errorf("%s is binary: accept it whole, not by hunks", f.Path)
	}
	var old []byte
	if f.OldHash != "" {
		var err error
		if old, err = r.readBlob(plumbing.NewHash(f.OldHash)); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	take := map[int]bool{}
	for _, i := range chosen {
		if i < 0 || i >= len(f.Hunks) {
			return fmt.Errorf("%s has %d hunks; hunk %d does not exist", f.Path, len(f.Hunks), i)
		}
		take[i] = true
	}
	if f.OldPath != "" {
		changes[f.OldPath] = nil
	}
	if f.Status == Deleted && len(take) == len(f.Hunks) {
		changes[f.Path] = nil
		return nil
	}
	return r.withHunks(f, old, take, changes)
}

// withHunks puts f at its path as its old content with the hunks in take applied.
func (r *Repo) withHunks(f FileDiff, old []byte, take map[int]bool, changes map[string]*treeFile) error {
	content := applyHunks(string(old), f.Hunks, take)
	m := f.NewMode
	if m == "" {
		m = f.OldMode
	}
	mode, err := filemode.New(m)
	if err != nil {
		return fmt.Errorf("%s: mode %q: %w", f.Path, m, err)
	}
	h, err := r.writeBlob([]byte(content))
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	changes[f.Path] = &treeFile{path: f.Path, mode: mode, hash: h}
	return nil
}

// applyHunks rebuilds a file from old with the hunks in take applied and the others left out.
func applyHunks(old string, hunks []Hunk, take map[int]bool) string {
	lines := strings.SplitAfter(old, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	pos := 0 // old lines consumed
	for i, h := range hunks {
		if !take[i] {
			continue
		}
		start := h.OldStart - 1
		if h.OldLines == 0 {
			start = h.OldStart // an insertion after line OldStart
		}
		for ; pos < start && pos < len(lines); pos++ {
			b.WriteString(lines[pos])
		}
		for j, l := range h.Lines {
			if l == noEOL || l[0] == '-' {
				continue
			}
			b.WriteString(l[1:])
			if j+1 >= len(h.Lines) || h.Lines[j+1] != noEOL {
				b.WriteByte('\n')
			}
		}
		pos = start + h.OldLines
	}
	for ; pos < len(lines); pos++ {
		b.WriteString(lines[pos])
	}
	return b.String()
}
