package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"go.lsp.dev/jsonrpc2"
)

// notification handles the notifications the daemon acts on; others are ignored as LSP
// requires.
func (c *conn) notification(ctx context.Context, method string, params json.RawMessage) {
	c.mu.Lock()
	started := c.initStarted
	c.mu.Unlock()
	if !started && method != "exit" {
		return // LSP: notifications before initialize are dropped
	}
	switch method {
	case "initialized":
		c.mu.Lock()
		c.initialized = true
		c.mu.Unlock()
		c.sendFullTree(ctx)
	case "exit":
		c.rpc.Close()
	case "$/cancelRequest":
		var p struct {
			ID jsonrpc2.ID `json:"id"`
		}
		if json.Unmarshal(params, &p) == nil {
			c.mu.Lock()
			cancel := c.inflight[p.ID]
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
}

// handle runs each request in its own goroutine: sessions take time to create and a slow
// request must not hold up the next one. Notifications run in order.
func (c *conn) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	call, isCall := req.(*jsonrpc2.Call)
	if !isCall {
		c.notification(ctx, req.Method(), req.Params())
		return nil
	}
	if err := c.admit(req.Method()); err != nil {
		return reply(ctx, nil, err)
	}
	r, ok := routes[req.Method()]
	if !ok {
		method := clip(req.Method(), maxEcho)
		if why := notBuilt(method); why != "" {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, why))
		}
		if strings.HasPrefix(method, "$/") {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, "method not supported: "+method))
		}
		return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, fmt.Sprintf("method %q is not part of the arbor protocol", method)))
	}
	// Wait for room before starting the request: this is the read loop, so a client with too
	// much in flight is not read from until its replies drain.
	size := len(req.Params())
	if err := c.budget.acquire(ctx, size); err != nil {
		return nil // the connection is ending
	}
	done, reqCtx := func() {}, ctx
	if r.cancellable {
		// Registered before the handler starts, so a $/cancelRequest read right after the
		// request always finds it. The reply is written under ctx, not the cancelled one.
		var cancel context.CancelFunc
		reqCtx, cancel = context.WithCancel(ctx)
		id := call.ID()
		c.mu.Lock()
		c.inflight[id] = cancel
		c.mu.Unlock()
		done = func() {
			// Before the reply: a client may reuse the id as soon as it has the answer.
			c.mu.Lock()
			delete(c.inflight, id)
			c.mu.Unlock()
			cancel()
		}
	}
	// The receive order is the read loop's; the journal entry (if any) is written in the
	// request's goroutine, so one slow fsync does not hold up reading the next request.
	seq := c.srv.journalStamp(r.name)
	c.requests.Add(1)
	go func() {
		defer c.requests.Done()
		defer c.budget.release(size) // after the reply is written (or failed)
		if err := c.srv.waitReady(ctx, req.Method()); err != nil {
			done()
			reply(ctx, nil, toRPCError(err))
			return
		}
		res, err := c.serve(reqCtx, r, req.Params(), seq)
		cancelled := reqCtx.Err() != nil && ctx.Err() == nil
		done()
		if err != nil {
			c.log.Debug("request failed", "method", req.Method(), "err", clip(err.Error(), maxErrorMessage))
			if cancelled && errors.Is(err, context.Canceled) {
				// Only a failure the cancel caused is reported as one; anything else keeps its
				// own error (and message), so the client learns what really happened.
				err = jsonrpc2.NewError(CodeRequestCancelled, req.Method()+": cancelled by the client: "+err.Error())
			}
		}
		reply(ctx, res, toRPCError(err))
		if req.Method() == MethodDaemonStop && err == nil {
			c.srv.Stop() // only now: the reply must reach the client first
		}
	}()
	return nil
}

// admit applies LSP's lifecycle rules to a request: nothing but initialize before
// initialize (ServerNotInitialized), initialize only once, and nothing after shutdown
// (InvalidRequest). initialize counts from the moment it is read: a client must wait for its
// reply before sending more, and one that does not is not worth a race.
func (c *conn) admit(method string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.shutdown:
		return jsonrpc2.NewError(jsonrpc2.InvalidRequest, "the client asked for shutdown; only the exit notification is accepted now")
	case method == "initialize" && c.initStarted:
		return jsonrpc2.NewError(jsonrpc2.InvalidRequest, "initialize was already called on this connection")
	case method == "initialize":
		c.initStarted = true
		return nil
	case !c.initStarted:
		return jsonrpc2.NewError(CodeServerNotInitialized, fmt.Sprintf("%s: send initialize first (LSP: no request before initialize)", clip(method, maxEcho)))
	}
	return nil
}

// serve journals a request that changes state (see journal.go), runs its handler and crosses
// the entry out. seq is when the request was read (0: now). A request the journal cannot take
// is refused, not run.
func (c *conn) serve(ctx context.Context, r route, params json.RawMessage, seq int64) (any, error) {
	j := c.srv.journal
	if j == nil || !journalRules[r.name].journalled() {
		return c.run(ctx, r, params)
	}
	c.mu.Lock()
	root := c.rootDir
	c.mu.Unlock()
	e, err := j.begin(seq, r.name, params, root)
	if err != nil {
		c.log.Error("request refused: journal write failed", "method", r.name, "err", err)
		return nil, err
	}
	c.srv.crashPoint(r.name, "before")
	res, err := c.run(withRequestKey(ctx, e.Key), r, params)
	c.srv.crashPoint(r.name, "after")
	if derr := j.done(e); derr != nil {
		c.log.Warn("request journal", "err", derr) // replayed after a crash, which its rule makes harmless
	}
	return res, err
}

// run runs one handler. A request is an isolation boundary: a panic in it is logged with
// its stack and answered as an internal error, and the daemon keeps serving everyone else.
func (c *conn) run(ctx context.Context, r route, params json.RawMessage) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic in request handler", "method", r.name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, jsonrpc2.NewError(jsonrpc2.InternalError,
				fmt.Sprintf("%s: internal error in the arbor daemon (%v); the daemon logged it and goes on serving — please report it", r.name, p))
		}
	}()
	return r.serve(c, ctx, params)
}
