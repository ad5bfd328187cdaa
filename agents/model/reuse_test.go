package model_test

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/arborhq/arbor/agents/model"
	"github.com/arborhq/arbor/agents/model/scripted"
)

// Streamed replies leave the connection to the endpoint open for the next call: a new
// connection per call costs a TCP (and, against a real API, a TLS) handshake on every turn.
func TestCallsReuseTheConnection(t *testing.T) {
	s, err := scripted.Parse([]byte(conversationScript), t.Name()+".json")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{Handler: s.Handler(), ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := newClient(t, "http://"+ln.Addr().String()+"/v1", nil)
	const calls = 20
	for i := range calls {
		reply, err := c.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "count"}}}, nil)
		if err != nil || len(reply.ToolCalls) != 1 {
			t.Fatalf("call %d: %+v %v", i, reply, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d calls opened %d connections, want 1", calls, n)
	}
}
