package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/eventlog"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// A full queue holds tree and progress messages instead of dropping them: per session only the
// newest delta, behind a full tree nothing older, and once there is room they are queued in
// order, after everything queued before them.
func TestFullQueueHoldsTreeAndProgress(t *testing.T) {
	c := &conn{out: make(chan outMsg, 4), attached: map[string]bool{"s": true}, behind: map[string]uint64{}}
	for i := uint64(1); i <= 4; i++ {
		c.enqueue(eventMsg("s", eventlog.Record{Seq: i, Type: "x"}), i)
	}
	delta := func(id string, seq uint64) outMsg {
		return outMsg{method: NotifySessionTree, params: &SessionTreeParams{Sessions: []Session{{ID: id, LastSeq: seq}}}}
	}
	progress := outMsg{method: "$/progress", params: "end of a"}
	c.enqueue(delta("a", 1), 0)
	c.enqueue(progress, 0)
	c.enqueue(delta("b", 7), 0)
	c.enqueue(delta("a", 2), 0) // replaces a@1
	c.enqueue(eventMsg("s", eventlog.Record{Seq: 5, Type: "x"}), 5)
	if c.attached["s"] || c.behind["s"] != 4 {
		t.Fatalf("the dropped event did not mark the session behind at 4: %v %v", c.attached, c.behind)
	}
	if len(c.late) != 3 {
		t.Fatalf("held %d messages, want 3 (progress, b@7, a@2)", len(c.late))
	}
	// The writer drains: events first, then what was held, in order.
	for i := 0; i < 3; i++ {
		<-c.out
	}
	flushLate(c)
	c.enqueue(delta("c", 1), 0) // the queue is full again: held, behind the ones before it
	if len(c.late) != 1 {
		t.Fatalf("held %d messages after the flush, want c", len(c.late))
	}
	<-c.out
	flushLate(c)
	got := []string{"event"}
	for len(c.out) > 0 {
		m := <-c.out
		switch p := m.params.(type) {
		case *SessionTreeParams:
			got = append(got, p.Sessions[0].ID)
		case string:
			got = append(got, p)
		case *Event:
			got = append(got, "event")
		}
	}
	want := []string{"event", "end of a", "b", "a", "c"}
	if len(got) != len(want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queued %v, want %v", got, want)
		}
	}
	// A full tree supersedes the held deltas.
	for i := 0; i < 4; i++ {
		c.enqueue(progress, 0)
	}
	c.enqueue(delta("a", 3), 0)
	c.enqueue(outMsg{method: NotifySessionTree, params: &SessionTreeParams{Full: true}}, 0)
	if len(c.late) != 1 || !c.late[0].params.(*SessionTreeParams).Full {
		t.Fatalf("behind a full tree the held deltas should go: %d held", len(c.late))
	}
}

// A client that refuses window/workDoneProgress/create gets neither a begin nor an end: an end
// without its begin makes Neovim 0.7.2 complain.
func TestProgressEndOnlyAfterBegin(t *testing.T) {
	for _, refuse := range []bool{true, false} {
		a, b := net.Pipe()
		c := &conn{out: make(chan outMsg, 16), attached: map[string]bool{}, behind: map[string]uint64{},
			progress: map[string]string{}, progressBegun: map[string]chan struct{}{}, progressOpen: map[string]bool{},
			caps: clientCaps{WorkDoneProgress: true}, life: t.Context()}
		c.rpc = jsonrpc2.NewConn(newStream(a))
		c.rpc.Go(t.Context(), jsonrpc2.MethodNotFoundHandler)
		client := jsonrpc2.NewConn(newStream(b))
		client.Go(t.Context(), func(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
			if refuse {
				return reply(ctx, nil, errors.New("no progress here"))
			}
			return reply(ctx, nil, nil)
		})
		info := agents.Info{Meta: agents.Meta{ID: "s1", Task: "t"}, State: agents.Running, LastSeq: 3}
		c.progressFor(info)
		info.State, info.LastSeq = agents.Idle, 5
		c.progressFor(info)
		var kinds []string
		deadline := time.After(5 * time.Second)
		want := 2
		if refuse {
			want = 0
		}
		for len(kinds) < want {
			select {
			case m := <-c.out:
				kinds = append(kinds, fmt.Sprintf("%T", m.params.(*protocol.ProgressParams).Value))
			case <-deadline:
				t.Fatalf("refuse=%v: queued %v, want %d progress messages", refuse, kinds, want)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if len(c.out) != 0 || (!refuse && (kinds[0] != "*protocol.WorkDoneProgressBegin" || kinds[1] != "*protocol.WorkDoneProgressEnd")) {
			t.Errorf("refuse=%v: queued %v and %d more", refuse, kinds, len(c.out))
		}
		c.rpc.Close()
		client.Close()
	}
}

// flushLate is what the writer does once the queue has room (flushBehind without behind
// sessions, which would need a connection).
func flushLate(c *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLateLocked()
}
