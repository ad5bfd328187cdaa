package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An autonomous run: the end condition fails once (its output goes back to the model), then
// passes; the run prints a verified end with the model's own claim beside it and exits 0.
// arbor goal and arbor progress show the same from another process.
func TestAutonomousRunUntilTheCheckPasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "--autonomous", "--until", `n=$(cat n.txt); echo "have $n"; test "$n" = 2`, "--max-turns", "5", "autonomous count to two")
	id := sessionID(t, r)
	for _, want := range []string{
		"autonomous: until `n=$(cat n.txt)",
		"◎ goal: autonomous count to two (5 turns), done when",
		"✗ end condition `n=$(cat n.txt); echo \"have $n\"; test \"$n\" = 2` failed (exit 1)",
		"✓ end condition",
		"◎ goal complete: the end condition",
		"run complete: " + id[:8],
		"verified: yes; the model claimed success: yes",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("arbor run lacks %q:\n%s", want, r)
		}
	}
	g := e.mustArbor("goal", id)
	for _, want := range []string{"status:   complete", "2 turns", "claimed by the model: yes; verified: yes", "evidence: n is 2", "(2 checks)"} {
		if !strings.Contains(g.stdout, want) {
			t.Errorf("arbor goal lacks %q:\n%s", want, g)
		}
	}
	p := e.mustArbor("progress", id)
	if n := strings.Count(p.stdout, " verified "); n != 2 {
		t.Errorf("arbor progress shows %d end-condition verdicts, want 2:\n%s", n, p)
	}
	var series struct {
		Points []struct {
			Kind, Status string
			Spend        struct{ Tokens int64 }
		}
	}
	if err := json.Unmarshal([]byte(e.mustArbor("progress", id, "--json").stdout), &series); err != nil {
		t.Fatal(err)
	}
	last := series.Points[len(series.Points)-1]
	if last.Kind != "goal_changed" || last.Status != "complete" || last.Spend.Tokens <= 0 {
		t.Errorf("last progress point = %+v, want the completion with its spending", last)
	}
	if r := e.arbor("goal", id, "pause"); r.code == 0 || !strings.Contains(r.stderr, "goal is complete, not active") {
		t.Errorf("pausing a complete goal:\n%s", r)
	}
}

// A limit ends a run naming it, and the exit status says the run was not verified.
func TestAutonomousRunEndsAtItsLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arbor("run", "--autonomous", "--until", "false", "--max-turns", "2", "autonomous forever")
	if r.code != 1 {
		t.Fatalf("want exit 1 for an unverified run:\n%s", r)
	}
	for _, want := range []string{"run budget limited", "turn budget reached: 2 of 2 turns", "verified: no; the model claimed success: no"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("arbor run lacks %q:\n%s", want, r)
		}
	}
	id := sessionID(t, r)
	if tr := e.mustArbor("tree"); !strings.Contains(tr.stdout, "goal budget limited") {
		t.Errorf("arbor tree does not show the goal:\n%s", tr)
	}
	// A goal whose budget is used up cannot resume: the refusal names the budget and the way on.
	if g := e.arbor("goal", id, "resume"); g.code == 0 || !strings.Contains(g.stderr, "cannot resume: its turn budget reached: 2 of 2 turns") ||
		!strings.Contains(g.stderr, "--replace --budget") {
		t.Errorf("arbor goal resume of a spent goal:\n%s", g)
	}
}

// An autonomous run given no limit gets the default bounds, and says so.
func TestAutonomousRunDefaultLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "--autonomous", "--until", "false", "--detach", "autonomous unbounded")
	if !strings.Contains(r.stderr, "at most 50 turns and 4h") {
		t.Errorf("no word of the default bounds:\n%s", r)
	}
	id := sessionID(t, r)
	defer e.arbor("stop", id)
	if g := e.mustArbor("goal", id); !strings.Contains(g.stdout, "budget:   50 turns, 4h0m0s") {
		t.Errorf("the goal's budget:\n%s", g)
	}
}

// Bad input gets an error naming what was wrong, and nothing is started.
func TestGoalBadInputFromTheCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--autonomous", "no end"}, "--autonomous needs an end condition: --until"},
		{[]string{"run", "--until", "make test", "x"}, "add --autonomous"},
		{[]string{"run", "--autonomous", "--until", "true", "--max-wall", "forever", "x"}, `wallBudget "forever": want a duration`},
		{[]string{"run", "--autonomous", "--until", "true", "--max-turns", "-1", "x"}, "--max-turns: want a limit above zero"},
		{[]string{"goal", "deadbeef", "x", "--budget", "tokens=0"}, `--budget item 1 "tokens=0": want a whole number of tokens above zero`},
		{[]string{"goal", "deadbeef", "x", "--budget", "turns=3,speed=9"}, `--budget item 2 "speed=9": unknown budget`},
		{[]string{"goal", "deadbeef", "x"}, "deadbeef"},
	} {
		r := e.arbor(tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("arbor %s: want a failure naming %q:\n%s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
	if ls := e.ls(); len(ls) != 0 {
		t.Errorf("bad input started %d sessions", len(ls))
	}
}

// A profile's completion gate makes arbor run --profile an autonomous run; --autonomous with a
// profile that has no gate is refused naming it.
func TestProfileRunIsAutonomous(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.userConfig(t, `{"profiles":{
  "count": {"until": "n=$(cat n.txt); echo \"have $n\"; test \"$n\" = 2", "maxTurns": 4},
  "plain": {"maxTurnSteps": 10}}}`)
	r := e.mustArbor("run", "--profile", "count", "autonomous count with a profile")
	for _, want := range []string{"autonomous: until `n=$(cat n.txt)", "run complete", "verified: yes"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("arbor run --profile lacks %q:\n%s", want, r)
		}
	}
	if r := e.arbor("run", "--autonomous", "--profile", "plain", "x"); r.code == 0 || !strings.Contains(r.stderr, `a profile that sets "until" (profile plain does not)`) {
		t.Errorf("--autonomous with a profile without a gate:\n%s", r)
	}
}

// kill -9 of the daemon mid run: the restarted daemon resumes the autonomous run with the
// turns and tokens it had already spent, and ends it at the same limit.
func TestAutonomousRunSurvivesKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "--detach", "--autonomous", "--until", "false", "--max-turns", "5", "autonomous slowly")
	id := sessionID(t, r)
	turns := func() int {
		n := 0
		for _, ev := range parseEvents(t, e.mustArbor("log", id, "--json")) {
			if ev.Type == "verified" {
				n++
			}
		}
		return n
	}
	eventually(t, "two checked turns", func() bool { return turns() >= 2 })
	before := turns()
	syscall.Kill(e.daemonPID(), syscall.SIGKILL)
	waitGone(e.daemons, 10*time.Second)
	eventually(t, "the resumed run to end at its limit", func() bool {
		return strings.Contains(e.mustArbor("goal", id).stdout, "status:   budget limited")
	})
	g := e.mustArbor("goal", id)
	if !strings.Contains(g.stdout, "turn budget reached: 5 of 5 turns") || !strings.Contains(g.stdout, "spent:    5 turns") {
		t.Errorf("after the restart the run should end at 5 turns in all (it had %d):\n%s", before, g)
	}
	// A turn the kill cut short was never checked; no turn is checked twice.
	if n := turns(); n < 4 || n > 5 {
		t.Errorf("%d end-condition checks, want one per finished turn of 5 (4 when the kill cut one short)", n)
	}
	log := e.mustArbor("log", id)
	if !strings.Contains(log.stdout, "recovered") {
		t.Errorf("the log does not show the recovery:\n%s", log.stdout)
	}
}
