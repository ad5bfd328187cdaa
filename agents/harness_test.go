package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/harness"
)

// Each scope's store lives where DESIGN says, and the git CLI sees it there.
func TestHarnessStoresPerScope(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	ctx := t.Context()
	s := e.create("anything")
	e.settled(s)
	note := harness.Entry{Kind: harness.Note, ID: "n", Title: "t", Body: "b"}
	for _, sc := range harness.Scopes {
		st, err := e.svc.HarnessStore(ctx, e.repo, sc, s.meta.ID)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		if _, err := st.Put(ctx, note, "", harness.Change{Author: "user"}); err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
	}
	refs := git(t, e.repo, "for-each-ref", "--format=%(refname)", "refs/arbor/harness/")
	if refs != "refs/arbor/harness/session/"+s.meta.ID+"\nrefs/arbor/harness/workspace\n" {
		t.Errorf("repository harness refs:\n%s", refs)
	}
	// From a session's worktree, the workspace scope is the main repository's.
	st, err := e.svc.HarnessStore(ctx, s.meta.Worktree, harness.ScopeWorkspace, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, harness.Note, "n"); err != nil || got.Body != "b" {
		t.Errorf("workspace scope from a worktree: %+v %v", got, err)
	}
	global := filepath.Join(os.Getenv("XDG_DATA_HOME"), "arbor", "harness")
	if out := git(t, global, "--git-dir="+global, "show", "refs/arbor/harness/global:notes/n.md"); !strings.Contains(out, "b") {
		t.Errorf("global store: %q", out)
	}
	if _, err := e.svc.HarnessStore(ctx, e.repo, "team", ""); err == nil {
		t.Error("unknown scope accepted")
	}
	if _, err := e.svc.HarnessStore(ctx, e.repo, harness.ScopeSession, "nope"); err == nil {
		t.Error("unknown session accepted")
	}
}
