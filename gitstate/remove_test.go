package gitstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemoveWorktree(t *testing.T) {
	t.Parallel()
	root := newTestRepo(t)
	r := openTest(t, root)
	wt := addSession(t, r, "s")

	writeFiles(t, wt, map[string]string{"a.go": "edited\n", "untracked.txt": "u\n", "ignored.log": "i\n"})
	err := r.RemoveWorktree(t.Context(), wt, false)
	var dirty *DirtyError
	if !errors.As(err, &dirty) || strings.Join(dirty.Files, ",") != "a.go,untracked.txt" {
		t.Fatalf("RemoveWorktree(dirty) = %v, want DirtyError naming a.go, untracked.txt", err)
	}
	if _, err := os.Stat(filepath.Join(wt, "a.go")); err != nil {
		t.Fatalf("refused removal still deleted files: %v", err)
	}
	if _, _, err := r.Checkpoint(t.Context(), wt, "save", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveWorktree(t.Context(), wt, false); err != nil {
		t.Fatalf("RemoveWorktree(clean) = %v", err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Errorf("worktree dir still there: %v", err)
	}
	if list := git(t, root, "worktree", "list"); strings.Contains(list, wt) {
		t.Errorf("git worktree list still shows it:\n%s", list)
	}
	if got := git(t, root, "show", "arbor/s:untracked.txt"); got != "u" {
		t.Errorf("branch lost the checkpoint: %q", got)
	}

	// The branch can be checked out again under the same name.
	if err := r.RestoreWorktree(t.Context(), "s", "arbor/s", wt); err != nil {
		t.Fatalf("RestoreWorktree: %v", err)
	}
	if st := git(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("restored worktree not clean: %s", st)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "untracked.txt")); string(b) != "u\n" {
		t.Errorf("restored worktree lacks the checkpoint: %q", b)
	}
	if err := r.RestoreWorktree(t.Context(), "s-again", "arbor/s", wt+"-2"); err == nil {
		t.Error("RestoreWorktree of a checked-out branch succeeded")
	}

	// Forced removal of dirty work, and removal of a worktree whose directory vanished.
	wt2 := addSession(t, r, "s2")
	writeFiles(t, wt2, map[string]string{"a.go": "edited\n"})
	if err := r.RemoveWorktree(t.Context(), wt2, true); err != nil {
		t.Fatalf("forced: %v", err)
	}
	wt3 := addSession(t, r, "s3")
	os.RemoveAll(wt3)
	if err := r.RemoveWorktree(t.Context(), wt3, false); err != nil {
		t.Fatalf("vanished: %v", err)
	}
	if list := git(t, root, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 2 {
		t.Errorf("worktrees left:\n%s", list)
	}
	assertFsck(t, root)
}
