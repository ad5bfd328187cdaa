// Package acpbench measures `arbor acp` as an ACP client sees it, through the real binary, its
// daemon and the SDK's client side, beside references measured in the same run:
//
//   - session/prompt → the first session/update, against the daemon's own path for the same
//     prompt (arbor/session.send → the first arbor/event of the reply, on a direct connection);
//   - the updates per second a client takes from a cell printing continuously, against the
//     tool_output events the daemon recorded for it (its bound: one per stream per 100 ms);
//   - the same cell read by a slow client (its stdout read at a fixed rate): what it takes, and
//     how much the agent's memory grows meanwhile — the outbox folds what supersedes itself,
//     so it is bounded by the cells in flight, not by what they print.
//
// Call [Run] with the path of the arbor binary.
package acpbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/arborhq/arbor/agents/model/scripted"
	"github.com/arborhq/arbor/bench"
	"github.com/arborhq/arbor/server"
)

// script's cell prints ~100-byte lines every millisecond for %g seconds.
const script = `{"rules":[
 {"when":{"last":"^stream for"},"code":"import time\nt = time.time()\ni = 0\nwhile time.time() - t < %g:\n    print('line', i, 'x' * 90, flush=True)\n    i += 1\n    time.sleep(0.001)\nprint('done', i)"},
 {"when":{"last":"^done \\d+"},"text":"streamed"},
 {"when":{"last":"^hello"},"text":"hi"}
],"default":{"text":"ok"}}`

// Options configure a run.
type Options struct {
	Exe  string // the arbor binary
	Runs int    // prompts timed for the latency figure (default 20)
	// SlowRate is the slow client's read rate in bytes per second (default 32 KiB/s).
	SlowRate int
	// Stream is how long the printing cell prints (default 5 s).
	Stream time.Duration
}

// Run measures the figures; it starts its own daemon in a private directory and stops it.
func Run(ctx context.Context, o Options) (*bench.Report, error) {
	if o.Runs <= 0 {
		o.Runs = 20
	}
	if o.SlowRate <= 0 {
		o.SlowRate = 32 << 10
	}
	if o.Stream <= 0 {
		o.Stream = 5 * time.Second
	}
	tmp, err := os.MkdirTemp("", "arbor-acpbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	sockDir, err := os.MkdirTemp("", "acpb")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sockDir)
	s, err := scripted.Parse([]byte(fmt.Sprintf(script, o.Stream.Seconds())), "acp bench")
	if err != nil {
		return nil, err
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	url, _, err := scripted.Serve(mctx, "127.0.0.1:0", s, nil)
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(tmp, "repo")
	if err := gitRepo(repo); err != nil {
		return nil, err
	}
	sock := filepath.Join(sockDir, "arbor.sock")
	env := []string{"ARBOR_SOCKET=" + sock, "ARBOR_STATE_DIR=" + filepath.Join(tmp, "state"),
		"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config"), "XDG_STATE_HOME=" + filepath.Join(tmp, "xstate"),
		"XDG_DATA_HOME=" + filepath.Join(tmp, "data"), "XDG_RUNTIME_DIR=" + filepath.Join(sockDir, "run"),
		"ARBOR_MODEL_BASE_URL=" + url, "ARBOR_MODEL=scripted", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	if py := os.Getenv("ARBOR_KERNEL_PYTHON"); py != "" {
		env = append(env, "ARBOR_KERNEL_PYTHON="+py)
	} else if _, err := os.Stat("/usr/bin/python3"); err == nil {
		env = append(env, "ARBOR_KERNEL_PYTHON=/usr/bin/python3")
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "ARBOR_") && !strings.HasPrefix(k, "XDG_") && !strings.HasPrefix(k, "GIT_CONFIG") {
			env = append(env, kv)
		}
	}
	defer func() {
		cmd := exec.Command(o.Exe, "daemon", "stop")
		cmd.Env = env
		cmd.Run()
	}()

	rep := &bench.Report{Suite: "acp"}
	fast, err := start(ctx, o.Exe, env, repo, 0)
	if err != nil {
		return nil, err
	}
	defer fast.stop()
	sess, err := fast.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: repo, McpServers: []sdk.McpServer{}})
	if err != nil {
		return nil, err
	}
	if _, err := fast.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sess.SessionId, ModeId: "branch"}); err != nil {
		return nil, err
	}
	// Warm: the session's kernel and the model connection.
	if _, err := fast.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: text("hello warm")}); err != nil {
		return nil, err
	}
	direct, events, err := dialDirect(ctx, sock, repo)
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	if _, err := server.SessionAttach.Call(ctx, direct, server.AttachParams{ID: string(sess.SessionId), SinceSeq: 1 << 62}); err != nil {
		return nil, err
	}
	var viaACP, viaDaemon []time.Duration
	for i := range o.Runs {
		mark := fast.cl.count()
		t0 := time.Now()
		first := fast.cl.next(mark)
		if _, err := fast.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: text(fmt.Sprintf("hello %d", i))}); err != nil {
			return nil, err
		}
		viaACP = append(viaACP, (<-first).Sub(t0))

		time.Sleep(50 * time.Millisecond) // the ACP turn's last events reach the direct client too
		drain(events)
		t0 = time.Now()
		if _, err := server.SessionSend.Call(ctx, direct, server.SendParams{ID: string(sess.SessionId), Text: fmt.Sprintf("hello direct %d", i)}); err != nil {
			return nil, err
		}
		if err := waitEvent(events, "assistant_message", 30*time.Second); err != nil {
			return nil, err
		}
		viaDaemon = append(viaDaemon, time.Since(t0))
		if err := waitEvent(events, "state_changed", 30*time.Second); err != nil { // settled
			return nil, err
		}
	}
	v, sp := bench.MedianMs(viaACP)
	ref, _ := bench.MedianMs(viaDaemon)
	rep.Add(bench.Figure{Name: "session/prompt → first session/update (p50)", Value: v, Spread: sp, Unit: "ms",
		Reference: "arbor/session.send → first reply event, direct", RefValue: ref})

	// A cell printing ~100-byte lines every millisecond for five seconds, to a fast client.
	rate, daemonRate, _, err := stream(ctx, fast, direct, sess.SessionId)
	if err != nil {
		return nil, err
	}
	rep.Add(bench.Figure{Name: "cell printing continuously → tool_call_updates a fast client takes", Value: rate, Unit: "updates/s",
		Reference: "tool_output events the daemon recorded", RefValue: daemonRate,
		Note: "the daemon's bound: one tool_output per stream per 100 ms, 4 KiB each"})

	// The same to a client reading its stdin at SlowRate.
	slow, err := start(ctx, o.Exe, env, repo, o.SlowRate)
	if err != nil {
		return nil, err
	}
	defer slow.stop()
	if _, err := slow.conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: sess.SessionId, Cwd: repo}); err != nil {
		return nil, err
	}
	rss0 := rssMB(slow.cmd.Process.Pid)
	slowRate, _, peak, err := stream(ctx, slow, direct, sess.SessionId)
	if err != nil {
		return nil, err
	}
	rep.Add(bench.Figure{Name: fmt.Sprintf("the same to a client reading %d KiB/s", o.SlowRate>>10), Value: slowRate, Unit: "updates/s",
		Reference: "fast client", RefValue: rate,
		Note: fmt.Sprintf("arbor acp RSS %.1f → peak %.1f MB while it waited (superseded updates folded)", rss0, peak)})
	return rep, nil
}

// stream runs the printing cell and returns the tool_call_updates per second the client took
// while it ran, the daemon's tool_output events per second, and the agent's peak RSS.
func stream(ctx context.Context, p *proc, direct *server.Client, id sdk.SessionId) (rate, daemonRate, peakMB float64, err error) {
	before, err := server.SessionGet.Call(ctx, direct, server.SessionRef{ID: string(id)})
	if err != nil {
		return 0, 0, 0, err
	}
	mark := p.cl.count()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
				if mb := rssMB(p.cmd.Process.Pid); uint64(mb*10) > peak.Load() {
					peak.Store(uint64(mb * 10))
				}
			}
		}
	}()
	t0 := time.Now()
	_, err = p.conn.Prompt(ctx, sdk.PromptRequest{SessionId: id, Prompt: text("stream for a while")})
	close(done)
	if err != nil {
		return 0, 0, 0, err
	}
	ups := p.cl.since(mark)
	var first, last time.Time
	n := 0
	for _, u := range ups {
		if u.n.Update.ToolCallUpdate != nil && u.n.Update.ToolCallUpdate.Status == nil {
			if first.IsZero() {
				first = u.at
			}
			last = u.at
			n++
		}
	}
	if n < 2 {
		return 0, 0, 0, fmt.Errorf("the client took %d output updates in %v", n, time.Since(t0))
	}
	rate = float64(n-1) / last.Sub(first).Seconds()
	log, err := server.SessionLog.Call(ctx, direct, server.LogParams{ID: string(id), SinceSeq: before.LastSeq + 1})
	if err != nil {
		return 0, 0, 0, err
	}
	var evFirst, evLast time.Time
	m := 0
	for _, e := range log.Events {
		if e.Type == "tool_output" {
			if evFirst.IsZero() {
				evFirst = e.TS
			}
			evLast = e.TS
			m++
		}
	}
	if m > 1 {
		daemonRate = float64(m-1) / evLast.Sub(evFirst).Seconds()
	}
	return rate, daemonRate, float64(peak.Load()) / 10, nil
}

type stamped struct {
	n  sdk.SessionNotification
	at time.Time
}

type client struct {
	mu   sync.Mutex
	ups  []stamped
	subs []chan time.Time
}

func (c *client) SessionUpdate(ctx context.Context, n sdk.SessionNotification) error {
	now := time.Now()
	c.mu.Lock()
	c.ups = append(c.ups, stamped{n, now})
	subs := c.subs
	c.subs = nil
	c.mu.Unlock()
	for _, s := range subs {
		s <- now
	}
	return nil
}

// next returns a channel that receives the time of the next update after mark.
func (c *client) next(mark int) chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ups) > mark {
		ch <- c.ups[mark].at
		return ch
	}
	c.subs = append(c.subs, ch)
	return ch
}

func (c *client) count() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.ups) }

func (c *client) since(i int) []stamped {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stamped(nil), c.ups[i:]...)
}

func (c *client) RequestPermission(context.Context, sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
}
func (c *client) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, errors.New("not offered")
}
func (c *client) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, errors.New("not offered")
}
func (c *client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, errors.New("not offered")
}
func (c *client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, errors.New("not offered")
}
func (c *client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, errors.New("not offered")
}
func (c *client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, errors.New("not offered")
}
func (c *client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, errors.New("not offered")
}

type proc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	conn *sdk.ClientSideConnection
	cl   *client
}

// start runs `arbor acp` and initializes it; rate > 0 reads its stdout at that many bytes a second.
func start(ctx context.Context, exe string, env []string, dir string, rate int) (*proc, error) {
	cmd := exec.Command(exe, "acp")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var r io.Reader = out
	if rate > 0 {
		r = &throttled{r: out, rate: rate}
	}
	cl := &client{}
	p := &proc{cmd: cmd, in: in, conn: sdk.NewClientSideConnection(cl, in, r), cl: cl}
	p.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := p.conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber}); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

func (p *proc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// throttled reads at most rate bytes a second.
type throttled struct {
	r    io.Reader
	rate int
}

func (t *throttled) Read(b []byte) (int, error) {
	chunk := max(t.rate/20, 1)
	if len(b) > chunk {
		b = b[:chunk]
	}
	time.Sleep(50 * time.Millisecond)
	return t.r.Read(b)
}

// dialDirect is a plain daemon client (the reference path) whose events arrive on the channel.
func dialDirect(ctx context.Context, sock, dir string) (*server.Client, chan string, error) {
	nc, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, nil, err
	}
	events := make(chan string, 4096)
	c := server.NewClient(context.Background(), nc, func(method string, params json.RawMessage) {
		if method != server.NotifyEvent {
			return
		}
		var ev server.Event
		if json.Unmarshal(params, &ev) == nil {
			typ := ev.Type
			if typ == "state_changed" && !strings.Contains(string(ev.Data), `"idle"`) {
				return
			}
			select {
			case events <- typ:
			default:
			}
		}
	})
	if err := c.Call(ctx, "initialize", map[string]any{"processId": os.Getpid(), "rootPath": dir, "capabilities": map[string]any{}}, nil); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, events, nil
}

func drain(ch chan string) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func waitEvent(ch chan string, typ string, limit time.Duration) error {
	deadline := time.After(limit)
	for {
		select {
		case t := <-ch:
			if t == typ {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no %s event within %v", typ, limit)
		}
	}
}

func text(s string) []sdk.ContentBlock { return []sdk.ContentBlock{sdk.TextBlock(s)} }

// rssMB reads a process's resident set from /proc.
func rssMB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

func gitRepo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte("print('hi')\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "bench"}, {"config", "user.email", "bench@example.com"}, {"add", "."}, {"commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v %s", args, err, out)
		}
	}
	return nil
}
