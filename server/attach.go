package server

import (
	"context"
)

// sessionAttach replays events since SinceSeq and then streams live ones. Live events that
// arrive while the replay is read are held back and queued after it, skipping any the replay
// already carried, so the client sees every event once, in seq order.
func (c *conn) sessionAttach(ctx context.Context, p AttachParams) (*AttachResult, error) {
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	id := sess.ID()
	// One attach at a time per connection: a second one of the same session would reset the
	// events the first is holding back, and lose them.
	c.attachMu.Lock()
	defer c.attachMu.Unlock()
	if err := c.srv.agents.Revive(ctx, id); err != nil {
		return nil, err
	}
	c.mu.Lock()
	delete(c.attached, id)
	delete(c.behind, id)
	c.replaying[id] = nil
	c.mu.Unlock()
	recs, err := sess.Events(p.SinceSeq)
	info := toSession(c.srv.agents.Info(sess))
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.replaying[id]
	delete(c.replaying, id)
	if err != nil {
		return nil, err
	}
	last := p.SinceSeq
	if last > 0 {
		last--
	}
	for _, r := range append(recs, held...) {
		if r.Seq > last {
			c.enqueueLocked(eventMsg(id, r), r.Seq)
			last = r.Seq
		}
		if _, dropped := c.behind[id]; dropped {
			break // the queue is full: nothing after the gap, the client reattaches from it
		}
	}
	if _, dropped := c.behind[id]; !dropped {
		c.attached[id] = true // else the replay overflowed: the client reattaches from the gap
	}
	return &AttachResult{Session: info}, nil
}

func (c *conn) sessionDetach(ctx context.Context, p SessionRef) (*Empty, error) {
	sess, err := c.srv.agents.Get(p.ID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	delete(c.attached, sess.ID())
	c.mu.Unlock()
	return nil, nil
}

func (c *conn) sessionLog(ctx context.Context, p LogParams) (*LogResult, error) {
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
