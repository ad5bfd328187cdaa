package agents

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

const setupScript = `{"rules":[
 {"when":{"task":"^setup","turn":1},"code":"print(open('.env').read().strip(), os.path.exists('deps/lib.txt') if (os := __import__('os')) else 0)"},
 {"when":{"task":"^setup"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestWorktreeSetupFromConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setupScript)
	os.WriteFile(filepath.Join(e.repo, ".env"), []byte("SECRET=1\n"), 0o600)
	os.MkdirAll(filepath.Join(e.repo, "deps"), 0o755)
	os.WriteFile(filepath.Join(e.repo, "deps", "lib.txt"), []byte("lib\n"), 0o644)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"copy":[".env"],"link":["deps"],"command":"echo prepared > .prepared && test -L deps"}}`), 0o644)
	e.trust() // the command is the repository's: trusted as the user would
	s := e.create("setup check")
	e.settled(s)
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	if !strings.Contains(out, "SECRET=1 True") {
		t.Errorf("the cell did not see the copied .env and linked deps: %q", out)
	}
	if ev := e.events(s, event.TypeWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != true {
		t.Errorf("worktree_setup events: %v", ev)
	}
	if tree := git(t, e.repo, "ls-tree", "-r", "--name-only", s.meta.Branch); strings.Contains(tree, ".env") || strings.Contains(tree, "deps") {
		t.Errorf("copied or linked paths were committed:\n%s", tree)
	}
}

func TestWorktreeSetupFailureIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setupScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"echo missing toolchain >&2; exit 3"}}`), 0o644)
	e.trust() // the command is the repository's: trusted as the user would
	s := e.create("setup that fails")
	e.settled(s)
	ev := e.events(s, event.TypeWorktreeSetup)
	if len(ev) != 1 || ev[0]["ok"] != false || !strings.Contains(fmt.Sprint(ev[0]["error"]), "missing toolchain") {
		t.Fatalf("worktree_setup events: %v", ev)
	}
	msgs := e.events(s, event.TypeUserMessage)
	if !strings.Contains(fmt.Sprint(msgs[0]["text"]), "preparing your worktree failed") {
		t.Errorf("the model was not told: %v", msgs[0]["text"])
	}
}

// A fork's worktree is new too: it gets the same copies, links and setup command, and a
// failure is a note in the fork's conversation (kept across a restart).
func TestForkRunsWorktreeSetup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setupScript)
	os.WriteFile(filepath.Join(e.repo, ".env"), []byte("SECRET=1\n"), 0o600)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"copy":[".env"],"command":"test ! -e .fail"}}`), 0o644)
	e.trust() // the command is the repository's: trusted as the user would
	s := e.create("setup check")
	e.settled(s)
	f, err := e.svc.Fork(context.Background(), s.meta.ID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.meta.Worktree, ".env")); err != nil || string(b) != "SECRET=1\n" {
		t.Errorf("the fork's worktree lacks the copied .env: %q %v", b, err)
	}
	if ev := e.events(f, event.TypeWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != true {
		t.Errorf("fork worktree_setup events: %v", ev)
	}

	// The setup command fails in the next fork: recorded, and the fork's model is told.
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"echo no toolchain >&2; exit 4"}}`), 0o644)
	e.trust() // the command is the repository's: trusted as the user would
	g, err := e.svc.Fork(context.Background(), s.meta.ID, 0, "second")
	if err != nil {
		t.Fatal(err)
	}
	if ev := e.events(g, event.TypeWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != false || !strings.Contains(fmt.Sprint(ev[0]["error"]), "no toolchain") {
		t.Fatalf("failed fork setup events: %v", ev)
	}
	told := func(sess *Session) bool {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		for _, m := range sess.conv {
			if strings.Contains(m.Content, "preparing your worktree failed") && strings.Contains(m.Content, "no toolchain") {
				return true
			}
		}
		return false
	}
	if !told(g) {
		t.Error("the fork's conversation does not tell the model its setup failed")
	}
	if told(f) {
		t.Error("the fork whose setup succeeded was told of a failure")
	}
	g2, err := e.restart().Get(g.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !told(g2) {
		t.Error("after a restart the fork's conversation lost the setup failure note")
	}
}
