package server

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// TestGoalsOverProtocol drives arbor/goal.* and arbor/progress through a real daemon: an
// autonomous session.create, the goal in the session tree, control, the series, and bad input
// answered with InvalidParams, CodeUnknownSession or CodeInvalidState naming what was wrong.
func TestGoalsOverProtocol(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := t.Context()
	repo, c := modelDaemon(t, `{"rules":[
 {"when":{"task":"^make","last":"^make"},"code":"open('done.txt','w').write('yes')"}
],"default":{"text":"done"}}`)
	rpcErr := func(err error, code int64, text string) {
		t.Helper()
		var e *jsonrpc2.Error
		if !errors.As(err, &e) || int64(e.Code) != code || !strings.Contains(e.Message, text) {
			t.Errorf("error %v, want code %d containing %q", err, code, text)
		}
	}

	turns := 4
	s, err := SessionCreate.Call(ctx, c, SessionCreateParams{Task: "make done.txt", Dir: repo, Autonomous: true,
		Goal: &GoalSetParams{Until: "test -f done.txt", TurnBudget: &turns}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Goal == nil || s.Goal.Status != "active" || s.Goal.Until != "test -f done.txt" {
		t.Fatalf("created session's goal = %+v", s.Goal)
	}
	var g *GoalResult
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if g, err = GoalGet.Call(ctx, c, GoalRef{Session: s.ID}); err != nil {
			t.Fatal(err)
		}
		if g.Goal != nil && g.Goal.Status == "complete" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goal never completed: %+v", g.Goal)
		}
	}
	if !g.Goal.Verified || g.Goal.By != "autonomous" || g.Goal.LastCheck == nil || !g.Goal.LastCheck.Passed || g.Goal.Spent.Tokens <= 0 {
		t.Errorf("goal = %+v", g.Goal)
	}
	pr, err := Progress.Call(ctx, c, ProgressParams{Session: s.ID[:8]})
	if err != nil || pr.Session != s.ID || len(pr.Points) < 3 || pr.Points[0].Kind != "goal_set" {
		t.Errorf("progress = %+v, %v", pr, err)
	}

	// Bad input.
	zero := int64(0)
	_, err = GoalSet.Call(ctx, c, GoalSetParams{Session: s.ID, Objective: "x", TokenBudget: &zero})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "tokenBudget 0: want a value above zero")
	_, err = GoalSet.Call(ctx, c, GoalSetParams{Session: s.ID, Objective: "x", WallBudget: "soon"})
	rpcErr(err, int64(jsonrpc2.InvalidParams), `wallBudget "soon": want a duration`)
	_, err = GoalSet.Call(ctx, c, GoalSetParams{Session: s.ID, Objective: "x", CheckTimeout: "5m"})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "give until too")
	_, err = GoalSet.Call(ctx, c, GoalSetParams{Session: "ffffffffffff", Objective: "x"})
	rpcErr(err, CodeUnknownSession, "ffffffffffff")
	_, err = GoalControl.Call(ctx, c, GoalControlParams{Session: s.ID, Action: "pause"})
	rpcErr(err, CodeInvalidState, "goal is complete, not active")
	_, err = GoalControl.Call(ctx, c, GoalControlParams{Session: s.ID, Action: "boost"})
	rpcErr(err, int64(jsonrpc2.InvalidParams), `goal "boost": want pause, resume or clear`)
	_, err = SessionCreate.Call(ctx, c, SessionCreateParams{Task: "no gate", Dir: repo, Autonomous: true})
	rpcErr(err, int64(jsonrpc2.InvalidParams), "an autonomous run needs an end condition")
	if _, err := GoalControl.Call(ctx, c, GoalControlParams{Session: s.ID, Action: "clear"}); err != nil {
		t.Fatal(err)
	}
	if g, err := GoalGet.Call(ctx, c, GoalRef{Session: s.ID}); err != nil || g.Goal != nil {
		t.Errorf("after clear: %+v, %v", g, err)
	}
}
