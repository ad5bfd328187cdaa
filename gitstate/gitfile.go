package gitstate

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// A linked worktree's .git file is written by gitstate and rewritten by whatever runs in the
// worktree: a sandboxed cell can write every file there. So gitstate never reads it to learn
// where the worktree's git dir is. It finds the admin dir in its own record of the worktree
// (or, for a worktree it did not make, in git's registration of it in the common dir: the
// admin dir's gitdir file), both in the common dir, which no sandbox can write; it gives that
// to git explicitly (see [gitAt]); and before working on the worktree it puts the .git file
// back to exactly what it wrote, so that the user's own git in the worktree goes where
// gitstate does.

// linked is a linked worktree as gitstate knows it.
type linked struct {
	dir, admin string
	rec        *record // nil for a worktree gitstate did not make (the user's own)
}

func (l linked) name() string { return filepath.Base(l.admin) }

// exclude is what Setup put into the worktree: never part of a checkpoint.
func (l linked) exclude() []string {
	if l.rec == nil {
		return nil
	}
	return l.rec.Exclude
}

// gitFileFor is the .git file gitstate writes into the linked worktree whose admin dir is admin.
func gitFileFor(admin string) []byte { return []byte("gitdir: " + admin + "\n") }

// linkedWorktree finds the linked worktree at dir and restores its .git file (see above).
func (r *Repo) linkedWorktree(dir string) (linked, error) {
	dir = filepath.Clean(dir)
	l, ok := r.findLinked(dir)
	if !ok {
		return linked{}, fmt.Errorf("%s is not a linked worktree of %s (no worktree of the repository is registered there)", dir, r.root)
	}
	if err := r.restoreGitFile(l); err != nil {
		return linked{}, err
	}
	return l, nil
}

// GitFile returns the path of the .git file of the linked worktree at dir, after putting it
// back to exactly what gitstate wrote if something changed it. Call it right before giving
// the worktree to a sandbox, to bind that file read-only: the path is then a regular file
// with that content, not a link the code that ran there last left.
func (r *Repo) GitFile(dir string) (string, error) {
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return "", fmt.Errorf("the .git file of %s: %w", dir, err)
	}
	return filepath.Join(l.dir, ".git"), nil
}

// findLinked looks dir up in gitstate's records (by the worktree's name first: gitstate's
// worktrees are named as their directories are), then in git's registrations.
func (r *Repo) findLinked(dir string) (linked, bool) {
	rec, err := r.readRecord(filepath.Base(dir))
	ok := err == nil && filepath.Clean(rec.Dir) == dir
	if !ok {
		rec, ok = r.recordAt(dir)
	}
	if ok && r.registeredAt(rec.Name, dir) {
		return linked{dir: dir, admin: r.adminDir(rec.Name), rec: &rec}, true
	}
	if admin := r.adminFor(dir); admin != "" {
		l := linked{dir: dir, admin: admin}
		if rec, err := r.readRecord(filepath.Base(admin)); err == nil {
			l.rec = &rec
		}
		return l, true
	}
	return linked{}, false
}

// registeredAt reports whether the admin dir of the worktree named name points back at dir.
func (r *Repo) registeredAt(name, dir string) bool {
	b, err := os.ReadFile(filepath.Join(r.adminDir(name), "gitdir"))
	return err == nil && filepath.Clean(strings.TrimSpace(string(b))) == filepath.Join(dir, ".git")
}

// restoreGitFile makes l's .git file what gitstate wrote, whatever replaced it: other
// content, a symlink, nothing. A directory there (`git init` run in the worktree) may hold
// commits of its own, so it is refused, not removed. A worktree whose directory is gone is
// left alone.
func (r *Repo) restoreGitFile(l linked) error {
	p := filepath.Join(l.dir, ".git")
	want := gitFileFor(l.admin)
	got, err := readGitFileBytes(p)
	if err == nil && bytes.Equal(got, want) {
		return nil
	}
	if _, derr := os.Lstat(l.dir); derr != nil {
		return nil
	}
	found := "nothing"
	if fi, lerr := os.Lstat(p); lerr == nil {
		switch {
		case fi.IsDir():
			return fmt.Errorf("worktree %s: its .git is a directory (a repository made there), not the file that links it to %s; "+
				"move %s out of the worktree and try again", l.dir, l.admin, p)
		case fi.Mode()&fs.ModeSymlink != 0:
			found = "a symlink"
		case err == nil:
			found = fmt.Sprintf("%.200q", got)
		default:
			found = fi.Mode().String()
		}
	}
	if err := replaceFile(p, want); err != nil {
		return fmt.Errorf("worktree %s: restore its .git file (it held %s): %w", l.dir, found, err)
	}
	r.logger.Warn("restored a worktree's .git file that was changed from what gitstate wrote", "file", p, "found", found)
	return nil
}

// readGitFileBytes reads a .git file that may have been replaced, never following a symlink,
// blocking on a FIFO or reading more than a .git file holds.
func readGitFileBytes(p string) ([]byte, error) {
	f, err := openNoFollow(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// replaceFile puts a new file with data at p by renaming a fresh one over it, so that a
// symlink at p, or one raced into its place, is replaced rather than written through.
func replaceFile(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".git.tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ownBranch refuses a checkpoint onto a branch that is not the worktree's own. That is the
// branch its record names, or, for one the user switched it to by hand (its HEAD is in the
// common dir, out of a sandbox's reach), a branch no other worktree has checked out and no
// other session records as its own.
func (r *Repo) ownBranch(l linked, branch plumbing.ReferenceName) error {
	if l.rec != nil && plumbing.NewBranchReferenceName(l.rec.Branch) == branch {
		return nil
	}
	recs, _ := r.records()
	for _, rec := range recs {
		if rec.Name != l.name() && plumbing.NewBranchReferenceName(rec.Branch) == branch {
			return fmt.Errorf("the worktree %s has branch %s checked out, which is session %s's; switch it back to its own branch (git -C %s switch %s)",
				l.dir, branch.Short(), rec.Name, l.dir, ownBranchName(l))
		}
	}
	heads := map[string]string{filepath.Join(r.common, "HEAD"): r.root}
	ents, _ := os.ReadDir(filepath.Join(r.common, "worktrees"))
	for _, e := range ents {
		if admin := filepath.Join(r.common, "worktrees", e.Name()); admin != l.admin {
			gitdir, _ := os.ReadFile(filepath.Join(admin, "gitdir"))
			heads[filepath.Join(admin, "HEAD")] = filepath.Dir(strings.TrimSpace(string(gitdir)))
		}
	}
	for head, wt := range heads {
		if b, err := os.ReadFile(head); err == nil && strings.TrimSpace(string(b)) == "ref: "+branch.String() {
			return fmt.Errorf("the worktree %s has branch %s checked out, which is also checked out in %s; switch it back to its own branch (git -C %s switch %s)",
				l.dir, branch.Short(), wt, l.dir, ownBranchName(l))
		}
	}
	return nil
}

func ownBranchName(l linked) string {
	if l.rec != nil {
		return l.rec.Branch
	}
	return "<branch>"
}
