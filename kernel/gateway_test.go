package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arborhq/arbor/kernel/jupytertest"
)

// gatewayKernel starts a kernel on s with the host handler h (nil: none).
func gatewayKernel(t *testing.T, s *jupytertest.Server, url string, h HostHandler, tweak func(*Options)) *Kernel {
	t.Helper()
	dir := t.TempDir()
	opts := Options{
		Dir: dir, StateDir: t.TempDir(), Host: h, Logger: testLogger(t),
		Gateway: &Gateway{URL: url, Token: s.Token, KernelName: jupytertest.KernelName, Reconnect: 2 * time.Second, Poll: time.Second},
		Env:     []string{"ARBOR_SESSION=s1"},
	}
	if tweak != nil {
		tweak(&opts)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	k, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start a gateway kernel: %v\nserver log:\n%s", err, s.Log())
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

func grun(t *testing.T, k *Kernel, code string, opts ExecOptions) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := k.Execute(ctx, code, opts)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return res
}

// kernelIDs lists the kernels the server runs.
func kernelIDs(t *testing.T, s *jupytertest.Server) []string {
	t.Helper()
	c := newGatewayClient(&Gateway{URL: s.URL, Token: s.Token})
	var ks []kernelModel
	if err := c.do(t.Context(), "GET", "/api/kernels", nil, &ks); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	return ids
}

// TestGatewayExecute: a kernel on a real Jupyter Server runs cells in the session's worktree,
// streams output, reports errors, keeps its namespace, serves the host bridge over comms (also
// to a task that outlives its cell, and while a cell awaits it), and Close deletes it there.
func TestGatewayExecute(t *testing.T) {
	s := jupytertest.Start(t)
	var mu sync.Mutex
	var calls []string
	host := HostFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		mu.Lock()
		calls = append(calls, method+" "+string(params))
		mu.Unlock()
		if method == "rlm.spawn" {
			return map[string]any{"id": "child-1", "name": "tests", "branch": "arbor/tests"}, nil
		}
		return nil, errors.New("no such thing here")
	})
	k := gatewayKernel(t, s, s.URL, host, nil)
	if k.PID() != 0 {
		t.Fatalf("PID %d for a gateway kernel", k.PID())
	}
	var streamed []Output
	res := grun(t, k, "import os\nprint(os.getcwd())\nx = 20\nx + 22", ExecOptions{OnOutput: func(o Output) { streamed = append(streamed, o) }})
	if res.Status != StatusOK || !strings.Contains(res.Text, k.opts.Dir) || !strings.Contains(res.Text, "42") {
		t.Fatalf("first cell: %+v", res)
	}
	if len(streamed) < 2 || streamed[0].Kind != KindStdout {
		t.Fatalf("streamed %+v", streamed)
	}
	if res := grun(t, k, "1/0", ExecOptions{}); res.Status != StatusError || res.Error == nil || res.Error.Name != "ZeroDivisionError" {
		t.Fatalf("error cell: %+v", res)
	}
	if res := grun(t, k, "print(os.environ.get('ARBOR_SESSION'), x)", ExecOptions{}); res.Text != "s1 20\n" {
		t.Fatalf("env and namespace: %q", res.Text)
	}
	res = grun(t, k, "h = await rlm('update the tests', name='tests')\nprint(h.id, h.branch)\nprint(await arbor_ping({'a': [1, 2]}))\n"+
		"try:\n    await agent_message.send('hi')\nexcept ArborError as e:\n    print('refused:', e)", ExecOptions{})
	if res.Status != StatusOK || !strings.Contains(res.Text, "child-1 arbor/tests") || !strings.Contains(res.Text, "{'a': [1, 2]}") ||
		!strings.Contains(res.Text, "refused: no such thing here") {
		t.Fatalf("host bridge: %+v", res)
	}
	// Model code that calls the bridge directly gets only the fixed method table.
	res = grun(t, k, "import arbor_runtime\ntry:\n    await arbor_runtime.call('kernel.exec', {'cmd': 'id'})\nexcept ArborError as e:\n    print('refused:', e)", ExecOptions{})
	if !strings.Contains(res.Text, `refused: unknown Arbor method "kernel.exec"`) {
		t.Fatalf("a method outside the table: %+v", res)
	}
	// A task that outlives its cell still gets its answer.
	grun(t, k, "import asyncio\nasync def later():\n    global got\n    await asyncio.sleep(0.3)\n    got = await arbor_ping('late')\nasyncio.ensure_future(later())", ExecOptions{})
	time.Sleep(time.Second)
	if res := grun(t, k, "got", ExecOptions{}); !strings.Contains(res.Text, "'late'") {
		t.Fatalf("a task after its cell: %+v", res)
	}
	mu.Lock()
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "rlm.spawn ") {
		t.Fatalf("host calls %q", calls)
	}
	mu.Unlock()
	if err := k.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := k.current().gw.id
	k.Close(t.Context())
	for _, got := range kernelIDs(t, s) {
		if got == id {
			t.Fatalf("kernel %s still on the server after Close", id)
		}
	}
}

// TestGatewayInterrupt: Interrupt stops a running cell (interrupt_request over the WebSocket),
// the kernel and its variables intact.
func TestGatewayInterrupt(t *testing.T) {
	s := jupytertest.Start(t)
	k := gatewayKernel(t, s, s.URL, nil, nil)
	grun(t, k, "y = 7", ExecOptions{})
	go func() {
		time.Sleep(time.Second)
		k.Interrupt(context.Background())
	}()
	res := grun(t, k, "import time\ntime.sleep(30)", ExecOptions{})
	if res.Status != StatusError || res.Error == nil || res.Error.Name != "KeyboardInterrupt" || res.Duration > 20*time.Second {
		t.Fatalf("interrupted cell: %+v", res)
	}
	if res := grun(t, k, "y", ExecOptions{}); res.Text != "7\n" {
		t.Fatalf("after the interrupt: %+v", res)
	}
}

// TestGatewayLadder: a cell that ignores every interrupt climbs the ladder to the gateway's
// restart endpoint; the same kernel id comes back with the snapshot restored.
func TestGatewayLadder(t *testing.T) {
	s := jupytertest.Start(t)
	k := gatewayKernel(t, s, s.URL, nil, func(o *Options) { o.InterruptGrace = 500 * time.Millisecond })
	id := k.current().gw.id
	grun(t, k, "kept = 41", ExecOptions{})
	if _, err := k.Snapshot(t.Context(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	res := grun(t, k, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    try:\n        time.sleep(0.1)\n    except BaseException:\n        pass",
		ExecOptions{Timeout: time.Second})
	if res.Status != StatusTimeout || !strings.Contains(res.Notice, "restarted the kernel through the gateway") || !strings.Contains(res.Notice, "Restored from the latest snapshot") {
		t.Fatalf("ladder: %+v", res)
	}
	if got := k.current().gw.id; got != id {
		t.Fatalf("the restart started kernel %s instead of restarting %s", got, id)
	}
	if res := grun(t, k, "kept + 1", ExecOptions{}); res.Text != "42\n" {
		t.Fatalf("after the restart: %+v", res)
	}
	if res := grun(t, k, "await arbor_ping(3)", ExecOptions{}); res.Status != StatusError || !strings.Contains(res.Text, "no Arbor host bridge") {
		// No Host: the surface is installed but has no bridge; the restart re-installed it.
		t.Fatalf("runtime after the restart: %+v", res)
	}
}

// TestGatewayDeath: a kernel process killed under the server (which restarts it empty) is
// noticed: Done closes, a cell in flight returns "died" with the reason, and with Revive the
// next cell runs on a new kernel with the snapshot restored; the dead one is deleted.
func TestGatewayDeath(t *testing.T) {
	s := jupytertest.Start(t)
	k := gatewayKernel(t, s, s.URL, nil, func(o *Options) { o.Revive = true; o.Snapshot = o.StateDir + "/snap" })
	res := grun(t, k, "import os\nv = 5\nos.getpid()", ExecOptions{})
	pid, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil {
		t.Fatalf("pid %q", res.Text)
	}
	if _, err := k.Snapshot(t.Context(), k.opts.Snapshot); err != nil {
		t.Fatal(err)
	}
	old := k.current().gw.id
	go func() {
		time.Sleep(500 * time.Millisecond)
		syscall.Kill(pid, syscall.SIGKILL)
	}()
	res = grun(t, k, "import time\ntime.sleep(30)", ExecOptions{})
	if res.Status != StatusDied || !strings.Contains(res.Notice, "gateway") || res.Duration > 20*time.Second {
		t.Fatalf("cell of a killed kernel: %+v", res)
	}
	select {
	case <-k.Done(): // closed by the process watcher, just after the cell saw the death
	case <-time.After(5 * time.Second):
		t.Fatal("Done is open after the death")
	}
	res = grun(t, k, "v", ExecOptions{})
	if res.Text != "5\n" || !strings.Contains(res.Notice, "died") {
		t.Fatalf("revived: %+v", res)
	}
	for _, id := range kernelIDs(t, s) {
		if id == old {
			t.Fatalf("the dead kernel %s is still on the server", old)
		}
	}
}

// TestGatewayBadInput: an address nobody answers, a wrong token and an unknown kernel name
// each fail the start with an error that says so (the server's kernel names listed).
func TestGatewayBadInput(t *testing.T) {
	s := jupytertest.Start(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name string
		g    Gateway
		is   error
		want []string
	}{
		{"no answer", Gateway{URL: dead, Token: s.Token}, ErrGatewayUnreachable, []string{dead, "does not answer", "refused"}},
		{"wrong token", Gateway{URL: s.URL, Token: "wrong"}, ErrGatewayAuth, []string{"refused the token", "403", s.URL}},
		{"no token", Gateway{URL: s.URL}, ErrGatewayAuth, []string{"no token was sent"}},
		{"unknown kernel", Gateway{URL: s.URL, Token: s.Token, KernelName: "julia-9"}, nil, []string{`no kernel named "julia-9"`, "python3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := Start(ctx, Options{Dir: t.TempDir(), StateDir: t.TempDir(), Gateway: &g})
			if err == nil {
				t.Fatal("started")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("%v is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if err := (Options{Dir: "/", StateDir: "/tmp", Gateway: &Gateway{URL: "gateway:8888"}}).Validate(); err == nil || !strings.Contains(err.Error(), "not an http") {
		t.Fatalf("URL without a scheme: %v", err)
	}
	if err := (Options{Dir: "/", StateDir: "/tmp", Sandbox: "bwrap", Gateway: &Gateway{URL: "http://g"}}).Validate(); err == nil {
		t.Fatal("a gateway with bwrap validated")
	}
}

// proxy forwards TCP to target and can cut every connection at once (a dropped WebSocket).
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	target string
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestGatewayDropAndStop: a WebSocket dropped mid-cell is reconnected and the cell finishes
// with its output (the server replays what it buffered); a server stopped mid-cell fails the
// cell within Reconnect with the reason, and once the server is back the next cell runs on a
// new kernel.
func TestGatewayDropAndStop(t *testing.T) {
	s := jupytertest.Start(t)
	px := newProxy(t, strings.TrimPrefix(s.URL, "http://"))
	k := gatewayKernel(t, s, px.url(), nil, func(o *Options) { o.Revive = true })
	go func() {
		time.Sleep(700 * time.Millisecond)
		px.cut()
	}()
	res := grun(t, k, "import time\nprint('before', flush=True)\ntime.sleep(2)\nprint('after')\n6*7", ExecOptions{})
	if res.Status != StatusOK || !strings.Contains(res.Text, "before") || !strings.Contains(res.Text, "after") || !strings.Contains(res.Text, "42") {
		t.Fatalf("cell across a dropped WebSocket: %+v", res)
	}
	go func() {
		time.Sleep(700 * time.Millisecond)
		s.Stop()
	}()
	start := time.Now()
	res = grun(t, k, "time.sleep(60)", ExecOptions{})
	if res.Status != StatusDied || !strings.Contains(res.Notice, "server is stopping") || !strings.Contains(res.Notice, px.url()) || time.Since(start) > 30*time.Second {
		t.Fatalf("cell while the server stopped: %+v after %v", res, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	_, err := k.Execute(ctx, "1+1", ExecOptions{})
	cancel()
	if err == nil || !errors.Is(err, ErrGatewayUnreachable) {
		t.Fatalf("a cell while the server is down: %v", err)
	}
	s.Restart()
	if res := grun(t, k, "1+1", ExecOptions{}); res.Text != "2\n" {
		t.Fatalf("after the server came back: %+v", res)
	}
	// A server that crashes (no shutdown, the WebSocket just goes) fails the cell once the
	// reconnect window has passed.
	go func() {
		time.Sleep(700 * time.Millisecond)
		s.Kill()
	}()
	res = grun(t, k, "import time\ntime.sleep(60)", ExecOptions{})
	if res.Status != StatusDied || !strings.Contains(res.Notice, "did not come back within 2s") || !strings.Contains(res.Notice, "does not answer") {
		t.Fatalf("cell while the server crashed: %+v", res)
	}
	s.Restart()
	if res := grun(t, k, "3+4", ExecOptions{}); res.Text != "7\n" {
		t.Fatalf("after the server came back from a crash: %+v", res)
	}
}

// TestGatewayOrphanAndPark: a kernel a crashed daemon left on the gateway is deleted when the
// session's kernel starts again from the same state dir; a Manager parks an idle gateway
// kernel (snapshot, delete there) and the next cell revives it with its variables.
func TestGatewayOrphanAndPark(t *testing.T) {
	s := jupytertest.Start(t)
	state := t.TempDir()
	first := gatewayKernel(t, s, s.URL, nil, func(o *Options) { o.StateDir = state })
	orphan := first.current().gw.id
	// The daemon "crashes": first is never closed; the next start finds its kernel recorded.
	m, err := NewManager(ManagerConfig{StateDir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	opts := first.opts
	opts.Logger = testLogger(t)
	k, err := m.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := kernelIDs(t, s)
	if len(ids) != 1 || ids[0] == orphan || ids[0] != k.current().gw.id {
		t.Fatalf("kernels on the server %v; the orphan was %s", ids, orphan)
	}
	grun(t, k, "z = 'kept'", ExecOptions{})
	if !k.Park(t.Context()) {
		t.Fatal("the gateway kernel was not parked")
	}
	if ids := kernelIDs(t, s); len(ids) != 0 {
		t.Fatalf("a parked kernel is still on the server: %v", ids)
	}
	res := grun(t, k, "z", ExecOptions{})
	if res.Text != "'kept'\n" || !strings.Contains(res.Notice, "stopped to free memory") {
		t.Fatalf("revived after parking: %+v", res)
	}
}
