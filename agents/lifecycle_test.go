package agents

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
)

const reviveScript = `{"rules":[
 {"when":{"task":"^remember","turn":1},"code":"x = 41\nprint('set')"},
 {"when":{"task":"^remember","last":"^what is x"},"code":"print(x + 1)"},
 {"when":{"task":"^remember"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestIdleSessionGoesInactiveAndRevivesWithNamespace(t *testing.T) {
	e := newEnv(t, reviveScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"idleTimeout":"200ms"}`), 0o644)
	s := e.create("remember a number")
	e.waitFor("inactive", func() bool { return s.State() == Inactive })
	if s.hasKernel() {
		t.Fatal("an inactive session still has a kernel")
	}
	var snap bool
	for _, k := range e.events(s, event.TypeKernel) {
		if k["event"] == "snapshot" {
			snap = true
		}
	}
	if !snap {
		t.Fatalf("no snapshot before going inactive: %v", e.events(s, event.TypeKernel))
	}
	if _, err := e.svc.Send(context.Background(), s.meta.ID, "what is x plus one?", "auto"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("revived turn", func() bool { return len(e.events(s, event.TypeToolFinished)) == 2 })
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[1]["output"])
	if !strings.Contains(out, "42") || !strings.Contains(out, "restored") {
		t.Errorf("revived kernel output = %q, want 42 and a note about the restored namespace", out)
	}
	if got := e.svc.Info(s).Usage.HumanInterventions; got != 1 {
		t.Errorf("human interventions = %d, want 1", got)
	}
}

const sandboxScript = `{"rules":[
 {"when":{"task":"^escape","turn":1},"code":"import os\nopen('inside.txt','w').write('ok')\ntry:\n    open(os.path.expanduser('~/arbor-escape-test.txt'),'w').write('x')\n    print('ESCAPED')\nexcept OSError as e:\n    print('refused:', type(e).__name__)"},
 {"when":{"task":"^escape"},"text":"done"}
],"default":{"text":"ok"}}`

func TestSandboxFromConfig(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap not installed")
	}
	e := newEnv(t, sandboxScript)
	os.WriteFile(filepath.Join(e.repo, "arbor.json"), []byte(`{"sandbox":"bwrap"}`), 0o644)
	s := e.create("escape the worktree")
	e.settled(s)
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) == 0 {
		t.Fatal("no tool result")
	}
	out := fmt.Sprint(outs[0]["output"])
	if strings.Contains(out, "ESCAPED") || !strings.Contains(out, "refused") {
		t.Errorf("sandboxed cell output: %s", out)
	}
	if got := git(t, e.repo, "show", s.meta.Branch+":inside.txt"); got != "ok" {
		t.Errorf("write inside the worktree did not land: %q", got)
	}
}
