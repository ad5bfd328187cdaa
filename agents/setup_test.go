package agents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const setupScript = `{"rules":[
 {"when":{"task":"^setup","turn":1},"code":"print(open('.env').read().strip(), os.path.exists('deps/lib.txt') if (os := __import__('os')) else 0)"},
 {"when":{"task":"^setup"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestWorktreeSetupFromConfig(t *testing.T) {
	e := newEnv(t, setupScript)
	os.WriteFile(filepath.Join(e.repo, ".env"), []byte("SECRET=1\n"), 0o600)
	os.MkdirAll(filepath.Join(e.repo, "deps"), 0o755)
	os.WriteFile(filepath.Join(e.repo, "deps", "lib.txt"), []byte("lib\n"), 0o644)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"copy":[".env"],"link":["deps"],"command":"echo prepared > .prepared && test -L deps"}}`), 0o644)
	s := e.create("setup check")
	e.settled(s)
	out := fmt.Sprint(e.events(s, EvToolFinished)[0]["output"])
	if !strings.Contains(out, "SECRET=1 True") {
		t.Errorf("the cell did not see the copied .env and linked deps: %q", out)
	}
	if ev := e.events(s, EvWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != true {
		t.Errorf("worktree_setup events: %v", ev)
	}
	if tree := git(t, e.repo, "ls-tree", "-r", "--name-only", s.meta.Branch); strings.Contains(tree, ".env") || strings.Contains(tree, "deps") {
		t.Errorf("copied or linked paths were committed:\n%s", tree)
	}
}

func TestWorktreeSetupFailureIsReported(t *testing.T) {
	e := newEnv(t, setupScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"worktree":{"command":"echo missing toolchain >&2; exit 3"}}`), 0o644)
	s := e.create("setup that fails")
	e.settled(s)
	ev := e.events(s, EvWorktreeSetup)
	if len(ev) != 1 || ev[0]["ok"] != false || !strings.Contains(fmt.Sprint(ev[0]["error"]), "missing toolchain") {
		t.Fatalf("worktree_setup events: %v", ev)
	}
	msgs := e.events(s, EvUserMessage)
	if !strings.Contains(fmt.Sprint(msgs[0]["text"]), "preparing your worktree failed") {
		t.Errorf("the model was not told: %v", msgs[0]["text"])
	}
}
