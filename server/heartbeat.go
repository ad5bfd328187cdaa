package server

import (
	"context"

	"github.com/arborhq/arbor/agents"
)

// The arbor/heartbeat.* handlers: a session's scheduled instructions.

func (c *conn) heartbeatCreate(ctx context.Context, p HeartbeatCreateParams) (*Heartbeat, error) {
	if p.Session == "" {
		return nil, errInvalidParams{msg: "arbor/heartbeat.create: name the session the heartbeat is for"}
	}
	hb, err := c.srv.agents.CreateHeartbeat(ctx, p.Session, agents.HeartbeatRequest{Instruction: p.Instruction, Every: p.Every, Cron: p.Cron,
		RequestKey: requestKey(ctx)})
	if err != nil {
		return nil, err
	}
	return toHeartbeat(hb), nil
}

func (c *conn) heartbeatList(ctx context.Context, p HeartbeatListParams) (*HeartbeatListResult, error) {
	hbs, err := c.srv.agents.Heartbeats(p.Session)
	if err != nil {
		return nil, err
	}
	res := &HeartbeatListResult{Heartbeats: make([]Heartbeat, 0, len(hbs))}
	for _, hb := range hbs {
		res.Heartbeats = append(res.Heartbeats, *toHeartbeat(hb))
	}
	return res, nil
}

func (c *conn) heartbeatDelete(ctx context.Context, p HeartbeatID) (*Heartbeat, error) {
	if p.ID == "" {
		return nil, errInvalidParams{msg: "arbor/heartbeat.delete: give the id of a heartbeat (see `arbor heartbeats`)"}
	}
	hb, err := c.srv.agents.DeleteHeartbeat(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return toHeartbeat(hb), nil
}

func toHeartbeat(hb agents.HeartbeatInfo) *Heartbeat {
	return &Heartbeat{ID: hb.ID, Session: hb.Session, Instruction: hb.Instruction, Every: hb.Every, Cron: hb.Cron,
		Created: hb.Created, NextDue: hb.Next, Ticks: hb.Ticks, Delivered: hb.Delivered, Pending: hb.Pending, Scheduled: hb.Scheduled}
}
