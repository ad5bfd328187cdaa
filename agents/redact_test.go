package agents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/workspace"
)

func TestRedactorKnowsModelKeysAndCredentials(t *testing.T) {
	t.Setenv("OPENAI_KEY", "sk-model-key-0123456789")
	t.Setenv("DEPLOY_TOKEN", "tok-abcdefghijkl")
	t.Setenv("SHORT_TOKEN", "abc")
	t.Setenv("PLAIN", "sk-model-key-not-a-secret-name")
	r := newRedactor(workspace.Config{Models: map[string]workspace.Model{"m": {APIKeyEnv: "OPENAI_KEY"}}})
	got := r("key=sk-model-key-0123456789 tok=tok-abcdefghijkl short=abc plain=sk-model-key-not-a-secret-name")
	for _, leaked := range []string{"sk-model-key-0123456789", "tok-abcdefghijkl"} {
		if strings.Contains(got, leaked) {
			t.Errorf("%q leaked: %s", leaked, got)
		}
	}
	for _, want := range []string{"[redacted $OPENAI_KEY]", "[redacted $DEPLOY_TOKEN]", "short=abc", "plain=sk-model-key-not-a-secret-name"} {
		if !strings.Contains(got, want) {
			t.Errorf("redacted output %q lacks %q", got, want)
		}
	}
}

// A cell that comes across a secret (here in a file of the repository) prints it; the event
// log, the artifact and the model see a marker instead.
func TestToolOutputIsRedacted(t *testing.T) {
	const secret = "tok-0123456789abcdef"
	t.Setenv("SERVICE_TOKEN", secret)
	repo := filepath.Join(t.TempDir(), "repo")
	e := newEnvIn(t, `{"rules":[
 {"when":{"turn":1},"code":"s = open('conf.txt').read().strip()\nprint('found', s)\nprint('x' * 20000)\nraise ValueError(s)"},
 {"when":{"turn":2},"text":"ok"}
],"default":{"text":"ok"}}`, repo)
	gitCommitFile(t, repo, "conf.txt", secret+"\n")
	s := e.create("read the config")
	e.settled(s)
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) != 1 {
		t.Fatalf("tool results %v", outs)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Error("the secret reached the event log")
	}
	if !strings.Contains(string(b), "found [redacted $SERVICE_TOKEN]") {
		t.Errorf("no redaction marker in the log")
	}
	arts, _ := filepath.Glob(filepath.Join(s.artifactsDir(), "*"))
	for _, a := range arts {
		if data, _ := os.ReadFile(a); strings.Contains(string(data), secret) {
			t.Errorf("artifact %s holds the secret", a)
		}
	}
	if len(arts) == 0 {
		t.Error("the long output made no artifact; the test did not check one")
	}
}

func gitCommitFile(t *testing.T, repo, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", name)
	git(t, repo, "commit", "-qm", "add "+name)
}
