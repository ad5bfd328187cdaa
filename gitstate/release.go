package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReleaseWorktree frees the disk of a session's worktree while keeping all of its work: the
// files are checkpointed onto the branch (message names why), and only once nothing in the
// directory differs from that commit is the directory removed. The branch and the record
// stay, the record marked released, so Reconcile neither recreates the worktree nor takes
// the session for an orphan, and [Repo.RestoreWorktree] brings it back. It returns the
// checkpoint commit ("" when there was nothing to commit).
//
// The steps, each safe to be killed after (Reconcile finishes or undoes them): checkpoint;
// mark the record released; move the directory aside (one rename); drop git's registration;
// delete the moved directory. A worktree with work no checkpoint can take (a repository of
// its own inside it) is refused with a *DirtyError and left as it is.
func (r *Repo) ReleaseWorktree(ctx context.Context, dir, message string) (string, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return "", fmt.Errorf("release worktree %s: %w", dir, err)
	}
	defer unlock()
	commit, err := r.releaseWorktree(ctx, filepath.Clean(dir), message)
	if err != nil {
		return "", fmt.Errorf("release worktree %s: %w", dir, err)
	}
	r.logger.Info("worktree released", "dir", dir, "checkpoint", commit)
	return commit, nil
}

func (r *Repo) releaseWorktree(ctx context.Context, dir, message string) (string, error) {
	if r.pendingAt(dir) {
		return "", errors.New("worktree is still being created")
	}
	l, err := r.linkedWorktree(dir)
	if err != nil {
		return "", err
	}
	if l.rec == nil {
		return "", fmt.Errorf("%s is not a session worktree of arbor's (gitstate has no record of it)", dir)
	}
	name, rec := l.name(), *l.rec
	h, changed, err := r.checkpoint(ctx, dir, message, []string{""})
	if err != nil {
		return "", err
	}
	commit := ""
	if changed {
		commit = h.String()
	}
	r.step(name, "checkpointed")
	// Nothing may be left that the branch does not hold.
	left, err := r.uncommitted(ctx, l)
	if err != nil {
		return commit, err
	}
	if len(left) > 0 {
		return commit, &DirtyError{Dir: dir, Files: left}
	}
	rec.Released = true
	if err := r.writeRecord(rec); err != nil {
		return commit, err
	}
	r.step(name, "marked")
	aside := releasedAside(dir)
	os.RemoveAll(aside) // a leftover of an earlier release cut short: it held nothing uncommitted
	if err := os.Rename(dir, aside); err != nil {
		return commit, err
	}
	r.step(name, "moved")
	if err := os.RemoveAll(l.admin); err != nil {
		return commit, err
	}
	r.step(name, "unregistered")
	if err := os.RemoveAll(aside); err != nil {
		return commit, err
	}
	r.step(name, "removed")
	return commit, nil
}

// releasedAside is where a worktree being released is moved before it is deleted.
func releasedAside(dir string) string { return dir + ".released" }

// Released reports whether the worktree named name (a session id) was released by
// ReleaseWorktree and not restored since.
func (r *Repo) Released(name string) bool {
	rec, err := r.readRecord(name)
	return err == nil && rec.Released
}

// step runs the test hook of OnStep.
func (r *Repo) step(name, step string) {
	if r.onStep != nil {
		r.onStep(name, step)
	}
}

// OnStep sets a function run after each step of ReleaseWorktree (crash tests stop the
// process there). Set it before the Repo is used.
func (r *Repo) OnStep(f func(name, step string)) { r.onStep = f }

// reconcileReleased settles a released worktree of a known session after a crash: a
// directory still whole at its place means the release stopped before the move, and the
// session keeps its worktree (the record loses its mark); otherwise what is left of the
// directory and registration goes — it held nothing the branch does not. Callers hold the
// lock.
func (r *Repo) reconcileReleased(rec record, rep *ReconcileReport) {
	if r.healthy(rec.Name, rec.Dir) {
		rec.Released = false
		if err := r.writeRecord(rec); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: %v", rec.Name, err))
		}
		return
	}
	if _, err := os.Lstat(rec.Dir); err == nil {
		if err := r.clearIfInitializing(rec); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: %v", rec.Name, err))
			return
		}
	}
	os.RemoveAll(releasedAside(rec.Dir))
	os.RemoveAll(r.adminDir(rec.Name))
}

// clearIfInitializing removes a half-made worktree at rec.Dir (a restore cut short), and
// refuses anything else found there.
func (r *Repo) clearIfInitializing(rec record) error {
	b, err := os.ReadFile(filepath.Join(r.adminDir(rec.Name), "locked"))
	if err != nil || string(b) != "initializing\n" {
		return fmt.Errorf("released worktree %s: a directory is there that arbor did not make; move it aside", rec.Dir)
	}
	return os.RemoveAll(rec.Dir)
}

// restoreReleased is RestoreWorktree's way past a released record: the moved-aside leftovers
// of a cut-short release go first. Callers hold the lock.
func (r *Repo) restoreReleased(name, dir string) {
	if rec, err := r.readRecord(name); err == nil && rec.Released {
		os.RemoveAll(releasedAside(dir))
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(r.adminDir(name))
		}
	}
}

// TreeSize estimates the disk a checkout of commit takes, what du reports for the worktree
// and its index: its files' sizes (`git ls-tree -r -l`) and its directories, each rounded up
// to a 4 KiB block, and the index (about 72 bytes and the path per file). Results are kept per
// commit.
func (r *Repo) TreeSize(ctx context.Context, commit string) (int64, error) {
	r.sizeMu.Lock()
	n, ok := r.sizes[commit]
	r.sizeMu.Unlock()
	if ok {
		return n, nil
	}
	out, err := runGit(ctx, r.mainAt(), nil, "ls-tree", "-r", "-l", "-z", commit)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", commit, err)
	}
	const block = 4096
	blocks := func(size int64) int64 { return (size + block - 1) / block * block }
	dirs := map[string]bool{"": true}
	var index int64
	for rec := range strings.SplitSeq(out, "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 {
			continue
		}
		index += 72 + int64(len(path))
		for d := filepath.Dir(path); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue // "-": a gitlink
		}
		n += blocks(size)
	}
	n += int64(len(dirs))*block + blocks(index)
	r.sizeMu.Lock()
	if r.sizes == nil {
		r.sizes = map[string]int64{}
	}
	r.sizes[commit] = n
	r.sizeMu.Unlock()
	return n, nil
}
