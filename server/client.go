package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// ErrConnectionClosed is what a call returns when the daemon closed the connection before it
// replied, as a daemon that is exiting does.
var ErrConnectionClosed = errors.New("the arbor daemon closed the connection")

// Client is a typed arbor/* client over one connection; the CLI uses it.
type Client struct {
	rpc jsonrpc2.Conn

	mu     sync.Mutex
	notify func(method string, params json.RawMessage)
}

// NewClient starts reading from nc. onNotify (may be nil) gets every notification in order.
func NewClient(ctx context.Context, nc net.Conn, onNotify func(method string, params json.RawMessage)) *Client {
	st := newStream(nc)
	st.depth = clientDepth
	c := &Client{rpc: jsonrpc2.NewConn(st), notify: onNotify}
	c.rpc.Go(ctx, func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
		if _, isCall := req.(*jsonrpc2.Call); isCall {
			return reply(ctx, nil, jsonrpc2.NewError(jsonrpc2.MethodNotFound, "the arbor CLI answers no requests"))
		}
		c.mu.Lock()
		f := c.notify
		c.mu.Unlock()
		if f != nil {
			f(req.Method(), req.Params())
		}
		return nil
	})
	return c
}

// Call sends a request and decodes its result into result (may be nil). It returns when the
// connection closes too: jsonrpc2 v0.10.0 leaves a pending call waiting forever otherwise. The
// reply is decoded into a private buffer, so a call given up on never writes into result.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type reply struct {
		raw json.RawMessage
		err error
	}
	done := make(chan reply, 1)
	go func() {
		var raw json.RawMessage
		_, err := c.rpc.Call(ctx, method, params, &raw)
		done <- reply{raw, err}
	}()
	var r reply
	select {
	case r = <-done:
	case <-c.rpc.Done():
		// A reply read just before the close is still on its way to the caller.
		select {
		case r = <-done:
		case <-time.After(500 * time.Millisecond):
			return fmt.Errorf("%s: %w", method, ErrConnectionClosed)
		}
	}
	var rpcErr *jsonrpc2.Error
	if r.err != nil && errors.As(r.err, &rpcErr) {
		return r.err // the daemon's answer
	}
	if r.err != nil {
		// A write or read that failed because the daemon hung up is that, whatever the socket
		// error said.
		select {
		case <-c.rpc.Done():
			return fmt.Errorf("%s: %w (%v)", method, ErrConnectionClosed, r.err)
		case <-time.After(100 * time.Millisecond):
			return r.err
		}
	}
	if result == nil || len(r.raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.raw, result); err != nil {
		return fmt.Errorf("%s: decode result: %w", method, err)
	}
	return nil
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	return c.rpc.Notify(ctx, method, params)
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.rpc.Done() }

// Close closes the connection.
func (c *Client) Close() error { return c.rpc.Close() }

// Call sends the request m with params p on c and decodes its result.
func (m Method[P, R]) Call(ctx context.Context, c *Client, p P) (R, error) {
	var r R
	err := c.Call(ctx, string(m), p, &r)
	return r, err
}
