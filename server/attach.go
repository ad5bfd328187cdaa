package server

import (
	"context"
	"encoding/json"
)

// sessionAttach replays events since SinceSeq and then streams live ones. The session is
// marked attached before the replay is read, so no event falls between replay and live; a
// client may see an event twice and drops it by seq.
func (c *conn) sessionAttach(ctx context.Context, raw json.RawMessage) (any, error) {
	p, err := decode[AttachParams](raw)
	if err != nil {
		return nil, err
	}
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	id := sess.ID()
	if err := c.srv.agents.Revive(ctx, id); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.attached[id] = true
	delete(c.behind, id)
	c.mu.Unlock()
	recs, err := sess.Events(p.SinceSeq)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		c.enqueue(outMsg{method: NotifyEvent, session: id, params: &Event{Session: id, Seq: r.Seq, TS: r.TS, Type: r.Type, Data: r.Data}}, r.Seq)
	}
	return &AttachResult{Session: toSession(c.srv.agents.Info(sess))}, nil
}

func (c *conn) sessionDetach(ctx context.Context, raw json.RawMessage) (any, error) {
	p, err := decode[SessionRef](raw)
	if err != nil {
		return nil, err
	}
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	delete(c.attached, sess.ID())
	c.mu.Unlock()
	return nil, nil
}

func (c *conn) sessionLog(ctx context.Context, raw json.RawMessage) (any, error) {
	p, err := decode[LogParams](raw)
	if err != nil {
		return nil, err
	}
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	recs, err := sess.Events(p.SinceSeq)
	if err != nil {
		return nil, err
	}
	if p.Limit > 0 && len(recs) > p.Limit {
		recs = recs[:p.Limit]
	}
	res := &LogResult{Events: make([]Event, 0, len(recs))}
	for _, r := range recs {
		res.Events = append(res.Events, Event{Session: sess.ID(), Seq: r.Seq, TS: r.TS, Type: r.Type, Data: r.Data})
	}
	return res, nil
}
