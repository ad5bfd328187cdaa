package main

import (
	"strings"
	"testing"
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
