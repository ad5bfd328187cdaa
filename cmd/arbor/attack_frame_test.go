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
	"os/exec"
	"strings"
	"syscall"
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

// The same from an ACP client on `arbor acp`'s stdin: a line nested too deeply is answered
// with a parse error naming the depth (with its id when one can be found), and the agent
// answers the next request.
func TestAttackLinesOnACP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command(arborBin, "acp")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	go func() {
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1,"x":%s}}`+"\n", deep)
		fmt.Fprintf(in, "%s\n", strings.Repeat("[", 3_000_000))
		fmt.Fprintf(in, "%s\n", strings.Repeat(`{"a":`, 600_000))
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	}()
	type reply struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var got []reply
	done := make(chan error, 1)
	go func() {
		dec := json.NewDecoder(out)
		for {
			var r reply
			if err := dec.Decode(&r); err != nil {
				done <- err
				return
			}
			got = append(got, r)
			if string(r.ID) == "6" {
				done <- nil
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("arbor acp's output ended before the answer to the last request: %v (the agent: %s)", err, state(cmd.Process.Pid))
		}
	case <-time.After(hangGuard):
		t.Fatalf("no answer to the last request after %v", hangGuard)
	}
	const want = "JSON nesting depth 1001 at byte"
	refused := map[string]int{}
	for _, r := range got {
		if r.Error != nil && r.Error.Code == -32700 && strings.Contains(r.Error.Message, want) {
			refused[string(r.ID)]++
		}
	}
	if refused["5"] != 1 || refused["null"] != 2 {
		var seen []string
		for _, r := range got {
			if r.Error != nil {
				seen = append(seen, fmt.Sprintf("id %s: error %d %q", r.ID, r.Error.Code, r.Error.Message))
			} else {
				seen = append(seen, fmt.Sprintf("id %s: result %s", r.ID, clipTo(r.Result, 60)))
			}
		}
		t.Errorf("replies:\n%s\nwant the deep request 5 and the two deep lines without an id refused with %q", strings.Join(seen, "\n"), want)
	}
	if last := got[len(got)-1]; last.Error != nil || len(last.Result) == 0 {
		t.Errorf("initialize after the refusals: %+v", last)
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
