package server

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Test-only methods, added after the table is built (this file's init runs after
// methods.go's): one that panics, one that blocks until cancelled.
func init() {
	for _, r := range []route{
		register(Method[Empty, *Empty]("arbor/test.panic"), func(*conn, context.Context, Empty) (*Empty, error) {
			var m map[string]int
			//lint:ignore SA5000 the point: a real runtime panic in a handler
			m["boom"]++
			return nil, nil
		}),
		register(Method[Empty, *Empty]("arbor/test.block"), func(_ *conn, ctx context.Context, _ Empty) (*Empty, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return &Empty{}, nil
			}
		}).withCancel(),
	} {
		routes[r.name] = r
	}
}

// TestPanicInRequestIsAnswered: a panic inside one request is answered as an internal error
// naming the method, and the daemon goes on serving that connection and others.
func TestPanicInRequestIsAnswered(t *testing.T) {
	d := startTestDaemon(t, "")
	r := d.raw(t)
	r.call(1, "arbor/test.panic", nil)
	r.expectError(-32603, "arbor/test.panic: internal error")
	r.expectStatus(2)
	d.raw(t).expectStatus(1)
}

// TestCancelRequest: $/cancelRequest ends a cancellable request with LSP's RequestCancelled,
// and a cancel for an unknown or finished id is harmless.
func TestCancelRequest(t *testing.T) {
	d := startTestDaemon(t, "")
	r := d.raw(t)
	r.call(7, "arbor/test.block", nil)
	r.send(frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}`))
	if m := r.expectError(CodeRequestCancelled, "cancelled"); string(m.ID) != "7" {
		t.Errorf("reply id %s, want 7", m.ID)
	}
	r.send(frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}`))
	r.send(frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"nope"}}`))
	r.expectStatus(8)
}

// TestUnbuiltMethodsSayWhy: a planned method that is not built answers MethodNotFound naming
// what is missing, and none of them is in the method table.
func TestUnbuiltMethodsSayWhy(t *testing.T) {
	for prefix := range unimplemented {
		for name := range routes {
			if strings.HasPrefix(name, prefix) {
				t.Errorf("%s is served but still listed as not built (%s)", name, prefix)
			}
		}
	}
	unimplemented["arbor/future."] = "a family planned for later"
	t.Cleanup(func() { delete(unimplemented, "arbor/future.") })
	d := startTestDaemon(t, "")
	r := d.raw(t)
	r.call(1, "arbor/future.run", nil)
	r.expectError(-32601, "not built yet: a family planned for later")
	r.expectStatus(2)
}
