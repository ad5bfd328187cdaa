package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

// A goal between turns: what an active goal does after each one (see the notes in goal.go),
// its continuations and back-offs, parking, and the end condition.

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
		s.endAtBudget(ctx, gen, reason, limit, false)
		return
	}
	if busy := s.busyDescendants(); len(busy) > 0 {
		if limit != "" {
			s.endAtBudget(ctx, gen, reason, limit, false)
			return
		}
		s.mu.Lock()
		if s.goal == g && g.gen == gen {
			g.Waiting = "children"
			if changed {
				g.IdleTurns = 0
			}
		}
		idle := g.IdleTurns
		s.mu.Unlock()
		// The idle count goes into the record, so a replay after a restart counts as this did.
		s.append(ctx, event.GoalWait{Reason: "children", Children: busy, IdleTurns: idle})
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
			s.endAtBudget(ctx, gen, reason, limit, false)
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
		g.kickLater = false
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if limit, reason := s.limitNow(); limit != "" {
		s.endAtBudget(s.svc.ctx, gen, reason, limit, false)
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

// goalKickOrLater kicks a goal the user just set or resumed; when the session is still reserved
// (its last turn letting go), the turn goroutine kicks it once it has (goalRecheck).
func (s *Session) goalKickOrLater() {
	s.mu.Lock()
	if g := s.goal; g != nil && g.Status == GoalActive && s.holder != free {
		g.kickLater = true
	}
	s.mu.Unlock()
	s.goalKick()
}

// goalRecheck is the turn goroutine letting the session go: a goal parked on children whose
// last one settled while this session was still busy (its kick found it reserved) goes on, and
// so does a goal the user set or resumed meanwhile (see goalKickOrLater).
func (s *Session) goalRecheck() {
	s.mu.Lock()
	g := s.goal
	parked := g != nil && g.Status == GoalActive && (g.Waiting == "children" || g.kickLater)
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

// checkEnd runs the goal's end condition on the turn's checkpoint, judged (runCheck), unless
// the checkpoint is the one it last failed on. It records the verdict; nil when the
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
		// On a checkout of its own: what the check writes (a log, a coverage file) never
		// reaches the worktree, so it counts neither as progress nor as a change to check again.
		s.runCheck(ctx, v, timeout)
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

// runCheck runs an end-condition command on the turn's checkpoint v.Commit, judged apart from
// the worktree the model's code runs in (runJudged): a clean checkout with test and build
// configuration and the files the command names restored from the session's base, generated
// files removed, Python isolated, a unittest or pytest command judged by its report; bounded by
// timeout. Files the checkout ignores (.gitignore) are not there: the condition judges what
// the branch holds.
func (s *Session) runCheck(ctx context.Context, v *event.Verified, timeout time.Duration) {
	start := time.Now()
	defer func() { v.DurationMs = time.Since(start).Milliseconds() }()
	r := s.runJudged(ctx, "verify", v.Commit, v.Command, judgeProtected, nil, nil, []string{"ARBOR_SESSION=" + s.meta.ID}, timeout, "")
	v.Passed, v.ExitCode, v.TimedOut, v.Output, v.Error, v.Judged = r.passed, r.exitCode, r.timedOut, r.output, r.err, r.judged
	if r.timedOut {
		v.Error = fmt.Sprintf("timed out after %s (goals.checkTimeout or --check-timeout)", timeout)
	}
}
