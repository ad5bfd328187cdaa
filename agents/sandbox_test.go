package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/sandbox"
)

// sandboxCell is one cell run by a scripted session whose task starts with "probe".
// plantSecrets gives the test a $HOME with a private key in ~/.ssh ("PRIVATE") and a model key
// in $OPENAI_KEY ("sk-planted"), for model code to try to read.
func plantSecrets(t *testing.T) {
	t.Helper()
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh/id_rsa"), []byte("PRIVATE"), 0o600)
	t.Setenv("HOME", home)
	t.Setenv("OPENAI_KEY", "sk-planted")
}

func sandboxScript(t *testing.T, code string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"rules": []map[string]any{
			{"when": map[string]any{"task": "^probe", "turn": 1}, "code": code},
			{"when": map[string]any{"task": "^probe"}, "text": "done"},
		},
		"default": map[string]any{"text": "ok"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// userConfig writes the user's config (not the repository's, which needs trust for some
// settings) for the service of e.
func userConfig(t *testing.T, body string) {
	t.Helper()
	p, ok := userConfigs.Load(t)
	if !ok {
		t.Fatal("userConfig: no test service made with newEnv in this test")
	}
	if err := os.WriteFile(p.(string), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func needSandbox(t *testing.T) {
	t.Helper()
	if st := sandbox.Probe(t.Context()); !st.Available {
		if os.Getenv("ARBOR_REQUIRE_KERNEL") == "1" {
			t.Fatalf("sandbox unavailable: %s", st.Reason)
		}
		t.Skipf("sandbox unavailable: %s", st.Reason)
	}
}

func startedSandboxed(t *testing.T, e *testEnv, s *Session) any {
	t.Helper()
	for _, ev := range e.events(s, event.TypeKernel) {
		if ev["event"] == "started" {
			return ev["sandboxed"]
		}
	}
	t.Fatal("no kernel started event")
	return nil
}

const sessionProbe = `import os, subprocess
def probe(name, f):
    try:
        print(name, "OPEN", repr(f())[:80])
    except Exception as e:
        print(name, "BLOCKED", type(e).__name__)
probe("main-tree", lambda: open(%q).read())
probe("ssh", lambda: open(os.path.expanduser("~/.ssh/id_rsa")).read())
probe("sessions", lambda: os.listdir(%q))
print("key-in-env", "OPENAI_KEY" in os.environ, "MY_TOOL" in os.environ)
print("git", subprocess.run(["git", "log", "--oneline"], capture_output=True, text=True).stdout.strip())
open("inside.txt", "w").write("ok")`

// A session with the default configuration gets a sandboxed kernel (where bubblewrap works):
// its cell cannot read the user's tree, ~/.ssh or the other sessions, never sees a model's key
// even when declared in kernelEnv, and git works in its worktree with the repository under /tmp.
func TestDefaultSessionIsSandboxed(t *testing.T) {
	needSandbox(t)
	plantSecrets(t)
	t.Setenv("MY_TOOL", "1")
	repo := filepath.Join(t.TempDir(), "repo")
	code := fmt.Sprintf(sessionProbe, filepath.Join(repo, "main.py"), filepath.Join(repo, ".git/arbor/sessions"))
	e := newEnvIn(t, sandboxScript(t, code), repo)
	userConfig(t, `{"kernelEnv":["MY_TOOL","OPENAI_KEY"],"models":{"other":{"baseURL":"http://127.0.0.1:1","apiKeyEnv":"OPENAI_KEY"}}}`)
	os.MkdirAll(filepath.Join(repo, ".git/arbor/sessions/another/kernel"), 0o700)
	s := e.create("probe the sandbox")
	e.settled(s)
	if got := startedSandboxed(t, e, s); got != true {
		t.Errorf("kernel started with sandboxed=%v, want true", got)
	}
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) == 0 {
		t.Fatal("no tool result")
	}
	out := fmt.Sprint(outs[0]["output"])
	// Only its own session directory is there, bound back over the mask.
	for _, want := range []string{"main-tree BLOCKED", "ssh BLOCKED", "sessions OPEN ['" + s.meta.ID + "']", "key-in-env False True", "git ", "init"} {
		if !strings.Contains(out, want) {
			t.Errorf("cell output lacks %q:\n%s", want, out)
		}
	}
	if got := git(t, e.repo, "show", s.meta.Branch+":inside.txt"); got != "ok" {
		t.Errorf("write inside the worktree did not land: %q", got)
	}
}

// "off" runs the kernel unsandboxed and says so; the environment rules still hold.
func TestSandboxOff(t *testing.T) {
	t.Setenv("OPENAI_KEY", "sk-planted")
	repo := filepath.Join(t.TempDir(), "repo")
	e := newEnvIn(t, sandboxScript(t, `import os; print("main", os.path.exists(`+fmt.Sprintf("%q", filepath.Join(repo, "main.py"))+`), "OPENAI_KEY" in os.environ)`), repo)
	userConfig(t, `{"sandbox":"off","kernelEnv":["OPENAI_KEY"],"models":{"other":{"baseURL":"http://127.0.0.1:1","apiKeyEnv":"OPENAI_KEY"}}}`)
	s := e.create("probe unsandboxed")
	e.settled(s)
	if got := startedSandboxed(t, e, s); got != false {
		t.Errorf("kernel started with sandboxed=%v, want false", got)
	}
	if out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"]); !strings.Contains(out, "main True False") {
		t.Errorf("unsandboxed cell: %s", out)
	}
}

// "bwrap" where bubblewrap cannot work fails the kernel's start with the probe's reason and
// what to do, instead of running unsandboxed.
func TestSandboxRequiredButUnavailable(t *testing.T) {
	e := newEnv(t, sandboxScript(t, "print('RAN')"))
	e.svc.sandbox = sandbox.Status{Reason: "bwrap: Failed to make / slave"}
	userConfig(t, `{"sandbox":"bwrap"}`)
	s := e.create("probe required")
	e.settled(s)
	var failed string
	for _, ev := range e.events(s, event.TypeKernel) {
		if ev["event"] == "start_failed" {
			failed = fmt.Sprint(ev["error"])
		}
		if ev["event"] == "started" {
			t.Error("a kernel started without the required sandbox")
		}
	}
	if !strings.Contains(failed, "Failed to make / slave") || !strings.Contains(failed, `"sandbox": "auto"`) {
		t.Errorf("start_failed error = %q", failed)
	}
	for _, ev := range e.events(s, event.TypeToolFinished) {
		if strings.Contains(fmt.Sprint(ev["output"]), "RAN") {
			t.Error("the cell ran")
		}
	}
}

// The worktree setup command runs in the session's sandbox with the kernels' environment: it
// cannot read the user's tree or ~/.ssh, nor see a model's key, and still writes its worktree.
func TestSetupCommandSandboxed(t *testing.T) {
	needSandbox(t)
	plantSecrets(t)
	repo := filepath.Join(t.TempDir(), "repo")
	e := newEnvIn(t, sandboxScript(t, "print(open('.probe').read())"), repo)
	cmd := fmt.Sprintf(`{ cat %s || echo tree-hidden; cat ~/.ssh/id_rsa || echo ssh-hidden; echo key=${OPENAI_KEY:-unset}; git log --oneline | wc -l; } > .probe 2>/dev/null`,
		filepath.Join(repo, "main.py"))
	b, _ := json.Marshal(map[string]any{"worktree": map[string]any{"command": cmd},
		"models": map[string]any{"other": map[string]any{"baseURL": "http://127.0.0.1:1", "apiKeyEnv": "OPENAI_KEY"}}})
	userConfig(t, string(b))
	s := e.create("probe setup")
	e.settled(s)
	if ev := e.events(s, event.TypeWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != true {
		t.Fatalf("worktree_setup events: %v", ev)
	}
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	for _, want := range []string{"tree-hidden", "ssh-hidden", "key=unset", "1"} {
		if !strings.Contains(out, want) {
			t.Errorf("setup command's view lacks %q:\n%s", want, out)
		}
	}
}

// A skill's module is model code, and checking that it imports runs it: in the session's
// sandbox, like a cell. A module that tries the user's tree, ~/.ssh and a model key at import
// sees none of them, writes nothing outside, and its refusal carries the traceback.
func TestSkillImportCheckSandboxed(t *testing.T) {
	needSandbox(t)
	plantSecrets(t)
	repo := filepath.Join(t.TempDir(), "repo")
	module := fmt.Sprintf(`import os
seen = []
for p in [%q, os.path.expanduser('~/.ssh/id_rsa')]:
    try:
        seen.append(open(p).read()[:20])
    except OSError as e:
        seen.append('hidden:' + type(e).__name__)
try:
    open(%q, 'w').write('pwned')
    seen.append('wrote')
except OSError as e:
    seen.append('write-refused')
seen.append('key=' + os.environ.get('OPENAI_KEY', 'unset'))
raise RuntimeError('SEEN ' + ' | '.join(seen))
`, filepath.Join(repo, "main.py"), filepath.Join(repo, "PWNED"))
	code := fmt.Sprintf("try:\n    await harness.skills.create('probe', 'Probe', body='probe()', module=%q)\nexcept ArborError as e:\n    print('refused:', e)", module)
	e := newEnvIn(t, sandboxScript(t, code), repo)
	b, _ := json.Marshal(map[string]any{"models": map[string]any{"other": map[string]any{"baseURL": "http://127.0.0.1:1", "apiKeyEnv": "OPENAI_KEY"}}})
	userConfig(t, string(b))
	s := e.create("probe a skill")
	e.settled(s)
	out := fmt.Sprint(e.events(s, event.TypeToolFinished)[0]["output"])
	for _, want := range []string{"refused:", "does not import", "Traceback", "SEEN hidden:", "| hidden:", "key=unset"} {
		if !strings.Contains(out, want) {
			t.Errorf("the check's refusal lacks %q:\n%s", want, out)
		}
	}
	for _, leak := range []string{"print('hi')", "PRIVATE", "sk-planted"} {
		if strings.Contains(out, leak) {
			t.Errorf("the skill's import saw %q:\n%s", leak, out)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "PWNED")); err == nil {
		t.Error("the skill's import wrote into the user's tree")
	}
	if refs := git(t, repo, "for-each-ref", "refs/arbor/harness/"); refs != "" {
		t.Errorf("a skill that does not import was stored: %s", refs)
	}
}

// A repository's setup command has the kernels' process budget: a fork loop in it stops at
// the limit (counted inside, children sleeping so they all hold a slot), and the session's
// kernel still starts and runs its cell.
func TestSetupCommandBudget(t *testing.T) {
	needSandbox(t)
	const limit = 64
	e := newEnvIn(t, sandboxScript(t, "print(open('.forks').read())"), filepath.Join(t.TempDir(), "repo"))
	bomb := `import os, time
n = 0
try:
    while n < 2000:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError:
    pass
open('.forks', 'w').write('FORKS %d' % n)`
	cmd := fmt.Sprintf(`/usr/bin/python3 -c "exec(bytes.fromhex('%x').decode())"`, bomb)
	b, _ := json.Marshal(map[string]any{"worktree": map[string]any{"command": cmd},
		"limits": map[string]any{"processes": limit}})
	userConfig(t, string(b))
	s := e.create("probe a bounded setup")
	e.settled(s)
	if ev := e.events(s, event.TypeWorktreeSetup); len(ev) != 1 || ev[0]["ok"] != true {
		t.Fatalf("worktree_setup events: %v", ev)
	}
	fin := e.events(s, event.TypeToolFinished)
	if len(fin) != 1 {
		recs, _ := s.Events(0)
		for _, r := range recs {
			t.Logf("%s %s", r.Type, r.Data)
		}
		t.Fatal("want the cell's result")
	}
	out := fmt.Sprint(fin[0]["output"])
	var n int
	if _, err := fmt.Sscanf(out[strings.Index(out, "FORKS"):], "FORKS %d", &n); err != nil {
		t.Fatalf("the setup's count: %v in %q", err, out)
	}
	if n >= limit {
		t.Errorf("the setup command forked %d children under a budget of %d tasks", n, limit)
	}
	t.Logf("setup forks under a budget of %d: %d", limit, n)
}
