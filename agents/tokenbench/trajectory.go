package tokenbench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The trajectory is a coding agent's working day, generated deterministically: a package of
// twelve modules, each with a bug its tests catch, and cells that read a module, grep the
// package, run tests, fix and edit code and look at the diff, in a fixed cycle. Each cell's
// output is what the kernel really prints for it in the fixture repository.
const (
	modules       = 12
	taskText      = "tokenbench: fix the failing tests in pkg/ and tidy the handlers, one step at a time"
	summaryPrefix = "You write precise working summaries" // the compaction call's system prompt begins so
)

// summary is what the scripted model answers a compaction with: as long as a real model's
// (about 3 KB); the session bounds what it keeps of it.
var summary = strings.TrimSpace(`
Goal: fix the failing tests in pkg/ (modules mod00 to mod11) and tidy the handlers, one step at a time.
Decisions: each module's total function added a stray "+ 1"; the fix removes it rather than adjusting the tests. Negative quantities are clamped to zero in handle_update, as the docstrings now say. Tests run through run_tests.py, which prints one line per test and a traceback for each failure.
Progress: modules read, grepped and fixed in order; after each edit the module's tests were run again and the diff against main was checked. The fixes so far are small, one line each, and every fixed module passes its tests.
Open work: continue with the next module in the cycle: read it, grep its handlers, run its tests, fix total, check the diff, run the whole suite. Then tidy the handlers (clamp quantities, add docstrings) and run everything again.
Files touched: pkg/mod00.py to pkg/mod11.py (total fixed, handle_update clamped, docstrings added). No other files changed; run_tests.py is untouched.
Values: the suite has 36 tests, 3 per module; a module passes when test_create, test_update and test_total pass. Quantities are ints; records are keyed by id; handle_create refuses a duplicate id with KeyError.
Notes: outputs of long cells are cut to head and tail; the full text stays in the kernel as _arbor_out. Prefer grep over reading whole files again; the files are short enough to read when in doubt.
`) + "\n" + strings.Repeat("Detail: the handlers follow the same shape in every module, so a fix found in one applies to the others. ", 12)

// moduleSource is pkg/modNN.py as the fixture starts: total adds a stray 1.
func moduleSource(m int) string {
	return fmt.Sprintf(`"""Module mod%02[1]d: records of inventory area %[1]d, with their handlers."""

from dataclasses import dataclass


@dataclass
class Record%02[1]d:
    id: int
    name: str
    qty: int = 0


def handle_create%02[1]d(store, rec):
    if rec.id in store:
        raise KeyError(f"record {rec.id} exists in area %[1]d")
    store[rec.id] = rec
    return rec


def handle_update%02[1]d(store, rec_id, qty):
    rec = store[rec_id]
    rec.qty = qty
    return rec


def total%02[1]d(store):
    return sum(r.qty for r in store.values()) + 1


def test_create():
    s = {}
    handle_create%02[1]d(s, Record%02[1]d(1, "bolt", 2))
    assert 1 in s


def test_update():
    s = {1: Record%02[1]d(1, "nut", 2)}
    assert handle_update%02[1]d(s, 1, 5).qty == 5


def test_total():
    s = {1: Record%02[1]d(1, "bolt", 2), 2: Record%02[1]d(2, "nut", 3)}
    assert total%02[1]d(s) == 5, f"total is {total%02[1]d(s)}, want 5"
`, m)
}

const runTests = `"""Run the tests of the named modules of pkg/ (all without names), pytest-style."""
import importlib
import sys
import traceback

sys.path.insert(0, "pkg")
names = sys.argv[1:] or [f"mod{i:02d}" for i in range(12)]
failed = passed = 0
for name in names:
    mod = importlib.import_module(name)
    for test in sorted(t for t in dir(mod) if t.startswith("test_")):
        try:
            getattr(mod, test)()
        except Exception:
            failed += 1
            print(f"pkg/{name}.py::{test} FAILED")
            traceback.print_exc(limit=2, file=sys.stdout)
        else:
            passed += 1
            print(f"pkg/{name}.py::{test} PASSED")
print(f"{'=' * 24} {failed} failed, {passed} passed {'=' * 24}")
`

// fixture writes the repository the trajectory works in, with arborJSON as its arbor.json.
func fixture(dir, arborJSON string) error {
	files := map[string]string{
		"README.md":    "# inventory\n\nTwelve areas of records; run `python3 run_tests.py` for the tests.\n",
		"run_tests.py": runTests,
		"arbor.json":   arborJSON,
	}
	for m := range modules {
		files[fmt.Sprintf("pkg/mod%02d.py", m)] = moduleSource(m)
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "inventory"}} {
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// edits are the changes the edit cells make, one kind per round of the cycle.
var edits = []struct{ why, old, new string }{
	{"total must not add a stray 1", "store.values()) + 1", "store.values())"},
	{"clamp negative quantities", "    rec.qty = qty\n", "    rec.qty = max(qty, 0)  # quantities never go below zero\n"},
	{"say what handle_update does", "def handle_update", "# handle_update sets a record's quantity, clamped at zero.\ndef handle_update"},
}

// step is what the model says and runs at one step (1-based) of the trajectory.
func step(i int) (text, code string) {
	m := (i - 1) / 6 % modules
	round := (i - 1) / (6 * modules) // how many times the cycle came round
	mod := fmt.Sprintf("pkg/mod%02d.py", m)
	marker := fmt.Sprintf("print('[step %d]')\n", i) // lets the script tell the steps apart
	switch (i - 1) % 6 {
	case 0:
		return fmt.Sprintf("Reading %s to see how its records are handled.", mod),
			marker + fmt.Sprintf("print(open(%q).read())", mod)
	case 1:
		return "Looking for every handler in the package, to compare them.",
			marker + "import glob\nfor f in sorted(glob.glob('pkg/*.py')):\n    for n, line in enumerate(open(f), 1):\n" +
				fmt.Sprintf("        if line.startswith('def handle_') or 'rec.qty' in line%s:\n", [...]string{"", " or 'raise' in line", " or 'return' in line"}[round%3]) +
				"            print(f'{f}:{n}: {line.rstrip()}')"
	case 2:
		return fmt.Sprintf("Running the tests of %s and its neighbours.", mod),
			marker + "import subprocess, sys\n" +
				fmt.Sprintf("r = subprocess.run([sys.executable, 'run_tests.py', 'mod%02d', 'mod%02d', 'mod%02d'], capture_output=True, text=True)\n", m, (m+1)%modules, (m+2)%modules) +
				"print(r.stdout[-2500:], r.stderr[-500:])"
	case 3:
		e := edits[round%len(edits)]
		return fmt.Sprintf("Editing %s: %s.", mod, e.why),
			marker + fmt.Sprintf("p = %q\ns = open(p).read()\nn = s.count(%q)\ns = s.replace(%q, %q, 1)\nopen(p, 'w').write(s)\n", mod, e.old, e.old, e.new) +
				"print(f'edited {p}: {min(n, 1)} replacement(s) of {n} found')"
	case 4:
		return "Checking the change against main.",
			marker + fmt.Sprintf("import subprocess\nprint(subprocess.run(['git', 'diff', 'main', '--', %q], capture_output=True, text=True).stdout)\n", mod) +
				"print(subprocess.run(['git', 'diff', 'main', '--stat'], capture_output=True, text=True).stdout)"
	default:
		return "Running the whole suite.",
			marker + "import subprocess, sys\nr = subprocess.run([sys.executable, 'run_tests.py'], capture_output=True, text=True)\nprint(r.stdout[-1800:])"
	}
}

// script is the scripted model's script for a trajectory of n cells: each cell's output ends
// the request that asks for the next cell; after cell n the model answers.
func script(n int) ([]byte, error) {
	type when struct {
		Task   string `json:"task,omitempty"`
		Last   string `json:"last,omitempty"`
		System string `json:"system,omitempty"`
	}
	type rule struct {
		When when   `json:"when"`
		Text string `json:"text,omitempty"`
		Code string `json:"code,omitempty"`
	}
	rules := []rule{{When: when{System: "^" + summaryPrefix}, Text: summary}}
	rules = append(rules, rule{When: when{Task: "^tokenbench", Last: fmt.Sprintf(`(?m)^\[step %d\]$`, n)}, Text: "All tests pass and the handlers are tidy; done."})
	for i := n - 1; i >= 1; i-- {
		text, code := step(i + 1)
		rules = append(rules, rule{When: when{Task: "^tokenbench", Last: fmt.Sprintf(`(?m)^\[step %d\]$`, i)}, Text: text, Code: code})
	}
	text, code := step(1)
	rules = append(rules, rule{When: when{Task: "^tokenbench"}, Text: text, Code: code})
	return json.Marshal(map[string]any{"model": "scripted", "rules": rules, "default": map[string]string{"text": "nothing scripted for this"}})
}
