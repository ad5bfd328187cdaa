package acp

import (
	"context"
	"fmt"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/arborhq/arbor/agents/event"
	"github.com/arborhq/arbor/server"
)

// turn is a session/prompt in flight: the message it sent, and what the session did with it.
type turn struct {
	text      string
	queuedSeq uint64 // its message_queued record, once seen
	started   bool   // its user_message was delivered: a turn runs it
	cancelled bool   // session/cancel came
	done      chan struct{}
	closed    bool

	failure   string // a failed turn's error, or why the prompt cannot finish
	interrupt string // why the turn was interrupted
	finish    string // the last reply's unnatural finish (content_filter, length)
	usage     sdk.Usage
}

// Prompt runs one turn: the prompt goes to the session, its events come back as updates, and
// it answers when the session settles, with why it stopped.
func (a *Agent) Prompt(ctx context.Context, p sdk.PromptRequest) (_ sdk.PromptResponse, err error) {
	defer guard(a, "session/prompt", &err)
	text, err := promptText(p.Prompt)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	s := a.session(string(p.SessionId))
	if s == nil {
		// Not opened here: a client that remembers a session id across restarts may prompt it
		// directly. It is resumed (no replay).
		info, d, err := a.lookup(ctx, string(p.SessionId))
		if err != nil {
			return sdk.PromptResponse{}, err
		}
		if s, err = a.open(ctx, d, info, info.Workspace, info.LastSeq+1, false); err != nil {
			return sdk.PromptResponse{}, err
		}
	}
	t := &turn{text: strings.TrimSpace(text), done: make(chan struct{})}
	s.mu.Lock()
	if s.turn != nil && !s.turn.closed {
		s.mu.Unlock()
		return sdk.PromptResponse{}, reqErr(-32602, fmt.Sprintf("session %s already runs a prompt: wait for it, or session/cancel it", short(s.id)))
	}
	s.turn = t
	notice := s.notice
	s.notice = ""
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.turn == t {
			s.turn = nil
		}
		s.mu.Unlock()
	}()
	if notice != "" {
		s.push(sdk.UpdateAgentThoughtText(notice))
	}
	d, err := a.client(ctx)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	if _, err := server.SessionSend.Call(ctx, d, server.SendParams{ID: s.id, Text: text, Mode: "auto"}); err != nil {
		return sdk.PromptResponse{}, daemonErr("session/prompt", err)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		// The connection closed (the editor went away): the turn goes on in the daemon, and a
		// later session/load shows it whole. Only the request's own cancellation stops it.
		select {
		case <-a.peer().Done():
			return sdk.PromptResponse{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		s.cancel(context.Background())
		select {
		case <-t.done:
		case <-time.After(30 * time.Second):
		}
	}
	if err := a.out.flush(context.Background()); err != nil {
		return sdk.PromptResponse{}, err
	}
	s.mu.Lock()
	stop, failure, usage := t.result()
	s.mu.Unlock()
	if failure != "" {
		return sdk.PromptResponse{}, reqErr(-32603, "the turn failed: "+failure)
	}
	if stop == sdk.StopReasonEndTurn {
		if err := a.review(ctx, s); err != nil {
			return sdk.PromptResponse{}, err
		}
	}
	if err := a.out.flush(context.Background()); err != nil {
		return sdk.PromptResponse{}, err
	}
	return sdk.PromptResponse{StopReason: stop, Usage: &usage,
		Meta: map[string]any{"arbor": map[string]any{"session": s.id, "tree": treeMeta(a.treeOf(s.id))}}}, nil
}

// result says why the turn stopped; failure is set when it failed instead (t's session's mu
// held).
func (t *turn) result() (stop sdk.StopReason, failure string, usage sdk.Usage) {
	usage = t.usage
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	switch {
	case t.cancelled:
		return sdk.StopReasonCancelled, "", usage
	case t.interrupt != "":
		if strings.Contains(t.interrupt, "token") {
			return sdk.StopReasonMaxTokens, "", usage
		}
		if strings.Contains(t.interrupt, "budget") {
			return sdk.StopReasonMaxTurnRequests, "", usage
		}
		return sdk.StopReasonCancelled, "", usage
	case strings.Contains(t.failure, "model calls (maxTurnSteps"):
		return sdk.StopReasonMaxTurnRequests, "", usage
	case t.failure != "":
		return "", t.failure, usage
	case t.finish == "content_filter":
		return sdk.StopReasonRefusal, "", usage
	case t.finish == "length":
		return sdk.StopReasonMaxTokens, "", usage
	}
	return sdk.StopReasonEndTurn, "", usage
}

// follow tracks the prompt's turn through the session's events and returns its done channel
// when this event ended it (mu held).
func (s *session) follow(ev server.Event) chan struct{} {
	t := s.turn
	if t == nil || t.closed {
		return nil
	}
	p, err := event.Decode(event.Type(ev.Type), ev.Data)
	if err != nil {
		return nil
	}
	switch d := p.(type) {
	case event.MessageQueued:
		if t.queuedSeq == 0 && d.From == "user" && strings.TrimSpace(d.Text) == t.text {
			t.queuedSeq = ev.Seq
		}
	case event.UserMessage:
		if t.queuedSeq != 0 && d.QueuedSeq == t.queuedSeq {
			t.started = true
			if t.cancelled {
				go s.interrupt() // cancelled before its turn began: stop that turn now
			}
		}
	case event.AssistantMessage:
		if t.started {
			t.usage.InputTokens += int(d.Usage.InputTokens)
			t.usage.OutputTokens += int(d.Usage.OutputTokens)
			t.finish = d.Finish
		}
	case event.TurnFailed:
		if t.started && !d.Checkpoint {
			t.failure = d.Error
		}
	case event.Interrupted:
		if t.started {
			t.interrupt = d.Reason
		}
	case event.StateChanged:
		if !t.started {
			break
		}
		switch d.State.String() {
		case server.StateIdle, server.StateInactive, server.StateStopped:
			if d.State.String() == server.StateStopped && t.interrupt == "" {
				t.interrupt = "the session was stopped " + d.Reason // by someone else: cancelled
			}
			t.closed = true
			return t.done
		case server.StateFailed:
			if t.failure == "" {
				t.failure = cmpOr(d.Reason, "the session failed")
			}
			t.closed = true
			return t.done
		}
	}
	return nil
}

// Cancel stops the session's running turn; the prompt then answers "cancelled".
func (a *Agent) Cancel(ctx context.Context, p sdk.CancelNotification) (err error) {
	defer guard(a, "session/cancel", &err)
	if s := a.session(string(p.SessionId)); s != nil {
		s.cancel(ctx)
	}
	return nil
}

func (s *session) cancel(ctx context.Context) {
	s.mu.Lock()
	t := s.turn
	if t == nil || t.closed {
		s.mu.Unlock()
		return
	}
	t.cancelled = true
	s.mu.Unlock()
	s.interrupt()
}

func (s *session) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.a.client(ctx)
	if err == nil {
		_, err = server.SessionInterrupt.Call(ctx, d, server.SessionRef{ID: s.id})
	}
	if err != nil {
		s.a.log.Warn("interrupt", "session", s.id, "err", err)
	}
}

// daemonGone ends a prompt waiting on a daemon connection that closed.
func (s *session) daemonGone() {
	s.mu.Lock()
	t := s.turn
	if t == nil || t.closed {
		s.mu.Unlock()
		return
	}
	t.failure = "the connection to the arbor daemon closed mid-turn; the session goes on in the daemon when it runs again — session/load shows the whole turn"
	t.closed = true
	s.mu.Unlock()
	close(t.done)
}

// reattach picks up the events after the last one seen, after the daemon's queue for this
// connection overflowed (arbor/fellBehind).
func (s *session) reattach() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.a.client(ctx)
	if err != nil {
		return
	}
	s.mu.Lock()
	since := s.lastSeq + 1
	s.mu.Unlock()
	if _, err := server.SessionAttach.Call(ctx, d, server.AttachParams{ID: s.id, SinceSeq: since}); err != nil {
		s.a.log.Warn("reattach", "session", s.id, "err", err)
	}
}

// waitReplayed waits until a load's replay reached the seq the session had when attached.
func (s *session) waitReplayed(ctx context.Context) error {
	s.mu.Lock()
	if s.lastSeq >= s.replayTo {
		s.replaying = false
		s.mu.Unlock()
		return nil
	}
	ch := s.replayed
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// promptText joins the prompt's blocks into the message the session gets: text as it is,
// embedded text resources as context with their URI, resource links by name and URI. Images
// and audio are declined by name: the model's one tool is a Python kernel.
func promptText(blocks []sdk.ContentBlock) (string, error) {
	var b strings.Builder
	for i, c := range blocks {
		switch {
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.Resource != nil:
			r := c.Resource.Resource
			switch {
			case r.TextResourceContents != nil:
				fmt.Fprintf(&b, "\n\n<context uri=%q>\n%s\n</context>\n", r.TextResourceContents.Uri, r.TextResourceContents.Text)
			case r.BlobResourceContents != nil:
				return "", reqErr(-32602, fmt.Sprintf("prompt block %d: a binary resource (%s) cannot be taken: Arbor's agent reads text; put the file in the repository and name its path", i+1, r.BlobResourceContents.Uri))
			}
		case c.ResourceLink != nil:
			fmt.Fprintf(&b, "\n[%s](%s)\n", c.ResourceLink.Name, c.ResourceLink.Uri)
		case c.Image != nil:
			return "", reqErr(-32602, fmt.Sprintf("prompt block %d: image content cannot be taken: Arbor's agent works through a Python kernel and reads text; describe it, or put the file in the repository and name its path", i+1))
		case c.Audio != nil:
			return "", reqErr(-32602, fmt.Sprintf("prompt block %d: audio content cannot be taken: Arbor's agent reads text; send a transcript", i+1))
		default:
			return "", reqErr(-32602, fmt.Sprintf("prompt block %d: an unknown content type", i+1))
		}
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", reqErr(-32602, "the prompt is empty: say what the agent should do")
	}
	return b.String(), nil
}
