package agents

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/gitstate"
	"github.com/arborhq/arbor/workspace"
)

const recoverScript = `{"rules":[
 {"when":{"task":"^write","turn":1},"code":"open('note.txt','w').write('kept\\n')\nprint('wrote')"},
 {"when":{"task":"^write"},"text":"done"}
],"default":{"text":"ok"}}`

// TestRecoverAfterRestart closes a service and opens a new one on the same state, as a daemon
// restart does: sessions come back inactive with their history, a worktree deleted by hand is
// recreated from the branch, and a worktree whose session was never recorded is cleaned up
// with its work kept on a branch.
func TestRecoverAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	s := e.create("write a note")
	e.settled(s)
	id, wt, branch := s.meta.ID, s.meta.Worktree, s.meta.Branch
	stateDir := e.svc.opts.StateDir
	ov := e.svc.opts.Overrides
	if err := e.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The user deletes the session's worktree by hand; a crash left a worktree no log knows.
	os.RemoveAll(wt)
	repo, err := gitstate.Open(e.repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	orphanDir := repo.CommonDir() + "/arbor/worktrees/orphan123"
	if err := repo.AddWorktree(context.Background(), gitstate.WorktreeSpec{Name: "orphan123", Branch: "arbor/orphan-orphan12", Base: s.meta.BaseCommit, Dir: orphanDir}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(orphanDir+"/unsaved.txt", []byte("work\n"), 0o644)
	repo.Close()

	svc2, err := New(Options{StateDir: stateDir, Overrides: ov})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc2.Close(context.Background()) })
	if err := svc2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, err := svc2.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if s2.State() != Inactive {
		t.Errorf("recovered state %v, want inactive", s2.State())
	}
	if got, err := os.ReadFile(wt + "/note.txt"); err != nil || string(got) != "kept\n" {
		t.Errorf("worktree not recreated from branch %s: %q %v", branch, got, err)
	}
	if _, err := os.Stat(orphanDir); !os.IsNotExist(err) {
		t.Errorf("orphan worktree still there: %v", err)
	}
	refs := git(t, e.repo, "for-each-ref", "--format=%(refname)")
	if !strings.Contains(refs, "orphan") {
		t.Errorf("the orphan's work is gone; refs:\n%s", refs)
	}
	if out := git(t, e.repo, "fsck"); strings.Contains(out, "error") {
		t.Errorf("git fsck: %s", out)
	}
	if len(s2.conversation()) < 3 {
		t.Errorf("conversation not replayed: %d messages", len(s2.conversation()))
	}
}

// restartWith is restart with other overrides for the new daemon.
func (e *testEnv) restartWith(ov workspace.Overrides) *Service {
	e.t.Helper()
	if err := e.svc.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	opts := e.svc.opts
	opts.Overrides = ov
	svc, err := New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { svc.Close(context.Background()) })
	if err := svc.Recover(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return svc
}

func TestRestartKeepsTheTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fanOutScript)
	root := e.create("fan out the work")
	e.settled(root)
	id := root.meta.ID
	before := e.svc.Info(root)
	svc := e.restart()
	r, err := svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.childIDs()); n != 3 {
		t.Fatalf("after a restart the root has %d children, want 3", n)
	}
	in := svc.Info(r)
	if in.Usage != before.Usage || in.Total != before.Total {
		t.Errorf("accounting changed across a restart:\nbefore own %+v\n       total %+v\nafter  own %+v\n       total %+v", before.Usage, before.Total, in.Usage, in.Total)
	}
}

func TestRecoveredSessionWithoutModelFailsClearly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	s := e.create("write a note")
	e.settled(s)
	id := s.meta.ID
	svc := e.restartWith(workspace.Overrides{KernelPython: "/usr/bin/python3"}) // no model configured now
	if _, err := svc.Send(context.Background(), id, "again", "auto"); err != nil {
		t.Fatal(err)
	}
	s2, _ := svc.Get(id)
	e.waitFor("failed", func() bool { return s2.State() == Failed })
	if msg := svc.Info(s2).Error; !strings.Contains(msg, "no model configured") {
		t.Errorf("error = %q", msg)
	}
	// The failed turn took the message: it does not retry on it in a loop.
	time.Sleep(200 * time.Millisecond)
	if n := len(e.events(s2, event.TypeTurnStarted)); n != 2 {
		t.Errorf("%d turns recorded, want 2 (the first, and the one that failed once)", n)
	}
}
