package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The kernel's goal surface: goal.set, goal.complete, goal.get. Model code may set its own
// session's goal and claim it complete; it cannot set an end condition, which is the user's
// check on the model (arbor goal --until, arbor run --autonomous, a profile).

// goalView is a goal as the kernel sees it.
type goalView struct {
	Objective   string  `json:"objective"`
	Status      string  `json:"status"`
	Reason      string  `json:"reason,omitempty"`
	TokenBudget int64   `json:"token_budget,omitempty"`
	TurnBudget  int     `json:"turn_budget,omitempty"`
	WallBudget  float64 `json:"wall_budget,omitempty"` // seconds
	CostBudget  float64 `json:"cost_budget,omitempty"`
	Until       string  `json:"until,omitempty"`
	Turns       int     `json:"turns"`
	Tokens      int64   `json:"tokens"`   // spent by the subtree since it was set
	CostUSD     float64 `json:"cost_usd"` // likewise
	Claimed     bool    `json:"claimed"`
	Verified    bool    `json:"verified"`
	Waiting     string  `json:"waiting,omitempty"`
	Note        string  `json:"note,omitempty"`
}

func viewOf(g Goal) goalView {
	return goalView{
		Objective: g.Objective, Status: g.Status, Reason: g.Reason, TokenBudget: g.TokenBudget,
		TurnBudget: g.TurnBudget, WallBudget: g.WallBudget.Seconds(), CostBudget: g.CostBudget, Until: g.Until,
		Turns: g.Turns, Tokens: g.Spent.Tokens, CostUSD: g.Spent.CostUSD, Claimed: g.Claimed, Verified: g.Verified,
		Waiting: g.Waiting,
	}
}

func hostGoalSet(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Objective   string   `json:"objective"`
		TokenBudget *int64   `json:"token_budget"`
		TurnBudget  *int     `json:"turn_budget"`
		WallBudget  *float64 `json:"wall_budget"` // seconds
		CostBudget  *float64 `json:"cost_budget"`
		Replace     bool     `json:"replace"`
	}
	if err := decodeStrict("goal.set", raw, &p); err != nil {
		return nil, err
	}
	spec := GoalSpec{Objective: p.Objective, Replace: p.Replace, By: "agent"}
	if cur, ok := s.goalNow(); ok && cur.By != "agent" && (cur.Status == GoalActive || cur.Status == GoalPaused) {
		// The user's goal is the user's check on the model: its end condition and budgets
		// cannot be swapped for the model's own.
		what := "budgets"
		if cur.Until != "" {
			what = fmt.Sprintf("end condition `%s` and budgets", cur.Until)
		}
		return nil, fmt.Errorf("goal.set: this session's goal was set by the %s (%q), with its %s; model code cannot replace it — work toward it, and call goal.complete(evidence=...) when it is met",
			cur.By, clipText(cur.Objective, 60), what)
	}
	for _, b := range []struct {
		name string
		set  bool
		ok   bool
	}{
		{"token_budget", p.TokenBudget != nil, p.TokenBudget == nil || *p.TokenBudget > 0},
		{"turn_budget", p.TurnBudget != nil, p.TurnBudget == nil || *p.TurnBudget > 0},
		{"wall_budget", p.WallBudget != nil, p.WallBudget == nil || *p.WallBudget > 0},
		{"cost_budget", p.CostBudget != nil, p.CostBudget == nil || *p.CostBudget > 0},
	} {
		if b.set && !b.ok {
			return nil, fmt.Errorf("goal.set: %s must be above zero (leave it out for no limit)", b.name)
		}
	}
	if p.TokenBudget != nil {
		spec.TokenBudget = *p.TokenBudget
	}
	if p.TurnBudget != nil {
		spec.TurnBudget = *p.TurnBudget
	}
	if p.WallBudget != nil {
		if *p.WallBudget < 1 {
			return nil, fmt.Errorf("goal.set: wall_budget %gs: want at least one second", *p.WallBudget)
		}
		spec.WallBudget = time.Duration(*p.WallBudget * float64(time.Second))
	}
	if p.CostBudget != nil {
		spec.CostBudget = *p.CostBudget
	}
	g, err := s.setGoal(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("goal.set: %w", err)
	}
	s.announce()
	v := viewOf(g)
	v.Note = "the goal keeps this session taking turns after this one until goal.complete(evidence=...) or a budget ends it"
	return v, nil
}

func hostGoalComplete(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	var p struct {
		Evidence string `json:"evidence"`
	}
	if err := decodeStrict("goal.complete", raw, &p); err != nil {
		return nil, err
	}
	g, err := s.completeGoal(ctx, p.Evidence)
	if err != nil {
		return nil, err
	}
	v := viewOf(g)
	if g.Until != "" {
		v.Note = fmt.Sprintf("claim recorded; the end condition `%s` decides when this turn ends", g.Until)
	}
	return v, nil
}

func hostGoalGet(ctx context.Context, s *Session, raw json.RawMessage) (any, error) {
	if err := decodeStrict("goal.get", raw, &struct{}{}); err != nil {
		return nil, err
	}
	g, ok := s.goalNow()
	if !ok {
		return nil, nil
	}
	return viewOf(g), nil
}
