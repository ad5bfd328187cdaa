package agents

import (
	"context"
	"errors"
	"testing"
)

// TestRequestApplied: the key of a create, a fork, a send, a heartbeat or a goal is found
// after a restart (a replayed request is skipped), and a key nobody recorded is not.
func TestRequestApplied(t *testing.T) {
	e := newEnv(t, `{"rules":[],"default":{"text":"ok"}}`)
	ctx := context.Background()
	s, err := e.svc.Create(ctx, CreateRequest{Task: "keyed", Dir: e.repo, RequestKey: "create-key"})
	if err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	if _, err := e.svc.SendKeyed(ctx, s.meta.ID, "hello", "auto", "send-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "unkeyed", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	f, err := e.svc.ForkKeyed(ctx, s.meta.ID, 0, "", "fork-key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateHeartbeat(ctx, s.meta.ID, HeartbeatRequest{Instruction: "check", Every: "1h", RequestKey: "hb-key"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetGoal(ctx, f.meta.ID, GoalSpec{Objective: "finish", TurnBudget: 1, By: "user", RequestKey: "goal-key"}); err != nil {
		t.Fatal(err)
	}
	e.settled(f)
	svc := e.restartWith(e.svc.opts.Overrides)
	for _, c := range []struct {
		session, key string
		want         bool
	}{
		{"", "create-key", true},
		{"", "fork-key", true},
		{"", "send-key", false}, // a message makes no session
		{"", "other", false},
		{"", "", false},
		{s.meta.ID, "send-key", true},
		{s.meta.ID, "other", false},
		{f.meta.ID, "send-key", false}, // the fork's log does not copy the source's records
		{s.meta.ID, "", false},
		{s.meta.ID, "hb-key", true},
		{f.meta.ID, "hb-key", false},
		{f.meta.ID, "goal-key", true},
		{s.meta.ID[:8], "goal-key", false}, // a prefix names the session too
		{f.meta.ID[:8], "goal-key", true},
	} {
		got, err := svc.RequestApplied(c.session, c.key)
		if err != nil || got != c.want {
			t.Errorf("RequestApplied(%q, %q) = %v, %v; want %v", c.session, c.key, got, err, c.want)
		}
	}
	if _, err := svc.RequestApplied("0123456789abcdef", "send-key"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("unknown session: %v, want ErrUnknownSession", err)
	}
}
