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
	seqs    []uint64 // per item, the number of the first push it holds
	pushed  uint64   // pushes so far
	busy    uint64   // the first push of the item being written (0: none)
	wake    chan struct{}
	written chan struct{} // closed and replaced after each write
	done    chan struct{}
	closed  bool
	err     error // the write that failed: the client is gone
}

func newOutbox(send func(context.Context, sdk.SessionNotification) error, hook func(int)) *outbox {
	o := &outbox{send: send, hook: hook, wake: make(chan struct{}, 1), written: make(chan struct{}), done: make(chan struct{})}
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
	o.pushed++
	if !o.merge(n) {
		o.items = append(o.items, n)
		o.seqs = append(o.seqs, o.pushed)
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
				o.items[i] = n // keeps its place and its number: flush waits for it either way
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
			closed := o.closed
			o.mu.Unlock()
			if closed {
				return
			}
			<-o.wake
			o.mu.Lock()
		}
		n := o.items[0]
		o.busy = o.seqs[0]
		o.items, o.seqs = o.items[1:], o.seqs[1:]
		o.mu.Unlock()
		err := o.send(context.Background(), n)
		o.mu.Lock()
		o.busy = 0
		if err != nil && o.err == nil {
			o.err = err
			o.items, o.seqs = nil, nil
		}
		close(o.written)
		o.written = make(chan struct{})
		o.mu.Unlock()
	}
}

// flush waits until everything pushed before it was written (or the client went away). What
// is pushed meanwhile — another session's cell printing on — does not hold it up.
func (o *outbox) flush(ctx context.Context) error {
	o.mu.Lock()
	mark := o.pushed
	o.mu.Unlock()
	for {
		o.mu.Lock()
		if o.err != nil {
			err := o.err
			o.mu.Unlock()
			return reqErr(-32603, "the client stopped reading: "+err.Error())
		}
		waiting := o.busy != 0 && o.busy <= mark || len(o.seqs) > 0 && o.seqs[0] <= mark
		ch := o.written
		o.mu.Unlock()
		if !waiting {
			return nil
		}
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
