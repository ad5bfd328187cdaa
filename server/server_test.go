package server

// Daemon tests over a real Unix socket with the daemon in-process (RunDaemon on a real
// agents.Service): what a misbehaving client can and cannot do to it, socket permissions, and
// goroutines returning to their baseline.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arborhq/arbor/agents"
	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/workspace"
)

// hangGuard turns a hang into a failure; nothing here is timed.
const hangGuard = 30 * time.Second

type testDaemon struct {
	sock string
	stop context.CancelFunc
	done chan error
}

// startTestDaemon runs RunDaemon in-process on a socket under a short temporary directory
// (Unix socket paths are limited to 108 bytes) and stops it when the test ends.
func startTestDaemon(t *testing.T, sockDir string) *testDaemon {
	t.Helper()
	return startTestDaemonOpts(t, sockDir, nil)
}

// startTestDaemonOpts is startTestDaemon with the daemon's options adjusted by set.
func startTestDaemonOpts(t *testing.T, sockDir string, set func(*DaemonOptions)) *testDaemon {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if sockDir == "" {
		base, err := os.MkdirTemp("", "ab")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		sockDir = filepath.Join(base, "run")
	}
	svc, err := agents.New(agents.Options{StateDir: t.TempDir(), PlainKernels: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &testDaemon{sock: filepath.Join(sockDir, "arbor.sock"), stop: cancel, done: make(chan error, 1)}
	opts := DaemonOptions{Socket: d.sock, Agents: svc, Version: "test"}
	if set != nil {
		set(&opts)
	}
	go func() { d.done <- RunDaemon(ctx, opts) }()
	t.Cleanup(func() { d.shutdown(t) })
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(5 * time.Millisecond) {
		nc, err := net.Dial("unix", d.sock)
		if err == nil {
			nc.Close()
			return d
		}
		select {
		case err := <-d.done:
			t.Fatalf("RunDaemon: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not listen on %s: %v", d.sock, err)
		}
	}
}

func (d *testDaemon) shutdown(t *testing.T) {
	t.Helper()
	d.stop()
	select {
	case err, ok := <-d.done:
		if ok && err != nil {
			t.Errorf("RunDaemon: %v", err)
		}
		if ok {
			close(d.done)
		}
	case <-time.After(hangGuard):
		t.Errorf("RunDaemon did not return after its context ended")
	}
}

// rpcMsg is any JSON-RPC message as it appears on the wire.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rawConn is a client that writes bytes, not messages: it can say anything.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

// raw connects and initializes (id 0), as every client must before its first request.
func (d *testDaemon) raw(t *testing.T) *rawConn {
	t.Helper()
	r := d.rawUninitialized(t)
	r.call(0, "initialize", map[string]any{"capabilities": map[string]any{}})
	if m := r.reply(); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	return r
}

// rawUninitialized connects and sends nothing.
func (d *testDaemon) rawUninitialized(t *testing.T) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// initClient initializes a typed client, as the CLI does.
func initClient(t *testing.T, c *Client) *Client {
	t.Helper()
	if err := c.Call(t.Context(), "initialize", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func (r *rawConn) send(s string) {
	r.t.Helper()
	if _, err := io.WriteString(r.nc, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) call(id int, method string, params any) {
	r.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	r.send(frame(string(b)))
}

// next reads the next message, skipping notifications.
func (r *rawConn) next() (rpcMsg, error) {
	r.nc.SetReadDeadline(time.Now().Add(hangGuard))
	for {
		s := &stream{in: r.br, max: MaxMessageBytes}
		length, _, err := s.readHeader()
		if err != nil {
			return rpcMsg{}, err
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(r.br, body); err != nil {
			return rpcMsg{}, err
		}
		var m rpcMsg
		if err := json.Unmarshal(body, &m); err != nil {
			return rpcMsg{}, fmt.Errorf("daemon sent invalid JSON: %v: %s", err, body)
		}
		if m.Method != "" && m.ID == nil {
			continue
		}
		return m, nil
	}
}

func (r *rawConn) reply() rpcMsg {
	r.t.Helper()
	m, err := r.next()
	if err != nil {
		r.t.Fatalf("no reply: %v", err)
	}
	return m
}

// expectError reads a reply and checks its error code and that its message names want.
func (r *rawConn) expectError(code int64, want string) rpcMsg {
	r.t.Helper()
	m := r.reply()
	if m.Error == nil || m.Error.Code != code || !strings.Contains(m.Error.Message, want) {
		r.t.Errorf("reply = %+v (error %+v), want error %d naming %q", m, m.Error, code, want)
	}
	return m
}

// expectStatus checks that the connection still answers a request.
func (r *rawConn) expectStatus(id int) {
	r.t.Helper()
	r.call(id, MethodDaemonStatus, nil)
	m := r.reply()
	var st DaemonStatusResult
	if m.Error != nil || json.Unmarshal(m.Result, &st) != nil || st.PID != os.Getpid() || string(m.ID) != fmt.Sprint(id) {
		r.t.Errorf("daemon.status reply = %+v, want pid %d and id %d", m, os.Getpid(), id)
	}
}

func (r *rawConn) expectClosed() {
	r.t.Helper()
	if m, err := r.next(); err == nil {
		r.t.Errorf("connection still open: read %+v", m)
	} else if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		r.t.Errorf("want the daemon to close the connection, got %v", err)
	}
}

func TestDaemonBadInputOnTheWire(t *testing.T) {
	d := startTestDaemon(t, "")

	t.Run("malformed JSON, then the connection goes on", func(t *testing.T) {
		r := d.raw(t)
		r.send(frame(`{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status"`))
		r.expectError(-32700, "malformed")
		r.expectStatus(2)
	})
	t.Run("valid JSON that is no request keeps its id", func(t *testing.T) {
		r := d.raw(t)
		r.send(frame(`{"jsonrpc":"2.0","id":5,"method":{"x":1}}`))
		if m := r.expectError(-32600, "malformed"); string(m.ID) != "5" {
			t.Errorf("reply id = %s, want 5", m.ID)
		}
		r.expectStatus(6)
	})
	t.Run("unknown method", func(t *testing.T) {
		r := d.raw(t)
		r.call(1, "arbor/nosuch", nil)
		r.expectError(-32601, "arbor/nosuch")
		r.call(2, "$/nosuch", nil)
		r.expectError(-32601, "$/nosuch")
		// Unknown notifications are ignored, as LSP requires.
		r.send(frame(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`))
		r.send(frame(`{"jsonrpc":"2.0","method":"workspace/didChangeConfiguration","params":{}}`))
		r.expectStatus(3)
	})
	t.Run("bad params", func(t *testing.T) {
		r := d.raw(t)
		r.call(1, MethodSessionGet, map[string]any{"id": 42})
		r.expectError(-32602, "invalid params")
		r.call(2, MethodSessionGet, map[string]any{"id": "nope"})
		r.expectError(CodeUnknownSession, "nope")
		r.call(3, MethodSessionCreate, map[string]any{"task": "x", "dir": t.TempDir()})
		r.expectError(CodeNotRepository, "git")
		r.expectStatus(4)
	})
	t.Run("bad header ends the connection", func(t *testing.T) {
		r := d.raw(t)
		r.send("Content-Length: lots\r\n\r\n{}")
		r.expectError(-32700, "Content-Length")
		r.expectClosed()
	})
	t.Run("3 GiB Content-Length is refused without allocating", func(t *testing.T) {
		r := d.raw(t)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r.send("Content-Length: 3221225472\r\n\r\n{\"jsonrpc\":")
		r.expectError(-32700, "exceeds the limit")
		r.expectClosed()
		runtime.ReadMemStats(&after)
		// Loose on purpose: the daemon shares this process; 3 GiB would be unmistakable.
		if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
			t.Errorf("the daemon allocated %d MiB answering a 3 GiB Content-Length", n>>20)
		}
	})
	t.Run("other clients are served meanwhile", func(t *testing.T) {
		stalled := d.raw(t)
		body := `{"jsonrpc":"2.0","id":9,"method":"arbor/daemon.status"}`
		// A client that sent half a message and stalls holds up nobody.
		stalled.send(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body[:10]))
		hostile := d.raw(t)
		hostile.send("Content-Length: 3221225472\r\n\r\n")
		for i := range 3 {
			d.raw(t).expectStatus(i + 1)
		}
		hostile.expectError(-32700, "exceeds")
		// The stalled client finishes its message and is answered.
		stalled.send(body[10:])
		m := stalled.reply()
		if string(m.ID) != "9" || m.Error != nil {
			t.Errorf("the stalled client's reply = %+v", m)
		}
	})
}

func TestDaemonSocketPermissions(t *testing.T) {
	base, err := os.MkdirTemp("", "ab")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "run")
	// A directory others may enter is tightened, not trusted.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startTestDaemon(t, dir)
	fi, err := os.Stat(d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode = %v (%v), want 0700", di.Mode().Perm(), err)
	}
	// A second daemon on the same socket is refused and names the first.
	svc, err := agents.New(agents.Options{StateDir: t.TempDir(), PlainKernels: true})
	if err != nil {
		t.Fatal(err)
	}
	err = RunDaemon(t.Context(), DaemonOptions{Socket: d.sock, Agents: svc})
	if !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second RunDaemon = %v, want ErrAlreadyRunning naming pid %d", err, os.Getpid())
	}
	svc.Close(context.Background())
	// The first still serves.
	d.raw(t).expectStatus(1)
}

// settledGoroutines waits until the goroutine count is at most want, and reports the stacks
// when it is not.
func settledGoroutines(t *testing.T, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("%s: %d goroutines, want at most %d:\n%s", what, runtime.NumGoroutine(), want, buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stableGoroutines returns the goroutine count once it stops changing.
func stableGoroutines() int {
	n := runtime.NumGoroutine()
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

func TestGoroutinesReturnToBaseline(t *testing.T) {
	before := stableGoroutines()
	d := startTestDaemon(t, "")
	// One round trip first, so the daemon's own goroutines (recovery, idle watch) are settled.
	d.raw(t).expectStatus(1)
	baseline := stableGoroutines()

	for i := range 5 {
		nc, err := Dial(t.Context(), DialOptions{Socket: d.sock})
		if err != nil {
			t.Fatal(err)
		}
		tree := make(chan struct{}, 1)
		c := NewClient(t.Context(), nc, func(method string, _ json.RawMessage) {
			if method == NotifySessionTree {
				select {
				case tree <- struct{}{}:
				default:
				}
			}
		})
		if err := c.Call(t.Context(), "initialize", map[string]any{"rootUri": "file:///nonexistent", "capabilities": map[string]any{}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Notify(t.Context(), "initialized", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tree:
		case <-time.After(hangGuard):
			t.Fatal("no arbor/sessionTree after initialized")
		}
		var res SessionsResult
		if err := c.Call(t.Context(), MethodSessions, &SessionsParams{}, &res); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			c.Call(t.Context(), "shutdown", nil, nil)
			c.Notify(t.Context(), "exit", nil)
			<-c.Done()
		}
		c.Close()
	}
	// Raw clients that misbehave and vanish.
	for _, s := range []string{"Content-Length: 3221225472\r\n\r\n", frame(`{oops`), "Content-Length: 100\r\n\r\n{"} {
		r := d.raw(t)
		r.send(s)
		r.nc.Close()
	}
	t.Logf("before %d baseline %d now %d", before, baseline, runtime.NumGoroutine())
	settledGoroutines(t, baseline, "after clients came and went")

	d.shutdown(t)
	settledGoroutines(t, before, "after the daemon stopped")
}

// TestForward relays an editor's stdio to the daemon and ends when the editor closes its
// side, without the daemon answering the half-close with anything.
func TestForward(t *testing.T) {
	d := startTestDaemon(t, "")
	nc, err := Dial(t.Context(), DialOptions{Socket: d.sock})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Forward(t.Context(), nc, inR, outW); outW.Close() }()
	editor := &rawConn{t: t, nc: nil, br: bufio.NewReader(outR)}
	io.WriteString(inW, frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`))
	m, err := editor.nextFrom()
	if err != nil || string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("initialize through the forwarder: %+v %v", m, err)
	}
	inW.Close() // the editor went away
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Forward: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Forward did not return after the editor closed stdin")
	}
	if rest, _ := io.ReadAll(editor.br); len(rest) > 0 {
		t.Errorf("after the editor left the daemon still sent %q", rest)
	}
}

// nextFrom reads one message from a rawConn without a socket (a pipe).
func (r *rawConn) nextFrom() (rpcMsg, error) {
	s := &stream{in: r.br, max: MaxMessageBytes}
	length, _, err := s.readHeader()
	if err != nil {
		return rpcMsg{}, err
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r.br, body); err != nil {
		return rpcMsg{}, err
	}
	var m rpcMsg
	err = json.Unmarshal(body, &m)
	return m, err
}

// TestDaemonStopReplyArrives: arbor/daemon.stop answers before the daemon closes the
// connection, and Client.Call returns that answer rather than "connection closed".
func TestDaemonStopReplyArrives(t *testing.T) {
	failures := 0
	const rounds = 20
	for i := range rounds {
		d := startTestDaemon(t, "")
		nc, err := Dial(t.Context(), DialOptions{Socket: d.sock})
		if err != nil {
			t.Fatal(err)
		}
		c := initClient(t, NewClient(t.Context(), nc, nil))
		var st DaemonStatusResult
		if err := c.Call(t.Context(), MethodDaemonStop, nil, &st); err != nil || st.PID != os.Getpid() {
			failures++
			t.Logf("round %d: daemon.stop = %+v, %v", i, st, err)
		}
		select {
		case <-d.done:
			close(d.done)
		case <-time.After(hangGuard):
			t.Fatalf("round %d: the daemon did not stop", i)
		}
		c.Close()
	}
	if failures > 0 {
		t.Errorf("%d of %d daemon.stop calls lost their reply", failures, rounds)
	}
}

// TestDaemonRefusesOtherUsers: even with the socket opened up to everyone, a client of
// another uid is disconnected without an answer (SO_PEERCRED). Needs root to act as nobody.
func TestDaemonRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	python := "/usr/bin/python3" // not one under $HOME, which the other user cannot reach
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to play the other user")
	}
	d := startTestDaemon(t, "")
	// Served means listen returned, so its own chmod 0600 of the socket is done and cannot
	// undo ours below (a dial alone can succeed in between).
	d.raw(t).expectStatus(1)
	os.Chmod(filepath.Dir(filepath.Dir(d.sock)), 0o755)
	os.Chmod(filepath.Dir(d.sock), 0o755)
	os.Chmod(d.sock, 0o777)
	body := `{"jsonrpc":"2.0","id":1,"method":"arbor/daemon.status"}`
	cmd := exec.Command(python, "-c", `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
try:
    s.sendall(sys.argv[2].encode())
    data = s.recv(65536)
except OSError as e:
    data = b""
sys.stdout.write(repr(data))
`, d.sock, frame(body))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the other user's client: %v\n%s", err, out)
	}
	if string(out) != "b''" {
		t.Errorf("a client of uid 65534 got %s, want the connection closed unanswered", out)
	}
	d.raw(t).expectStatus(1) // and we are still served
}

const burstScript = `{"rules":[
 {"when":{"last":"step 30\\n?$"},"text":"burst done"},
 {"when":{"task":"^burst"},"code":"n = globals().get('n', 0) + 1\nprint('step', n)"}
],"default":{"text":"done"}}`

// TestAttachWhileAppending attaches again and again while a session appends quickly. A
// client that drops what it has already seen by seq, as the CLI does, must end up with
// every event from 1 on, in order: replayed events must not arrive after live ones.
func TestAttachWhileAppending(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	script, err := scripted.Parse([]byte(burstScript), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	mctx, stopModel := context.WithCancel(context.Background())
	url, wait, err := scripted.Serve(mctx, "127.0.0.1:0", script, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stopModel(); wait() }()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ARBOR_MODEL_BASE_URL", url)
	t.Setenv("ARBOR_MODEL", "scripted")
	t.Setenv("ARBOR_KERNEL_PYTHON", "/usr/bin/python3")
	repo := filepath.Join(t.TempDir(), "repo")
	gitInit(t, repo, map[string]string{"a.txt": "a\n"})
	d := startTestDaemonWith(t, agents.Options{StateDir: t.TempDir(), PlainKernels: true,
		Overrides: workspace.Overrides{ModelBaseURL: url, Model: "scripted", KernelPython: "/usr/bin/python3"}})

	nc, err := Dial(t.Context(), DialOptions{Socket: d.sock})
	if err != nil {
		t.Fatal(err)
	}
	c := initClient(t, NewClient(t.Context(), nc, nil))
	defer c.Close()
	var s Session
	if err := c.Call(t.Context(), MethodSessionCreate, &SessionCreateParams{Task: "burst of cells", Dir: repo}, &s); err != nil {
		t.Fatal(err)
	}

	id := s.ID // s is decoded into below while the attachers run
	var mu sync.Mutex
	var attaches, misordered int
	var example string
	settled := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-settled:
					return
				default:
				}
				got, ok := attachOnce(t, d.sock, id)
				if !ok {
					continue
				}
				// What a seq-deduplicating client keeps.
				var kept []uint64
				for _, seq := range got {
					if len(kept) == 0 || seq > kept[len(kept)-1] {
						kept = append(kept, seq)
					}
				}
				mu.Lock()
				attaches++
				for i, seq := range kept {
					if seq != uint64(i+1) {
						misordered++
						if example == "" {
							example = fmt.Sprintf("arrival order %v", got)
						}
						break
					}
				}
				mu.Unlock()
			}
		}()
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if err := c.Call(t.Context(), MethodSessionGet, &SessionRef{ID: s.ID}, &s); err != nil {
			t.Fatal(err)
		}
		if s.State.String() == StateIdle || s.State.String() == StateFailed || time.Now().After(deadline) {
			break
		}
	}
	close(settled)
	wg.Wait()
	if s.State.String() != StateIdle {
		t.Fatalf("the burst session ended %s: %s", s.State, s.Error)
	}
	t.Logf("%d attaches during the burst", attaches)
	if misordered > 0 {
		t.Errorf("%d of %d attaches delivered a replayed event after a live one, so a client dropping seen seqs loses events; e.g. %s", misordered, attaches, example)
	}
}

// attachOnce attaches a fresh connection and returns the seqs of the arbor/event
// notifications it got, in arrival order, up to the session's last seq at attach time.
func attachOnce(t *testing.T, sock, id string) ([]uint64, bool) {
	nc, err := Dial(t.Context(), DialOptions{Socket: sock})
	if err != nil {
		return nil, false
	}
	var mu sync.Mutex
	var got []uint64
	var maxSeq uint64
	more := make(chan struct{}, 1)
	c := NewClient(t.Context(), nc, func(method string, params json.RawMessage) {
		if method != NotifyEvent {
			return
		}
		var ev Event
		json.Unmarshal(params, &ev)
		mu.Lock()
		got = append(got, ev.Seq)
		maxSeq = max(maxSeq, ev.Seq)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	})
	defer c.Close()
	initClient(t, c)
	var ar AttachResult
	if err := c.Call(t.Context(), MethodSessionAttach, &AttachParams{ID: id}, &ar); err != nil {
		return nil, false
	}
	for {
		mu.Lock()
		done := maxSeq >= ar.Session.LastSeq
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-more:
		case <-time.After(hangGuard):
			return nil, false
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]uint64(nil), got...), true
}

// startTestDaemonWith is startTestDaemon with the agents options of the caller.
func startTestDaemonWith(t *testing.T, opts agents.Options) *testDaemon {
	t.Helper()
	base, err := os.MkdirTemp("", "ab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	svc, err := agents.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &testDaemon{sock: filepath.Join(base, "arbor.sock"), stop: cancel, done: make(chan error, 1)}
	go func() { d.done <- RunDaemon(ctx, DaemonOptions{Socket: d.sock, Agents: svc, Version: "test"}) }()
	t.Cleanup(func() { d.shutdown(t) })
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(5 * time.Millisecond) {
		if nc, err := net.Dial("unix", d.sock); err == nil {
			nc.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not listen on %s", d.sock)
		}
	}
}
