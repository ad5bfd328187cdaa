package gitstate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInterop: the user works on session branches and worktrees with the git CLI.
func TestInterop(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)

	// The branch is deleted by hand: a clear error, nothing written.
	wt := addSession(t, r, "del")
	git(t, root, "update-ref", "-d", "refs/heads/arbor/del")
	writeFiles(t, wt, map[string]string{"x.txt": "x\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "t", nil); err == nil || !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("checkpoint on a deleted branch = %v", err)
	}

	// `git worktree remove` by hand: Reconcile recreates it for a known session.
	wt2 := addSession(t, r, "gone")
	git(t, root, "worktree", "remove", wt2)
	rep, err := r.Reconcile(t.Context(), map[string]string{"gone": wt2, "del": wt})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Recreated, ",") != "gone" {
		t.Errorf("Recreated = %v, problems %v", rep.Recreated, rep.Problems)
	}
	if st := git(t, wt2, "status", "--porcelain"); st != "" {
		t.Errorf("recreated worktree status: %s", st)
	}

	// The user switches the session worktree to another branch by hand and back.
	git(t, wt2, "switch", "-q", "-c", "user-side")
	writeFiles(t, wt2, map[string]string{"side.txt": "s\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt2, "on the user's branch", nil); err != nil {
		t.Fatal(err)
	}
	if got := git(t, root, "log", "-1", "--format=%s", "user-side"); got != "on the user's branch" {
		t.Errorf("checkpoint followed HEAD to %q", got)
	}
	// A git gc that packs everything does not disturb a Repo that is already open.
	git(t, root, "gc", "-q", "--prune=now")
	writeFiles(t, wt2, map[string]string{"after-gc.txt": "g\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt2, "after gc", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Diff(t.Context(), "main", "user-side"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wt2, "side.txt")); err != nil {
		t.Fatal(err)
	}
	assertFsck(t, root)
}

// TestSparseEntriesAreNotDeletions: a skip-worktree entry absent from disk is not a deletion.
func TestSparseEntriesAreNotDeletions(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "sparse")
	git(t, wt, "update-index", "--skip-worktree", "b.go")
	os.Remove(filepath.Join(wt, "b.go"))
	writeFiles(t, wt, map[string]string{"a.go": "changed\n"})
	if _, _, err := r.Checkpoint(t.Context(), wt, "t", nil); err != nil {
		t.Fatal(err)
	}
	if got := git(t, wt, "diff", "--name-status", "HEAD~1", "HEAD"); got != "M\ta.go" {
		t.Errorf("checkpoint changed %q, want only a.go", got)
	}
}
