package agents

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// countRequests counts the model requests whose task (first user message) starts with prefix.
func countRequests(s *scripted.Script, prefix string) *atomic.Int64 {
	var n atomic.Int64
	s.Observe(func(r scripted.Request) {
		if strings.HasPrefix(r.Task, prefix) {
			n.Add(1)
		}
	})
	return &n
}

// requestTimes records when the model was asked for sessions whose task starts with prefix;
// the returned func is a copy of the times so far.
func requestTimes(s *scripted.Script, prefix string) func() []time.Time {
	var mu sync.Mutex
	var at []time.Time
	s.Observe(func(r scripted.Request) {
		if strings.HasPrefix(r.Task, prefix) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		}
	})
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

func (e *testEnv) goalOf(s *Session) Goal {
	e.t.Helper()
	g, ok, err := e.svc.GoalOf(s.meta.ID)
	if err != nil || !ok {
		e.t.Fatalf("goal of %s: ok=%v err=%v", s.meta.ID, ok, err)
	}
	return g
}

func (e *testEnv) waitGoal(s *Session, status string) Goal {
	e.t.Helper()
	e.waitFor("goal "+status, func() bool {
		g, ok := s.goalNow()
		return ok && g.Status == status
	})
	e.settled(s)
	return e.goalOf(s)
}

// A goal the model sets keeps the session taking turns — each continuation a real model
// request — until the model claims it complete on the third; then no request follows.
func TestGoalCompletedAfterThreeTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"last":"^reach the goal"},"code":"print((await goal.set('write three files', turn_budget=10))['status'])"},
 {"when":{"last":"Keep working toward the goal: write three files"},"code":"import glob\nn = len(glob.glob('f*.txt'))\nopen(f'f{n}.txt', 'w').write('x')\nif n == 2:\n    print((await goal.complete(evidence='three files'))['status'])"}
],"default":{"text":"step done"}}`)
	n := countRequests(e.script, "reach the goal")
	s := e.create("reach the goal")
	g := e.waitGoal(s, GoalComplete)
	if g.Turns != 3 || !g.Claimed || g.Verified || g.Evidence != "three files" || g.By != "agent" {
		t.Errorf("goal = %+v, want complete after 3 turns, claimed, not verified", g)
	}
	if got := n.Load(); got != 8 { // 2 requests in the turn that set it, 2 in each of 3 more
		t.Errorf("%d model requests, want 8", got)
	}
	time.Sleep(300 * time.Millisecond)
	if got := n.Load(); got != 8 {
		t.Errorf("%d model requests after the goal completed, want still 8", got)
	}
	ch := e.events(s, event.TypeGoalChanged)
	if len(ch) != 1 || ch[0]["status"] != GoalComplete || ch[0]["claimed"] != true {
		t.Errorf("goal_changed events = %v", ch)
	}
	if sp, _ := ch[0]["spend"].(map[string]any); sp == nil || sp["tokens"].(float64) <= 0 {
		t.Errorf("goal_changed carries no spending: %v", ch[0])
	}
	for _, c := range e.events(s, event.TypeCheckpoint) {
		if c["spend"] == nil {
			t.Errorf("checkpoint without its spending: %v", c)
		}
	}
}

// A goal waiting on its child parks: no model request for the parent while the child works
// (10 s), and the child's result resumes it.
func TestGoalParksOnChildAndResumesOnItsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^delegate","last":"^delegate"},"code":"await goal.set('get the answer from the child')\nh = await rlm('child: compute the answer slowly', name='slow')\nprint('started')"},
 {"when":{"task":"^delegate","last":"child result 42"},"code":"await goal.complete(evidence='the child said 42')"},
 {"when":{"task":"^child","turn":1},"code":"import time\ntime.sleep(10)"},
 {"when":{"task":"^child"},"text":"child result 42"}
],"default":{"text":"waiting"}}`)
	parentAtNow := requestTimes(e.script, "delegate")
	s := e.create("delegate the work")
	e.waitFor("the parked goal", func() bool { g, ok := s.goalNow(); return ok && g.Waiting == "children" })
	parked := time.Now()
	g := e.waitGoal(s, GoalComplete)
	parentAt := parentAtNow()
	var during int
	var resumed time.Time
	for _, at := range parentAt {
		if at.After(parked) {
			if resumed.IsZero() {
				resumed = at
			}
			during++
		}
	}
	if wait := resumed.Sub(parked); wait < 8*time.Second {
		t.Errorf("the parent's model was asked %s after it parked, while the child still worked", wait)
	}
	if during != 2 || len(parentAt) != 4 {
		t.Errorf("parent requests: %d in all, %d after parking; want 4 and 2 (the resumed turn only)", len(parentAt), during)
	}
	if !g.Claimed || g.Status != GoalComplete {
		t.Errorf("goal = %+v", g)
	}
	waits := e.events(s, event.TypeGoalWait)
	if len(waits) == 0 || waits[0]["reason"] != "children" {
		t.Errorf("goal_wait events = %v, want a park on children", waits)
	}
}

// Turns that change nothing back off, doubling, and the goal ends as stalled after
// goals.stallAfter of them; then no request follows.
func TestGoalStallBacksOffThenStalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"I have nothing to do"}}`)
	userConfig(t, `{"goals":{"backoff":"200ms","stallAfter":3}}`)
	n := countRequests(e.script, "idle along")
	s := e.create("idle along")
	e.settled(s)
	if _, err := e.svc.SetGoal(context.Background(), s.meta.ID, GoalSpec{Objective: "make progress"}); err != nil {
		t.Fatal(err)
	}
	g := e.waitGoal(s, GoalStalled)
	if g.Turns != 3 || !strings.Contains(g.Reason, "3 turns in a row changed nothing") {
		t.Errorf("goal = %+v", g)
	}
	waits := e.events(s, event.TypeGoalWait)
	if len(waits) != 2 || waits[0]["delayMs"] != float64(200) || waits[1]["delayMs"] != float64(400) {
		t.Errorf("back-offs = %v, want 200 then 400 ms", waits)
	}
	recs, _ := s.Events(0)
	var starts []time.Time
	for _, r := range recs {
		if r.Type == string(event.TypeTurnStarted) {
			starts = append(starts, r.TS)
		}
	}
	if len(starts) != 4 {
		t.Fatalf("%d turns, want 4 (the task and 3 under the goal)", len(starts))
	}
	if d := starts[3].Sub(starts[2]); d < 400*time.Millisecond {
		t.Errorf("third goal turn %s after the second, want the 400 ms back-off", d)
	}
	time.Sleep(time.Second)
	if got := n.Load(); got != 4 {
		t.Errorf("%d requests, want 4 and none after the stall", got)
	}
}

// A child's spending counts against its parent's goal: the child's model call that uses up
// the parent's token budget ends the goal as budget_limited and interrupts the child.
func TestChildSpendingStopsParentGoalAtBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^lead","last":"^lead"},"code":"await goal.set('lead the work', token_budget=5000)\nawait rlm('worker: spend a lot', name='w')"},
 {"when":{"task":"^worker"},"code":"import time\ntime.sleep(30)","usage":{"prompt_tokens":6000,"completion_tokens":10}}
],"default":{"text":"ok"}}`)
	s := e.create("lead the team")
	g := e.waitGoal(s, GoalBudgetLimited)
	if g.Limit != "tokens" || !strings.Contains(g.Reason, "of 5000 tokens") || g.Spent.Tokens < 5000 {
		t.Errorf("goal = %+v", g)
	}
	kids := s.childIDs()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	child, _ := e.svc.Get(kids[0])
	e.settled(child)
	ints := e.events(child, event.TypeInterrupted)
	if len(ints) != 1 || !strings.Contains(ints[0]["reason"].(string), "token budget reached") {
		t.Errorf("child's interruptions = %v, want the budget's", ints)
	}
	if child.State() == Stopped {
		t.Error("the child was stopped; an interrupted turn leaves the session usable")
	}
}

// Bad input: a budget of zero or below, an empty objective, a second goal without replace, a
// goal on a stopped session, an unknown action.
func TestGoalBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	s := e.create("something")
	e.settled(s)
	ctx := context.Background()
	for _, tc := range []struct {
		spec GoalSpec
		want string
	}{
		{GoalSpec{}, "the objective is empty"},
		{GoalSpec{Objective: "x", TokenBudget: -1}, "token budget -1"},
		{GoalSpec{Objective: "x", WallBudget: -time.Second}, "wall budget -1s"},
	} {
		if _, err := e.svc.SetGoal(ctx, s.meta.ID, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetGoal(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	if _, err := e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "first", TurnBudget: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "second"}); err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("second goal = %v, want a refusal naming --replace", err)
	}
	e.waitGoal(s, GoalBudgetLimited)
	if _, err := e.svc.ControlGoal(ctx, s.meta.ID, "explode"); err == nil || !strings.Contains(err.Error(), "want pause, resume or clear") {
		t.Errorf("bad action = %v", err)
	}
	if err := e.svc.Stop(ctx, s.meta.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "late", Replace: true}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("goal on a stopped session = %v", err)
	}
}

// autonomous creates a session whose goal is an autonomous run: the task until the command
// passes, within the given limits.
func (e *testEnv) autonomous(task string, spec GoalSpec) *Session {
	e.t.Helper()
	spec.Objective, spec.By = task, "autonomous"
	s, err := e.svc.Create(context.Background(), CreateRequest{Task: task, Dir: e.repo, Goal: &spec})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// The end condition fails twice, its output going back to the model each time, then passes:
// the run ends verified, with the model's own claim recorded beside it.
func TestEndConditionFailsTwiceThenPasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^count to three","last":"^count to three"},"code":"open('n.txt', 'w').write('1')"},
 {"when":{"task":"^count to three","last":"(?s)failed \\(exit 1\\).*have 1"},"code":"open('n.txt', 'w').write('2')"},
 {"when":{"task":"^count to three","last":"(?s)failed \\(exit 1\\).*have 2"},"code":"open('n.txt', 'w').write('3')\nawait goal.complete(evidence='n is 3')"}
],"default":{"text":"done with this step"}}`)
	n := countRequests(e.script, "count to three")
	s := e.autonomous("count to three", GoalSpec{Until: `n=$(cat n.txt); echo "have $n"; test "$n" = 3`})
	g := e.waitGoal(s, GoalComplete)
	if !g.Verified || !g.Claimed || g.Turns != 3 || g.Checks != 3 {
		t.Errorf("goal = %+v, want verified and claimed after 3 turns and 3 checks", g)
	}
	vs := e.events(s, event.TypeVerified)
	if len(vs) != 3 || vs[0]["passed"] != false || vs[1]["passed"] != false || vs[2]["passed"] != true {
		t.Fatalf("verdicts = %v, want fail, fail, pass", vs)
	}
	if vs[2]["claimed"] != true || vs[0]["claimed"] == true {
		t.Errorf("claims on the verdicts = %v, %v; want only the last", vs[0]["claimed"], vs[2]["claimed"])
	}
	if !strings.Contains(vs[0]["output"].(string), "have 1") {
		t.Errorf("first verdict's output %q", vs[0]["output"])
	}
	if got := n.Load(); got != 6 {
		t.Errorf("%d model requests, want 6 (a cell and an answer in each of 3 turns)", got)
	}
	pts, err := e.svc.Progress(s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range pts {
		kinds = append(kinds, p.Kind+":"+p.Status)
	}
	want := "goal_set:active checkpoint: verified:failed checkpoint: verified:failed checkpoint: verified:passed goal_changed:complete"
	if strings.Join(kinds, " ") != want {
		t.Errorf("progress = %s\nwant       %s", strings.Join(kinds, " "), want)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Spend.Tokens < pts[i-1].Spend.Tokens {
			t.Errorf("spending went down at point %d: %+v after %+v", i, pts[i].Spend, pts[i-1].Spend)
		}
	}
}

// A turn that leaves the worktree as it was when the end condition last failed is not checked
// again; the model is told so, and the next change is checked.
func TestUnchangedWorktreeIsNotCheckedAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^fix it","last":"^fix it"},"code":"open('ok.txt', 'w').write('no')"},
 {"when":{"task":"^fix it","last":"failed \\(exit 1\\)"},"text":"I think it is fine as it is"},
 {"when":{"task":"^fix it","last":"has not changed since the end condition"},"code":"open('ok.txt', 'w').write('yes')"}
],"default":{"text":"step done"}}`)
	userConfig(t, `{"goals":{"backoff":"50ms"}}`)
	s := e.autonomous("fix it", GoalSpec{Until: `grep -q yes ok.txt`})
	g := e.waitGoal(s, GoalComplete)
	vs := e.events(s, event.TypeVerified)
	if len(vs) != 3 || vs[0]["passed"] != false || vs[1]["skipped"] != true || vs[2]["passed"] != true {
		t.Fatalf("verdicts = %v, want fail, skipped, pass", vs)
	}
	if g.Checks != 2 || !g.Verified || g.Claimed {
		t.Errorf("goal = %+v, want 2 checks run, verified, not claimed", g)
	}
}

// Each limit ends a run naming it: turns, wall time (mid-cell), cost.
func TestRunLimits(t *testing.T) {
	t.Parallel()
	t.Run("turns", func(t *testing.T) {
		e := newEnv(t, `{"rules":[{"when":{"task":"^keep going"},"code":"import uuid\nopen(uuid.uuid4().hex, 'w').write('x')"}],"default":{"text":"more"}}`)
		s := e.autonomous("keep going", GoalSpec{Until: "false", TurnBudget: 2})
		g := e.waitGoal(s, GoalBudgetLimited)
		if g.Limit != "turns" || g.Turns != 2 || !strings.Contains(g.Reason, "2 of 2 turns") {
			t.Errorf("goal = %+v", g)
		}
	})
	t.Run("wall", func(t *testing.T) {
		e := newEnv(t, `{"rules":[{"when":{"task":"^slow","last":"^slow"},"code":"import time\ntime.sleep(30)"}],"default":{"text":"ok"}}`)
		start := time.Now()
		s := e.autonomous("slow work", GoalSpec{Until: "true", WallBudget: 2 * time.Second})
		g := e.waitGoal(s, GoalBudgetLimited)
		if g.Limit != "wall" || time.Since(start) > 20*time.Second {
			t.Errorf("goal = %+v after %s", g, time.Since(start))
		}
		if ints := e.events(s, event.TypeInterrupted); len(ints) != 1 || !strings.Contains(ints[0]["reason"].(string), "wall budget") {
			t.Errorf("interruptions = %v, want the wall budget's", ints)
		}
	})
	t.Run("cost", func(t *testing.T) {
		e := newEnv(t, `{"rules":[{"when":{"task":"^pricey"},"code":"import uuid\nopen(uuid.uuid4().hex, 'w').write('x')","usage":{"prompt_tokens":1000,"completion_tokens":0}}],"default":{"text":"more","usage":{"prompt_tokens":1000,"completion_tokens":0}}}`)
		userConfig(t, `{"models":{"priced":{"baseURL":"`+e.url+`","model":"scripted","inputPrice":1000}}}`)
		spec := GoalSpec{Objective: "pricey", By: "autonomous", Until: "false", CostBudget: 3}
		s, err := e.svc.Create(context.Background(), CreateRequest{Task: "pricey work", Dir: e.repo, Model: "priced", Goal: &spec})
		if err != nil {
			t.Fatal(err)
		}
		g := e.waitGoal(s, GoalBudgetLimited)
		if g.Limit != "cost" || g.Spent.CostUSD < 3 || !strings.Contains(g.Reason, "cost budget reached") {
			t.Errorf("goal = %+v", g)
		}
	})
}

// A restart resumes an active goal with what it had spent: its turns so far count, a back-off
// under way is waited out, and it ends where it would have without the restart.
func TestGoalResumesAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[],"default":{"text":"nothing to do"}}`)
	userConfig(t, `{"goals":{"backoff":"10s","stallAfter":2}}`)
	s := e.create("sit still")
	e.settled(s)
	if _, err := e.svc.SetGoal(context.Background(), s.meta.ID, GoalSpec{Objective: "make progress", TokenBudget: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first back-off", func() bool { g, _ := s.goalNow(); return g.Waiting == "backoff" })
	before := e.goalOf(s)
	id := s.meta.ID
	e.svc = e.restart()
	s2, err := e.svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := s2.goalNow()
	if !ok || g.Status != GoalActive || g.Turns != before.Turns || g.IdleTurns != 1 || g.Waiting != "backoff" {
		t.Fatalf("recovered goal = %+v (before %+v), want active, same turns, 1 idle, backing off", g, before)
	}
	if g.Spent.Tokens != before.Spent.Tokens || g.Spent.Tokens == 0 {
		t.Errorf("recovered spending %+v, want %+v", g.Spent, before.Spent)
	}
	end := e.waitGoal(s2, GoalStalled)
	if end.Turns != 2 {
		t.Errorf("goal = %+v, want stalled after 2 turns in all", end)
	}
	recs, _ := s2.Events(0)
	var wait, next time.Time
	for _, r := range recs {
		switch {
		case r.Type == string(event.TypeGoalWait) && wait.IsZero():
			wait = r.TS
		case r.Type == string(event.TypeTurnStarted) && !wait.IsZero() && next.IsZero():
			next = r.TS
		}
	}
	if d := next.Sub(wait); d < 10*time.Second {
		t.Errorf("the turn after the back-off began %s after it, across the restart; want the whole 10 s", d)
	}
}

// A profile's completion gate and limits make a root session's run autonomous; a request's
// own settings win over the profile's, one by one; children run with the profile but no goal.
func TestProfileMakesTheRunAutonomous(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^gated","last":"^gated"},"code":"open('done.txt', 'w').write('yes')\nawait rlm('helper: look around', name='h')"}
],"default":{"text":"ok"}}`)
	userConfig(t, `{"profiles":{"ci":{"until":"test -f done.txt","maxTurns":5,"maxTokens":900000}}}`)
	spec := GoalSpec{Objective: "gated work", TurnBudget: 3, By: "autonomous"}
	s, err := e.svc.Create(context.Background(), CreateRequest{Task: "gated work", Dir: e.repo, Profile: "ci", Goal: &spec})
	if err != nil {
		t.Fatal(err)
	}
	g := e.waitGoal(s, GoalComplete)
	if g.Until != "test -f done.txt" || g.TurnBudget != 3 || g.TokenBudget != 900000 || !g.Verified {
		t.Errorf("goal = %+v, want the profile's gate and token limit, the request's turn limit, verified", g)
	}
	kids := s.childIDs()
	if len(kids) != 1 {
		t.Fatalf("children %v", kids)
	}
	if _, ok, _ := e.svc.GoalOf(kids[0]); ok {
		t.Error("the child has a goal of its own; the profile's run is the root's")
	}
	if got := profileGoal(nil, "x", nil); got != nil {
		t.Errorf("no profile, no goal: %+v", got)
	}
}

// A turn that only sends a message parks the goal until the reply: the child asks its parent,
// makes no model request while the parent takes its time, and goes on when the answer comes.
func TestGoalParksOnAMessageUntilTheReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^boss","last":"^boss"},"code":"await rlm('asker: find out the colour', name='asker')"},
 {"when":{"task":"^boss","last":"which colour"},"code":"import time\ntime.sleep(5)\nawait agent_message.send('blue', receiver_role='child', receiver_name='asker')"},
 {"when":{"task":"^asker","last":"^asker"},"code":"await goal.set('learn the colour')\nawait agent_message.send('which colour?', receiver_role='parent')"},
 {"when":{"task":"^asker","last":"blue"},"code":"await goal.complete(evidence='blue')"}
],"default":{"text":"ok"}}`)
	askerAtNow := requestTimes(e.script, "asker")
	s := e.create("boss: delegate")
	e.waitFor("the child", func() bool { return len(s.childIDs()) == 1 })
	child, _ := e.svc.Get(s.childIDs()[0])
	e.waitFor("the parked goal", func() bool { g, ok := child.goalNow(); return ok && g.Waiting == "message" })
	parked := time.Now()
	g := e.waitGoal(child, GoalComplete)
	if g.Evidence != "blue" {
		t.Errorf("goal = %+v", g)
	}
	askerAt := askerAtNow()
	for _, at := range askerAt {
		if at.After(parked) && at.Sub(parked) < 3*time.Second {
			t.Errorf("the child asked its model %s after parking, before any reply", at.Sub(parked))
		}
	}
}

// An end condition that does not exist, or hangs, is reported as such (named, timed out) and
// the model is told; the run goes on to its limit rather than hanging.
func TestEndConditionMissingOrHanging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[{"when":{"task":"^try"},"code":"import uuid\nopen(uuid.uuid4().hex, 'w').write('x')"}],"default":{"text":"ok"}}`)
	var mu sync.Mutex
	var told []string
	e.script.Observe(func(r scripted.Request) {
		mu.Lock()
		told = append(told, r.Last)
		mu.Unlock()
	})
	missing := e.autonomous("try the missing check", GoalSpec{Until: "no-such-command-xyz --flag", TurnBudget: 2})
	g := e.waitGoal(missing, GoalBudgetLimited)
	if g.LastCheck == nil || !strings.Contains(g.LastCheck.Error, "the command was not found") || g.LastCheck.ExitCode != 127 {
		t.Errorf("missing command's verdict = %+v", g.LastCheck)
	}
	hang := e.autonomous("try the hanging check", GoalSpec{Until: "sleep 60", CheckTimeout: time.Second, TurnBudget: 1})
	start := time.Now()
	g = e.waitGoal(hang, GoalBudgetLimited)
	if g.LastCheck == nil || !g.LastCheck.TimedOut || !strings.Contains(g.LastCheck.Error, "timed out after 1s") {
		t.Errorf("hanging command's verdict = %+v", g.LastCheck)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a 1 s check timeout took %s to end the run", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slicesContain(told, "the end condition `no-such-command-xyz --flag` could not run: the command was not found") {
		t.Errorf("the model was not told the check could not run; it was told:\n%s", strings.Join(told, "\n---\n"))
	}
}

func slicesContain(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// The end condition runs in the session's sandbox: the user's own tree is invisible to it.
func TestEndConditionRunsInTheSandbox(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	userConfig(t, `{"sandbox":"bwrap"}`)
	s := e.autonomous("look around", GoalSpec{Until: "test -e main.py && ! test -e " + e.repo + "/main.py", TurnBudget: 2})
	g := e.waitGoal(s, GoalComplete)
	if !g.Verified {
		t.Errorf("goal = %+v: the check saw the user's tree %s", g, e.repo)
	}
}

// A second goal replaces the first with Replace, recorded as such; a paused goal takes no
// turns until resumed.
func TestGoalReplaceAndPause(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"nothing"}}`)
	userConfig(t, `{"goals":{"backoff":"30s"}}`)
	s := e.create("wait around")
	e.settled(s)
	ctx := context.Background()
	if _, err := e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "first"}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first back-off", func() bool { g, _ := s.goalNow(); return g.Waiting == "backoff" })
	g, err := e.svc.ControlGoal(ctx, s.meta.ID, "pause")
	if err != nil || g.Status != GoalPaused {
		t.Fatalf("pause = %+v, %v", g, err)
	}
	g, err = e.svc.SetGoal(ctx, s.meta.ID, GoalSpec{Objective: "second", TurnBudget: 1, Replace: true})
	if err != nil || g.Objective != "second" || g.Status != GoalActive {
		t.Fatalf("replace = %+v, %v", g, err)
	}
	e.waitGoal(s, GoalBudgetLimited)
	sets := e.events(s, event.TypeGoalSet)
	if len(sets) != 2 || sets[1]["replaced"] != true {
		t.Errorf("goal_set events = %v", sets)
	}
	if g, err := e.svc.ControlGoal(ctx, s.meta.ID, "clear"); err != nil || g.Status != "cleared" {
		t.Errorf("clear = %+v, %v", g, err)
	}
	if _, ok, _ := e.svc.GoalOf(s.meta.ID); ok {
		t.Error("the goal is still there after clear")
	}
}

// A goal parked on a child the user stops goes on at once: it is not left waiting for a
// message that will never come.
func TestGoalParkedOnAStoppedChildGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^chief","last":"^chief"},"code":"await goal.set('have the child finish')\nawait rlm('sleeper: sleep long', name='sleeper')"},
 {"when":{"task":"^chief","last":"Keep working toward the goal"},"code":"await goal.complete(evidence='the child was stopped; done without it')"},
 {"when":{"task":"^sleeper"},"code":"import time\ntime.sleep(60)"}
],"default":{"text":"ok"}}`)
	s := e.create("chief: delegate")
	e.waitFor("the parked goal", func() bool { g, ok := s.goalNow(); return ok && g.Waiting == "children" })
	if err := e.svc.Stop(context.Background(), s.childIDs()[0]); err != nil {
		t.Fatal(err)
	}
	g := e.waitGoal(s, GoalComplete)
	if !g.Claimed {
		t.Errorf("goal = %+v", g)
	}
}

// Model code cannot swap the user's goal (its end condition, its budgets) for its own, and
// what the end condition writes counts neither as the model's progress nor as a change to
// check again: a model that does nothing backs off and stalls. Stopping the session pauses
// its goal, saying so.
func TestGoalGuardsAgainstTheModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `{"rules":[
 {"when":{"task":"^cheat","last":"^cheat"},"code":"print(await goal.set('anything', replace=True))"}
],"default":{"text":"nothing to do"}}`)
	userConfig(t, `{"goals":{"backoff":"100ms","stallAfter":3}}`)
	s := e.autonomous("cheat the check", GoalSpec{Until: "date +%s%N > check.log; false", TurnBudget: 8})
	g := e.waitGoal(s, GoalStalled)
	if g.Until == "" || g.Objective != "cheat the check" || g.By != "autonomous" {
		t.Errorf("goal = %+v: the model replaced the user's goal", g)
	}
	outs := e.events(s, event.TypeToolFinished)
	if len(outs) == 0 || !strings.Contains(outs[0]["output"].(string), "model code cannot replace it") {
		t.Errorf("the model's goal.set was not refused: %v", outs)
	}
	if sets := e.events(s, event.TypeGoalSet); len(sets) != 1 {
		t.Errorf("%d goal_set events, want only the user's", len(sets))
	}
	vs := e.events(s, event.TypeVerified)
	if len(vs) != 4 || vs[0]["skipped"] == true || vs[1]["skipped"] != true || vs[3]["skipped"] != true {
		t.Errorf("verdicts = %v, want one run and then skipped (what the check wrote is not the model's change)", vs)
	}
	if w := e.events(s, event.TypeGoalWait); len(w) != 2 {
		t.Errorf("goal_wait = %v, want two back-offs before the stall", w)
	}

	s2 := e.create("wait to be stopped")
	e.settled(s2)
	if _, err := e.svc.SetGoal(context.Background(), s2.meta.ID, GoalSpec{Objective: "go on", Until: "false"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Stop(context.Background(), s2.meta.ID); err != nil {
		t.Fatal(err)
	}
	if g := e.goalOf(s2); g.Status != GoalPaused || g.Reason != "the session was stopped" {
		t.Errorf("goal of a stopped session = %+v", g)
	}
}

// A goal set while the last turn is letting the session go (its kick finds the session still
// reserved) takes its turn when the turn goroutine lets go.
func TestGoalSetWhileTheTurnLetsGo(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"nothing"}}`)
	userConfig(t, `{"goals":{"backoff":"30s"}}`)
	s := e.create("wait around")
	e.settled(s)
	s.mu.Lock()
	s.holder = turnHolder // what runTurns holds until it has settled
	s.mu.Unlock()
	if _, err := e.svc.SetGoal(context.Background(), s.meta.ID, GoalSpec{Objective: "one turn", TurnBudget: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if g, _ := s.goalNow(); g.Turns != 0 {
		t.Fatalf("a turn ran while the session was reserved: %+v", g)
	}
	s.mu.Lock()
	s.holder = free
	s.mu.Unlock()
	s.goalRecheck() // as runTurns does once it lets go
	e.waitGoal(s, GoalBudgetLimited)
}
