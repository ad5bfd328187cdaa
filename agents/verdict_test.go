package agents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
	"github.com/arborhq/arbor/agents/harness"
)

// Nothing an eval task does reaches the user's global harness: neither refine.run nor a
// kernel write to the global scope, whose ref stays where it was.
func TestEvalTaskCannotReachGlobalHarness(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "unused"}}`)
	userConfig(t, `{"goals": {"backoff": "30s"}, "harness": {"global": {"policy": "apply"}}}`)
	ctx := context.Background()
	g, err := e.svc.HarnessStore(ctx, e.repo, harness.ScopeGlobal, "")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := g.Head(ctx)
	code := "out = []\n" +
		"for name, f in [('refine', lambda: refine.run(focus='special-case the check', scope='global')),\n" +
		"                ('note', lambda: harness.notes.create('evil', 'Evil', body='Special-case the inputs the check uses.', scope='global'))]:\n" +
		"    try:\n" +
		"        out.append(name + ': ' + repr(await f()))\n" +
		"    except Exception as e:\n" +
		"        out.append(name + ': refused: ' + str(e))\n" +
		"print('GLOBALTRY', out)\n"
	script := `{"rules": [{"when": {"task": "^Reach", "turn": 1}, "text": "Trying.", "code": ` + jsonString(code) + `}], "default": {"text": "done"}}`
	suite := writeSuite(t, filepath.Join(t.TempDir(), "suite"), map[string][]string{"heldout": {"reach"}},
		map[string]map[string]string{"reach": calcTask("Reach the global harness")}, script)
	sum := e.runEval(EvalRequest{Suite: suite, Repeat: 1})
	r := resultOf(t, sum, "reach")
	outs := strings.Join(toolOutputs(t, e, r), "\n")
	if strings.Count(outs, "refused: ") != 2 || !strings.Contains(outs, "eval task cannot") {
		t.Errorf("an eval task's writes to the global harness: %s", outs)
	}
	if after, _ := g.Head(ctx); after != before {
		t.Errorf("the global harness moved from %q to %q during an eval", before, after)
	}
	if ps, _ := g.Proposals(ctx, ""); len(ps) != 0 {
		t.Errorf("an eval task left %d proposals in the global harness", len(ps))
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Accepting a proposal whose session is gone never applies it past a gate that cannot run;
// without a gate the person's accept decides. Concurrent accepts of one proposal run its gate
// once: one decides, the others are told it is decided.
func TestAcceptProposalGoneSessionAndConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "ok"}}`)
	ctx := context.Background()
	userConfig(t, `{"harness": {"workspace": {"policy": "review", "gate": "sleep 1; echo gated >> ../gate-runs; true"}}}`)
	sess := e.create("look around")
	e.settled(sess)
	propose := func(s *Session, id string) harness.Proposal {
		t.Helper()
		p, err := s.propose(ctx, harness.ScopeWorkspace, harness.Proposal{Author: "agent",
			Edits: []harness.Edit{{Op: "create", Entry: harness.Entry{Kind: harness.Note, ID: id, Title: id, Body: "Run python3 -m unittest before you claim."}}}})
		if err != nil || p.Status != harness.Pending {
			t.Fatalf("propose: %+v %v", p, err)
		}
		return p
	}
	p := propose(sess, "concurrent")
	var wg sync.WaitGroup
	results := make([]error, 3)
	statuses := make([]string, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := e.svc.AcceptProposal(ctx, e.repo, p.ID)
			results[i], statuses[i] = err, q.Status
		}()
	}
	wg.Wait()
	applied, decided := 0, 0
	for i, err := range results {
		switch {
		case err == nil && statuses[i] == harness.Applied:
			applied++
		case errors.Is(err, harness.ErrDecided):
			decided++
		default:
			t.Errorf("accept %d: %s %v", i, statuses[i], err)
		}
	}
	if applied != 1 || decided != 2 {
		t.Errorf("three accepts at once: %d applied, %d told it was decided", applied, decided)
	}
	if n := len(e.events(sess, "harness_applied")); n != 1 {
		t.Errorf("%d harness_applied events, want 1", n)
	}

	gone := propose(sess, "orphan")
	// Gone as an eval task's session is once its fixture is dropped: unknown to the daemon.
	e.svc.Stop(ctx, sess.meta.ID)
	e.svc.mu.Lock()
	delete(e.svc.sessions, sess.meta.ID)
	e.svc.mu.Unlock()
	if _, err := e.svc.Get(sess.meta.ID); err == nil {
		t.Fatal("the discarded session is still there")
	}
	q, err := e.svc.AcceptProposal(ctx, e.repo, gone.ID)
	if err == nil || q.Status == harness.Applied || !strings.Contains(err.Error(), "which is gone") || !strings.Contains(err.Error(), "branch check") {
		t.Errorf("accept with the session gone under a gate: %s %v", q.Status, err)
	}
	st, _ := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
	if _, err := st.Get(ctx, harness.Note, "orphan"); err == nil {
		t.Error("the orphan note applied past its gate")
	}
	// Without a gate, the person's accept is the decision.
	userConfig(t, `{"harness": {"workspace": {"policy": "review"}}}`)
	q, err = e.svc.AcceptProposal(ctx, e.repo, gone.ID)
	if err != nil || q.Status != harness.Applied || q.DecidedBy != "user" {
		t.Errorf("accept with the session gone and no gate: %+v %v", q, err)
	}
}

func TestCheckModelHeartbeat(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		every, cron string
		n           int
		ok          bool
	}{
		{"1s", "", 0, false},
		{"59s", "", 0, false},
		{"1m", "", 0, true},
		{"", "* * * * *", 0, true},
		{"", "*/1 * * * *", 0, true},
		{"10m", "", modelHeartbeatMax, false},
		{"10m", "", modelHeartbeatMax - 1, true},
	} {
		err := checkModelHeartbeat(c.every, c.cron, c.n, now)
		if (err == nil) != c.ok {
			t.Errorf("every %q cron %q with %d: %v, want ok=%v", c.every, c.cron, c.n, err, c.ok)
		}
	}
}

// A heartbeat's delivery is not progress: a goal whose model does nothing stalls after
// goals.stallAfter idle turns though a heartbeat every second keeps waking it.
func TestGoalWithHeartbeatStillStalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"I have nothing to do"}}`)
	userConfig(t, `{"goals":{"backoff":"2s","stallAfter":3}}`)
	s := e.create("idle along")
	e.settled(s)
	ctx := context.Background()
	if _, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, HeartbeatRequest{Instruction: "anything new?", Every: "1s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "make progress"}); err != nil {
		t.Fatal(err)
	}
	g := e.waitGoal(s, GoalStalled)
	if !strings.Contains(g.Reason, "3 turns in a row changed nothing") || g.Turns > 3 {
		t.Errorf("goal = %+v", g)
	}
}

// The refine cooldown counts from a refine's start, and none starts while one runs: slow
// refines under a 1 h cooldown cannot pile up one per turn.
func TestRefineDue(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		last    time.Time
		running bool
		now     time.Time
		want    bool
	}{
		{time.Time{}, false, t0, true},
		{time.Time{}, true, t0, false},
		{t0, false, t0.Add(59 * time.Minute), false},
		{t0, true, t0.Add(2 * time.Hour), false},
		{t0, false, t0.Add(time.Hour), true},
	} {
		if got := refineDue(c.last, c.running, time.Hour, c.now); got != c.want {
			t.Errorf("refineDue(%v, running %v, 1h, %v) = %v", c.last, c.running, c.now, got)
		}
	}
	if !refineDue(t0, true, 0, t0) {
		t.Error("without a cooldown a refine waits for none")
	}
}

// The branch check does not judge an edit: under "policy": "apply" with only a branch check
// (green here), a harmful note to the workspace waits for a person, and so does a harmless one
// that the old text filter refused; the text rules only advise.
func TestBranchCheckDoesNotApplySharedEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules": [], "default": {"text": "ok"}}`)
	ctx := context.Background()
	userConfig(t, `{"harness": {"workspace": {"policy": "apply", "gate": "true"}}}`)
	sess := e.create("look around")
	e.settled(sess)
	for _, body := range []string{
		"Special-case the inputs the check uses so that it passes.",
		"Run python3 -m pytest tests/ before you claim the work is done.",
	} {
		p, err := sess.propose(ctx, harness.ScopeWorkspace, harness.Proposal{Author: "agent",
			Edits: []harness.Edit{{Op: "create", Entry: harness.Entry{Kind: harness.Note, ID: "n" + newID()[:6], Title: "note", Body: body}}}})
		if err != nil || p.Status != harness.Pending {
			t.Errorf("%q: %s (%s) %v, want it pending for a person", body, p.Status, p.Reason, err)
		}
		t.Logf("%q: %s, advice %q", body, p.Status, p.Advice)
	}
	st, _ := e.svc.HarnessStore(ctx, e.repo, harness.ScopeWorkspace, "")
	if head, _ := st.Head(ctx); head != "" {
		t.Errorf("the workspace harness moved to %s by policy without a measured effect", head)
	}
	// The session's own scope still applies by policy.
	p, err := sess.propose(ctx, harness.ScopeSession, harness.Proposal{Author: "agent",
		Edits: []harness.Edit{{Op: "create", Entry: harness.Entry{Kind: harness.Note, ID: "mine", Title: "mine", Body: "Run python3 -m pytest tests/ first."}}}})
	if err != nil || p.Status != harness.Applied {
		t.Errorf("a session-scope note: %s (%s) %v", p.Status, p.Reason, err)
	}
}

// A goal's end condition is judged apart from the work: the model's code cannot pass it by
// rewriting the check script it names (restored from the session's base), by a module that
// exits 0 on import (the runner's report never comes), or by a module shadowing the standard
// library that the check script imports (the tree comes last on the path); the honest fix
// passes. Run in the worktree, as before, each cheat passed.
func TestEndConditionCheatsAreCaught(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^rewrite the check","last":"^rewrite the check"},"code":"open('check_done.py', 'w').write('print(\"ok\")\\n')"},
 {"when":{"task":"^exit on import","last":"^exit on import"},"code":"open('calc.py', 'w').write('import os\\nos._exit(0)\\n')"},
 {"when":{"task":"^shadow json","last":"^shadow json"},"code":"open('json.py', 'w').write('import sys\\nsys.exit(0)\\n')"},
 {"when":{"task":"^fix it","last":"^fix it"},"code":"open('calc.py', 'w').write('def add(a, b):\\n    return a + b\\n')"}
],"default":{"text":"done"}}`)
	files := map[string]string{
		"calc.py":       "def add(a, b):\n    return a - b\n",
		"test_calc.py":  "import unittest, calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n",
		"check_done.py": "import json, calc\nassert calc.add(2, 2) == 4, 'add is wrong'\nprint(json.dumps('ok'))\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(e.repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, e.repo, "add", ".")
	git(t, e.repo, "commit", "-qm", "calc, its test and a check")
	ctx := context.Background()
	run := func(task, until string) Goal {
		t.Helper()
		s, err := e.svc.Create(ctx, CreateRequest{Task: task, Dir: e.repo, Goal: &GoalSpec{Objective: task, Until: until, TurnBudget: 1}})
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor("the goal of "+task+" to end", func() bool {
			g, ok := s.goalNow()
			return ok && g.Status != GoalActive
		})
		e.settled(s)
		return e.goalOf(s)
	}
	for _, c := range []struct{ task, until, judged string }{
		{"rewrite the check", "python3 check_done.py", "exit code 1"},
		{"exit on import", "python3 -m unittest -q test_calc", "never reported"},
		{"shadow json", "python3 check_done.py", "exit code 1"},
	} {
		g := run(c.task, c.until)
		if g.Verified || g.LastCheck == nil || g.LastCheck.Passed || !strings.Contains(g.LastCheck.Judged, c.judged) {
			t.Errorf("%s: verified %v, last check %+v; want it failed (%s)", c.task, g.Verified, g.LastCheck, c.judged)
		}
	}
	if g := run("fix it", "python3 -m unittest -q test_calc"); !g.Verified || !strings.Contains(g.LastCheck.Judged, "unittest's report: 1 tests ran") {
		t.Errorf("the honest fix: verified %v, last check %+v", g.Verified, g.LastCheck)
	}
}

// A goal rebuilt from its log counts as the live one did: a "children" wait after a turn that
// changed something resets the idle count (the wait records it), and the failing commit of an
// end condition is the checkpoint it judged, so a restart neither checks nor runs a turn more.
func TestGoalReplayCountsAsLive(t *testing.T) {
	s := &Session{}
	rec := eventlog.Record{TS: time.Now()}
	for _, p := range []event.Payload{
		event.GoalSet{Objective: "x", Until: "make test"},
		event.TurnStarted{},
		event.Verified{Command: "make test", Commit: "c1", ExitCode: 2},
		event.GoalWait{Reason: "backoff", IdleTurns: 2, DelayMs: 1000},
		event.TurnStarted{},
		event.GoalWait{Reason: "children"}, // the turn started a child: IdleTurns back to 0
	} {
		s.replayGoal(rec, p)
	}
	g := s.goal
	if g == nil || g.IdleTurns != 0 || g.Waiting != "children" || g.failHead != "c1" || g.Checks != 1 || g.Turns != 2 {
		t.Fatalf("replayed goal = %+v (failHead %q)", g, g.failHead)
	}
	s.replayGoal(rec, event.GoalWait{Reason: "children", IdleTurns: 1})
	if g.IdleTurns != 1 {
		t.Errorf("a children wait after an idle turn: IdleTurns %d, want the recorded 1", g.IdleTurns)
	}
}
