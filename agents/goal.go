package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
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
	decided  bool        // replay: the after-turn decision of the latest turn was read
	wall     *time.Timer // the wall budget
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

// spendOf is the subtree's spending now: the session, every descendant, refine runs.
func spendOf(u Usage) event.Spend {
	return event.Spend{
		Tokens:     u.InputTokens + u.OutputTokens + u.RefineInputTokens + u.RefineOutputTokens,
		CostUSD:    u.CostUSD + u.RefineCostUSD,
		ModelCalls: u.ModelCalls + u.RefineCalls,
	}
}

func (s *Service) spend(sess *Session) event.Spend { return spendOf(s.info(sess).Total) }

func sub(a, b event.Spend) event.Spend {
	return event.Spend{Tokens: a.Tokens - b.Tokens, CostUSD: a.CostUSD - b.CostUSD, ModelCalls: a.ModelCalls - b.ModelCalls}
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
	sess.goalKick()
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
		sess.goalKick()
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

// goalTurnStart counts a turn under an active goal and marks what it may change.
func (s *Session) goalTurnStart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interruptWhy = ""
	if g := s.goal; g != nil && g.Status == GoalActive {
		g.Turns++
		g.Waiting = ""
		g.mark = s.markLocked()
		if g.timer != nil { // a message started this turn before the back-off ran out
			g.timer.Stop()
			g.timer = nil
		}
	}
}

// overLimitLocked names the budget the goal has used up, with a reason; "" when none.
func (s *Session) overLimitLocked(now time.Time) (limit, reason string) {
	g := s.goal
	spent := sub(spendOf(s.svc.infoLocked(s).Total), g.base)
	switch {
	case g.TokenBudget > 0 && spent.Tokens >= g.TokenBudget:
		return "tokens", fmt.Sprintf("token budget reached: the subtree spent %d of %d tokens", spent.Tokens, g.TokenBudget)
	case g.CostBudget > 0 && spent.CostUSD >= g.CostBudget:
		return "cost", fmt.Sprintf("cost budget reached: the subtree spent $%.4f of $%.4f", spent.CostUSD, g.CostBudget)
	case g.TurnBudget > 0 && g.Turns >= g.TurnBudget:
		return "turns", fmt.Sprintf("turn budget reached: %d of %d turns", g.Turns, g.TurnBudget)
	case g.WallBudget > 0 && !now.Before(g.Set.Add(g.WallBudget)):
		return "wall", fmt.Sprintf("wall budget reached: %s of %s since the goal was set", now.Sub(g.Set).Round(time.Second), g.WallBudget)
	}
	return "", ""
}

// spent is called when a session's usage grew: every goal above it (its own included) whose
// token or cost budget is now used up ends, and the turns of its subtree are interrupted.
func (s *Service) spent(sess *Session) {
	for cur := sess; cur != nil; {
		cur.checkSpendBudget()
		if cur.meta.Parent == "" {
			return
		}
		p, err := s.Get(cur.meta.Parent)
		if err != nil {
			return
		}
		cur = p
	}
}

func (s *Session) checkSpendBudget() {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.Status != GoalActive || (g.TokenBudget == 0 && g.CostBudget == 0) {
		s.mu.Unlock()
		return
	}
	gen := g.gen
	limit, _ := s.overLimitLocked(time.Now())
	s.mu.Unlock()
	if limit == "tokens" || limit == "cost" {
		s.goalOverBudget(gen, limit)
	}
}

// goalOverBudget ends the goal at a budget and interrupts the work of its subtree.
func (s *Session) goalOverBudget(gen int, limit string) {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.Status != GoalActive || g.gen != gen {
		s.mu.Unlock()
		return
	}
	got, reason := s.overLimitLocked(time.Now())
	s.mu.Unlock()
	if got == "" {
		return
	}
	if !s.endGoal(s.svc.ctx, gen, GoalBudgetLimited, reason, got) {
		return
	}
	for _, d := range append([]*Session{s}, s.descendants()...) {
		d.interrupt("the goal of session " + shortID(s.meta.ID) + " ended: " + reason)
	}
}

// descendants lists every session below s.
func (s *Session) descendants() []*Session {
	var out []*Session
	for _, id := range s.childIDs() {
		c, err := s.svc.Get(id)
		if err != nil {
			continue
		}
		out = append(out, c)
		out = append(out, c.descendants()...)
	}
	return out
}

// busyDescendants names the descendants still working: a turn running or a message waiting.
func (s *Session) busyDescendants() []string {
	var out []string
	for _, d := range s.descendants() {
		d.mu.Lock()
		busy := d.state != Stopped && (d.holder == turnHolder || len(d.pending) > 0 || d.state == Running || d.state == Admitted)
		d.mu.Unlock()
		if busy {
			out = append(out, d.label())
		}
	}
	return out
}

// interrupt cuts the running turn short, recording why (see runTurns).
func (s *Session) interrupt(why string) {
	s.mu.Lock()
	cancel := s.cancelTurn
	if s.holder != turnHolder {
		cancel = nil
	}
	if cancel != nil {
		s.interruptWhy = why
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// takeInterrupt returns and clears why the turn was interrupted.
func (s *Session) takeInterrupt() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	why := s.interruptWhy
	s.interruptWhy = ""
	return why
}

// goalAfterTurn decides what an active goal does after a turn (see the package's goal notes):
// it may queue the next message (the loop then runs another turn), arm a back-off, park, or
// end the goal. It runs on the turn goroutine, which still holds the session.
func (s *Session) goalAfterTurn(ctx context.Context, turnErr error) {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.Status != GoalActive || s.state == Stopped {
		s.mu.Unlock()
		return
	}
	gen := g.gen
	now := s.markLocked()
	// The turn that set the goal (not counted under it) is never an idle one.
	changed := turnErr == nil && (g.Turns == 0 || now.head != g.mark.head || now.sent > g.mark.sent || now.inbound > g.mark.inbound || now.children > g.mark.children)
	limit, reason := s.overLimitLocked(time.Now())
	s.mu.Unlock()
	if limit != "" && g.Until == "" {
		s.endGoal(ctx, gen, GoalBudgetLimited, reason, limit)
		return
	}
	if busy := s.busyDescendants(); len(busy) > 0 {
		if limit != "" {
			s.endGoal(ctx, gen, GoalBudgetLimited, reason, limit)
			return
		}
		s.mu.Lock()
		if s.goal == g && g.gen == gen {
			g.Waiting = "children"
			if changed {
				g.IdleTurns = 0
			}
		}
		s.mu.Unlock()
		s.append(ctx, event.GoalWait{Reason: "children", Children: busy})
		s.announce()
		return // a child's message, or the last child settling (goalChildSettled), resumes it
	}
	if turnErr == nil && now.sent > g.mark.sent && now.inbound == g.mark.inbound && now.head == g.mark.head && now.children == g.mark.children {
		// The turn only sent messages: it waits for a reply, which starts the next turn.
		s.mu.Lock()
		if s.goal == g && g.gen == gen {
			g.Waiting, g.IdleTurns = "message", 0
		}
		s.mu.Unlock()
		s.append(ctx, event.GoalWait{Reason: "message"})
		s.announce()
		return
	}
	note := ""
	if g.Until != "" {
		v, skipped := s.checkEnd(ctx, gen)
		if v == nil {
			return // the goal changed meanwhile
		}
		if v.Passed {
			s.mu.Lock()
			if s.goal == g {
				g.Verified = true
			}
			s.mu.Unlock()
			s.endGoal(ctx, gen, GoalComplete, fmt.Sprintf("the end condition `%s` passed", g.Until), "")
			return
		}
		if limit != "" {
			// The last turn the budget allowed was checked, and did not pass.
			s.endGoal(ctx, gen, GoalBudgetLimited, reason, limit)
			return
		}
		if !skipped {
			s.mu.Lock()
			text := checkFailedText(g.Until, v, v.Claimed)
			g.IdleTurns = 0 // the worktree changed since the last failure
			s.mu.Unlock()
			s.goalContinueNow(ctx, gen, text)
			return
		}
		note = fmt.Sprintf("The worktree has not changed since the end condition `%s` last failed, so it was not run again; change the code so that it passes.", g.Until)
	}
	if changed {
		s.mu.Lock()
		g.IdleTurns = 0
		s.mu.Unlock()
		s.goalContinueNow(ctx, gen, note)
		return
	}
	s.mu.Lock()
	g.IdleTurns++
	idle := g.IdleTurns
	s.mu.Unlock()
	if idle >= s.cfg.Goals.StallAfter {
		why := fmt.Sprintf("%d turns in a row changed nothing (no file, message or child)", idle)
		if turnErr != nil {
			why += "; the last one failed: " + failureReason(turnErr)
		}
		s.endGoal(ctx, gen, GoalStalled, why, "")
		return
	}
	delay := s.cfg.Goals.Backoff << (idle - 1)
	if delay > s.cfg.Goals.MaxBackoff || delay <= 0 {
		delay = s.cfg.Goals.MaxBackoff
	}
	s.mu.Lock()
	if s.goal != g || g.gen != gen {
		s.mu.Unlock()
		return
	}
	g.Waiting = "backoff"
	s.armContinuationLocked(delay, note)
	s.mu.Unlock()
	s.append(ctx, event.GoalWait{Reason: "backoff", DelayMs: delay.Milliseconds(), IdleTurns: idle})
	s.announce()
}

func checkFailedText(until string, v *event.Verified, claimed bool) string {
	var b strings.Builder
	if claimed {
		b.WriteString("You called goal.complete, but ")
	}
	switch {
	case v.TimedOut:
		fmt.Fprintf(&b, "the end condition `%s` timed out after %s.", until, time.Duration(v.DurationMs)*time.Millisecond)
	case v.Error != "":
		fmt.Fprintf(&b, "the end condition `%s` could not run: %s.", until, v.Error)
	default:
		fmt.Fprintf(&b, "the end condition `%s` failed (exit %d).", until, v.ExitCode)
	}
	if out := strings.TrimSpace(v.Output); out != "" {
		b.WriteString(" Its output (the end of it):\n" + out)
	}
	return b.String()
}

// continuationText is the message that starts a goal's next turn.
func (s *Session) continuationText(note string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.goal
	if g == nil {
		return ""
	}
	spent := sub(spendOf(s.svc.infoLocked(s).Total), g.base)
	var b strings.Builder
	fmt.Fprintf(&b, "[arbor goal] Keep working toward the goal: %s\n", g.Objective)
	fmt.Fprintf(&b, "Spent so far: %d tokens", spent.Tokens)
	if g.TokenBudget > 0 {
		fmt.Fprintf(&b, " of %d", g.TokenBudget)
	}
	if g.TurnBudget > 0 {
		fmt.Fprintf(&b, ", %d of %d turns.\n", g.Turns, g.TurnBudget)
	} else {
		fmt.Fprintf(&b, ", %d turn(s).\n", g.Turns)
	}
	if note != "" {
		b.WriteString(note + "\n")
	}
	if g.IdleTurns > 0 {
		fmt.Fprintf(&b, "Your last %d turn(s) changed nothing; after %d in a row the goal ends as stalled. If you are blocked, say what on.\n", g.IdleTurns, s.cfg.Goals.StallAfter)
	}
	if g.Until != "" {
		fmt.Fprintf(&b, "The goal is met when `%s` passes in your worktree; it runs after each of your turns.", g.Until)
	} else {
		b.WriteString("When it is achieved, call `goal.complete(evidence=\"…\")` with what shows it.")
	}
	return b.String()
}

// goalContinueNow queues the next turn's message (the turn loop takes it).
func (s *Session) goalContinueNow(ctx context.Context, gen int, note string) {
	s.mu.Lock()
	ok := s.goal != nil && s.goal.gen == gen && s.goal.Status == GoalActive
	for _, m := range s.pending {
		if m.From == "goal" {
			ok = false // one continuation at a time: two kicks racing queue one
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	text := s.continuationText(note)
	if _, err := s.enqueue(ctx, "goal", text, "follow_up"); err != nil && !errors.Is(err, ErrInvalidState) {
		s.svc.log.Warn("goal continuation", "session", s.meta.ID, "err", err)
	}
}

// armContinuationLocked starts the next turn after delay (a back-off); the caller holds mu.
func (s *Session) armContinuationLocked(delay time.Duration, note string) {
	g := s.goal
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timerGen++
	gen, tg := g.gen, g.timerGen
	g.timer = time.AfterFunc(delay, func() {
		s.svc.spawn(func() { s.goalContinueLater(gen, tg, note) })
	})
}

// goalContinueLater is a back-off running out: the next turn starts unless one already did.
// While the session is going inactive or being merged into, it tries again shortly.
func (s *Session) goalContinueLater(gen, tg int, note string) {
	s.mu.Lock()
	g := s.goal
	ok := g != nil && g.gen == gen && g.timerGen == tg && g.Status == GoalActive && g.timer != nil
	if ok {
		g.timer = nil
	}
	quiet := s.holder == free && len(s.pending) == 0
	if ok && !quiet && s.holder != turnHolder && len(s.pending) == 0 {
		s.armContinuationLocked(time.Second, note) // an inactive move or a merge: soon free
		ok = false
	}
	s.mu.Unlock()
	if ok && quiet {
		s.goalContinueNow(s.svc.ctx, gen, note)
	}
}

// goalKick starts a turn for an active goal when the session is free and nothing else will:
// after the goal is set or resumed, at recovery, and when its last busy child settles.
func (s *Session) goalKick() {
	s.mu.Lock()
	g := s.goal
	ok := g != nil && g.Status == GoalActive && g.timer == nil && s.holder == free && len(s.pending) == 0 && s.state != Stopped
	gen := 0
	if ok {
		gen = g.gen
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if limit, reason := s.limitNow(); limit != "" {
		s.endGoal(s.svc.ctx, gen, GoalBudgetLimited, reason, limit)
		return
	}
	if busy := s.busyDescendants(); len(busy) > 0 {
		s.mu.Lock()
		already := g.Waiting == "children"
		if s.goal == g && g.gen == gen {
			g.Waiting = "children"
		}
		s.mu.Unlock()
		if !already {
			s.append(s.svc.ctx, event.GoalWait{Reason: "children", Children: busy})
			s.announce()
		}
		return
	}
	s.goalContinueNow(s.svc.ctx, gen, "")
}

// goalRecheck is the turn goroutine letting the session go: a goal parked on children whose
// last one settled while this session was still busy (its kick found it reserved) goes on.
func (s *Session) goalRecheck() {
	s.mu.Lock()
	parked := s.goal != nil && s.goal.Status == GoalActive && s.goal.Waiting == "children"
	s.mu.Unlock()
	if parked {
		s.goalKick()
	}
}

func (s *Session) limitNow() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goal == nil {
		return "", ""
	}
	return s.overLimitLocked(time.Now())
}

// goalChildSettled is a child going quiet: a parent whose goal was parked on its children
// resumes when none is busy any more (a child's result message usually resumed it already).
func (s *Session) goalChildSettled() {
	if s.meta.Parent == "" {
		return
	}
	for p := s.parentSession(); p != nil; p = p.parentSession() {
		p.mu.Lock()
		parked := p.goal != nil && p.goal.Status == GoalActive && p.goal.Waiting == "children"
		p.mu.Unlock()
		if parked {
			p.goalKick()
		}
	}
}

func (s *Session) parentSession() *Session {
	if s.meta.Parent == "" {
		return nil
	}
	p, err := s.svc.Get(s.meta.Parent)
	if err != nil {
		return nil
	}
	return p
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

// checkEnd runs the goal's end condition in the worktree (sandboxed like setup commands),
// unless the worktree is unchanged since it last failed. It records the verdict; nil when the
// goal changed meanwhile.
func (s *Session) checkEnd(ctx context.Context, gen int) (*event.Verified, bool) {
	s.mu.Lock()
	g := s.goal
	if g == nil || g.gen != gen {
		s.mu.Unlock()
		return nil, false
	}
	head, failHead, until, claimed := s.head, g.failHead, g.Until, g.Claimed
	timeout := g.CheckTimeout
	if timeout <= 0 {
		timeout = s.cfg.Goals.CheckTimeout
	}
	s.mu.Unlock()
	v := &event.Verified{Command: until, Commit: head, Claimed: claimed}
	if claimed {
		v.Evidence = g.Evidence
	}
	skipped := failHead != "" && failHead == head
	if skipped {
		v.Skipped = true
	} else {
		s.runCheck(ctx, v, timeout)
		// What the check itself wrote (a log, a coverage file) is committed now, so it counts
		// neither as the model's progress nor as a change that needs checking again.
		s.mu.Lock()
		turn := s.turn
		s.mu.Unlock()
		s.checkpointAs(ctx, turn, fmt.Sprintf("arbor: after the end condition of turn %d of session %s", turn, s.meta.ID))
		s.mu.Lock()
		head = s.head
		s.mu.Unlock()
	}
	v.Spend = s.svc.spend(s)
	s.append(ctx, *v)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goal != g || g.gen != gen {
		return nil, false
	}
	if !skipped {
		g.Checks++
		if !v.Passed {
			g.failHead = head
		}
	}
	if !v.Passed {
		g.Claimed = false // a claim answers for its turn: the next one must claim again
	}
	g.LastCheck = v
	return v, skipped
}

// runCheck runs an end-condition command in the worktree, bounded by timeout.
func (s *Session) runCheck(ctx context.Context, v *event.Verified, timeout time.Duration) {
	start := time.Now()
	defer func() { v.DurationMs = time.Since(start).Milliseconds() }()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := s.runCommand(cctx, s.meta.Worktree, v.Command, []string{"ARBOR_SESSION=" + s.meta.ID})
	v.Passed, v.ExitCode, v.TimedOut, v.Output, v.Error = r.passed, r.exitCode, r.timedOut, r.output, r.err
	if r.timedOut {
		v.Error = fmt.Sprintf("timed out after %s (goals.checkTimeout or --check-timeout)", timeout)
	}
}

// replayGoal rebuilds the goal from one record (see Session.replay); the caller holds mu.
func (s *Session) replayGoal(r eventlog.Record, p event.Payload) {
	switch d := p.(type) {
	case event.GoalSet:
		s.goal = &goalState{Goal: Goal{GoalSpec: GoalSpec{
			Objective: d.Objective, TokenBudget: d.TokenBudget, TurnBudget: d.TurnBudget,
			WallBudget: time.Duration(d.WallBudgetMs) * time.Millisecond, CostBudget: d.CostBudget,
			Until: d.Until, CheckTimeout: time.Duration(d.CheckTimeoutMs) * time.Millisecond, By: d.By,
		}, Status: GoalActive, Set: r.TS}, base: d.Spend}
	case event.GoalChanged:
		if s.goal == nil {
			return
		}
		if d.Status == goalCleared {
			s.goal = nil
			return
		}
		g := s.goal
		g.Status, g.Reason, g.Limit, g.Claimed, g.Verified, g.Evidence = d.Status, d.Reason, d.Limit, d.Claimed, d.Verified, d.Evidence
		if d.Status == GoalActive {
			g.IdleTurns = 0
		}
	case event.GoalWait:
		if g := s.goal; g != nil {
			g.Waiting, g.decided = d.Reason, true
			switch d.Reason {
			case "backoff":
				g.IdleTurns = d.IdleTurns
				g.resumeAt = r.TS.Add(time.Duration(d.DelayMs) * time.Millisecond)
			case "message":
				g.IdleTurns = 0
			}
		}
	case event.MessageQueued:
		if g := s.goal; g != nil && d.From == "goal" && !g.decided {
			g.IdleTurns, g.decided = 0, true // continued at once: the turn changed something
		}
	case event.Verified:
		if g := s.goal; g != nil && d.Command == g.Until {
			v := d
			g.LastCheck = &v
			if !d.Skipped {
				g.Checks++
				if !d.Passed {
					g.failHead = d.Commit
					g.IdleTurns, g.decided = 0, true
				}
			}
			g.Claimed = d.Passed && d.Claimed
			if d.Claimed {
				g.Evidence = d.Evidence
			}
		}
	case event.TurnStarted:
		if g := s.goal; g != nil && g.Status == GoalActive {
			g.Turns++
			g.resumeAt = time.Time{}
			g.Waiting, g.decided = "", false
		}
	}
}

// clipText shortens s to at most n bytes for a message, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// resumeGoal brings an active goal back after a restart: its wall budget re-armed from when it
// was set, and its next turn started unless one is queued already.
func (s *Session) resumeGoal() {
	s.mu.Lock()
	g := s.goal
	ok := g != nil && g.Status == GoalActive && s.state != Stopped
	if ok {
		s.armWallLocked()
		if g.Waiting == "message" {
			ok = false // the reply starts the next turn
		} else if left := time.Until(g.resumeAt); left > 0 {
			// A back-off was under way: the rest of it runs before the next turn.
			g.Waiting = "backoff"
			s.armContinuationLocked(left, "")
			ok = false
		}
	}
	s.mu.Unlock()
	if ok {
		s.goalKick()
	}
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
