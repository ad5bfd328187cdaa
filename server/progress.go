package server

import (
	"fmt"

	"github.com/arborhq/arbor/agents"
	"go.lsp.dev/protocol"
)

// progressFor reports running sessions through $/progress to clients that support it: begin
// when a session starts running, end when it stops. Progress params are always passed by
// pointer: ProgressToken marshals through a pointer receiver, and by value it becomes {},
// which crashes Neovim 0.7.2's handler.
func (c *conn) progressFor(info agents.Info) {
	c.mu.Lock()
	if !c.caps.WorkDoneProgress {
		c.mu.Unlock()
		return
	}
	token, active := c.progress[info.ID]
	running := info.State == agents.Running
	var begun chan struct{}
	switch {
	case running && !active:
		token = fmt.Sprintf("arbor/%s/%d", info.ID, info.LastSeq)
		c.progress[info.ID] = token
		begun = make(chan struct{})
		c.progressBegun[token] = begun
	case !running && active:
		delete(c.progress, info.ID)
		begun = c.progressBegun[token]
		delete(c.progressBegun, token)
	default:
		c.mu.Unlock()
		return
	}
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.background.Add(1) // under mu, before closing is set: serveConn's Wait sees it
	c.mu.Unlock()
	title := "Arbor: " + firstLine(info.Task)
	go func() {
		defer c.background.Done()
		ctx := c.life
		tok := protocol.NewProgressToken(token)
		if running {
			// End waits for begin: a short turn must not end a progress the client has not
			// created yet, or its spinner stays forever.
			defer close(begun)
			if err := c.call(ctx, protocol.MethodWorkDoneProgressCreate, &protocol.WorkDoneProgressCreateParams{Token: *tok}, nil); err != nil {
				return // no begin, so no end either: the client never knew this progress
			}
			c.mu.Lock()
			c.progressOpen[token] = true
			c.mu.Unlock()
			c.enqueue(outMsg{method: protocol.MethodProgress, params: &protocol.ProgressParams{Token: *tok,
				Value: &protocol.WorkDoneProgressBegin{Kind: protocol.WorkDoneProgressKindBegin, Title: title, Message: "running on " + info.Branch}}}, 0)
			return
		}
		if begun != nil {
			<-begun
		}
		c.mu.Lock()
		open := c.progressOpen[token]
		delete(c.progressOpen, token)
		c.mu.Unlock()
		if !open {
			return
		}
		c.enqueue(outMsg{method: protocol.MethodProgress, params: &protocol.ProgressParams{Token: *tok,
			Value: &protocol.WorkDoneProgressEnd{Kind: protocol.WorkDoneProgressKindEnd, Message: info.State.String()}}}, 0)
	}()
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' || i >= 60 {
			return s[:i]
		}
	}
	return s
}
