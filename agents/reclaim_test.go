package agents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

// TestWorktreeBoundReleasesAndRestores: with "worktrees": {"max": 1}, a new session makes the
// inactive one give its worktree up — its uncommitted work checkpointed onto its branch, the
// directory gone, Info saying so — and a message to it checks the worktree out again with
// that work, before its turn runs there.
func TestWorktreeBoundReleasesAndRestores(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktrees":{"max":1},"idleTimeout":"2s"}`), 0o644)
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "bounds")
	a := e.create("write a note")
	e.settled(a)
	e.waitFor("the first session to go inactive", func() bool { return a.State() == Inactive })
	// Work no checkpoint took yet: a user's edit in the inactive session's worktree.
	os.WriteFile(filepath.Join(a.meta.Worktree, "user.txt"), []byte("by hand\n"), 0o644)

	b := e.create("write another note")
	e.settled(b)
	e.waitFor("the first session's worktree to be released", func() bool {
		infos, _ := e.svc.List("")
		for _, in := range infos {
			if in.ID == a.meta.ID {
				return in.WorktreeReleased
			}
		}
		return false
	})
	if _, err := os.Stat(a.meta.Worktree); !os.IsNotExist(err) {
		t.Errorf("the released worktree is still on disk: %v", err)
	}
	if got := strings.TrimSpace(git(t, e.repo, "show", a.meta.Branch+":user.txt")); got != "by hand" {
		t.Errorf("the uncommitted work on the branch: %q", got)
	}
	if ev := e.events(a, event.TypeWorktree); len(ev) != 1 || ev[0]["event"] != "released" {
		t.Errorf("worktree events = %v", ev)
	}

	if _, err := e.svc.Send(t.Context(), a.meta.ID, "write it again", "auto"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the revived session to settle", func() bool { return a.State() == Idle })
	for f, want := range map[string]string{"user.txt": "by hand\n", "note.txt": "kept\n"} {
		if b, err := os.ReadFile(filepath.Join(a.meta.Worktree, f)); err != nil || string(b) != want {
			t.Errorf("%s in the restored worktree: %q, %v", f, b, err)
		}
	}
	if ev := e.events(a, event.TypeWorktree); len(ev) < 2 || ev[1]["event"] != "restored" {
		t.Errorf("worktree events = %v", ev)
	}
	if st := git(t, a.meta.Worktree, "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("the restored worktree: git status %q", st)
	}
}

// TestDiskBudgetTooSmallIsRefused: a disk budget smaller than one worktree of the repository
// refuses new sessions, saying how big one is.
func TestDiskBudgetTooSmallIsRefused(t *testing.T) {
	e := newEnv(t, recoverScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktrees":{"diskBudget":"1KB"}}`), 0o644)
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "tiny budget")
	_, err := e.svc.Create(t.Context(), CreateRequest{Task: "write a note", Dir: e.repo})
	var re RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "worktrees.diskBudget 1.0 KB is smaller than one worktree of this repository (16.4 KB") {
		t.Fatalf("Create = %v, want the budget refused", err)
	}
}

// TestQueuedChildHoldsNoWorktree: a child waiting for a run slot (maxRunning taken) has its
// branch but no files — Info says queued, git lists no worktree, the bounds do not count it —
// and once the slot is free its worktree is written and it runs its task there.
func TestQueuedChildHoldsNoWorktree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[{"when":{"task":"^leaf","turn":1},"code":"print(open('main.py').read())"}],"default":{"text":"done"}}`)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"maxRunning":1}`), 0o644)
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "one at a time")
	parent := e.create("parent")
	e.settled(parent)
	// Someone else holds the workspace's one slot.
	blocker := &Session{svc: e.svc}
	if err := parent.ws.slots.acquire(t.Context(), blocker); err != nil {
		t.Fatal(err)
	}
	child, err := e.svc.Create(t.Context(), CreateRequest{Parent: parent.meta.ID, Task: "leaf reads main.py"})
	if err != nil {
		t.Fatal(err)
	}
	info := func() Info {
		infos, _ := e.svc.List("")
		for _, in := range infos {
			if in.ID == child.meta.ID {
				return in
			}
		}
		t.Fatalf("child %s not listed", child.meta.ID)
		return Info{}
	}
	e.waitFor("the child to wait for a slot", func() bool {
		parent.ws.slots.mu.Lock()
		defer parent.ws.slots.mu.Unlock()
		return parent.ws.slots.waiting[child]
	})
	if in := info(); !in.WorktreeQueued || in.WorktreeReleased {
		t.Errorf("queued child: WorktreeQueued %v, WorktreeReleased %v", in.WorktreeQueued, in.WorktreeReleased)
	}
	if _, err := os.Stat(child.meta.Worktree); !os.IsNotExist(err) {
		t.Errorf("a queued child's worktree is on disk: %v", err)
	}
	if list := git(t, e.repo, "worktree", "list"); strings.Contains(list, child.meta.Worktree) {
		t.Errorf("git lists the queued child's worktree:\n%s", list)
	}
	if got := git(t, e.repo, "rev-parse", child.meta.Branch); strings.TrimSpace(got) != child.meta.BaseCommit {
		t.Errorf("the queued child's branch is at %q, want %s", got, child.meta.BaseCommit)
	}
	if child.holdsWorktree() {
		t.Error("the bounds count a queued child's worktree")
	}
	parent.ws.slots.release(blocker)
	e.settled(child)
	if in := info(); in.WorktreeQueued {
		t.Error("still queued after it ran")
	}
	outs := e.events(child, event.TypeToolFinished)
	if len(outs) == 0 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "print('hi')") {
		t.Errorf("the child's cell did not read its worktree: %v", outs)
	}
	if st := git(t, child.meta.Worktree, "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("the child's worktree is not clean: %q", st)
	}
}

// A child still queued for a run slot when the daemon stops has no files, and the restart does
// not write them (a wide tree's queued children would all be written at once): its worktree is
// released, and checked out when it runs.
func TestQueuedChildAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[{"when":{"task":"^leaf","turn":1},"code":"print(open('main.py').read())"}],"default":{"text":"done"}}`)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"maxRunning":1}`), 0o644)
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "one at a time")
	parent := e.create("parent")
	e.settled(parent)
	blocker := &Session{svc: e.svc}
	if err := parent.ws.slots.acquire(t.Context(), blocker); err != nil {
		t.Fatal(err)
	}
	child, err := e.svc.Create(t.Context(), CreateRequest{Parent: parent.meta.ID, Task: "leaf reads main.py"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the child to wait for a slot", func() bool {
		parent.ws.slots.mu.Lock()
		defer parent.ws.slots.mu.Unlock()
		return parent.ws.slots.waiting[child]
	})
	id, dir := child.meta.ID, child.meta.Worktree
	svc := e.restart()
	c, err := svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.settled(c)
	var restored, recreated bool
	recs, _ := c.Events(0)
	for _, r := range recs {
		switch event.Type(r.Type) {
		case event.TypeWorktree:
			restored = restored || strings.Contains(string(r.Data), `"restored"`)
		case event.TypeRecovered:
			recreated = recreated || strings.Contains(string(r.Data), "recreated")
		}
	}
	if recreated || !restored {
		t.Errorf("the queued child's worktree: recreated at the restart %v, restored when it ran %v; want false, true", recreated, restored)
	}
	outs := e.events(c, event.TypeToolFinished)
	if len(outs) == 0 || !strings.Contains(fmt.Sprint(outs[0]["output"]), "print('hi')") {
		t.Errorf("the child's cell did not read its worktree: %v", outs)
	}
	if st := git(t, dir, "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("the child's worktree is not clean: %q", st)
	}
}

// Discarding a child still queued for a run slot writes none of its files, nor does
// discarding a session whose worktree was released: each has only its branch to give up.
func TestDiscardWritesNoFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[{"when":{"task":"^leaf","turn":1},"code":"print(open('main.py').read())"}],"default":{"text":"done"}}`)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"maxRunning":1,"worktrees":{"max":1},"idleTimeout":"1s"}`), 0o644)
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "one at a time")
	parent := e.create("parent")
	e.settled(parent)
	blocker := &Session{svc: e.svc}
	if err := parent.ws.slots.acquire(t.Context(), blocker); err != nil {
		t.Fatal(err)
	}
	child, err := e.svc.Create(t.Context(), CreateRequest{Parent: parent.meta.ID, Task: "leaf reads main.py"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the child to wait for a slot", func() bool {
		parent.ws.slots.mu.Lock()
		defer parent.ws.slots.mu.Unlock()
		return parent.ws.slots.waiting[child]
	})
	res, err := e.svc.Discard(t.Context(), child.meta.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed || !res.Deleted {
		t.Errorf("discard of a queued child: %+v, want its branch deleted and no worktree to remove", res)
	}
	if _, err := os.Stat(child.meta.Worktree); !os.IsNotExist(err) {
		t.Errorf("discarding the queued child wrote its worktree: %v", err)
	}
	if in := e.svc.Info(child); !in.Discarded || in.WorktreeQueued {
		t.Errorf("discarded queued child: Discarded %v, WorktreeQueued %v", in.Discarded, in.WorktreeQueued)
	}
	parent.ws.slots.release(blocker)

	// The parent, inactive, gives its worktree up to another session's (max 1); its discard
	// archives its branch and checks nothing out.
	e.waitFor("the parent to go inactive", func() bool { return parent.State() == Inactive })
	other := e.create("another")
	e.settled(other)
	e.waitFor("the parent's worktree to be released", func() bool { return e.svc.Info(parent).WorktreeReleased })
	if res, err = e.svc.Discard(t.Context(), parent.meta.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(parent.meta.Worktree); !os.IsNotExist(err) {
		t.Errorf("discarding the released parent checked its worktree out: %v", err)
	}
	for _, ev := range e.events(parent, event.TypeWorktree) {
		if ev["event"] == "restored" {
			t.Errorf("the released parent was restored to be discarded: %v", ev)
		}
	}
	if res.Removed || !res.Deleted {
		t.Errorf("discard of a released session: %+v", res)
	}
}
