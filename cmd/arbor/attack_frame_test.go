package main

// Frames a local process sends the daemon to kill it or starve its other clients: nesting
// deep enough to overflow a recursive decoder's stack, before and after initialize, in arrays
// and in objects. Each is refused with an error naming the depth, the connection that sent
// it goes on, and a healthy client is answered after every one.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func TestAttackFramesOnControlSocket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := e.startDaemon()
	eventually(t, "the daemon listens", e.listening)
	healthy := dialInitialized(t, e.sock)
	defer healthy.Close()

	const size = 3_000_000
	deepArrays := strings.Repeat("[", size)
	deepObjects := `{"jsonrpc":"2.0","id":9,"method":"arbor/daemon.status","params":` + strings.Repeat(`{"a":`, size/5)
	attacks := []struct {
		name       string
		initialize bool // the attacker initializes first
		body       string
	}{
		{"nested arrays before initialize", false, deepArrays},
		{"nested arrays after initialize", true, deepArrays},
		{"nested objects before initialize", false, deepObjects},
		{"nested objects after initialize", true, deepObjects},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			nc, err := net.Dial("unix", e.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			c := &rawClient{nc: nc, br: bufio.NewReader(nc)}
			if a.initialize {
				if err := c.call("initialize", map[string]any{"capabilities": map[string]any{}}); err != nil {
					t.Fatalf("initialize: %v", err)
				}
			}
			nc.SetDeadline(time.Now().Add(hangGuard))
			if _, err := fmt.Fprintf(nc, "Content-Length: %d\r\n\r\n%s", len(a.body), a.body); err != nil {
				t.Fatalf("send the frame: %v (the daemon: %v)", err, state(d.Process.Pid))
			}
			body, err := readFrame(c.br)
			if err != nil {
				t.Fatalf("no answer to the frame: %v (the daemon: %v)", err, state(d.Process.Pid))
			}
			var reply struct {
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			json.Unmarshal(body, &reply)
			want := "JSON nesting depth 1001 at byte"
			if reply.Error == nil || reply.Error.Code != -32700 || !strings.Contains(reply.Error.Message, want) || !strings.Contains(reply.Error.Message, "exceeds the limit of 1000") {
				t.Errorf("reply = %s, want a parse error containing %q and the limit", clipTo(body, 300), want)
			}
			// The connection that sent it goes on.
			next := "arbor/daemon.status"
			if !a.initialize {
				next = "initialize"
			}
			if err := c.call(next, map[string]any{"capabilities": map[string]any{}}); err != nil {
				t.Errorf("%s on the same connection after the frame: %v", next, err)
			}
			if err := healthy.status(); err != nil {
				t.Fatalf("the healthy client after the attack: %v (the daemon: %v)", err, state(d.Process.Pid))
			}
		})
	}
}

// state says whether pid still runs, for failure messages.
func state(pid int) string {
	if !alive(pid) {
		return "gone"
	}
	return "still running"
}

func clipTo(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
