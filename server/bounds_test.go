package server

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// LSP's lifecycle: before initialize only initialize is answered (others get
// ServerNotInitialized, notifications are dropped); initialize is answered once; after
// shutdown requests are invalid; exit ends the connection.
func TestLifecycleRules(t *testing.T) {
	d := startTestDaemon(t, "")
	r := d.rawUninitialized(t)
	r.call(1, MethodDaemonStatus, nil)
	r.expectError(CodeServerNotInitialized, "send initialize first")
	r.call(2, MethodSessions, nil)
	r.expectError(CodeServerNotInitialized, MethodSessions)
	r.send(frame(`{"jsonrpc":"2.0","method":"initialized","params":{}}`)) // dropped: no tree is sent
	r.call(3, "initialize", map[string]any{"capabilities": map[string]any{}})
	if m := r.reply(); m.Error != nil || string(m.ID) != "3" {
		t.Fatalf("initialize: %+v", m)
	}
	r.call(4, "initialize", map[string]any{"capabilities": map[string]any{}})
	r.expectError(int64(jsonrpc2.InvalidRequest), "already")
	r.expectStatus(5)
	r.call(6, "shutdown", nil)
	if m := r.reply(); m.Error != nil {
		t.Fatalf("shutdown: %+v", m)
	}
	r.call(7, MethodDaemonStatus, nil)
	r.expectError(int64(jsonrpc2.InvalidRequest), "shutdown")
	r.send(frame(`{"jsonrpc":"2.0","method":"exit"}`))
	r.expectClosed()
}

// Bad input is answered as bad input, and what of it is echoed is bounded.
func TestUserErrorsAndBoundedEcho(t *testing.T) {
	d := startTestDaemon(t, "")
	r := d.raw(t)
	huge := "/" + strings.Repeat("a", 1<<20)
	for i, c := range []struct {
		method string
		params any
		code   int64
		want   string
	}{
		{MethodSessionCreate, map[string]any{"task": "  ", "dir": "/"}, int64(jsonrpc2.InvalidParams), "the task is empty"},
		{MethodSessionCreate, map[string]any{"task": "x", "dir": "/no/such/dir"}, int64(jsonrpc2.InvalidParams), "no such file or directory"},
		{MethodSessions, map[string]any{"dir": "/no/such/dir"}, int64(jsonrpc2.InvalidParams), "/no/such/dir"},
		{MethodSessionCreate, map[string]any{"task": "x", "dir": huge}, int64(jsonrpc2.InvalidParams), "more bytes]"},
		{MethodSessionFileAt, map[string]any{"id": "x", "path": "../../etc/passwd", "side": "head"}, int64(jsonrpc2.InvalidParams), "relative to the repository root"},
		{MethodSessionFileAt, map[string]any{"id": "x", "path": "/etc/passwd", "side": "head"}, int64(jsonrpc2.InvalidParams), "relative to the repository root"},
		{"arbor/" + strings.Repeat("m", 1<<20), nil, int64(jsonrpc2.MethodNotFound), "more bytes]"},
	} {
		r.call(i+1, c.method, c.params)
		m := r.expectError(c.code, c.want)
		if m.Error != nil && len(m.Error.Message) > maxErrorMessage+64 {
			t.Errorf("%s: a %d-byte error message; want at most about %d", clip(c.method, 40), len(m.Error.Message), maxErrorMessage)
		}
	}
	// A malformed message with a huge id: answered with a null id and a short message.
	r.send(frame(`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 1<<20) + `","method":7}`))
	m := r.reply()
	if string(m.ID) != "null" || m.Error == nil || len(m.Error.Message) > maxErrorMessage {
		t.Errorf("malformed message with a huge id: id %d bytes, error %d bytes", len(m.ID), len(m.Error.Message))
	}
	r.expectStatus(99)
}

// A client that sends requests and never reads the replies holds at most MaxInFlight of
// them in the daemon (the daemon stops reading it), other clients are served meanwhile, and
// once a write to it times out it is disconnected and everything it held is released.
func TestNonReadingClientIsBounded(t *testing.T) {
	const maxInFlight = 16
	d := startTestDaemonOpts(t, "", func(o *DaemonOptions) {
		o.MaxInFlight = maxInFlight
		o.WriteTimeout = time.Second
	})
	d.raw(t).expectStatus(1)
	runtime.GC()
	base := runtime.NumGoroutine()

	hostile := d.raw(t)
	req := []byte(frame(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status"}`))
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() { // blocks once the daemon stops reading; ends when it disconnects us
		for range 5000 {
			if _, err := hostile.nc.Write(req); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- nil
	}()
	peak, start := 0, time.Now()
	healthy := false
	var werr error
wait:
	for {
		select {
		case werr = <-done:
			break wait
		case <-time.After(5 * time.Millisecond):
		}
		peak = max(peak, runtime.NumGoroutine())
		if !healthy && time.Since(start) > 200*time.Millisecond {
			h := d.raw(t)
			h.expectStatus(2) // served while the hostile client is stuck
			h.nc.Close()
			healthy = true
		}
		if time.Since(start) > hangGuard {
			t.Fatalf("the non-reading client was not disconnected (%d requests sent)", sent.Load())
		}
	}
	if werr == nil {
		t.Errorf("all 5000 requests were taken without the client reading a reply")
	}
	if extra := peak - base; extra > maxInFlight+24 {
		t.Errorf("%d goroutines above baseline with a non-reading client; want about %d in flight at most", extra, maxInFlight)
	}
	t.Logf("sent %d requests before the disconnect after %v; goroutine peak %d above baseline %d", sent.Load(), time.Since(start).Round(time.Millisecond), peak-base, base)
	for deadline := time.Now().Add(hangGuard); runtime.NumGoroutine() > base+2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the disconnect, baseline %d", runtime.NumGoroutine(), base)
		}
	}
}
