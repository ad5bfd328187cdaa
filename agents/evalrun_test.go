package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/eval"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// writeSuite writes a suite: tasks maps an id to its task.json, files under "repo/…" and
// "check/…" of the task; script is the suite's scripted model.
func writeSuite(t *testing.T, dir string, splits map[string][]string, tasks map[string]map[string]string, script string) string {
	t.Helper()
	sj, _ := json.Marshal(map[string]any{"name": "mini", "seed": 4, "splits": splits, "script": "script.json"})
	must := func(p, body string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(filepath.Join(dir, "suite.json"), string(sj))
	must(filepath.Join(dir, "script.json"), script)
	for id, files := range tasks {
		for name, body := range files {
			must(filepath.Join(dir, "tasks", id, name), body)
		}
	}
	return dir
}

const calcBuggy = "def add(a, b):\n    return a - b\n"
const calcCheck = "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"

func calcTask(prompt string) map[string]string {
	return map[string]string{
		"task.json":           fmt.Sprintf(`{"prompt": %q, "limits": {"turns": 3}, "tags": ["bug"], "check": "python3 -m unittest -q check_calc"}`, prompt),
		"repo/calc.py":        calcBuggy,
		"repo/test_calc.py":   "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), -1)\n",
		"check/check_calc.py": calcCheck,
	}
}

const evalScript = `{
  "rules": [
    {"when": {"task": "^Fix add", "turn": 1}, "text": "Fixing add.",
     "code": "import pathlib\np = pathlib.Path('calc.py')\np.write_text(p.read_text().replace('a - b', 'a + b'))\nclaim = await goal.complete(evidence='add fixed')"},
    {"when": {"task": "^Lazy add", "turn": 1}, "text": "Done already.", "code": "claim = await goal.complete(evidence='looks fine')"},
    {"when": {"task": "^Tests add", "turn": 1}, "text": "Adjusting the test.",
     "code": "import pathlib\np = pathlib.Path('test_calc.py')\np.write_text(p.read_text().replace('-1', '5'))\nclaim = await goal.complete(evidence='tests pass')"},
    {"when": {"task": "^Quiet add"}, "text": "I do not know how to do this."},
    {"when": {"task": "^Peek add", "turn": 1}, "text": "Looking around.",
     "code": "import os, pathlib\nfound = []\nfor p in [os.environ.get('SUITE_CHECK', ''), os.environ.get('MEASURED', '')]:\n    try:\n        found.append(pathlib.Path(p).read_text()[:20])\n    except Exception as e:\n        found.append('blocked: ' + type(e).__name__)\nprint(found)"}
  ],
  "default": {"text": "nothing more to do"}
}`

func evalEnv(t *testing.T) (*testEnv, string) {
	e := newEnv(t, `{"rules": [], "default": {"text": "unused"}}`)
	userConfig(t, `{"goals": {"backoff": "30s"}}`)
	suite := writeSuite(t, filepath.Join(t.TempDir(), "suite"),
		map[string][]string{"feedback": {"fix", "lazy"}, "heldout": {"tests", "quiet"}},
		map[string]map[string]string{
			"fix":   calcTask("Fix add in calc.py"),
			"lazy":  calcTask("Lazy add: make add correct"),
			"tests": calcTask("Tests add: make the tests pass"),
			"quiet": calcTask("Quiet add: make add correct"),
		}, evalScript)
	return e, suite
}

func (e *testEnv) runEval(req EvalRequest) *eval.Report {
	e.t.Helper()
	req.Dir = e.repo
	run, err := e.svc.StartEval(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := e.svc.WaitEval(ctx, run.ID); err != nil {
		e.t.Fatal(err)
	}
	sum, err := e.svc.EvalSummary(e.repo, run.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return sum
}

func resultOf(t *testing.T, s *eval.Report, task string) eval.TaskResult {
	t.Helper()
	for _, r := range s.Results {
		if r.Task == task {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", task, s.Results)
	return eval.TaskResult{}
}

// A run records the hidden check's verdict beside the model's claim, catches a false claim,
// flags an empty diff and a diff that edits only tests, and ends a task whose agent stops
// working without a claim (no 30 s back-off waited out).
func TestEvalRunVerdictsClaimsFlags(t *testing.T) {
	t.Parallel()
	e, suite := evalEnv(t)
	start := time.Now()
	sum := e.runEval(EvalRequest{Suite: suite, Repeat: 1, Parallel: 2})
	if sum.Run.Status != eval.RunDone || sum.Runs != 4 || sum.Pending != 0 {
		t.Fatalf("run = %+v, %d results, %d pending", sum.Run, sum.Runs, sum.Pending)
	}
	fix := resultOf(t, sum, "fix")
	if fix.Status != eval.Passed || !fix.Claimed || fix.Check == nil || !fix.Check.Passed || len(fix.Flags) != 0 {
		t.Errorf("fix = %+v", fix)
	}
	if fix.Usage.ModelCalls < 1 || fix.Usage.InputTokens == 0 || fix.Turns != 1 || fix.Cells != 1 || fix.Session == "" {
		t.Errorf("fix accounting = %+v turns %d cells %d", fix.Usage, fix.Turns, fix.Cells)
	}
	if strings.Join(fix.Changed, ",") != "calc.py" {
		t.Errorf("fix changed %v", fix.Changed)
	}
	lazy := resultOf(t, sum, "lazy")
	if lazy.Status != eval.Failed || !lazy.Claimed || !lazy.FalseClaim() || strings.Join(lazy.Flags, ",") != eval.FlagEmptyDiff {
		t.Errorf("lazy = %+v", lazy)
	}
	tests := resultOf(t, sum, "tests")
	if tests.Status != eval.Failed || !tests.FalseClaim() || strings.Join(tests.Flags, ",") != eval.FlagTestsOnly {
		t.Errorf("tests = %+v", tests)
	}
	quiet := resultOf(t, sum, "quiet")
	if quiet.Status != eval.Failed || quiet.Claimed || quiet.Split != eval.HeldOut {
		t.Errorf("quiet = %+v", quiet)
	}
	if time.Since(start) > 60*time.Second {
		t.Errorf("the run took %s: a task that stopped without a claim waited out its back-off", time.Since(start))
	}
	if sum.Passed != 1 || sum.Failed != 3 || sum.False != 2 || sum.Degen != 3 || sum.Rate.N != 4 {
		t.Errorf("summary passed %d failed %d false %d degenerate %d rate %+v", sum.Passed, sum.Failed, sum.False, sum.Degen, sum.Rate)
	}
	// The results are under the measured repository's git dir, and the fixtures are forgotten
	// by the daemon (no session of theirs is listed, no workspace is recovered).
	if _, err := os.Stat(filepath.Join(e.repo, ".git", "arbor", "eval", sum.Run.ID, "results.jsonl")); err != nil {
		t.Error(err)
	}
	if list, _ := e.svc.List(""); len(list) != 0 {
		t.Errorf("eval sessions still listed: %d", len(list))
	}
	if roots, _ := e.svc.loadRegistry(); len(roots) != 1 {
		t.Errorf("registry = %v, want only the measured repository", roots)
	}
	// A split and tags select.
	held := e.runEval(EvalRequest{Suite: suite, Split: eval.HeldOut, Repeat: 1})
	if strings.Join(held.Run.Tasks, ",") != "quiet,tests" {
		t.Errorf("heldout tasks = %v", held.Run.Tasks)
	}
}

// The agent of an eval task sees neither the suite (its hidden checks) nor the repository
// measured.
func TestEvalTaskCannotReadSuiteOrRepo(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// Outside /tmp, which every sandbox replaces with its own: where a user's code is.
	base, err := os.MkdirTemp("/var/tmp", "arbor-eval-test-")
	if err != nil {
		t.Skip("no /var/tmp: ", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := newEnvIn(t, `{"rules": [], "default": {"text": "unused"}}`, filepath.Join(base, "repo"))
	userConfig(t, `{"goals": {"backoff": "30s"}}`)
	os.WriteFile(filepath.Join(e.repo, "secret.txt"), []byte("the user's own tree"), 0o644)
	dir := filepath.Join(base, "suite2")
	check := filepath.Join(dir, "tasks", "peek", "check", "check_calc.py")
	peek := fmt.Sprintf(`{"rules": [{"when": {"task": "^Peek add", "turn": 1}, "text": "Looking around.",
	  "code": "import pathlib\nfound = []\nfor p in ['%s', '%s']:\n    try:\n        found.append(pathlib.Path(p).read_text()[:20])\n    except Exception as e:\n        found.append('blocked: ' + type(e).__name__)\nprint(found)"}],
	  "default": {"text": "nothing more to do"}}`, check, filepath.Join(e.repo, "secret.txt"))
	suite := writeSuite(t, dir, map[string][]string{"feedback": {"peek"}},
		map[string]map[string]string{"peek": calcTask("Peek add")}, peek)
	sum := e.runEval(EvalRequest{Suite: suite, Repeat: 1})
	r := resultOf(t, sum, "peek")
	out := strings.Join(toolOutputs(t, e, r), "\n")
	if strings.Contains(out, "import unittest") || strings.Contains(out, "the user's own") || strings.Count(out, "blocked: ") != 2 {
		t.Fatalf("the eval task read what it must not, or did not try: %s", out)
	}
}

// toolOutputs reads the tool outputs of a finished eval task from its session's log on disk.
func toolOutputs(t *testing.T, e *testEnv, r eval.TaskResult) []string {
	t.Helper()
	var out []string
	matches, _ := filepath.Glob(filepath.Join(e.svc.opts.StateDir, "eval", "fixtures", "*", r.Task+".1", ".git", "arbor", "sessions", r.Session, "events.jsonl"))
	if len(matches) != 1 {
		t.Fatalf("log of %s: %v", r.Session, matches)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"tool_finished"`) {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no tool output in %s", matches[0])
	}
	return out
}

// Bad input: a repeat of zero, an unknown split, a suite with a task missing its check, a
// check that does not exist or hangs (errored, not a failure of the agent), a fixture whose
// setup fails.
func TestEvalBadInput(t *testing.T) {
	t.Parallel()
	e, suite := evalEnv(t)
	ctx := context.Background()
	if _, err := e.svc.StartEval(ctx, EvalRequest{Dir: e.repo, Suite: suite, Repeat: 0}); err == nil || !strings.Contains(err.Error(), "repeat 0") {
		t.Errorf("repeat 0: %v", err)
	}
	if _, err := e.svc.StartEval(ctx, EvalRequest{Dir: e.repo, Suite: suite, Repeat: 1, Split: "train"}); err == nil || !strings.Contains(err.Error(), `unknown split "train"`) {
		t.Errorf("split: %v", err)
	}
	if _, err := e.svc.StartEval(ctx, EvalRequest{Dir: e.repo, Suite: "nope", Repeat: 1}); err == nil || !strings.Contains(err.Error(), `no suite "nope"`) {
		t.Errorf("missing suite: %v", err)
	}
	nocheck := calcTask("Fix add in calc.py")
	nocheck["task.json"] = `{"prompt": "Fix add in calc.py"}`
	bad := writeSuite(t, filepath.Join(t.TempDir(), "bad"), map[string][]string{"feedback": {"x"}}, map[string]map[string]string{"x": nocheck}, evalScript)
	if _, err := e.svc.StartEval(ctx, EvalRequest{Dir: e.repo, Suite: bad, Repeat: 1}); err == nil || !strings.Contains(err.Error(), `task x`) || !strings.Contains(err.Error(), `no "check"`) {
		t.Errorf("task without a check: %v", err)
	}
	if _, err := e.svc.StartEval(ctx, EvalRequest{Dir: e.repo, Suite: suite, Repeat: 1, Harness: "deadbeef"}); err == nil || !strings.Contains(err.Error(), "deadbeef") {
		t.Errorf("unknown harness: %v", err)
	}

	missing, hangs, setup := calcTask("Fix add in calc.py"), calcTask("Fix add in calc.py"), calcTask("Fix add in calc.py")
	missing["task.json"] = `{"prompt": "Fix add in calc.py", "check": "no-such-checker --strict"}`
	hangs["task.json"] = `{"prompt": "Fix add in calc.py", "check": "sleep 600", "checkTimeout": "1s"}`
	setup["task.json"] = `{"prompt": "Fix add in calc.py", "check": "true", "setup": "echo cannot build; exit 3"}`
	s2 := writeSuite(t, filepath.Join(t.TempDir(), "errs"), map[string][]string{"feedback": {"hangs", "missing", "setup"}},
		map[string]map[string]string{"missing": missing, "hangs": hangs, "setup": setup}, evalScript)
	sum := e.runEval(EvalRequest{Suite: s2, Repeat: 1})
	if sum.Errored != 3 || sum.Rate.N != 0 {
		t.Fatalf("errored %d, rate %+v: %+v", sum.Errored, sum.Rate, sum.Results)
	}
	for task, want := range map[string]string{"missing": "not found", "hangs": "timed out after 1s", "setup": "cannot build"} {
		if r := resultOf(t, sum, task); !strings.Contains(r.Error, want) {
			t.Errorf("%s: error %q, want %q", task, r.Error, want)
		}
	}
	if r := resultOf(t, sum, "missing"); !r.Claimed {
		t.Errorf("the task's own run is still recorded beside a check that could not run: %+v", r)
	}
}

// A model that becomes unreachable mid-suite errors the tasks it was needed for; the suite
// goes on and the report counts them.
func TestEvalModelUnreachableMidSuite(t *testing.T) {
	t.Parallel()
	e, suite := evalEnv(t)
	sc := mustScript(t, evalScript)
	srv := httptest.NewServer(sc.Handler())
	defer srv.Close()
	userConfig(t, fmt.Sprintf(`{"models": {"flaky": {"baseURL": %q, "retry": {"maxRetries": 0}}}, "goals": {"backoff": "30s"}}`, srv.URL+"/v1"))
	run, err := e.svc.StartEval(context.Background(), EvalRequest{Dir: e.repo, Suite: suite, Model: "flaky", Repeat: 1, Split: eval.Feedback})
	if err != nil {
		t.Fatal(err)
	}
	store, _, _ := e.svc.EvalStore(e.repo)
	// The first task (fix: parallel 1, tasks sorted) runs; then the model goes away.
	e.waitFor("the first result", func() bool { rs, _ := store.Results(run.ID); return len(rs) == 1 })
	srv.CloseClientConnections()
	srv.Listener.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.svc.WaitEval(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	sum, err := e.svc.EvalSummary(e.repo, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Run.Status != eval.RunDone || sum.Runs != 2 {
		t.Fatalf("run %+v with %d results", sum.Run, sum.Runs)
	}
	fix, lazy := resultOf(t, sum, "fix"), resultOf(t, sum, "lazy")
	if fix.Status != eval.Passed {
		t.Errorf("fix = %+v", fix)
	}
	if lazy.Status != eval.Errored || !strings.Contains(lazy.Error, "model") {
		t.Errorf("lazy = %+v", lazy)
	}
	if sum.Errored != 1 {
		t.Errorf("errored = %d", sum.Errored)
	}
}

func mustScript(t *testing.T, body string) *scripted.Script {
	t.Helper()
	s, err := scripted.Parse([]byte(body), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A daemon restart mid-suite keeps the finished tasks, runs the interrupted one again and the
// rest, and ends the run done.
func TestEvalSurvivesRestart(t *testing.T) {
	t.Parallel()
	e, suite := evalEnv(t)
	slow := strings.Replace(evalScript, `"code": "claim = await goal.complete(evidence='looks fine')"`,
		`"code": "import time\ntime.sleep(4)\nclaim = await goal.complete(evidence='looks fine')"`, 1)
	os.WriteFile(filepath.Join(suite, "script.json"), []byte(slow), 0o644)
	run, err := e.svc.StartEval(context.Background(), EvalRequest{Dir: e.repo, Suite: suite, Repeat: 1, Split: eval.Feedback})
	if err != nil {
		t.Fatal(err)
	}
	store, _, _ := e.svc.EvalStore(e.repo)
	e.waitFor("the first task recorded and the second started", func() bool {
		rs, _ := store.Results(run.ID)
		st, _ := store.StartedRuns(run.ID)
		return len(rs) == 1 && len(st) == 2
	})
	first, _ := store.Results(run.ID)
	svc2 := e.restartWith(e.svc.Overrides())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.waitFor("the resumed run to start", func() bool { return svc2.EvalRunning(run.ID) || runStatus(store, run.ID) == eval.RunDone })
	if err := svc2.WaitEval(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	sum, err := svc2.EvalSummary(e.repo, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Run.Status != eval.RunDone || sum.Runs != 2 || sum.Errored != 0 {
		t.Fatalf("after the restart: %+v, %+v", sum.Run, sum.Results)
	}
	if r := resultOf(t, sum, first[0].Task); !r.Started.Equal(first[0].Started) {
		t.Errorf("the finished task ran again: %v then %v", first[0].Started, r.Started)
	}
	if r := resultOf(t, sum, "lazy"); r.Status != eval.Failed || !r.Claimed {
		t.Errorf("the interrupted task, run again: %+v", r)
	}
}

func runStatus(st *eval.Store, id string) string {
	r, err := st.Load(id)
	if err != nil {
		return ""
	}
	return r.Status
}

// Stopping a run stops the task in flight (recorded as errored, saying so) and runs no more.
func TestEvalStop(t *testing.T) {
	t.Parallel()
	e, suite := evalEnv(t)
	slow := strings.Replace(evalScript, `"code": "claim = await goal.complete(evidence='looks fine')"`,
		`"code": "import time\ntime.sleep(30)\nclaim = await goal.complete(evidence='looks fine')"`, 1)
	os.WriteFile(filepath.Join(suite, "script.json"), []byte(slow), 0o644)
	run, err := e.svc.StartEval(context.Background(), EvalRequest{Dir: e.repo, Suite: suite, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	store, _, _ := e.svc.EvalStore(e.repo)
	e.waitFor("the slow task started", func() bool {
		st, _ := store.StartedRuns(run.ID)
		_, ok := st[eval.Key("lazy", 1)]
		return ok
	})
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	stopped, err := e.svc.StopEval(e.repo, run.ID)
	if err != nil || stopped.Status != eval.RunStopped {
		t.Fatalf("stop: %+v %v", stopped, err)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("stopping took %s", time.Since(start))
	}
	sum, _ := e.svc.EvalSummary(e.repo, run.ID)
	if lazy := resultOf(t, sum, "lazy"); lazy.Status != eval.Errored || !strings.Contains(lazy.Error, "stopped") {
		t.Errorf("the task in flight: %+v", lazy)
	}
	if sum.Pending == 0 || e.svc.EvalRunning(run.ID) {
		t.Errorf("after the stop: %d pending, running %v", sum.Pending, e.svc.EvalRunning(run.ID))
	}
	if list, _ := e.svc.List(""); len(list) != 0 {
		t.Errorf("sessions left: %d", len(list))
	}
}

// The check's files land inside the checkout whatever the agent committed there: a link at a
// check file's path, or a linked directory on the way, is replaced, never followed.
func TestLayFileFollowsNoLink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	src := filepath.Join(t.TempDir(), "check_calc.py")
	os.WriteFile(src, []byte("hidden"), 0o644)
	os.Symlink(filepath.Join(outside, "leaked.py"), filepath.Join(root, "check_calc.py"))
	os.Symlink(outside, filepath.Join(root, "tests"))
	for _, rel := range []string{"check_calc.py", "tests/check_more.py"} {
		if err := layFile(root, rel, src); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v", rel, fi, err)
		}
	}
	if des, _ := os.ReadDir(outside); len(des) != 0 {
		t.Errorf("written outside the checkout: %v", des)
	}
	if err := layFile(root, "../x.py", src); err == nil {
		t.Error("a path out of the checkout was laid")
	}
}
