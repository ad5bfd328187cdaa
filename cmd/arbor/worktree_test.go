package main

import (
	"strings"
	"testing"

	"github.com/arborhq/arbor/server"
)

// `arbor ls` run inside a session's worktree lists the repository's sessions: a linked
// worktree resolves to the main repository, as `arbor run` from there does.
func TestListFromASessionWorktree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "hello there"))
	s := e.session(id)
	r := e.arborIn(s.Worktree, "ls")
	if r.code != 0 || !strings.Contains(r.stdout, id[:8]) {
		t.Errorf("arbor ls in the session's worktree does not list it:\n%s", r)
	}
	// A session created from the worktree belongs to the same repository.
	r = e.arborIn(s.Worktree, "run", "hello again")
	id2 := sessionID(t, r)
	if got := e.session(id2); got.ID != id2 {
		t.Errorf("the session created from a worktree is not listed from the main tree")
	}
}

// The WORKTREE column of `arbor ls` names each state a session's worktree can be in.
func TestWorktreeLabel(t *testing.T) {
	for _, c := range []struct {
		s    server.Session
		want string
	}{
		{server.Session{}, "yes"},
		{server.Session{WorktreeWriting: true}, "writing"},
		{server.Session{WorktreeQueued: true}, "queued"},
		{server.Session{WorktreeReleased: true}, "released"},
		{server.Session{Discarded: true, WorktreeWriting: true}, "-"},
	} {
		if got := worktreeLabel(c.s); got != c.want {
			t.Errorf("worktreeLabel(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
}
