package agents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
)

// TestReconcileAfterDiscard: reconciling recreates a worktree the user deleted, cleans up an
// orphan with its work archived, and leaves a discarded session without a worktree.
func TestReconcileAfterDiscard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, acceptScript)
	ctx := t.Context()
	lost := e.create("files task")
	gone := e.create("whole task")
	e.settled(lost)
	e.settled(gone)
	if _, err := e.svc.Discard(ctx, gone.meta.ID, false); err != nil {
		t.Fatal(err)
	}
	ws := lost.ws
	// The user deletes a session's worktree by hand; the daemon died after making a worktree
	// for a session it never recorded, with work in it.
	if err := os.RemoveAll(lost.meta.Worktree); err != nil {
		t.Fatal(err)
	}
	orphan := "0123456789abcdef"
	spec := gitstate.WorktreeSpec{Name: orphan, Branch: "arbor/orphan-01234567", Base: lost.meta.BaseCommit,
		Dir: filepath.Join(ws.WorktreeDir, orphan)}
	if err := ws.Repo.AddWorktree(ctx, spec); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(spec.Dir, "orphan.txt"), []byte("orphan work\n"), 0o644)

	if err := e.svc.reconcile(ctx, ws, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(lost.meta.Worktree, "x.txt")); err != nil || string(got) != "x\n" {
		t.Errorf("the lost worktree was not recreated from its branch: %q %v", got, err)
	}
	if st := git(t, lost.meta.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("recreated worktree is not clean:\n%s", st)
	}
	if ev := e.events(lost, event.TypeRecovered); len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]["worktree"]), "recreated") {
		t.Errorf("recovered events: %v", ev)
	}
	list := git(t, e.repo, "worktree", "list")
	if strings.Contains(list, spec.Dir) || strings.Contains(list, gone.meta.Worktree) {
		t.Errorf("orphan or discarded worktree still listed:\n%s", list)
	}
	if got := git(t, e.repo, "show", gitstate.ArchivePrefix+spec.Branch+":orphan.txt"); got != "orphan work\n" {
		t.Errorf("the orphan's work was not archived: %q", got)
	}
	if out := git(t, e.repo, "fsck", "--no-progress"); strings.Contains(out, "error") {
		t.Errorf("git fsck:\n%s", out)
	}
}
