package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.lsp.dev/jsonrpc2"
)

type handlerFunc func(c *conn, ctx context.Context, params json.RawMessage) (any, error)

// methods is the one table of everything the daemon answers. Method families in other files
// add their entries from init functions.
var methods = map[string]handlerFunc{
	"initialize":               (*conn).initialize,
	"shutdown":                 (*conn).shutdownReq,
	"textDocument/codeAction":  (*conn).codeAction,
	"workspace/executeCommand": (*conn).executeCommand,
	MethodSessionCreate:        (*conn).sessionCreate,
	MethodSessions:             (*conn).sessions,
	MethodSessionGet:           (*conn).sessionGet,
	MethodSessionAttach:        (*conn).sessionAttach,
	MethodSessionDetach:        (*conn).sessionDetach,
	MethodSessionLog:           (*conn).sessionLog,
	MethodSessionSend:          (*conn).sessionSend,
	MethodSessionStop:          (*conn).sessionStop,
	MethodSessionDiff:          (*conn).sessionDiff,
	MethodSessionFileAt:        (*conn).sessionFileAt,
	MethodDaemonStatus:         (*conn).daemonStatus,
	MethodDaemonStop:           (*conn).daemonStop,
}

// notifications the daemon accepts and acts on; others are ignored as LSP requires.
func (c *conn) notification(ctx context.Context, method string, params json.RawMessage) {
	switch method {
	case "initialized":
		c.mu.Lock()
		c.initialized = true
		c.mu.Unlock()
		c.sendFullTree(ctx)
	case "exit":
		c.rpc.Close()
	}
}

// handle runs each request in its own goroutine: sessions take time to create and a slow
// request must not hold up the next one. Notifications run in order.
func (c *conn) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	if _, isCall := req.(*jsonrpc2.Call); !isCall {
		c.notification(ctx, req.Method(), req.Params())
		return nil
	}
	h, ok := methods[req.Method()]
	if !ok {
		if strings.HasPrefix(req.Method(), "$/") {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, "method not supported: "+req.Method()))
		}
		return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, fmt.Sprintf("method %q is not part of the arbor protocol", req.Method())))
	}
	c.requests.Add(1)
	go func() {
		defer c.requests.Done()
		if err := c.srv.waitReady(ctx, req.Method()); err != nil {
			reply(ctx, nil, toRPCError(err))
			return
		}
		res, err := h(c, ctx, req.Params())
		if err != nil {
			c.log.Debug("request failed", "method", req.Method(), "err", err)
		}
		reply(ctx, res, toRPCError(err))
		if req.Method() == MethodDaemonStop && err == nil {
			c.srv.Stop() // only now: the reply must reach the client first
		}
	}()
	return nil
}
