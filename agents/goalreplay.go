package agents

import (
	"time"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/agents/eventlog"
)

// A goal rebuilt from the log at recovery, and resumed with what it had spent.

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
			case "children":
				g.IdleTurns = d.IdleTurns // as the live turn left it (reset when the turn changed something)
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
