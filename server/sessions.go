package server

import (
	"context"
	"fmt"

	"github.com/arborhq/arbor/agents"
)

func (c *conn) sessionCreate(ctx context.Context, p SessionCreateParams) (*Session, error) {
	if p.Dir == "" && p.Parent == "" {
		c.mu.Lock()
		p.Dir = c.rootDir
		c.mu.Unlock()
	}
	req := agents.CreateRequest{Task: p.Task, Dir: p.Dir, Parent: p.Parent, Name: p.Name, Model: p.Model, Profile: p.Profile,
		Open: p.Open, RequestKey: requestKey(ctx)}
	if s := p.Selection; s != nil && s.Text != "" {
		req.Selection = fmt.Sprintf("%s lines %d-%d:\n%s", s.URI, s.StartLine+1, s.EndLine+1, s.Text)
	}
	if p.Autonomous && p.Goal == nil {
		p.Goal = &GoalSetParams{}
	}
	if p.Goal != nil {
		g := *p.Goal
		if g.Objective == "" {
			g.Objective = p.Task
		}
		spec, err := goalSpec("arbor/session.create", g, p.Profile != "")
		if err != nil {
			return nil, err
		}
		if p.Autonomous {
			spec.By = "autonomous"
		}
		req.Goal = &spec
	}
	sess, err := c.srv.agents.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	return sessionResult(c.srv.agents.Info(sess)), nil
}

func (c *conn) sessions(ctx context.Context, p SessionsParams) (*SessionsResult, error) {
	infos, err := c.srv.agents.List(p.Dir)
	if err != nil {
		return nil, err
	}
	res := &SessionsResult{Sessions: make([]Session, 0, len(infos))}
	for _, in := range infos {
		res.Sessions = append(res.Sessions, toSession(in))
	}
	return res, nil
}

func (c *conn) sessionGet(ctx context.Context, p SessionRef) (*Session, error) {
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	return sessionResult(c.srv.agents.Info(sess)), nil
}

func (c *conn) sessionSend(ctx context.Context, p SendParams) (*SendResult, error) {
	status, seq, err := c.srv.agents.SendQueued(ctx, p.ID, p.Text, p.Mode, requestKey(ctx))
	if err != nil {
		return nil, err
	}
	return &SendResult{Status: status, Seq: seq}, nil
}

func (c *conn) sessionInterrupt(ctx context.Context, p InterruptParams) (*Session, error) {
	if p.Turn < 0 {
		return nil, errInvalidParams{fmt.Sprintf("interrupt: turn %d: want a turn number (from 1), or none for the running turn", p.Turn)}
	}
	if err := c.srv.agents.Interrupt(ctx, p.ID, p.Turn, p.Tree); err != nil {
		return nil, err
	}
	return c.sessionGet(ctx, SessionRef{ID: p.ID})
}

func (c *conn) sessionSetModel(ctx context.Context, p SetModelParams) (*Session, error) {
	info, err := c.srv.agents.SetModel(ctx, p.ID, p.Model)
	if err != nil {
		return nil, err
	}
	return sessionResult(info), nil
}

func (c *conn) models(ctx context.Context, p ModelsParams) (*ModelsResult, error) {
	if p.Dir == "" {
		c.mu.Lock()
		p.Dir = c.rootDir
		c.mu.Unlock()
	}
	models, def, err := c.srv.agents.Models(p.Dir)
	if err != nil {
		return nil, err
	}
	res := &ModelsResult{Models: make([]ModelInfo, 0, len(models)), Default: def}
	for _, m := range models {
		res.Models = append(res.Models, ModelInfo{Name: m.Name, Model: m.Model})
	}
	return res, nil
}

func (c *conn) sessionStop(ctx context.Context, p SessionRef) (*Session, error) {
	if err := c.srv.agents.Stop(ctx, p.ID); err != nil {
		return nil, err
	}
	return c.sessionGet(ctx, p)
}
