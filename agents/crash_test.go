package agents

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

// TestPanicInTurnFailsOnlyThatTurn: a panic inside a turn is recovered at the turn boundary,
// recorded as turn_failed, and the session takes a message afterwards; other sessions never
// notice.
func TestPanicInTurnFailsOnlyThatTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	e.svc.opts.turnHook = func(s *Session, turn int) {
		if s.meta.Name == "victim" && turn == 1 {
			panic("boom in the turn")
		}
	}
	s := e.svc
	sess, err := s.Create(t.Context(), CreateRequest{Task: "write a note", Dir: e.repo, Name: "victim"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the turn fails", func() bool { return sess.State() == Failed })
	fails := e.events(sess, event.TypeTurnFailed)
	if len(fails) != 1 || !strings.Contains(fails[0]["error"].(string), "internal error") || !strings.Contains(fails[0]["error"].(string), "boom in the turn") {
		t.Fatalf("turn_failed = %v", fails)
	}
	other := e.create("write another note")
	e.settled(other)
	if other.State() != Idle {
		t.Errorf("another session: %v", other.State())
	}
	if _, err := s.Send(t.Context(), sess.meta.ID, "try again", "auto"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the retry settles", func() bool { return sess.State() == Idle })
}

// TestVisibleOnlyOnceRecorded: a fork whose worktree setup takes a while is listed as
// admitted, never in an unrecorded state, and every State prints.
func TestVisibleOnlyOnceRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"sleep 1"}}`), 0o644)
	e.trust()
	git(t, e.repo, "add", "arbor.json")
	git(t, e.repo, "commit", "-qm", "setup")
	src := e.create("write a note")
	e.settled(src)
	done := make(chan error, 1)
	go func() { _, err := e.svc.Fork(context.Background(), src.meta.ID, 0, "slow"); done <- err }()
	sawAdmitted := false
	for {
		infos, err := e.svc.List("")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.State == event.Unknown {
				t.Fatalf("session %s listed before its first state", in.ID)
			}
			if in.Name == "slow" && in.State == Admitted {
				sawAdmitted = true
			}
			_ = in.State.String()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if !sawAdmitted {
				t.Error("the fork was never listed as admitted during its setup")
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRecoverLogWithOnlySessionCreated: the daemon died between a session's first record and
// its first state. Recovery neither crashes nor hides it: the session comes back, its task is
// queued, and it runs.
func TestRecoverLogWithOnlySessionCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, recoverScript)
	s := e.create("write a note")
	e.settled(s)
	id := s.meta.ID
	stateDir, ov := e.svc.opts.StateDir, e.svc.opts.Overrides
	if err := e.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.dir, "events.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := data[:bytes.IndexByte(data, '\n')+1]
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
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
	e2 := &testEnv{t: t, svc: svc2, repo: e.repo}
	e2.waitFor("the recovered session runs its task", func() bool {
		return len(e2.events(s2, event.TypeAssistantMessage)) >= 2 && s2.State() == Idle
	})
	q := e2.events(s2, event.TypeMessageQueued)
	if len(q) != 1 || q[0]["from"] != "task" || q[0]["text"] != "write a note" {
		t.Errorf("queued = %v", q)
	}
}
