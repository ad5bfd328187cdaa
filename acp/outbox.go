package acp

import (
	"context"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// outbox sends session/update notifications in order on one goroutine, so the daemon's
// events are taken as fast as they come however slowly the client reads. What waits is
// merged where a later update supersedes an earlier one: a tool call's update folds into the
// pending start or update of the same call (its content replaces, as ACP's does), agent text
// joins the text chunk just before it, and a plan replaces the pending plan of its session.
// So the pending list holds at most a few entries per cell in flight, whatever they print.
type outbox struct {
	send func(context.Context, sdk.SessionNotification) error
	hook func(pending int)

	mu      sync.Mutex
	items   []sdk.SessionNotification
	busy    bool // the sender holds an item it is writing
	wake    chan struct{}
	drained chan struct{} // closed and replaced each time the outbox empties
	done    chan struct{}
	closed  bool
	err     error // the write that failed: the client is gone
}

func newOutbox(send func(context.Context, sdk.SessionNotification) error, hook func(int)) *outbox {
	o := &outbox{send: send, hook: hook, wake: make(chan struct{}, 1), drained: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

// push queues n (never blocks).
func (o *outbox) push(n sdk.SessionNotification) {
	o.mu.Lock()
	if o.closed || o.err != nil {
		o.mu.Unlock()
		return
	}
	if !o.merge(n) {
		o.items = append(o.items, n)
	}
	pending := len(o.items)
	o.mu.Unlock()
	if o.hook != nil {
		o.hook(pending)
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// merge folds n into a pending item it supersedes (o.mu held).
func (o *outbox) merge(n sdk.SessionNotification) bool {
	u := n.Update
	switch {
	case u.ToolCallUpdate != nil:
		id := u.ToolCallUpdate.ToolCallId
		for i := len(o.items) - 1; i >= 0; i-- {
			p := &o.items[i]
			if p.SessionId != n.SessionId {
				continue
			}
			if tc := p.Update.ToolCall; tc != nil && tc.ToolCallId == id {
				foldIntoStart(tc, u.ToolCallUpdate)
				p.Meta = n.Meta
				return true
			}
			if tu := p.Update.ToolCallUpdate; tu != nil && tu.ToolCallId == id {
				foldUpdate(tu, u.ToolCallUpdate)
				p.Meta = n.Meta
				return true
			}
		}
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		if k := len(o.items) - 1; k >= 0 && o.items[k].SessionId == n.SessionId {
			if p := o.items[k].Update.AgentMessageChunk; p != nil && p.Content.Text != nil {
				p.Content.Text.Text += u.AgentMessageChunk.Content.Text.Text
				o.items[k].Meta = n.Meta
				return true
			}
		}
	case u.Plan != nil:
		for i := range o.items {
			if o.items[i].SessionId == n.SessionId && o.items[i].Update.Plan != nil {
				o.items[i] = n
				return true
			}
		}
	}
	return false
}

func foldUpdate(dst, src *sdk.SessionToolCallUpdate) {
	if src.Content != nil {
		dst.Content = src.Content
	}
	if src.Status != nil {
		dst.Status = src.Status
	}
	if src.Title != nil {
		dst.Title = src.Title
	}
	if src.Kind != nil {
		dst.Kind = src.Kind
	}
	if src.RawOutput != nil {
		dst.RawOutput = src.RawOutput
	}
	if src.RawInput != nil {
		dst.RawInput = src.RawInput
	}
	if src.Locations != nil {
		dst.Locations = src.Locations
	}
	dst.Meta = src.Meta
}

func foldIntoStart(dst *sdk.SessionUpdateToolCall, src *sdk.SessionToolCallUpdate) {
	if src.Content != nil {
		dst.Content = src.Content
	}
	if src.Status != nil {
		dst.Status = *src.Status
	}
	if src.Title != nil {
		dst.Title = *src.Title
	}
	if src.Kind != nil {
		dst.Kind = *src.Kind
	}
	if src.RawOutput != nil {
		dst.RawOutput = src.RawOutput
	}
	if src.Locations != nil {
		dst.Locations = src.Locations
	}
	dst.Meta = src.Meta
}

func (o *outbox) run() {
	defer close(o.done)
	for {
		o.mu.Lock()
		for len(o.items) == 0 {
			close(o.drained)
			o.drained = make(chan struct{})
			closed := o.closed
			o.mu.Unlock()
			if closed {
				return
			}
			<-o.wake
			o.mu.Lock()
		}
		n := o.items[0]
		o.items = o.items[1:]
		o.busy = true
		o.mu.Unlock()
		err := o.send(context.Background(), n)
		o.mu.Lock()
		o.busy = false
		if err != nil && o.err == nil {
			o.err = err
			o.items = nil
		}
		o.mu.Unlock()
	}
}

// flush waits until everything pushed so far was written (or the client went away).
func (o *outbox) flush(ctx context.Context) error {
	for {
		o.mu.Lock()
		if o.err != nil {
			err := o.err
			o.mu.Unlock()
			return reqErr(-32603, "the client stopped reading: "+err.Error())
		}
		if len(o.items) == 0 && !o.busy {
			o.mu.Unlock()
			return nil
		}
		ch := o.drained
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pending is how many notifications wait.
func (o *outbox) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items)
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}
