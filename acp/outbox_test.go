package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/arborhq/arbor/server"
)

// A client that takes a second per update while a cell streams 500 updates gets them folded:
// what waits stays a handful of entries, the last update it gets carries the newest content
// and the final status, text chunks join in order, and nothing of another call is lost.
func TestOutboxFoldsWhatSupersedes(t *testing.T) {
	var mu sync.Mutex
	var got []sdk.SessionNotification
	release := make(chan struct{})
	send := func(ctx context.Context, n sdk.SessionNotification) error {
		<-release // the client is stuck until released
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
		return nil
	}
	peak := 0
	o := newOutbox(send, func(p int) { peak = max(peak, p) })
	defer o.close()
	note := func(u sdk.SessionUpdate) sdk.SessionNotification {
		return sdk.SessionNotification{SessionId: "s", Update: u}
	}
	o.push(note(sdk.UpdateAgentMessageText("first"))) // taken by the sender, which then blocks
	time.Sleep(20 * time.Millisecond)
	o.push(note(sdk.StartToolCall("a", "python: a", sdk.WithStartStatus(sdk.ToolCallStatusPending))))
	o.push(note(sdk.StartToolCall("b", "python: b", sdk.WithStartStatus(sdk.ToolCallStatusPending))))
	for i := range 500 {
		o.push(note(sdk.UpdateToolCall("a", sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress),
			sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(fmt.Sprintf("out %d", i)))}))))
	}
	o.push(note(sdk.UpdateToolCall("a", sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted))))
	o.push(note(sdk.UpdateAgentMessageText("one ")))
	o.push(note(sdk.UpdateAgentMessageText("two")))
	o.push(note(sdk.UpdatePlan(sdk.PlanEntry{Content: "old"})))
	o.push(note(sdk.UpdatePlan(sdk.PlanEntry{Content: "new"})))
	if p := o.pending(); p != 4 || peak > 5 {
		t.Fatalf("pending %d (peak %d), want a, b, the joined text and the plan", p, peak)
	}
	close(release)
	if err := o.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("%d sent", len(got))
	}
	a := got[1].Update.ToolCall
	if a == nil || a.ToolCallId != "a" || a.Status != sdk.ToolCallStatusCompleted || !strings.Contains(toolContentText(a.Content), "out 499") {
		t.Fatalf("call a as sent: %+v", got[1].Update)
	}
	if b := got[2].Update.ToolCall; b == nil || b.ToolCallId != "b" || b.Status != sdk.ToolCallStatusPending {
		t.Fatalf("call b as sent: %+v", got[2].Update)
	}
	if txt := got[3].Update.AgentMessageChunk; txt == nil || txt.Content.Text.Text != "one two" {
		t.Fatalf("text as sent: %+v", got[3].Update)
	}
	if pl := got[4].Update.Plan; pl == nil || pl.Entries[0].Content != "new" {
		t.Fatalf("plan as sent: %+v", got[4].Update)
	}
}

// Once a write fails (the client is gone), flush says so and nothing more is queued.
func TestOutboxClientGone(t *testing.T) {
	o := newOutbox(func(context.Context, sdk.SessionNotification) error { return fmt.Errorf("broken pipe") }, nil)
	defer o.close()
	o.push(sdk.SessionNotification{SessionId: "s", Update: sdk.UpdateAgentMessageText("x")})
	err := o.flush(context.Background())
	if err == nil || !strings.Contains(err.Error(), "stopped reading: broken pipe") {
		t.Fatalf("flush: %v", err)
	}
	o.push(sdk.SessionNotification{SessionId: "s", Update: sdk.UpdateAgentMessageText("y")})
	if o.pending() != 0 {
		t.Fatal("queued after the client went away")
	}
}

func toolContentText(cs []sdk.ToolCallContent) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Content != nil && c.Content.Content.Text != nil {
			b.WriteString(c.Content.Content.Text.Text)
		}
	}
	return b.String()
}

// The prompt's blocks: text and embedded context are taken, images, audio and binary
// resources are declined by name, an empty prompt is refused.
func TestPromptText(t *testing.T) {
	got, err := promptText([]sdk.ContentBlock{sdk.TextBlock("rename Foo"),
		sdk.ResourceBlock(sdk.EmbeddedResourceResource{TextResourceContents: &sdk.TextResourceContents{Uri: "file:///r/a.py", Text: "class Foo: pass"}}),
		sdk.ResourceLinkBlock("b.py", "file:///r/b.py")})
	if err != nil || !strings.Contains(got, `<context uri="file:///r/a.py">`) || !strings.Contains(got, "class Foo: pass") || !strings.Contains(got, "[b.py](file:///r/b.py)") {
		t.Fatalf("%q %v", got, err)
	}
	for _, c := range []struct {
		blocks []sdk.ContentBlock
		want   string
	}{
		{[]sdk.ContentBlock{sdk.ImageBlock("aGk=", "image/png")}, "image content cannot be taken"},
		{[]sdk.ContentBlock{sdk.TextBlock("x"), sdk.AudioBlock("aGk=", "audio/wav")}, "prompt block 2: audio content cannot be taken"},
		{[]sdk.ContentBlock{sdk.ResourceBlock(sdk.EmbeddedResourceResource{BlobResourceContents: &sdk.BlobResourceContents{Uri: "file:///r/x.bin", Blob: "AA=="}})}, "a binary resource (file:///r/x.bin)"},
		{[]sdk.ContentBlock{sdk.TextBlock("  ")}, "the prompt is empty"},
	} {
		if _, err := promptText(c.blocks); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

// Why a turn stopped, as ACP's stop reasons tell it apart.
func TestStopReasons(t *testing.T) {
	for _, c := range []struct {
		t    turn
		stop sdk.StopReason
		fail string
	}{
		{turn{}, sdk.StopReasonEndTurn, ""},
		{turn{cancelled: true, interrupt: "cancelled by the user"}, sdk.StopReasonCancelled, ""},
		{turn{interrupt: "the goal of session ab12 ended: token budget reached", limit: "tokens"}, sdk.StopReasonMaxTokens, ""},
		{turn{interrupt: "the goal of session ab12 ended: wall budget reached", limit: "wall"}, sdk.StopReasonMaxTurnRequests, ""},
		{turn{failure: "the turn reached its limit of 40 model calls (maxTurnSteps in arbor.json)", limit: "steps"}, sdk.StopReasonMaxTurnRequests, ""},
		{turn{interrupt: "the session was stopped"}, sdk.StopReasonCancelled, ""},
		{turn{finish: "content_filter"}, sdk.StopReasonRefusal, ""},
		{turn{finish: "length"}, sdk.StopReasonMaxTokens, ""},
		{turn{failure: "model scripted: connection refused"}, "", "model scripted: connection refused"},
	} {
		stop, fail, _ := c.t.result()
		if stop != c.stop || fail != c.fail {
			t.Errorf("%+v: %q %q, want %q %q", c.t, stop, fail, c.stop, c.fail)
		}
	}
}

// flush waits for what was pushed before it, not for an outbox that never empties: another
// session's cell printing on to a slow client does not hold up this one's answer.
func TestOutboxFlushWatermark(t *testing.T) {
	sent := make(chan struct{}, 1000)
	o := newOutbox(func(ctx context.Context, n sdk.SessionNotification) error {
		time.Sleep(30 * time.Millisecond) // a slow client
		sent <- struct{}{}
		return nil
	}, nil)
	defer o.close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // another session's cell, printing on
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o.push(sdk.SessionNotification{SessionId: "other", Update: sdk.UpdateAgentThoughtText(fmt.Sprint(i))})
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	o.push(sdk.SessionNotification{SessionId: "mine", Update: sdk.UpdateAgentMessageText("answer")})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := o.flush(ctx); err != nil {
		t.Fatalf("flush did not return while the other session printed: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("flush took %v", d)
	}
}

// A cell the turn never finished (interrupted, or never started because the turn ended
// first) is ended as failed, live and on replay, so no tool call is left spinning.
func TestInterruptedCellsEnd(t *testing.T) {
	a := New(Options{})
	s := newSession(a, server.Session{ID: "s1"}, "/r")
	ev := func(seq uint64, typ string, data string) server.Event {
		return server.Event{Session: "s1", Seq: seq, Type: typ, Data: json.RawMessage(data)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.translate(ev(1, "assistant_message", `{"text":"","toolCalls":[{"id":"c1","code":"sleep()"},{"id":"c2","code":"after()"}],"usage":{"inputTokens":1,"outputTokens":1,"costUSD":0}}`))
	s.translate(ev(2, "tool_started", `{"callId":"c1","code":"sleep()"}`))
	s.translate(ev(3, "tool_output", `{"callId":"c1","stream":"stdout","text":"half\n"}`))
	ups := s.translate(ev(4, "interrupted", `{"turn":1,"reason":"cancelled by the user"}`))
	ended := map[string]bool{}
	for _, u := range ups {
		if tu := u.ToolCallUpdate; tu != nil && tu.Status != nil && *tu.Status == sdk.ToolCallStatusFailed {
			ended[string(tu.ToolCallId)] = true
			if tu.ToolCallId == "c1@1" && !strings.Contains(toolContentText(tu.Content), "half") {
				t.Errorf("the interrupted cell lost its output: %q", toolContentText(tu.Content))
			}
		}
	}
	if !ended["c1@1"] || !ended["c2@1"] || len(s.cells) != 0 {
		t.Fatalf("ended %v, open %d", ended, len(s.cells))
	}
}
