package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/workspace"
)

// TestCreateRefusedUntilTrusted: a repository whose arbor.json sets a setup command cannot
// start a session — nothing of one is made, the command does not run — until it is trusted;
// a fork after the command changed is refused the same way.
func TestCreateRefusedUntilTrusted(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	// The command runs in the session's sandbox, which sees only its worktree writable: the
	// marker it leaves is there (and there is no worktree before trust).
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"touch ran"}}`), 0o644)
	_, err := e.svc.Create(context.Background(), CreateRequest{Task: "hello", Dir: e.repo})
	var ue *workspace.UntrustedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "worktree.command") || !strings.Contains(err.Error(), "arbor trust ") {
		t.Fatalf("Create = %v, want an *UntrustedError naming worktree.command and arbor trust", err)
	}
	if infos, _ := e.svc.List(e.repo); len(infos) != 0 {
		t.Errorf("a refused create left sessions: %+v", infos)
	}
	if out := git(t, e.repo, "branch", "--list", "arbor/*"); out != "" {
		t.Errorf("a refused create left branches: %s", out)
	}

	e.trust()
	s := e.create("hello")
	e.settled(s)
	if _, err := os.Stat(filepath.Join(s.meta.Worktree, "ran")); err != nil {
		t.Fatalf("the trusted setup command did not run: %v", err)
	}

	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"touch ran.2"}}`), 0o644)
	if _, err := e.svc.Fork(context.Background(), s.meta.ID, 0, ""); !errors.As(err, &ue) || !ue.Trust.Changed {
		t.Fatalf("Fork after a changed command = %v, want an *UntrustedError saying it changed", err)
	}
	if infos, _ := e.svc.List(e.repo); len(infos) != 1 {
		t.Fatalf("a refused fork left a session (and ran the changed command): %+v", infos)
	}
}
