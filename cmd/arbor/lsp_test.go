package main

// The editor path: `arbor lsp` over stdio with LSP framing, as Neovim and VS Code spawn it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func (e *env) startLSP() *lspClient {
	e.t.Helper()
	cmd := exec.Command(arborBin, "lsp")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	c := &lspClient{t: e.t, cmd: cmd, stdin: stdin, msgs: make(chan map[string]json.RawMessage, 1024), exited: make(chan struct{})}
	go func() {
		defer close(c.msgs)
		br := bufio.NewReader(stdout)
		for {
			body, err := readFrame(br)
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) == nil {
				c.msgs <- m
			}
		}
	}()
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	e.t.Cleanup(func() {
		stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			e.t.Errorf("arbor lsp pid %d did not exit when its stdin closed", cmd.Process.Pid)
			cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// readFrame reads one Content-Length framed message.
func readFrame(br *bufio.Reader) ([]byte, error) {
	length := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length:"); ok {
			length, err = strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, err
			}
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("no Content-Length")
	}
	body := make([]byte, length)
	_, err := io.ReadFull(br, body)
	return body, err
}

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return err
}

func (c *lspClient) notify(method string, params any) {
	c.t.Helper()
	if err := writeFrame(c.stdin, map[string]any{"jsonrpc": "2.0", "method": method, "params": params}); err != nil {
		c.t.Fatalf("send %s: %v", method, err)
	}
}

// call sends a request and returns its result, keeping the notifications that arrive before
// the reply in notes.
func (c *lspClient) call(method string, params any, notes *[]map[string]json.RawMessage) json.RawMessage {
	c.t.Helper()
	c.nextID++
	id := c.nextID
	if err := writeFrame(c.stdin, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		c.t.Fatalf("send %s: %v", method, err)
	}
	for {
		m := c.next("the reply to " + method)
		if _, isNote := m["method"]; isNote && m["id"] == nil {
			if notes != nil {
				*notes = append(*notes, m)
			}
			continue
		}
		if string(m["id"]) != strconv.Itoa(id) {
			continue
		}
		if m["error"] != nil {
			c.t.Fatalf("%s failed: %s", method, m["error"])
		}
		return m["result"]
	}
}

func (c *lspClient) next(what string) map[string]json.RawMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			c.t.Fatalf("arbor lsp closed its stdout while waiting for %s", what)
		}
		return m
	case <-time.After(hangGuard):
		c.t.Fatalf("gave up waiting for %s", what)
		return nil
	}
}

// waitNote returns the first notification of method for which match holds, looking at the
// notifications already seen first.
func (c *lspClient) waitNote(method string, seen []map[string]json.RawMessage, match func(json.RawMessage) bool) json.RawMessage {
	c.t.Helper()
	for _, m := range seen {
		if string(m["method"]) == strconv.Quote(method) && match(m["params"]) {
			return m["params"]
		}
	}
	for {
		m := c.next("notification " + method)
		if string(m["method"]) == strconv.Quote(method) && m["id"] == nil && match(m["params"]) {
			return m["params"]
		}
	}
}

type treeNote struct {
	Full     bool `json:"full"`
	Sessions []struct {
		ID, State, Branch string
	} `json:"sessions"`
}

func (c *lspClient) initialize(root string) json.RawMessage {
	c.t.Helper()
	res := c.call("initialize", map[string]any{
		"processId": os.Getpid(), "rootUri": "file://" + root,
		"capabilities": map[string]any{"window": map[string]any{"workDoneProgress": false}},
		"clientInfo":   map[string]any{"name": "integration-test"},
	}, nil)
	c.notify("initialized", map[string]any{})
	return res
}

func TestLSPForwarder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.startLSP()
	res := c.initialize(e.repo)
	var init struct {
		Capabilities struct {
			ExecuteCommandProvider struct{ Commands []string }
		}
		ServerInfo struct{ Name string }
	}
	if err := json.Unmarshal(res, &init); err != nil || init.ServerInfo.Name != "arbor" || len(init.Capabilities.ExecuteCommandProvider.Commands) == 0 {
		t.Errorf("initialize result = %s", res)
	}
	c.waitNote("arbor/sessionTree", nil, func(p json.RawMessage) bool {
		var tn treeNote
		return json.Unmarshal(p, &tn) == nil && tn.Full
	})

	var notes []map[string]json.RawMessage
	created := c.call("arbor/session.create", map[string]any{"task": "hello from the editor", "dir": e.repo}, &notes)
	var s struct{ ID, Branch string }
	if err := json.Unmarshal(created, &s); err != nil || s.ID == "" {
		t.Fatalf("arbor/session.create result = %s", created)
	}
	// Deltas carry the new session, up to its settling idle.
	c.waitNote("arbor/sessionTree", notes, func(p json.RawMessage) bool {
		var tn treeNote
		if json.Unmarshal(p, &tn) != nil || tn.Full {
			return false
		}
		for _, ts := range tn.Sessions {
			if ts.ID == s.ID && ts.State == "idle" && ts.Branch == s.Branch {
				return true
			}
		}
		return false
	})

	if res := c.call("shutdown", nil, nil); string(res) != "null" {
		t.Errorf("shutdown result = %s, want null", res)
	}
	c.notify("exit", nil)
	select {
	case <-c.exited:
		if c.err != nil {
			t.Errorf("arbor lsp exited with %v after exit", c.err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("arbor lsp did not exit after exit")
	}
	// The session outlives the editor.
	if st := e.session(s.ID).State; st != "idle" {
		t.Errorf("after the editor left, state = %q, want idle", st)
	}
}

func TestTwoForwardersStartOneDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clients := []*lspClient{e.startLSP(), e.startLSP()}
	var wg sync.WaitGroup
	pids := make([]int, len(clients))
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.initialize(e.repo)
		}()
		_ = i
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, c := range clients {
		var st struct{ PID int }
		json.Unmarshal(c.call("arbor/daemon.status", nil, nil), &st)
		pids[i] = st.PID
	}
	if pids[0] == 0 || pids[0] != pids[1] {
		t.Errorf("the forwarders reach daemons %v, want one and the same", pids)
	}
	if ds := e.daemons(); len(ds) != 1 {
		t.Errorf("%d daemon processes for %s, want 1: %v", len(ds), e.sock, ds)
	}
	if data, _ := os.ReadFile(filepath.Join(e.vars["ARBOR_STATE_DIR"], "daemon.log")); strings.Contains(string(data), "already running") {
		t.Errorf("a second daemon was started and refused:\n%s", data)
	}
	for _, c := range clients {
		c.call("shutdown", nil, nil)
		c.notify("exit", nil)
	}
}
