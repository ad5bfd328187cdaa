package agents

import (
	"context"
	"fmt"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

// A goal's budgets: what the subtree spent, which limit is used up, and the interruption of
// the subtree's turns when one is.

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
	s.endAtBudget(s.svc.ctx, gen, reason, got, true)
}

// endAtBudget ends the goal at a used-up budget and interrupts the turns its subtree is
// running for it — the session's own too when self (mid-turn; after a turn it has none): work
// for a goal that has ended would be spending no budget governs.
func (s *Session) endAtBudget(ctx context.Context, gen int, reason, limit string, self bool) {
	if !s.endGoal(ctx, gen, GoalBudgetLimited, reason, limit) {
		return
	}
	sessions := s.descendants()
	if self {
		sessions = append([]*Session{s}, sessions...)
	}
	for _, d := range sessions {
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
