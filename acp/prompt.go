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
// Until arbor/session.send answers with the message's seq, the session's events wait in
// backlog, so the turn is followed from its own message whatever else arrives meanwhile.
type turn struct {
	text      string
	awaiting  bool
	backlog   []server.Event
	queuedSeq uint64 // its message_queued record
	lastTurn  int    // the newest turn_started seen
	number    int    // the daemon's turn that delivered it
	started   bool   // its user_message was delivered: a turn runs it
	cancelled bool   // session/cancel came (also after the turn ended: the answer says cancelled)
	cut       bool   // an interrupt was sent for it
	done      chan struct{}
	closed    bool
	released  chan struct{} // closed when the prompt has answered and let the session go

	failure   string // a failed turn's error, or why the prompt cannot finish
	interrupt string // why the turn was cut short by someone else
	limit     string // the budget that ended it: tokens, turns, wall, cost, or steps
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
	t := &turn{text: strings.TrimSpace(text), awaiting: true, done: make(chan struct{}), released: make(chan struct{})}
	// A prompt sent while another runs supersedes it: the SDK has cancelled the earlier one,
	// which stops its turn and answers "cancelled"; this one waits for that, then runs.
	for {
		s.mu.Lock()
		prev := s.turn
		if prev == nil {
			s.turn = t
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		select {
		case <-prev.released:
		case <-time.After(30 * time.Second):
			return sdk.PromptResponse{}, reqErr(-32602, fmt.Sprintf("session %s still runs an earlier prompt: session/cancel it first", short(s.id)))
		case <-ctx.Done():
			return sdk.PromptResponse{}, ctx.Err()
		}
	}
	defer func() {
		s.mu.Lock()
		if s.turn == t {
			s.turn = nil
		}
		s.mu.Unlock()
		close(t.released)
	}()
	s.mu.Lock()
	notice := s.notice
	s.notice = ""
	s.mu.Unlock()
	if notice != "" {
		s.push(sdk.UpdateAgentThoughtText(notice))
	}
	d, err := a.client(ctx)
	if err != nil {
		return sdk.PromptResponse{}, err
	}
	sent, err := server.SessionSend.Call(ctx, d, server.SendParams{ID: s.id, Text: text, Mode: "auto"})
	if err != nil {
		return sdk.PromptResponse{}, daemonErr("session/prompt", err)
	}
	s.sent(t, sent.Seq)
	select {
	case <-t.done:
	case <-ctx.Done():
		// The connection closed (the editor went away): the turn goes on in the daemon, and a
		// later session/load shows it whole. Otherwise the prompt was cancelled (session/cancel,
		// a prompt superseding it, or $/cancel_request): its turn is stopped, once.
		select {
		case <-a.peer().Done():
			return sdk.PromptResponse{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		s.cancel()
		select {
		case <-t.done:
		case <-time.After(30 * time.Second):
		}
	}
	// What is left runs to its end whatever the client does now: a change is accepted whole
	// or not at all. Only the permission request itself is the prompt's to cancel.
	work, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer stop()
	if err := a.out.flush(work); err != nil {
		return sdk.PromptResponse{}, err
	}
	s.mu.Lock()
	reason, failure, usage := t.result()
	s.mu.Unlock()
	if failure != "" {
		return sdk.PromptResponse{}, reqErr(-32603, "the turn failed: "+failure)
	}
	if reason == sdk.StopReasonEndTurn {
		if err := a.review(ctx, work, s); err != nil {
			return sdk.PromptResponse{}, err
		}
		s.mu.Lock()
		if t.cancelled {
			reason = sdk.StopReasonCancelled
		}
		s.mu.Unlock()
	}
	if err := a.out.flush(work); err != nil {
		return sdk.PromptResponse{}, err
	}
	return sdk.PromptResponse{StopReason: reason, Usage: &usage,
		Meta: map[string]any{"arbor": map[string]any{"session": s.id, "tree": treeMeta(a.treeOf(s.id))}}}, nil
}

// sent records the seq arbor/session.send gave the prompt's message and follows the events
// that arrived meanwhile.
func (s *session) sent(t *turn, seq uint64) {
	s.mu.Lock()
	t.awaiting = false
	if seq != 0 {
		t.queuedSeq = seq
	}
	backlog := t.backlog
	t.backlog = nil
	var finished chan struct{}
	for _, ev := range backlog {
		if finished = s.follow(ev); finished != nil {
			break
		}
	}
	s.mu.Unlock()
	if finished != nil {
		close(finished)
	}
}

// result says why the turn stopped; failure is set when it failed instead (the session's mu
// held).
func (t *turn) result() (stop sdk.StopReason, failure string, usage sdk.Usage) {
	usage = t.usage
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	switch {
	case t.cancelled:
		return sdk.StopReasonCancelled, "", usage
	case t.limit == "tokens":
		return sdk.StopReasonMaxTokens, "", usage
	case t.limit != "": // turns, wall, cost (a goal's budget), steps (maxTurnSteps)
		return sdk.StopReasonMaxTurnRequests, "", usage
	case t.interrupt != "": // stopped or cut short by someone else
		return sdk.StopReasonCancelled, "", usage
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
		// Only a daemon that gives no seq with the send is followed by the message's text.
		if t.queuedSeq == 0 && d.From == "user" && strings.TrimSpace(d.Text) == t.text {
			t.queuedSeq = ev.Seq
		}
	case event.TurnStarted:
		t.lastTurn = d.Turn
	case event.UserMessage:
		if t.queuedSeq != 0 && d.QueuedSeq == t.queuedSeq {
			t.started, t.number = true, t.lastTurn
			if t.cancelled && !t.cut {
				t.cut = true
				go s.interrupt(t.number) // cancelled before its turn began: stop that turn now
			}
		}
	case event.AssistantMessage:
		if t.started {
			t.usage.InputTokens += int(d.Usage.InputTokens)
			t.usage.OutputTokens += int(d.Usage.OutputTokens)
			t.finish = d.Finish
		}
	case event.GoalChanged:
		if t.started && d.Status == "budget_limited" {
			t.limit = d.Limit
		}
	case event.TurnFailed:
		if t.started && !d.Checkpoint {
			t.failure = d.Error
			if d.Limit != "" {
				t.limit = d.Limit
			}
		}
	case event.Interrupted:
		if t.started {
			t.interrupt = d.Reason
		}
	case event.StateChanged:
		switch d.State.String() {
		case server.StateStopped:
			// Stopped ends the prompt whether or not its message ran: none will now.
			if t.interrupt == "" {
				t.interrupt = strings.TrimSpace("the session was stopped " + d.Reason)
			}
			t.closed = true
			return t.done
		case server.StateIdle, server.StateInactive:
			if t.started {
				t.closed = true
				return t.done
			}
		case server.StateFailed:
			if t.started {
				if t.failure == "" {
					t.failure = cmpOr(d.Reason, "the session failed")
				}
				t.closed = true
				return t.done
			}
		}
	}
	return nil
}

// Cancel stops the session's running turn and its subagents' turns; the prompt then answers
// "cancelled". A turn this connection did not start (another editor's, or one a closed
// connection left running) is stopped too.
func (a *Agent) Cancel(ctx context.Context, p sdk.CancelNotification) (err error) {
	defer guard(a, "session/cancel", &err)
	s := a.session(string(p.SessionId))
	if s == nil {
		return nil
	}
	s.cancel()
	return nil
}

// cancel marks the prompt cancelled and sends one interrupt for its turn: at once when it
// runs, else when its message starts (see follow). Without a prompt here, whatever turn the
// session runs is interrupted.
func (s *session) cancel() {
	s.mu.Lock()
	t := s.turn
	turnNo, send := 0, t == nil
	if t != nil {
		t.cancelled = true
		if !t.closed && t.started && !t.cut {
			t.cut, turnNo, send = true, t.number, true
		}
	}
	s.mu.Unlock()
	if send {
		go s.interrupt(turnNo)
	}
}

// interrupt asks the daemon to cut turn (0: whichever runs) and its descendants' turns.
func (s *session) interrupt(turnNo int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.a.client(ctx)
	if err == nil {
		_, err = server.SessionInterrupt.Call(ctx, d, server.InterruptParams{ID: s.id, Turn: turnNo, Tree: true})
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
		s.mu.Lock()
		s.replaying = false // what arrives from now on is live
		s.mu.Unlock()
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
