package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var evalRunID = regexp.MustCompile(`eval run (\d{8}-\d{6}-[0-9a-f]{6})`)

func evalID(t *testing.T, r result) string {
	t.Helper()
	m := evalRunID.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no eval run id in:\n%s", r)
	}
	return m[1]
}

// The built-in example suite from the CLI: the empty harness and a careful note measured with
// repeats, compared (the difference exceeds the noise the repeats measured), and listed; the
// results live in the repository's git dir.
func TestEvalRunAndCompareFromTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The held-out task the empty harness gets wrong, three times: enough repeats for one task
	// to tell a difference from the noise.
	slice := []string{"eval", "run", "example", "--split", "heldout", "--tags", "edge-case", "--repeat", "3", "--parallel", "2"}
	a := e.mustArbor(slice...)
	idA := evalID(t, a)
	for _, want := range []string{
		"suite example, 1 task(s) × 3, model scripted, harness workspace=empty",
		"✗ page-count#1", "claimed falsely", "check: ", "its work: git -C ",
		"success   0/3 = 0%", "across 3 repeats ±0.0 points (sd)",
		"claims    3 claimed, 3 of them false",
		"page-count  heldout  0/3",
	} {
		if !strings.Contains(a.stdout, want) {
			t.Errorf("arbor eval run lacks %q:\n%s", want, a)
		}
	}
	e.mustArbor("harness", "edit", "note", "careful", // titled by its id
		"--body", "Check edge cases (empty input, boundaries) before you finish. EVAL-CAREFUL")
	careful := strings.TrimSpace(e.git(e.repo, "rev-parse", "refs/arbor/harness/workspace"))
	b := e.mustArbor(slice...)
	idB := evalID(t, b)
	if !strings.Contains(b.stdout, "success   3/3 = 100%") || !strings.Contains(b.stdout, "harness workspace="+careful[:10]) {
		t.Errorf("the careful harness:\n%s", b)
	}
	c := e.mustArbor("eval", "compare", idA, idB)
	for _, want := range []string{`page-count +0% of 3 +100% of 3`, `B succeeds more: \+100\.0 points \(95% interval \+60\.0 ± 49\.6, clear of zero\)`} {
		if !regexp.MustCompile(want).MatchString(c.stdout) {
			t.Errorf("arbor eval compare lacks %q:\n%s", want, c)
		}
	}
	var cmp struct {
		SuccessDelta       float64 `json:"successDelta"`
		SuccessSignificant bool    `json:"successSignificant"`
	}
	if err := json.Unmarshal([]byte(e.mustArbor("eval", "compare", idA, idB, "--json").stdout), &cmp); err != nil || !cmp.SuccessSignificant || cmp.SuccessDelta <= 0 {
		t.Errorf("compare --json = %+v %v", cmp, err)
	}
	ls := e.mustArbor("eval", "results")
	if !strings.Contains(ls.stdout, idA) || !strings.Contains(ls.stdout, idB) || !strings.Contains(ls.stdout, "1×3") {
		t.Errorf("arbor eval results:\n%s", ls)
	}
	if _, err := os.Stat(filepath.Join(e.repo, ".git", "arbor", "eval", idB, "results.jsonl")); err != nil {
		t.Errorf("results not under the git dir: %v", err)
	}
	// The note changes again; the careful version, measured by its commit, is still careful.
	e.mustArbor("harness", "edit", "note", "careful", "--body", "Say it is done. EVAL-LAZY")
	if r := e.mustArbor("eval", "run", "example", "--split", "heldout", "--tags", "edge-case"); !strings.Contains(r.stdout, "success   0/1 = 0%") {
		t.Errorf("the lazy note:\n%s", r)
	}
	if r := e.mustArbor("eval", "run", "example", "--split", "heldout", "--tags", "edge-case", "--harness", careful[:12]); !strings.Contains(r.stdout, "success   1/1 = 100%") {
		t.Errorf("--harness REF:\n%s", r)
	}
}

// Bad input from the CLI names what is wrong.
func TestEvalBadInputFromTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "run", "example", "--repeat", "0"}, "--repeat 0: want at least 1"},
		{[]string{"eval", "run", "no-such-suite"}, `no suite "no-such-suite"`},
		{[]string{"eval", "run", "example", "--split", "train"}, `unknown split "train"`},
		{[]string{"eval", "run", "example", "--model", "nope"}, `unknown model "nope"`},
		{[]string{"eval", "compare", "a", "b"}, `no such eval run "a"`},
		{[]string{"eval", "frobnicate"}, `unknown eval command "frobnicate"`},
	} {
		r := e.arbor(c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("arbor %s: want an error with %q:\n%s", strings.Join(c.args, " "), c.want, r)
		}
	}
}

// A daemon stopped mid-suite: the next daemon resumes the run; finished tasks are kept, and
// the run ends done.
func TestEvalSurvivesADaemonRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("eval", "run", "example", "--split", "feedback", "--detach")
	id := evalID(t, r)
	results := filepath.Join(e.repo, ".git", "arbor", "eval", id, "results.jsonl")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(results)
		if strings.Count(string(b), "\n") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no task finished")
		}
		time.Sleep(100 * time.Millisecond)
	}
	first, _ := os.ReadFile(results)
	firstLine := strings.SplitN(string(first), "\n", 2)[0]
	e.mustArbor("daemon", "stop")
	for {
		res := e.mustArbor("eval", "results", id, "--json") // starts a daemon, which resumes the run
		var rep struct {
			Run     struct{ Status string }
			Runs    int `json:"runs"`
			Errored int `json:"errored"`
			Results []struct {
				Task    string
				Started time.Time
			}
		}
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Run.Status == "done" {
			if rep.Runs != 6 || rep.Errored != 0 {
				t.Fatalf("after the restart: %s", res.stdout)
			}
			var f struct {
				Task    string
				Started time.Time
			}
			json.Unmarshal([]byte(firstLine), &f)
			for _, x := range rep.Results {
				if x.Task == f.Task && !x.Started.Equal(f.Started) {
					t.Errorf("the task finished before the restart ran again: %v then %v", f.Started, x.Started)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed run did not finish: %s", res.stdout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
