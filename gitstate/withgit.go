package gitstate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// This file is the CLI path of the policy in doc.go: the same jobs as scan.go, checkout.go and
// the diff's binary test, done by git itself, for repositories whose attributes or settings
// make git transform content.

// stageWithGit has git stage the whole worktree at into its own index (`git add -A`,
// through clean filters and eol conversion) and returns the tree `git write-tree` makes of it.
// Paths Setup copied in and repositories nested in the worktree are left out, as the scan
// leaves them out. Callers hold the lock.
func (r *Repo) stageWithGit(ctx context.Context, at gitAt, exclude []string) (plumbing.Hash, error) {
	out, err := runGit(ctx, at, nil, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("list untracked files: %w", err)
	}
	specs := []string{":/"}
	for _, p := range exclude {
		specs = append(specs, ":(top,exclude,literal)"+p)
	}
	for p := range strings.SplitSeq(out, "\x00") {
		if strings.HasSuffix(p, "/") { // git lists a nested repository as its directory
			specs = append(specs, ":(top,exclude,literal)"+strings.TrimSuffix(p, "/"))
		}
	}
	if _, err := runGit(ctx, at, nil, append([]string{"add", "-A", "--"}, specs...)...); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("stage: %w", err)
	}
	out, err = runGit(ctx, at, nil, "write-tree")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write tree: %w", err)
	}
	if h := strings.TrimSpace(out); plumbing.IsHash(h) {
		return plumbing.NewHash(h), nil
	}
	return plumbing.ZeroHash, fmt.Errorf("git write-tree printed %q, want a tree id", out)
}

// checkoutWithGit fills a prepared worktree (HEAD set, no index, no files) the way
// `git worktree add` does after registering it, through smudge filters and eol conversion.
// It reads objects and writes only the worktree's files and index, so it runs without the lock.
// (`git worktree add` runs `git reset --hard`; read-tree does the same checkout without
// rewriting the branch ref.)
func checkoutWithGit(ctx context.Context, at gitAt) error {
	if _, err := runGit(ctx, at, nil, "read-tree", "--reset", "-u", "HEAD"); err != nil {
		return fmt.Errorf("checkout: %w", err)
	}
	return nil
}

// uncommittedWithGit is [Repo.uncommitted] by `git status`, which compares content the way
// git stores it.
func uncommittedWithGit(ctx context.Context, at gitAt, exclude []string) ([]string, error) {
	out, err := runGit(ctx, at, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all")
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	var files []string
	for rec := range strings.SplitSeq(out, "\x00") {
		if len(rec) < 4 {
			continue
		}
		p := rec[3:]
		switch {
		case excludedBy(p, exclude):
		case strings.HasSuffix(p, "/"):
			files = append(files, p+" (a git repository of its own)")
		default:
			files = append(files, p)
		}
	}
	sort.Strings(files)
	return files, nil
}

// binaryFromGit makes d's binary verdicts git's, which follow the `binary`, `diff` and
// `-diff` attributes as well as content. Files git calls binary lose their hunks; files it
// calls text that the content test called binary get them. Callers hold the lock.
func (r *Repo) binaryFromGit(ctx context.Context, d *Diff) error {
	out, err := runGit(ctx, r.mainAt(), nil, "diff", "--numstat", "-z", "-M", "--no-ext-diff", "--no-color", d.Base, d.Head)
	if err != nil {
		return fmt.Errorf("git's numstat: %w", err)
	}
	binary := parseNumstatBinary(out)
	for i := range d.Files {
		f := &d.Files[i]
		isBin, ok := binary[f.Path]
		switch {
		case !ok || isBin == f.Binary:
		case isBin:
			f.Binary, f.Hunks, f.Additions, f.Deletions = true, nil, 0, 0
		default:
			if err := r.textHunks(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseNumstatBinary reads `git diff --numstat -z` into path → binary ("-" counts).
// Records are "A\tD\tpath\0", or "A\tD\t\0old\0new\0" for a rename.
func parseNumstatBinary(out string) map[string]bool {
	m := map[string]bool{}
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		counts, p, ok := cutLast(fields[i], "\t")
		if !ok {
			continue
		}
		if p == "" && i+2 < len(fields) {
			p = fields[i+2]
			i += 2
		}
		m[p] = strings.HasPrefix(counts, "-")
	}
	return m
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// textHunks diffs a file's two blobs as text.
func (r *Repo) textHunks(f *FileDiff) error {
	var sides [2][]byte
	for i, h := range []string{f.OldHash, f.NewHash} {
		if h == "" || strings.HasPrefix(f.OldMode, "16") && i == 0 || strings.HasPrefix(f.NewMode, "16") && i == 1 {
			continue
		}
		b, err := r.readBlob(plumbing.NewHash(h))
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		sides[i] = b
	}
	f.Binary = false
	f.Hunks, f.Additions, f.Deletions = hunks(string(sides[0]), string(sides[1]))
	return nil
}
