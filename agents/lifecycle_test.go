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

const reviveScript = `{"rules":[
 {"when":{"task":"^remember","turn":1},"code":"x = 41\nprint('set')"},
 {"when":{"task":"^remember","last":"^what is x"},"code":"print(x + 1)"},
 {"when":{"task":"^remember"},"text":"ok"}
],"default":{"text":"ok"}}`

func TestIdleSessionGoesInactiveAndRevivesWithNamespace(t *testing.T) {
	t.Parallel()
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
