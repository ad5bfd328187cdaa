package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiscard(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)

	// Unmerged work is archived, not lost.
	wt := addSession(t, r, "s1")
	writeFiles(t, wt, map[string]string{"work.txt": "precious\n"})
	c, _, err := r.Checkpoint(t.Context(), wt, "work", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Discard(t.Context(), wt, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Removed || !res.Deleted || res.Archived != "refs/arbor/archive/arbor/s1" {
		t.Errorf("Discard(unmerged) = %+v", res)
	}
	if got := git(t, root, "rev-parse", res.Archived); got != c {
		t.Errorf("archive at %s, want checkpoint %s", got, c)
	}
	if out, _ := gitErr(root, "rev-parse", "--verify", "-q", "arbor/s1"); out != "" {
		t.Errorf("branch still there: %s", out)
	}

	// Work already merged elsewhere: the branch is simply deleted.
	wt2 := addSession(t, r, "s2")
	writeFiles(t, wt2, map[string]string{"merged.txt": "m\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt2, "m", nil); err != nil {
		t.Fatal(err)
	}
	git(t, root, "merge", "-q", "--no-edit", "arbor/s2")
	if res, err := r.Discard(t.Context(), wt2, "", false); err != nil || !res.Deleted || res.Archived != "" {
		t.Errorf("Discard(merged) = %+v, %v", res, err)
	}

	// Uncommitted work refuses without force; force deletes everything.
	wt3 := addSession(t, r, "s3")
	writeFiles(t, wt3, map[string]string{"a.go": "dirty\n"})
	var dirty *DirtyError
	if _, err := r.Discard(t.Context(), wt3, "", false); !errors.As(err, &dirty) {
		t.Errorf("Discard(dirty) = %v, want DirtyError", err)
	}
	if _, err := os.Stat(filepath.Join(wt3, "a.go")); err != nil {
		t.Error("refused discard removed files")
	}
	if res, err := r.Discard(t.Context(), wt3, "", true); err != nil || !res.Deleted || res.Archived != "" {
		t.Errorf("Discard(force) = %+v, %v", res, err)
	}

	// A branch checked out by the user is never deleted.
	git(t, root, "branch", "arbor/s4")
	git(t, root, "checkout", "-q", "arbor/s4")
	if _, err := r.Discard(t.Context(), "", "arbor/s4", true); err == nil || !strings.Contains(err.Error(), "checked out") {
		t.Errorf("Discard(checked-out branch) = %v", err)
	}
	if list := git(t, root, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", list)
	}
	assertFsck(t, root)
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)

	// A session whose worktree vanished is recreated from its branch.
	gone := addSession(t, r, "gone")
	writeFiles(t, gone, map[string]string{"kept.txt": "checkpointed\n"})
	if _, _, err := r.Checkpoint(t.Context(), gone, "t", nil); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(gone)

	// A half-made worktree (the daemon died inside AddWorktree) of a known session.
	half := addSession(t, r, "half")
	os.WriteFile(filepath.Join(r.adminDir("half"), "locked"), []byte("initializing\n"), 0o644)
	os.Remove(filepath.Join(half, "a.go"))

	// An orphan (created, never recorded as a session) with uncommitted work.
	orphan := addSession(t, r, "orphan")
	writeFiles(t, orphan, map[string]string{"unsaved.txt": "do not lose me\n"})

	// An orphan with no work at all, and a stale lock in a healthy known session.
	empty := addSession(t, r, "empty")
	ok := addSession(t, r, "ok")
	lock := filepath.Join(r.adminDir("ok"), "index.lock")
	os.WriteFile(lock, nil, 0o644)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(lock, old, old)

	// A worktree whose record was lost is still recognised as Arbor's.
	lost := addSession(t, r, "lost")
	os.Remove(r.recordPath("lost"))

	// The user's own linked worktree is none of gitstate's business.
	userWT := filepath.Join(t.TempDir(), "user-wt")
	git(t, root, "worktree", "add", "-q", "-b", "user-branch", userWT)

	rep, err := r.Reconcile(t.Context(), map[string]string{"gone": gone, "half": half, "ok": ok})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Recreated, ",") != "gone,half" {
		t.Errorf("Recreated = %v", rep.Recreated)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("Problems = %v", rep.Problems)
	}
	if len(rep.StaleLocks) != 1 || rep.StaleLocks[0] != lock {
		t.Errorf("StaleLocks = %v", rep.StaleLocks)
	}
	for _, dir := range []string{gone, half, ok, userWT} {
		if st := git(t, dir, "status", "--porcelain"); st != "" {
			t.Errorf("%s not clean after reconcile:\n%s", dir, st)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(gone, "kept.txt")); string(b) != "checkpointed\n" {
		t.Errorf("recreated worktree lacks the checkpoint: %q", b)
	}
	byName := map[string]Orphan{}
	for _, o := range rep.Orphans {
		byName[o.Name] = o
	}
	if o := byName["orphan"]; o.Checkpoint == "" || o.Archived == "" {
		t.Errorf("orphan with work = %+v, want checkpointed and archived", o)
	} else if got := git(t, root, "show", o.Archived+":unsaved.txt"); got != "do not lose me" {
		t.Errorf("orphan's work in archive = %q", got)
	}
	if o := byName["empty"]; !o.Deleted || o.Archived != "" {
		t.Errorf("empty orphan = %+v, want branch deleted", o)
	}
	if o := byName["lost"]; !o.Deleted {
		t.Errorf("orphan without a record = %+v, want cleaned up", o)
	}
	for _, dir := range []string{orphan, empty, lost} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("orphan dir %s still there", dir)
		}
	}
	list := git(t, root, "worktree", "list", "--porcelain")
	if strings.Count(list, "worktree ") != 5 || !strings.Contains(list, userWT) {
		t.Errorf("worktree list after reconcile:\n%s", list)
	}
	// A second run finds nothing to do.
	rep, err = r.Reconcile(t.Context(), map[string]string{"gone": gone, "half": half, "ok": ok})
	if err != nil || len(rep.Recreated)+len(rep.Orphans)+len(rep.StaleLocks)+len(rep.Problems) != 0 {
		t.Errorf("second Reconcile = %+v, %v", rep, err)
	}
	assertFsck(t, root)
}
