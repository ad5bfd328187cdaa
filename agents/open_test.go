package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents/event"
)

const openScript = `{"rules":[
 {"when":{"last":"^long cell"},"code":"import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"},
 {"when":{"last":"^rename"},"text":"renamed"},
 {"when":{"last":"^refuse"},"text":"I cannot help with that","finish":"content_filter"}
],"default":{"text":"ok"}}`

// An open session starts idle with no turn and no task, takes its name from its first
// message, runs that message as its first turn, and keeps its name across a restart (where
// no task is queued for it).
func TestOpenSession(t *testing.T) {
	e := newEnv(t, openScript)
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, CreateRequest{Dir: e.repo}); err == nil || !strings.Contains(err.Error(), "the task is empty") {
		t.Fatalf("create without a task or open: %v", err)
	}
	s := e.createWith(CreateRequest{Open: true})
	in := e.svc.Info(s)
	if in.State != Idle || in.Task != "" || !in.Open || !strings.HasPrefix(in.Branch, "arbor/session-") {
		t.Fatalf("open session: state %s task %q open %v branch %s", in.State, in.Task, in.Open, in.Branch)
	}
	if n := len(e.events(s, event.TypeTurnStarted)); n != 0 {
		t.Fatalf("%d turns before any message", n)
	}
	if _, err := e.svc.Create(ctx, CreateRequest{Parent: s.meta.ID, Open: true}); err == nil || !strings.Contains(err.Error(), "only a root session") {
		t.Fatalf("open child: %v", err)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "rename Foo to Bar\nin every file", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	in = e.svc.Info(s)
	if in.Task != "rename Foo to Bar" || in.State != Idle {
		t.Fatalf("after the first message: task %q state %s", in.Task, in.State)
	}
	if msgs := e.events(s, event.TypeAssistantMessage); len(msgs) != 1 || msgs[0]["text"] != "renamed" {
		t.Fatalf("assistant messages %v", msgs)
	}
	svc := e.restart()
	s2, err := svc.Get(s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in := svc.Info(s2); in.Task != "rename Foo to Bar" {
		t.Fatalf("after a restart: task %q", in.Task)
	}
	for _, q := range e.events(s2, event.TypeMessageQueued) {
		if q["from"] == "task" {
			t.Fatalf("recovery queued a task for an open session: %v", q)
		}
	}
}

// Interrupt stops the running cell and turn, records why, and leaves the session idle and
// able to take the next message; with no turn running it does nothing.
func TestInterruptKeepsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, openScript)
	ctx := context.Background()
	s := e.createWith(CreateRequest{Open: true})
	if err := e.svc.Interrupt(ctx, s.meta.ID, 0, false); err != nil {
		t.Fatalf("interrupt an idle session: %v", err)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "long cell", "auto"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the cell to print", func() bool { return len(e.events(s, event.TypeToolOutput)) > 0 })
	if err := e.svc.Interrupt(ctx, s.meta.ID, 99, false); err != nil { // another turn: not this one
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(e.events(s, event.TypeInterrupted)); n != 0 {
		t.Fatalf("an interrupt of turn 99 cut the running turn (%d interrupted)", n)
	}
	start := time.Now()
	if err := e.svc.Interrupt(ctx, s.meta.ID, 1, false); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the turn took %v to end after the interrupt", d)
	}
	ints := e.events(s, event.TypeInterrupted)
	if len(ints) != 1 || ints[0]["reason"] != "cancelled by the user" {
		t.Fatalf("interrupted events %v", ints)
	}
	if st := s.State(); st != Idle {
		t.Fatalf("state after interrupt %s", st)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "rename it now", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	msgs := e.events(s, event.TypeAssistantMessage)
	if last := msgs[len(msgs)-1]; last["text"] != "renamed" {
		t.Fatalf("the turn after the interrupt answered %v", last)
	}
	if err := e.svc.Interrupt(ctx, "nonexistent", 0, false); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("interrupt an unknown session: %v", err)
	}
}

// SetModel switches the model the next requests ask for, is recorded, survives a restart,
// is inherited by children, and refuses a model that is not configured (naming those that are).
func TestSetModel(t *testing.T) {
	e := newEnv(t, openScript)
	writeConfig(t, e.repo, fmt.Sprintf(`{"models":{"scripted":{},"other":{"model":"other-id-9","baseURL":%q}}}`, e.url))
	e.trust()
	stub := observeStub(e.script)
	ctx := context.Background()
	s := e.createWith(CreateRequest{Open: true})
	if _, err := e.svc.SetModel(ctx, s.meta.ID, "nope"); err == nil || !strings.Contains(err.Error(), `unknown model "nope"`) || !strings.Contains(err.Error(), "other") {
		t.Fatalf("set an unknown model: %v", err)
	}
	in, err := e.svc.SetModel(ctx, s.meta.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if in.Model != "other" {
		t.Fatalf("info model %q", in.Model)
	}
	if _, err := e.svc.Send(ctx, s.meta.ID, "rename with the other model", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	reqs := stub.of("rename with the other")
	if len(reqs) == 0 || reqs[len(reqs)-1].Model != "other-id-9" {
		t.Fatalf("requests %+v", reqs)
	}
	if ch := e.events(s, event.TypeModelChanged); len(ch) != 1 || ch[0]["model"] != "other" || ch[0]["from"] != "scripted" {
		t.Fatalf("model_changed events %v", ch)
	}
	svc := e.restart()
	s2, err := svc.Get(s.meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in := svc.Info(s2); in.Model != "other" {
		t.Fatalf("after a restart: model %q", in.Model)
	}
	models, def, err := svc.Models(e.repo)
	if err != nil || len(models) != 2 || models[0].Name != "other" || models[0].Model != "other-id-9" || def != "scripted" {
		t.Fatalf("models %+v default %q err %v", models, def, err)
	}
}

// A reply that ended other than naturally (a refusal, the token limit) says so in its record.
func TestAssistantFinishRecorded(t *testing.T) {
	e := newEnv(t, openScript)
	s := e.createWith(CreateRequest{Open: true})
	if _, err := e.svc.Send(context.Background(), s.meta.ID, "refuse this", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	if _, err := e.svc.Send(context.Background(), s.meta.ID, "rename it", "auto"); err != nil {
		t.Fatal(err)
	}
	e.settled(s)
	msgs := e.events(s, event.TypeAssistantMessage)
	if len(msgs) != 2 || msgs[0]["finish"] != "content_filter" || msgs[1]["finish"] != nil {
		t.Fatalf("assistant messages %v", msgs)
	}
}
