package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recordingHost answers every method by echoing it with its params, fails
// "agent_message.inbox", and
// for "rlm.spawn" blocks until release is closed.
type recordingHost struct {
	mu      sync.Mutex
	calls   []string
	started chan struct{} // receives when rlm.spawn is entered
	release chan struct{}
	n       atomic.Int64
}

func (h *recordingHost) HandleHost(ctx context.Context, method string, params json.RawMessage) (any, error) {
	h.n.Add(1)
	h.mu.Lock()
	h.calls = append(h.calls, method+" "+string(params))
	h.mu.Unlock()
	switch method {
	case "agent_message.inbox":
		return nil, errors.New("inbox unreadable")
	case "rlm.spawn":
		var p struct{ Task, Name string }
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
		if h.started != nil {
			h.started <- struct{}{}
			select {
			case <-h.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return map[string]any{"id": "s-1", "name": p.Name, "branch": "arbor/x-1", "worktree": "/tmp/wt", "model": "m"}, nil
	}
	return map[string]any{"method": method, "params": params}, nil
}

func TestBridgeSurface(t *testing.T) {
	host := &recordingHost{}
	k := startKernel(t, Options{Host: host})
	tests := []struct {
		name, code, want string
		status           string
	}{
		{"ping", "await arbor_ping({'a': 1})", "{'a': 1}", "ok"},
		{"rlm handle", "h = await rlm('write tests', name='tests')\n(h.id, h.name, h.branch, h.worktree, h.model)",
			"('s-1', 'tests', 'arbor/x-1', '/tmp/wt', 'm')", "ok"},
		{"rlm repr", "h", "Handle(id='s-1', name='tests'", "ok"},
		{"rlm unknown kwarg", "await rlm('x', colour='red')", "TypeError", "error"},
		{"rlm.stop by handle", "(await rlm.stop(h))['params']", "{'id': 's-1'}", "ok"},
		{"rlm.merge by name", "(await rlm.merge('tests'))['params']", "{'id': 'tests'}", "ok"},
		{"message", "(await agent_message.send('hi', receiver_name='b'))['params']",
			"{'text': 'hi', 'receiver_role': 'parent', 'receiver_name': 'b', 'mode': 'auto'}", "ok"},
		{"list agents", "(await agent_message.list_agents())['method']", "'agent_message.list_agents'", "ok"},
		{"host error", "await agent_message.inbox()", "ArborError: inbox unreadable", "error"},
		{"bad role", "await agent_message.send('x', receiver_role='boss')", "ValueError: receiver_role='boss': expected one of 'parent', 'child', 'sibling'", "error"},
		{"bad mode", "await agent_message.send('x', mode='shout')", "ValueError: mode='shout'", "error"},
		{"empty task", "await rlm('')", "TypeError: task must be a non-empty string", "error"},
		{"goal budget checked", "await goal.set('ship it', token_budget=0)", "ValueError: token_budget=0: expected a number above zero", "error"},
		{"goal wall budget parsed", "await goal.set('ship it', wall_budget='2 hours')", "ValueError: wall_budget='2 hours'", "error"},
		{"refine scope checked", "await refine.run('x', scope='team')", "ValueError: scope='team'", "error"},
		{"harness kinds", "print(harness.notes, harness.skills)", "<harness.notes: await .create(id, title, ...)", "ok"},
		{"ArborError catchable", "try:\n    await agent_message.inbox()\nexcept ArborError as e:\n    print('caught', e)", "caught inbox unreadable", "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, k, tc.code)
			if res.Status != tc.status || !strings.Contains(res.Text, tc.want) {
				t.Errorf("%s → %s %q, want %s containing %q", tc.code, res.Status, res.Text, tc.status, tc.want)
			}
		})
	}
}

// A cell that awaits a host request gets its reply while it is still running, and the reply is
// not on the shell channel (which the running cell keeps busy).
func TestBridgeReplyWhileCellRuns(t *testing.T) {
	host := &recordingHost{started: make(chan struct{}, 1), release: make(chan struct{})}
	k := startKernel(t, Options{Host: host})
	var outputs []string
	done := make(chan *Result, 1)
	go func() {
		res, err := k.Execute(context.Background(),
			"print('before', flush=True)\nh = await rlm('task', name='kid')\nprint('got', h.id)",
			ExecOptions{OnOutput: func(o Output) { outputs = append(outputs, o.Text) }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-host.started // the cell is running and blocked on the host
	select {
	case res := <-done:
		t.Fatalf("cell finished before the host replied: %+v", res)
	default:
	}
	close(host.release)
	res := <-done
	if res.Status != StatusOK || !strings.Contains(res.Text, "got s-1") {
		t.Fatalf("result %s %q", res.Status, res.Text)
	}
}

func TestBridgeConcurrent(t *testing.T) {
	host := &recordingHost{}
	k := startKernel(t, Options{Host: host})
	res := mustOK(t, k, "import asyncio\nrs = await asyncio.gather(*[arbor_ping(i) for i in range(50)])\n"+
		"hs = await asyncio.gather(*[agent_message.send(f'm{i}') for i in range(50)])\n"+
		"print(rs == list(range(50)), [h['params']['text'] for h in hs] == [f'm{i}' for i in range(50)])")
	if !strings.Contains(res.Text, "True True") {
		t.Fatalf("text %q", res.Text)
	}
	if n := host.n.Load(); n != 50 {
		t.Errorf("host saw %d requests, want 50 (pings are answered by the bridge)", n)
	}
}

// A task started by one cell and finishing in a later one still gets its reply.
func TestBridgeTaskOutlivesCell(t *testing.T) {
	k := startKernel(t, Options{Host: &recordingHost{}})
	mustOK(t, k, "import asyncio\nasync def later():\n    await asyncio.sleep(0.2)\n    return await arbor_ping('late')\ntask = asyncio.ensure_future(later())")
	res := mustOK(t, k, "await task")
	if !strings.Contains(res.Text, "'late'") {
		t.Fatalf("text %q", res.Text)
	}
}

func TestBridgeRejects(t *testing.T) {
	k := startKernel(t, Options{Host: &recordingHost{}})
	tests := []struct{ name, code, want string }{
		{"unknown method", "import arbor_runtime\nawait arbor_runtime.call('rm.rf', {})", "unknown Arbor method"},
		{"unbuilt method", "import arbor_runtime\nawait arbor_runtime.call('eval.run', {})", "unknown Arbor method \"eval.run\""},
		{"bad token", "import os, arbor_runtime, asyncio\nos.environ['ARBOR_BRIDGE_TOKEN'] = 'nope'\n" +
			"async def fresh():\n    arbor_runtime._conns.clear()\n    return await arbor_runtime.call('ping', {})\n" +
			"await fresh()", "refused this connection: bad token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, k, tc.code)
			if res.Status != StatusError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("→ %s %q, want an error containing %q", res.Status, res.Text, tc.want)
			}
		})
	}
}

func TestNoBridgeWithoutHost(t *testing.T) {
	k := startKernel(t, Options{})
	res := run(t, k, "await arbor_ping()")
	if res.Status != StatusError || !strings.Contains(res.Text, "no Arbor host bridge") {
		t.Fatalf("→ %s %q", res.Status, res.Text)
	}
}

// FuzzBridgeRequest feeds arbitrary lines through the bridge's parser and dispatcher: nothing
// panics, unknown methods and non-object params never reach the host, and every reply encodes.
func FuzzBridgeRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"method":"ping","params":{"payload":[1,2]}}`,
		`{"id":2,"method":"rlm.spawn","params":{"task":"x"}}`,
		`{"id":3,"method":"rm.rf","params":{}}`,
		`{"id":4,"method":"agent_message.inbox","params":[1]}`,
		`{"id":null}`, `not json`, `{"id":"a","method":"ping","params":null}`,
	} {
		f.Add([]byte(s))
	}
	host := HostFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		if !bridgeMethods[method] || method == "ping" {
			panic("host got " + method)
		}
		var v map[string]any
		if err := json.Unmarshal(params, &v); err != nil {
			panic("host got non-object params: " + string(params))
		}
		return v, nil
	})
	b := &bridge{host: host, ctx: context.Background()}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := parseRequest(line)
		if err != nil {
			return
		}
		res, err := b.handle(req)
		r := bridgeReply{ID: req.ID, Result: res}
		if err != nil {
			r = bridgeReply{ID: req.ID, Error: &bridgeError{Message: err.Error()}}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("reply does not encode: %v", err)
		}
	})
}

// A fresh kernel's namespace holds the runtime's surface and nothing else public: no object for
// a feature that is not built (it would tell the model the feature exists), in a plain or a
// forked kernel. The methods the surface calls are exactly the bridge's table, so a feature
// enters both together.
func TestRuntimeSurface(t *testing.T) {
	want := []string{"ArborError", "agent_message", "arbor_ping", "goal", "harness", "heartbeat", "refine", "rlm"}
	var methods []string
	for m := range bridgeMethods {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	// Nothing here assigns a name, so the listing sees only what the kernel booted with.
	const code = `print(__import__('json').dumps({
    'names': sorted(n for n in get_ipython().user_ns
                    if not n.startswith('_') and n not in ('In', 'Out', 'get_ipython', 'exit', 'quit', 'open')),
    'hidden': sorted(n for n in get_ipython().user_ns_hidden if n in __import__('arbor_runtime').surface()),
    'methods': __import__('arbor_runtime').methods(),
}))`
	kernels := map[string]func(t *testing.T) *Kernel{
		"plain": func(t *testing.T) *Kernel { return startKernel(t, Options{Host: &recordingHost{}}) },
		"forked": func(t *testing.T) *Kernel {
			m := newTestManager(t, ManagerConfig{Fork: true})
			k := managedKernel(t, m)
			if !k.forked {
				t.Fatal("the kernel was not forked")
			}
			return k
		},
	}
	for name, start := range kernels {
		t.Run(name, func(t *testing.T) {
			res := mustOK(t, start(t), code)
			var got struct{ Names, Hidden, Methods []string }
			if err := json.Unmarshal([]byte(res.Text), &got); err != nil {
				t.Fatalf("listing %q: %v", res.Text, err)
			}
			if !slices.Equal(got.Names, want) {
				t.Errorf("public names %v, want exactly %v", got.Names, want)
			}
			if !slices.Equal(got.Hidden, want) {
				t.Errorf("hidden from %%who and snapshots: %v, want %v", got.Hidden, want)
			}
			if !slices.Equal(got.Methods, methods) {
				t.Errorf("the runtime calls %v, the bridge allows %v", got.Methods, methods)
			}
		})
	}
}

// A hostile cell flooding its bridge with requests the host is slow to answer makes the
// daemon hold at most maxBridgeInflight of them; the rest wait unread in the socket.
func TestBridgeBoundsAHostileKernel(t *testing.T) {
	var active, peak atomic.Int64
	release := make(chan struct{})
	host := HostFunc(func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "ok", nil
	})
	b, err := newBridge(t.TempDir(), host, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	c, err := net.Dial("unix", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, `{"token":%q}`+"\n", b.token)
	go func() {
		for i := range 2000 {
			if _, err := fmt.Fprintf(c, `{"id":%d,"method":"rlm.list","params":{}}`+"\n", i); err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for peak.Load() < maxBridgeInflight && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // give an unbounded bridge the chance to go past
	if p := peak.Load(); p != maxBridgeInflight {
		t.Errorf("%d requests held at once, want the cap %d", p, maxBridgeInflight)
	}
	// More connections than a runtime needs are refused.
	var open []net.Conn
	for range maxBridgeConns + 4 {
		if c2, err := net.Dial("unix", b.path); err == nil {
			open = append(open, c2)
		}
	}
	closed := 0
	for _, c2 := range open {
		c2.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c2.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
		c2.Close()
	}
	if closed < 4 {
		t.Errorf("%d of %d extra connections refused, want at least 4", closed, len(open))
	}
	close(release)
}
