package gitstate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// ReconcileReport lists what Reconcile found and did.
type ReconcileReport struct {
	// Orphans are worktrees Arbor made for sessions that were never recorded (the daemon died
	// in between): uncommitted work was checkpointed, the worktree removed, and the branch
	// deleted or archived like a discard.
	Orphans []Orphan `json:"orphans,omitempty"`
	// Recreated names known sessions whose worktree was missing or half-made and was checked
	// out again from their branch.
	Recreated []string `json:"recreated,omitempty"`
	// Deferred names known sessions whose worktree was never all written (the daemon died
	// before or while writing it) and that may wait for their files (see
	// [Repo.ReconcileDeferring]): now marked released, checked out at their next use.
	Deferred []string `json:"deferred,omitempty"`
	// StaleLocks are lock files left by killed processes in Arbor's worktrees, now removed.
	StaleLocks []string `json:"staleLocks,omitempty"`
	// Problems are what Reconcile could not fix, each naming the session and why.
	Problems []string `json:"problems,omitempty"`
}

// Orphan is one cleaned-up worktree without a session.
type Orphan struct {
	Name       string `json:"name"`
	Dir        string `json:"dir"`
	Branch     string `json:"branch"`
	Checkpoint string `json:"checkpoint,omitempty"` // commit holding work found uncommitted
	Archived   string `json:"archived,omitempty"`
	Deleted    bool   `json:"deleted"`
}

// Reconcile brings the worktrees gitstate made in line with the sessions the caller knows
// (session name → worktree dir), at daemon start: recreates missing or half-made worktrees of
// known sessions from their branches, cleans up worktrees of unknown sessions without losing
// their work, and removes stale locks. The user's own linked worktrees are never touched.
//
// Run it when nothing else works on Arbor's sessions (at daemon start): it removes every lock
// file on their branches and in their worktree admin dirs, which then only a killed process
// can have left.
func (r *Repo) Reconcile(ctx context.Context, known map[string]string) (*ReconcileReport, error) {
	return r.ReconcileDeferring(ctx, known, nil)
}

// ReconcileDeferring is Reconcile, except that a known session named in lazy whose worktree
// was never all written — nothing at its place yet, or a half-made one — is not written now:
// its record is marked released, as [Repo.ReleaseWorktree] leaves one, and
// [Repo.RestoreWorktree] writes it when the session needs it. (A child queued behind its
// workspace's run slots when the daemon stopped holds a branch and no files; a restart must
// not write them all at once.)
func (r *Repo) ReconcileDeferring(ctx context.Context, known map[string]string, lazy map[string]bool) (*ReconcileReport, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", r.root, err)
	}
	defer unlock()
	recs, err := r.records()
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", r.root, err)
	}
	recs = append(recs, r.unrecorded(recs)...)
	rep := &ReconcileReport{}
	recorded := map[string]bool{}
	for _, rec := range recs {
		recorded[rec.Name] = true
		if _, ok := r.pending[rec.Name]; ok {
			continue // being made right now by this process
		}
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("reconcile %s: %w", r.root, err)
		}
		if dir, ok := known[rec.Name]; ok {
			if dir != "" {
				rec.Dir = filepath.Clean(dir)
			}
			if rec.Released {
				r.reconcileReleased(rec, rep)
				continue
			}
			r.reconcileKnown(ctx, rec, rep, lazy[rec.Name])
		} else {
			r.reconcileOrphan(ctx, rec, rep)
		}
	}
	for name, dir := range known {
		if !recorded[name] {
			if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: no worktree at %s and no gitstate record to recreate it from", name, dir))
			}
		}
	}
	sort.Strings(rep.Problems)
	sort.Strings(rep.Recreated)
	sort.Strings(rep.Deferred)
	r.logger.Info("reconciled", "orphans", len(rep.Orphans), "recreated", len(rep.Recreated), "deferred", len(rep.Deferred), "staleLocks", len(rep.StaleLocks), "problems", len(rep.Problems))
	return rep, nil
}

// unrecorded rebuilds records for worktrees registered under <common>/arbor/worktrees that
// have none (a record lost to a power cut, which writeRecord does not fsync against), from
// their admin files, so they are reconciled like the rest.
func (r *Repo) unrecorded(recs []record) []record {
	have := map[string]bool{}
	for _, rec := range recs {
		have[rec.Name] = true
	}
	ours := filepath.Join(r.common, "arbor", "worktrees") + string(filepath.Separator)
	ents, _ := os.ReadDir(filepath.Join(r.common, "worktrees"))
	var out []record
	for _, e := range ents {
		if have[e.Name()] {
			continue
		}
		admin := r.adminDir(e.Name())
		gitdir, err := os.ReadFile(filepath.Join(admin, "gitdir"))
		dir := filepath.Dir(filepath.Clean(strings.TrimSpace(string(gitdir))))
		if err != nil || !strings.HasPrefix(dir, ours) {
			continue // the user's own worktree
		}
		branch, _, err := r.headAt(filepath.Join(admin, "HEAD"))
		if err != nil && !errors.Is(err, ErrNoCommits) || branch == "" {
			continue
		}
		rec := record{Name: e.Name(), Branch: branch.Short(), Dir: dir}
		if err := r.writeRecord(rec); err == nil {
			out = append(out, rec)
		}
	}
	return out
}

// healthy reports whether a worktree is complete: registered, pointing at each other, and not
// stuck "initializing".
func (r *Repo) healthy(name, dir string) bool {
	admin := r.adminDir(name)
	if b, err := os.ReadFile(filepath.Join(admin, "locked")); err == nil && strings.TrimSpace(string(b)) == "initializing" {
		return false
	}
	gitdir, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if err != nil || filepath.Clean(strings.TrimSpace(string(gitdir))) != filepath.Join(dir, ".git") {
		return false
	}
	// A .git file whatever ran in the worktree rewrote is put back; one that is gone, or a
	// directory in its place, makes the worktree broken.
	if fi, err := os.Lstat(filepath.Join(dir, ".git")); err != nil || fi.IsDir() {
		return false
	}
	if err := r.restoreGitFile(linked{dir: dir, admin: admin}); err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(admin, "index"))
	return err == nil
}

func (r *Repo) reconcileKnown(ctx context.Context, rec record, rep *ReconcileReport, lazy bool) {
	r.clearStaleLocks(rec, rep)
	if r.healthy(rec.Name, rec.Dir) {
		return
	}
	branch := plumbing.NewBranchReferenceName(rec.Branch)
	ref, err := r.git.Storer.Reference(branch)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: worktree %s is missing and branch %s is gone (%v); it cannot be recreated", rec.Name, rec.Dir, rec.Branch, err))
		return
	}
	if lazy && r.unwritten(rec) {
		// Holds no work (it never had all its files): cleared, and written at its next use.
		if _, err := r.clearPartial(rec, false); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: %v", rec.Name, err))
			return
		}
		rec.Released = true
		if err := r.writeRecord(rec); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: %v", rec.Name, err))
			return
		}
		rep.Deferred = append(rep.Deferred, rec.Name)
		return
	}
	aside, err := r.clearPartial(rec, true)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: %v", rec.Name, err))
		return
	}
	if aside != "" {
		rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: worktree %s was broken (its .git link or index); "+
			"recreated from branch %s, and the old files, with any work not yet checkpointed, kept at %s", rec.Name, rec.Dir, rec.Branch, aside))
	}
	if err := r.linkWorktree(ctx, rec.Name, branch, ref.Hash(), rec.Dir); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("session %s: recreate worktree %s: %v", rec.Name, rec.Dir, err))
		return
	}
	rep.Recreated = append(rep.Recreated, rec.Name)
}

// unwritten reports whether a worktree never had all its files: a half-made one (still marked
// initializing), or nothing at all at its place, neither its directory nor git's registration.
func (r *Repo) unwritten(rec record) bool {
	admin := r.adminDir(rec.Name)
	if b, err := os.ReadFile(filepath.Join(admin, "locked")); err == nil && strings.TrimSpace(string(b)) == "initializing" {
		return true
	}
	_, aerr := os.Lstat(admin)
	_, derr := os.Lstat(rec.Dir)
	return errors.Is(aerr, fs.ErrNotExist) && errors.Is(derr, fs.ErrNotExist)
}

// clearPartial clears the way for recreating a broken worktree. A half-made one (still marked
// initializing) holds no work and is removed, and so is an orphan's (its session was never
// recorded, or its discard was cut short). A known session's may hold work no checkpoint took
// (an agent that replaced .git, say): with keep it is moved aside, never deleted, and its new
// place returned. A directory whose registration vanished is refused.
func (r *Repo) clearPartial(rec record, keep bool) (aside string, err error) {
	admin := r.adminDir(rec.Name)
	initializing := false
	if b, err := os.ReadFile(filepath.Join(admin, "locked")); err == nil && strings.TrimSpace(string(b)) == "initializing" {
		initializing = true
	}
	if _, err := os.Lstat(rec.Dir); err == nil && !initializing {
		if _, err := os.Stat(admin); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("worktree dir %s exists but its registration %s is gone; move the dir aside to let it be recreated", rec.Dir, admin)
		}
		if keep {
			aside = fmt.Sprintf("%s.broken-%s", rec.Dir, time.Now().UTC().Format("20060102T150405Z"))
			if err := os.Rename(rec.Dir, aside); err != nil {
				return "", fmt.Errorf("move the broken worktree %s aside: %w", rec.Dir, err)
			}
		}
	}
	if err := os.RemoveAll(rec.Dir); err != nil {
		return aside, err
	}
	return aside, os.RemoveAll(admin)
}

func (r *Repo) reconcileOrphan(ctx context.Context, rec record, rep *ReconcileReport) {
	o := Orphan{Name: rec.Name, Dir: rec.Dir, Branch: rec.Branch}
	r.clearStaleLocks(rec, rep)
	if r.healthy(rec.Name, rec.Dir) {
		h, changed, err := r.checkpoint(ctx, rec.Dir, "arbor: work found in an unrecorded session's worktree", []string{""})
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("orphaned worktree %s: checkpoint before cleanup: %v; left in place", rec.Dir, err))
			return
		}
		if changed {
			o.Checkpoint = h.String()
		}
		if err := r.removeWorktree(ctx, rec.Dir, true); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("orphaned worktree %s: %v", rec.Dir, err))
			return
		}
	} else if _, err := r.clearPartial(rec, false); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("orphaned worktree %s: %v", rec.Dir, err))
		return
	}
	if rec.Released {
		os.RemoveAll(releasedAside(rec.Dir))
	}
	var res DiscardResult
	if err := r.dropBranch(plumbing.NewBranchReferenceName(rec.Branch), false, &res); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("orphaned branch %s: %v", rec.Branch, err))
	}
	o.Archived, o.Deleted = res.Archived, res.Deleted
	r.removeRecord(rec.Name)
	rep.Orphans = append(rep.Orphans, o)
}

// clearStaleLocks removes git lock files that a killed process left in one of Arbor's
// worktree admin dirs or on its branch.
func (r *Repo) clearStaleLocks(rec record, rep *ReconcileReport) {
	admin := r.adminDir(rec.Name)
	branchLock := filepath.Join(r.common, "refs", "heads", filepath.FromSlash(rec.Branch)+".lock")
	for _, p := range []string{filepath.Join(admin, "index.lock"), filepath.Join(admin, "HEAD.lock"), branchLock} {
		if _, err := os.Stat(p); err == nil {
			if err := os.Remove(p); err == nil {
				rep.StaleLocks = append(rep.StaleLocks, p)
			}
		}
	}
}
