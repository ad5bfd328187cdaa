package server

import (
	"context"
	"fmt"
	"time"

	"github.com/arborhq/arbor/agents"
)

// The arbor/goal.* and arbor/progress handlers: goals, autonomous runs and the cost–progress
// series.

// goalSpec checks a goal request; its errors name the field and the value.
func goalSpec(method string, p GoalSetParams, fromProfile bool) (agents.GoalSpec, error) {
	spec := agents.GoalSpec{Objective: p.Objective, Until: p.Until, Replace: p.Replace, By: "user"}
	bad := func(field string, v any) error {
		return errInvalidParams{msg: fmt.Sprintf("%s: %s %v: want a value above zero (leave it out for no limit)", method, field, v)}
	}
	if p.TokenBudget != nil {
		if *p.TokenBudget <= 0 {
			return spec, bad("tokenBudget", *p.TokenBudget)
		}
		spec.TokenBudget = *p.TokenBudget
	}
	if p.TurnBudget != nil {
		if *p.TurnBudget <= 0 {
			return spec, bad("turnBudget", *p.TurnBudget)
		}
		spec.TurnBudget = *p.TurnBudget
	}
	if p.CostBudget != nil {
		if *p.CostBudget <= 0 {
			return spec, bad("costBudget", *p.CostBudget)
		}
		spec.CostBudget = *p.CostBudget
	}
	for _, d := range []struct {
		field, v string
		dst      *time.Duration
	}{{"wallBudget", p.WallBudget, &spec.WallBudget}, {"checkTimeout", p.CheckTimeout, &spec.CheckTimeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil {
			return spec, errInvalidParams{msg: fmt.Sprintf("%s: %s %q: want a duration such as \"2h\" or \"90m\"", method, d.field, d.v)}
		}
		if v <= 0 {
			return spec, bad(d.field, d.v)
		}
		*d.dst = v
	}
	if p.CheckTimeout != "" && p.Until == "" && !fromProfile {
		return spec, errInvalidParams{msg: method + ": checkTimeout bounds the end condition; give until too"}
	}
	return spec, nil
}

func (c *conn) goalSet(ctx context.Context, p GoalSetParams) (*Goal, error) {
	if p.Session == "" {
		return nil, errInvalidParams{msg: "arbor/goal.set: name the session"}
	}
	spec, err := goalSpec("arbor/goal.set", p, false)
	if err != nil {
		return nil, err
	}
	spec.RequestKey = requestKey(ctx)
	g, err := c.srv.agents.SetGoal(ctx, p.Session, spec)
	if err != nil {
		return nil, err
	}
	return c.goalResult(p.Session, g)
}

func (c *conn) goalGet(ctx context.Context, p GoalRef) (*GoalResult, error) {
	g, ok, err := c.srv.agents.GoalOf(p.Session)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &GoalResult{}, nil
	}
	out, err := c.goalResult(p.Session, g)
	return &GoalResult{Goal: out}, err
}

func (c *conn) goalControl(ctx context.Context, p GoalControlParams) (*Goal, error) {
	g, err := c.srv.agents.ControlGoal(ctx, p.Session, p.Action)
	if err != nil {
		return nil, err
	}
	return c.goalResult(p.Session, g)
}

func (c *conn) goalResult(ref string, g agents.Goal) (*Goal, error) {
	sess, err := c.srv.agents.Get(ref)
	if err != nil {
		return nil, err
	}
	return toGoal(sess.ID(), g), nil
}

func toGoal(id string, g agents.Goal) *Goal {
	return &Goal{
		Session: id, Objective: g.Objective, Status: g.Status, Reason: g.Reason, Limit: g.Limit, By: g.By,
		TokenBudget: g.TokenBudget, TurnBudget: g.TurnBudget, WallBudgetMs: g.WallBudget.Milliseconds(),
		CostBudget: g.CostBudget, Until: g.Until, Set: g.Set, Turns: g.Turns, IdleTurns: g.IdleTurns,
		Spent: g.Spent, Claimed: g.Claimed, Verified: g.Verified, Evidence: g.Evidence, Checks: g.Checks,
		LastCheck: g.LastCheck, Waiting: g.Waiting,
	}
}

func (c *conn) progressSeries(ctx context.Context, p ProgressParams) (*ProgressResult, error) {
	sess, err := c.srv.agents.Get(p.Session)
	if err != nil {
		return nil, err
	}
	pts, err := c.srv.agents.Progress(sess.ID())
	if err != nil {
		return nil, err
	}
	res := &ProgressResult{Session: sess.ID(), Points: make([]ProgressPoint, 0, len(pts))}
	for _, pt := range pts {
		res.Points = append(res.Points, ProgressPoint{Seq: pt.Seq, Time: pt.Time, Kind: pt.Kind, Status: pt.Status, Detail: pt.Detail, Spend: pt.Spend})
	}
	return res, nil
}
