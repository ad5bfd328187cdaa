package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/workspace"
)

// Goals keep a session taking turns until an objective is met, without hot loops.
//
// A goal is recorded (goal_set, goal_changed, goal_wait, verified) and rebuilt from the log,
// so it survives restarts with what it has already spent. After each turn of a session with an
// active goal, goalAfterTurn decides what comes next, in this order:
//
//   - a budget — tokens, cost (the whole subtree's, refine included), turns, wall time — that
//     is used up ends it as budget_limited, naming the limit (an end condition still checks
//     the last turn first); tokens, cost and wall time are also watched mid-turn, and their
//     end interrupts the subtree's turns;
//   - while a descendant is busy the goal parks: no model call until a message arrives (a
//     child's result or message starts the next turn) or the last busy child settles; a turn
//     that only sent messages parks it too, until a reply arrives;
//   - an end condition (an autonomous run) runs in the worktree; its pass completes the goal,
//     its failure goes to the model as the next message, and a worktree unchanged since the
//     last failure is not checked again (the model is told so);
//   - a turn that changed nothing (no checkpoint, no message sent or received, no new child)
//     delays the next continuation, doubling from goals.backoff; goals.stallAfter of them in a
//     row end the goal as stalled;
//   - otherwise the next turn starts at once with a continuation message.
//
// The model sets goals and claims them complete (goal.complete); it cannot set an end
// condition: that is the user's check on the model, so a claim and a verified success are
// recorded apart.

// Goal statuses.
const (
	GoalActive        = "active"
	GoalPaused        = "paused"
	GoalBudgetLimited = "budget_limited"
	GoalStalled       = "stalled"
	GoalComplete      = "complete"
	goalCleared       = "cleared"
)

// GoalSpec is what a goal asks for. A budget of 0 is no limit; budgets count the whole
// subtree's spending from the moment the goal is set.
type GoalSpec struct {
	Objective    string
	TokenBudget  int64
	TurnBudget   int
	WallBudget   time.Duration
	CostBudget   float64
	Until        string        // the end-condition command of an autonomous run
	CheckTimeout time.Duration // bounds Until; 0 = goals.checkTimeout
	Replace      bool          // replace an active or paused goal
	By           string        // user, agent, profile or autonomous
	RequestKey   string        // the journal key of the client's request (see [Service.RequestApplied])
}

// Validate checks a spec; its errors say what to send instead.
func (g GoalSpec) Validate() error {
	switch {
	case strings.TrimSpace(g.Objective) == "":
		return RequestError("goal: the objective is empty; say what the session should achieve")
	case g.TokenBudget < 0:
		return RequestError(fmt.Sprintf("goal: token budget %d: want a positive number of tokens", g.TokenBudget))
	case g.TurnBudget < 0:
		return RequestError(fmt.Sprintf("goal: turn budget %d: want a positive number of turns", g.TurnBudget))
	case g.WallBudget < 0:
		return RequestError(fmt.Sprintf("goal: wall budget %s: want a positive duration such as 2h", g.WallBudget))
	case g.CostBudget < 0:
		return RequestError(fmt.Sprintf("goal: cost budget %g: want a positive amount of USD", g.CostBudget))
	case g.Until != "" && strings.TrimSpace(g.Until) == "":
		return RequestError("goal: the end condition is blank; give a command that passes when the goal is met")
	case g.CheckTimeout < 0:
		return RequestError(fmt.Sprintf("goal: check timeout %s: want a positive duration such as 5m", g.CheckTimeout))
	}
	return nil
}

// Goal is a goal's state for clients.
type Goal struct {
	GoalSpec
	Status    string
	Reason    string
	Limit     string // the budget that ended it
	Set       time.Time
	Turns     int         // turns taken under the goal
	IdleTurns int         // turns in a row that changed nothing
	Spent     event.Spend // the subtree's spending since the goal was set
	Claimed   bool        // the model called goal.complete
	Verified  bool        // the end condition passed
	Evidence  string
	Checks    int             // end-condition runs
	LastCheck *event.Verified // the latest one
	Waiting   string          // children, message or backoff while the goal holds back its next turn
}

// Ended reports whether the goal no longer drives turns.
func (g Goal) Ended() bool {
	return g.Status == GoalComplete || g.Status == GoalStalled || g.Status == GoalBudgetLimited
}

// goalState is a session's goal (under Session.mu).
type goalState struct {
	Goal
	base     event.Spend // the subtree's spending when it was set
	mark     turnMark    // at the start of the current turn
	failHead string      // the worktree commit the end condition last failed on
	resumeAt time.Time   // a recovered back-off's end
	gen      int         // bumped by every change: a stale continuation timer does nothing
	timerGen int         // bumped by every back-off armed: a timer that lost its race does nothing
	timer    *time.Timer // the next continuation after a back-off
	// kickLater: the user set or resumed the goal while the session was reserved; the turn
	// goroutine kicks it when it lets go.
	kickLater bool
	decided   bool        // replay: the after-turn decision of the latest turn was read
	wall      *time.Timer // the wall budget
}

// turnMark is what a turn can change that counts as progress.
type turnMark struct {
	head     string
	sent     int64
	inbound  int64
	children int
}

func (s *Session) markLocked() turnMark {
	return turnMark{head: s.head, sent: s.usage.Messages, inbound: s.inbound, children: len(s.children)}
}

func (g *goalState) stopTimers() {
	g.gen++
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	if g.wall != nil {
		g.wall.Stop()
		g.wall = nil
	}
}

// SetGoal gives a session a goal; it starts a turn when the session is free.
func (s *Service) SetGoal(ctx context.Context, id string, spec GoalSpec) (Goal, error) {
	sess, err := s.Get(id)
	if err != nil {
		return Goal{}, err
	}
	g, err := sess.setGoal(ctx, spec)
	if err != nil {
		return Goal{}, err
	}
	sess.announce()
	sess.goalKickOrLater()
	return g, nil
}

// GoalOf returns a session's goal; false when it has none.
func (s *Service) GoalOf(id string) (Goal, bool, error) {
	sess, err := s.Get(id)
	if err != nil {
		return Goal{}, false, err
	}
	g, ok := sess.goalNow()
	return g, ok, nil
}

// ControlGoal pauses, resumes or clears a session's goal.
func (s *Service) ControlGoal(ctx context.Context, id, action string) (Goal, error) {
	sess, err := s.Get(id)
	if err != nil {
		return Goal{}, err
	}
	var g Goal
	switch action {
	case "pause":
		g, err = sess.changeGoal(ctx, []string{GoalActive}, GoalPaused, "paused by the user")
	case "resume":
		g, err = sess.changeGoal(ctx, []string{GoalPaused, GoalStalled, GoalBudgetLimited}, GoalActive, "resumed by the user")
	case "clear":
		g, err = sess.changeGoal(ctx, nil, goalCleared, "cleared by the user")
	default:
		return Goal{}, RequestError(fmt.Sprintf("goal %q: want pause, resume or clear", action))
	}
	if err != nil {
		return Goal{}, err
	}
	sess.announce()
	if action == "resume" {
		sess.goalKickOrLater()
	}
	return g, nil
}

func (s *Session) goalNow() (Goal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goal == nil {
		return Goal{}, false
	}
	return s.goalInfoLocked(), true
}

// goalInfoLocked copies the goal with its spending; the caller holds mu.
func (s *Session) goalInfoLocked() Goal {
	g := s.goal.Goal
	g.Spent = sub(spendOf(s.svc.infoLocked(s).Total), s.goal.base)
	if g.LastCheck != nil {
		c := *g.LastCheck
		g.LastCheck = &c
	}
	return g
}

// setGoal records a new goal. An active or paused one is replaced only when asked.
func (s *Session) setGoal(ctx context.Context, spec GoalSpec) (Goal, error) {
	if err := spec.Validate(); err != nil {
		return Goal{}, err
	}
	if spec.By == "" {
		spec.By = "user"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == Stopped {
		return Goal{}, fmt.Errorf("%w: session %s is stopped and takes no more turns; fork it to give the fork a goal", ErrInvalidState, shortID(s.meta.ID))
	}
	replaced := false
	if g := s.goal; g != nil {
		if (g.Status == GoalActive || g.Status == GoalPaused) && !spec.Replace {
			return Goal{}, fmt.Errorf("%w: session %s already has a goal (%s): %q; replace it with --replace (replace=True from Python)",
				ErrInvalidState, shortID(s.meta.ID), g.Status, clipText(g.Objective, 80))
		}
		replaced = true
		g.stopTimers()
	}
	spend := spendOf(s.svc.infoLocked(s).Total)
	rec, err := s.append(ctx, event.GoalSet{
		Objective: spec.Objective, TokenBudget: spec.TokenBudget, TurnBudget: spec.TurnBudget,
		WallBudgetMs: spec.WallBudget.Milliseconds(), CostBudget: spec.CostBudget, Until: spec.Until,
		CheckTimeoutMs: spec.CheckTimeout.Milliseconds(), By: spec.By, Replaced: replaced, Spend: spend,
		RequestKey: spec.RequestKey,
	})
	if err != nil {
		return Goal{}, err
	}
	s.goal = &goalState{Goal: Goal{GoalSpec: spec, Status: GoalActive, Set: rec.TS}, base: spend, mark: s.markLocked()}
	s.armWallLocked()
	return s.goalInfoLocked(), nil
}

// armWallLocked arms the wall budget's timer; the caller holds mu.
func (s *Session) armWallLocked() {
	g := s.goal
	if g == nil || g.WallBudget <= 0 || g.Status != GoalActive {
		return
	}
	if g.wall != nil {
		g.wall.Stop()
	}
	gen := g.gen
	left := time.Until(g.Set.Add(g.WallBudget))
	g.wall = time.AfterFunc(max(left, 0), func() {
		s.svc.spawn(func() { s.goalOverBudget(gen, "wall") })
	})
}

// changeGoal moves the goal to status when it is in one of from (any when nil).
func (s *Session) changeGoal(ctx context.Context, from []string, status, reason string) (Goal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.goal
	if g == nil {
		return Goal{}, fmt.Errorf("%w: session %s has no goal; set one with `arbor goal %s \"objective\"`", ErrInvalidState, shortID(s.meta.ID), shortID(s.meta.ID))
	}
	if from != nil && !contains(from, g.Status) {
		return Goal{}, fmt.Errorf("%w: session %s's goal is %s, not %s", ErrInvalidState, shortID(s.meta.ID), g.Status, strings.Join(from, " or "))
	}
	if status == GoalActive && s.state == Stopped {
		return Goal{}, fmt.Errorf("%w: session %s is stopped; fork it to continue its goal", ErrInvalidState, shortID(s.meta.ID))
	}
	if status == GoalActive {
		if limit, reason := s.overLimitLocked(time.Now()); limit != "" {
			return Goal{}, fmt.Errorf("%w: session %s's goal cannot resume: its %s; give it new budgets: arbor goal %s %q --replace --budget …",
				ErrInvalidState, shortID(s.meta.ID), reason, shortID(s.meta.ID), clipText(g.Objective, 60))
		}
	}
	if err := s.recordGoalLocked(ctx, status, reason, ""); err != nil {
		return Goal{}, err
	}
	if status == goalCleared {
		out := g.Goal
		out.Status = goalCleared
		s.goal = nil
		return out, nil
	}
	if status == GoalActive {
		g.IdleTurns, g.Limit = 0, ""
		s.armWallLocked()
	}
	return s.goalInfoLocked(), nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// recordGoalLocked records the goal's new status and applies it; the caller holds mu.
func (s *Session) recordGoalLocked(ctx context.Context, status, reason, limit string) error {
	g := s.goal
	_, err := s.append(ctx, event.GoalChanged{
		Status: status, Reason: reason, Limit: limit, Evidence: g.Evidence, Claimed: g.Claimed,
		Verified: g.Verified, Turns: g.Turns, Spend: spendOf(s.svc.infoLocked(s).Total),
	})
	if err != nil {
		return err
	}
	g.stopTimers()
	g.Status, g.Reason, g.Limit, g.Waiting = status, reason, limit, ""
	return nil
}

// endGoal ends an active goal (gen guards against a change made meanwhile; -1 = any).
func (s *Session) endGoal(ctx context.Context, gen int, status, reason, limit string) bool {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.Status != GoalActive || (gen >= 0 && g.gen != gen) {
		s.mu.Unlock()
		return false
	}
	err := s.recordGoalLocked(ctx, status, reason, limit)
	s.mu.Unlock()
	if err != nil {
		s.svc.log.Warn("record goal end", "session", s.meta.ID, "err", err)
	}
	s.announce()
	return true
}

// completeGoal is the model's claim that the goal is met (goal.complete). Without an end
// condition the claim completes it, recorded as self-reported; with one, the condition decides
// after the turn.
func (s *Session) completeGoal(ctx context.Context, evidence string) (Goal, error) {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.Status != GoalActive {
		s.mu.Unlock()
		return Goal{}, errors.New("goal.complete: the session has no active goal")
	}
	g.Claimed, g.Evidence = true, evidence
	if g.Until != "" {
		out := s.goalInfoLocked()
		s.mu.Unlock()
		return out, nil
	}
	err := s.recordGoalLocked(ctx, GoalComplete, "the model reported it complete (self-reported: no end condition was set)", "")
	out := s.goalInfoLocked()
	s.mu.Unlock()
	s.announce()
	return out, err
}

// clipText shortens s to at most n bytes for a message, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// profileGoal is the goal of a root session run with a profile whose completion gate or
// limits are set: an autonomous run toward the task. What the request sets itself (flags of
// `arbor run`) wins over the profile, setting by setting.
func profileGoal(p *workspace.Profile, task string, req *GoalSpec) *GoalSpec {
	if p == nil || (p.Until == "" && p.MaxTurns == 0 && p.MaxTokens == 0 && p.MaxWall == 0 && p.MaxCost == 0) {
		return req
	}
	g := GoalSpec{Objective: task, By: "profile"}
	if req != nil {
		g = *req
	}
	if g.Until == "" {
		g.Until = p.Until
	}
	if g.CheckTimeout == 0 {
		g.CheckTimeout = p.CheckTimeout
	}
	if g.TurnBudget == 0 {
		g.TurnBudget = p.MaxTurns
	}
	if g.TokenBudget == 0 {
		g.TokenBudget = p.MaxTokens
	}
	if g.WallBudget == 0 {
		g.WallBudget = p.MaxWall
	}
	if g.CostBudget == 0 {
		g.CostBudget = p.MaxCost
	}
	return &g
}

// goalStopped pauses the goal of a session being stopped, saying so: a stopped session takes
// no more turns, so its timers go and `arbor goal` tells the truth (a fork can take it up).
func (s *Session) goalStopped(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.goal; g != nil && g.Status == GoalActive {
		if err := s.recordGoalLocked(ctx, GoalPaused, "the session was stopped", ""); err != nil {
			s.svc.log.Warn("record goal pause", "session", s.meta.ID, "err", err)
		}
	}
}
