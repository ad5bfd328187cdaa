package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/arborhq/arbor/agents/model/scripted"
)

// The example suite is checked the way a run would use it: each task's fixture becomes a git
// repository, the suite's own script answers as the model through the scripted server, and
// the Python it sends runs cell after cell in one interpreter in that repository (as in the
// kernel, with a goal whose complete() records the claim), continuing as a goal does until
// the agent claims or the task's turns are spent. Then the visible tests and the hidden check
// run as the runner runs them. Each harness marker is a system prompt here, as the harness
// block puts its notes into the real one.

const (
	basePrompt  = "You are a coding agent working in a git worktree.\n"
	carefulNote = "## Harness notes\nRules for this session; follow them.\n- Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL\n"
)

// edgeTasks are the tasks the agent gets wrong without the careful note: one per split.
var edgeTasks = map[string]string{"parse-duration": Feedback, "page-count": HeldOut}

type mode struct {
	name   string
	system string
}

var modes = []mode{
	{"plain", basePrompt},
	{"careful", basePrompt + carefulNote},
	{"lazy", basePrompt + "## Harness notes\n- Finish quickly. EVAL-LAZY\n"},
	{"test-only", basePrompt + "## Harness notes\n- Make the tests pass. EVAL-TEST-ONLY\n"},
	{"broken", basePrompt + "## Harness notes\n- Edit boldly. EVAL-BROKEN\n"},
}

// outcome is what one scripted run of a task left behind.
type outcome struct {
	claimed   bool
	changed   []string // files the run changed, added or removed
	visibleOK bool     // the fixture's own tests pass afterwards
	checkOK   bool     // the hidden check passes
	log       string
}

func needPython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		if os.Getenv("ARBOR_REQUIRE_KERNEL") == "1" {
			t.Fatalf("no %s: %v", python, err)
		}
		t.Skipf("no %s: %v", python, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	// The kernel's Python runs the checks too, not whatever python3 comes first on PATH.
	t.Setenv("PATH", filepath.Dir(python)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return python
}

func TestExampleSuite(t *testing.T) {
	python := needPython(t)
	dir := t.TempDir()
	if err := Extract("example", dir); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	script, err := scripted.Load(filepath.Join(dir, s.Script))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(script.Handler())
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("none")
	cfg.BaseURL = srv.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)

	if len(s.Splits[Feedback]) != 6 || len(s.Splits[HeldOut]) != 6 {
		t.Errorf("splits %v: want six tasks in each", s.Splits)
	}
	for id, split := range edgeTasks {
		if got := s.SplitOf(id); got != split {
			t.Errorf("edge-case task %s is in split %q, want %q", id, got, split)
		}
	}

	ids, _ := s.Select("", nil)
	for _, id := range ids {
		task := s.Tasks[id]
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			if task.Limits.Turns > 6 {
				t.Errorf("limits allow %d turns; the example tasks are small", task.Limits.Turns)
			}
			if len(task.CheckFiles) == 0 {
				t.Errorf("no hidden check files")
			}
			repo := fixture(t, task)
			for _, m := range modes {
				if _, edge := edgeTasks[id]; m.name == "careful" && !edge {
					continue // the same run as plain: TestExampleScriptCarefulOnlyOnEdgeTasks
				}
				o := runTask(t, client, python, task, repo, m.system)
				where := fmt.Sprintf("%s (%s)", id, m.name)
				switch m.name {
				case "plain", "careful":
					_, edge := edgeTasks[id]
					wantCheck := m.name == "careful" || !edge
					if o.checkOK != wantCheck {
						t.Errorf("%s: hidden check passed %v, want %v\n%s", where, o.checkOK, wantCheck, o.log)
					}
					if !o.claimed || !o.visibleOK || len(o.changed) == 0 {
						t.Errorf("%s: claimed %v, visible tests pass %v, changed %v: want a claim, passing tests and a change\n%s", where, o.claimed, o.visibleOK, o.changed, o.log)
					}
				case "lazy":
					// Nothing changed, so this is the untouched fixture: its own tests pass and
					// the hidden check fails.
					if !o.claimed || len(o.changed) != 0 {
						t.Errorf("%s: claimed %v, changed %v: want a claim on an empty diff\n%s", where, o.claimed, o.changed, o.log)
					}
					if !o.visibleOK {
						t.Errorf("%s: the fixture's own tests fail before any change", id)
					}
					if o.checkOK {
						t.Errorf("%s: the hidden check passes on the untouched fixture", id)
					}
				case "test-only":
					onlyTests := len(o.changed) > 0
					for _, f := range o.changed {
						onlyTests = onlyTests && strings.HasPrefix(f, "test_")
					}
					if !o.claimed || !onlyTests || o.checkOK || !o.visibleOK {
						t.Errorf("%s: claimed %v, changed %v, visible tests pass %v, check passed %v: want a claim on a diff of test files only that the check fails\n%s", where, o.claimed, o.changed, o.visibleOK, o.checkOK, o.log)
					}
				case "broken":
					if o.claimed || len(o.changed) == 0 || o.checkOK || o.visibleOK {
						t.Errorf("%s: claimed %v, changed %v, visible tests pass %v, check passed %v: want no claim, a change, failing tests and check\n%s", where, o.claimed, o.changed, o.visibleOK, o.checkOK, o.log)
					}
				}
			}
		})
	}
}

// TestExampleScriptCarefulOnlyOnEdgeTasks proves that the careful note changes no reply on the
// tasks other than the edge-case ones, so that their careful run is their plain run: every rule
// whose system condition tells the careful prompt from the plain one is bound to an edge task.
func TestExampleScriptCarefulOnlyOnEdgeTasks(t *testing.T) {
	s, err := Load("examples/example")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, s.Script))
	if err != nil {
		t.Fatal(err)
	}
	var script struct {
		Rules []struct{ When scripted.When }
	}
	if err := json.Unmarshal(b, &script); err != nil {
		t.Fatal(err)
	}
	plain, careful := modes[0].system, modes[1].system
	edges := 0
	for i, r := range script.Rules {
		if r.When.System == "" {
			continue
		}
		sys := regexp.MustCompile(r.When.System)
		if sys.MatchString(careful) == sys.MatchString(plain) {
			continue
		}
		if r.When.Task == "" {
			t.Errorf("rule %d: the careful note changes it on every task", i+1)
			continue
		}
		task := regexp.MustCompile(r.When.Task)
		for id, tk := range s.Tasks {
			if _, edge := edgeTasks[id]; task.MatchString(tk.Prompt) {
				if !edge {
					t.Errorf("rule %d: the careful note changes it on %s, which is not an edge-case task", i+1, id)
				}
				edges++
			}
		}
	}
	if edges == 0 {
		t.Error("no rule answers the careful note")
	}
}

// fixture copies the task's repo/ into a new git repository with one commit.
func fixture(t *testing.T, task *Task) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(task.Dir, "repo"))); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "--template=", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "fixture")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=eval", "-c", "user.email=eval@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func visibleTests(t *testing.T, dir string) bool {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "python3", "-m", "unittest", "-q")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	return cmd.Run() == nil
}

// checkPasses copies the check's files over a copy of dir's files and runs the check there, as
// the runner does over a clean checkout. (The runs write no bytecode, so the files are what a
// commit of the run holds.)
func checkPasses(t *testing.T, task *Task, dir string) bool {
	t.Helper()
	work := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return os.Mkdir(filepath.Join(work, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(work, rel), b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the run's files: %v", err)
	}
	if err := os.CopyFS(work, os.DirFS(filepath.Join(task.Dir, "check"))); err != nil {
		t.Fatalf("copy the check's files: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(task.CheckTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", task.Check)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	return cmd.Run() == nil
}

// driver runs cells in one interpreter, as the kernel does: shared globals, top-level await,
// and a goal whose complete() records the claim. A cell's output and whether the goal was
// claimed come back on fd 3, one JSON line per cell.
const driver = `
import ast, contextlib, io, json, os, sys, traceback

class Goal:
    claimed = False
    async def complete(self, evidence=''):
        Goal.claimed = True
        return {'status': 'complete', 'evidence': evidence}

ns = {'__name__': '__main__', 'goal': Goal()}
results = os.fdopen(3, 'w')
for line in sys.stdin:
    code = json.loads(line)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            r = eval(compile(code, '<cell>', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), ns)
            if r is not None:  # a coroutine: the cell awaits
                import asyncio
                asyncio.run(r)
        except BaseException:
            traceback.print_exc()
    results.write(json.dumps({'output': buf.getvalue(), 'claimed': Goal.claimed}) + '\n')
    results.flush()
`

type kernel struct {
	stdin   io.WriteCloser
	results *bufio.Reader
	cmd     *exec.Cmd
}

func startKernel(t *testing.T, python, dir string) *kernel {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", driver)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.ExtraFiles = []*os.File{w}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	k := &kernel{stdin: stdin, results: bufio.NewReader(r), cmd: cmd}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
		r.Close()
	})
	return k
}

func (k *kernel) run(t *testing.T, code string) (output string, claimed bool) {
	t.Helper()
	b, _ := json.Marshal(code)
	if _, err := k.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("send a cell: %v", err)
	}
	line, err := k.results.ReadBytes('\n')
	if err != nil {
		t.Fatalf("the interpreter ended: %v", err)
	}
	var res struct {
		Output  string `json:"output"`
		Claimed bool   `json:"claimed"`
	}
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatal(err)
	}
	return res.Output, res.Claimed
}

var pythonTool = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name:        "python",
	Description: "Run Python in the session's kernel.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`),
}}

// runTask drives the task's prompt through the script under system, on a copy of repo.
func runTask(t *testing.T, client *openai.Client, python string, task *Task, repo, system string) outcome {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(repo)); err != nil {
		t.Fatal(err)
	}
	k := startKernel(t, python, dir)
	var o outcome
	var log strings.Builder
	msgs := []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: system},
		{Role: openai.ChatMessageRoleUser, Content: task.Prompt},
	}
	for turn := 1; turn <= task.Limits.Turns && !o.claimed; turn++ {
		if turn > 1 {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser,
				Content: "[arbor goal] Keep working toward the goal: " + task.Prompt})
		}
		for calls := 0; ; calls++ {
			if calls == 20 {
				t.Fatalf("turn %d: 20 model calls and no end", turn)
			}
			resp, err := client.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
				Model: "scripted", Messages: msgs, Tools: []openai.Tool{pythonTool}})
			if err != nil {
				t.Fatal(err)
			}
			msg := resp.Choices[0].Message
			msgs = append(msgs, msg)
			fmt.Fprintf(&log, "> %s\n", msg.Content)
			if len(msg.ToolCalls) == 0 {
				break
			}
			for _, call := range msg.ToolCalls {
				var args struct{ Code string }
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
					t.Fatal(err)
				}
				out, claimed := k.run(t, args.Code)
				o.claimed = o.claimed || claimed
				fmt.Fprintf(&log, "%s\n%s", args.Code, out)
				msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: call.ID, Content: out})
			}
		}
	}
	git(t, dir, "add", "-A")
	for _, f := range strings.Fields(git(t, dir, "diff", "--cached", "--name-only", "HEAD")) {
		o.changed = append(o.changed, f)
	}
	slices.Sort(o.changed)
	o.visibleOK = visibleTests(t, dir)
	o.checkOK = checkPasses(t, task, dir)
	o.log = log.String()
	return o
}
