package main

// Integration tests: the real binary (built with -race in TestMain), a real daemon on a real
// Unix socket, real ipykernel kernels, real git repositories checked with the git CLI, and the
// scripted model of testdata/script.json served by `arbor fake-model`. Every assertion is on
// what a user sees: stdout, stderr, exit status and the repository.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestRunSessionOnItsOwnBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// A turn that runs code in the kernel and then answers.
	r := e.mustArbor("run", "compute two plus two minus two")
	id := sessionID(t, r)
	if !regexp.MustCompile(`(?m)^\s*│ 2$`).MatchString(r.stdout) {
		t.Errorf("the kernel result 2 is not shown:\n%s", r)
	}
	if !strings.Contains(r.stdout, "the answer is 2") {
		t.Errorf("the model's answer is not shown:\n%s", r)
	}
	if !strings.Contains(r.stdout, "● idle") {
		t.Errorf("the run does not end idle:\n%s", r)
	}

	s := e.session(id)
	wantBranch := regexp.MustCompile(`^arbor/[a-z0-9-]+-` + regexp.QuoteMeta(id[:8]) + `$`)
	if !wantBranch.MatchString(s.Branch) {
		t.Errorf("branch = %q, want arbor/<slug>-%s", s.Branch, id[:8])
	}
	if s.State != "idle" || s.Model != "scripted" || s.Worktree == "" || s.Parent == nil || *s.Parent != "" {
		t.Errorf("arbor ls --json entry = %+v, want state idle, model scripted, a worktree, parent \"\"", s)
	}
	var usage map[string]any
	if err := json.Unmarshal(s.Usage, &usage); err != nil || usage["modelCalls"] == nil || usage["modelCalls"].(float64) < 2 {
		t.Errorf("usage = %s, want modelCalls >= 2", s.Usage)
	}

	// The git CLI sees the branch and the worktree, and the worktree is clean.
	if wl := e.git(e.repo, "worktree", "list", "--porcelain"); !strings.Contains(wl, "worktree "+s.Worktree+"\n") ||
		!strings.Contains(wl, "branch refs/heads/"+s.Branch+"\n") {
		t.Errorf("git worktree list does not show %s on %s:\n%s", s.Worktree, s.Branch, wl)
	}
	if st := e.git(s.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("git -C worktree status --porcelain = %q, want clean", st)
	}
	if br := e.git(e.repo, "branch", "--list", "arbor/*"); !strings.Contains(br, s.Branch) {
		t.Errorf("git branch --list 'arbor/*' = %q, want %s", br, s.Branch)
	}

	// A turn that writes a file: a checkpoint commit on the session branch, a diff, and the
	// user's tree untouched.
	r = e.mustArbor("run", "write a file please")
	id2 := sessionID(t, r)
	s2 := e.session(id2)
	if data, err := os.ReadFile(filepath.Join(s2.Worktree, "hello.txt")); err != nil || string(data) != "hello from arbor\n" {
		t.Errorf("hello.txt in the worktree = %q, %v", data, err)
	}
	if st := e.git(s2.Worktree, "status", "--porcelain"); st != "" {
		t.Errorf("worktree not clean after the checkpoint: %q", st)
	}
	log := e.git(e.repo, "log", "--format=%an %s", s2.Branch)
	if n := strings.Count(log, "\n"); n < 2 || strings.Contains(strings.SplitN(log, "\n", 2)[0], "initial") {
		t.Errorf("git log %s shows no checkpoint commit on top of the base:\n%s", s2.Branch, log)
	}
	if files := e.git(e.repo, "show", "--name-only", "--format=", s2.Branch); strings.TrimSpace(files) != "hello.txt" {
		t.Errorf("the checkpoint commit changes %q, want hello.txt", files)
	}
	d := e.mustArbor("diff", id2)
	for _, want := range []string{"diff --git a/hello.txt b/hello.txt", "+++ b/hello.txt", "+hello from arbor"} {
		if !strings.Contains(d.stdout, want) {
			t.Errorf("arbor diff lacks %q:\n%s", want, d)
		}
	}
	if d := e.mustArbor("diff", id); strings.TrimSpace(d.stdout) != "" {
		t.Errorf("arbor diff of a session that changed nothing = %q, want empty", d.stdout)
	}
	if st := e.git(e.repo, "status", "--porcelain"); st != "" {
		t.Errorf("the user's tree changed: git status --porcelain = %q", st)
	}
	if _, err := os.Stat(filepath.Join(e.repo, "hello.txt")); err == nil {
		t.Errorf("hello.txt appeared in the user's tree")
	}
	if head := strings.TrimSpace(e.git(e.repo, "rev-parse", "--abbrev-ref", "HEAD")); head != "main" {
		t.Errorf("the user's HEAD moved to %q", head)
	}
}

func TestDetachThenFollowFromAnotherProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "--detach", "slow count to three")
	id := sessionID(t, r)
	if !strings.Contains(r.stdout, "arbor log "+id[:8]+" --follow") {
		t.Errorf("--detach does not say how to follow:\n%s", r)
	}
	// The client that started the session is gone; a new one follows it to the end.
	f := e.mustArbor("log", id, "--follow", "--json")
	evs := parseEvents(t, f)
	if len(evs) == 0 {
		t.Fatalf("no events:\n%s", f)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d, want seqs 1, 2, 3, … :\n%s", i, ev.Seq, f.stdout)
		}
	}
	if st := states(evs); len(st) == 0 || st[len(st)-1] != "idle" {
		t.Errorf("states = %v, want the last to be idle", st)
	}
	if !strings.Contains(f.stdout, "tick 2") || !strings.Contains(f.stdout, "counted to three") {
		t.Errorf("the followed log misses the kernel output or the answer:\n%s", f.stdout)
	}
	// The plain log, after the fact, is the same sequence.
	again := parseEvents(t, e.mustArbor("log", id[:8], "--json"))
	if len(again) != len(evs) {
		t.Errorf("arbor log has %d events, arbor log --follow had %d", len(again), len(evs))
	}
}

func TestUnknownSessionID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, args := range [][]string{{"log", "nope"}, {"stop", "deadbeef"}, {"diff", "cafe0000"}, {"log", "nope", "--follow"}} {
		r := e.arbor(args...)
		if r.code == 0 || !strings.Contains(r.stderr, args[1]) || !strings.Contains(r.stderr, "unknown session") {
			t.Errorf("want a non-zero exit and a message naming %q as an unknown session:\n%s", args[1], r)
		}
	}
}

func TestRunOutsideGitRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arborIn(t.TempDir(), "run", "compute two")
	if r.code == 0 || !regexp.MustCompile(`not (inside )?a git repository`).MatchString(r.stderr) {
		t.Errorf("want a non-zero exit and \"not a git repository\":\n%s", r)
	}
}

func TestRunWithoutModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["ARBOR_MODEL_BASE_URL"], e.vars["ARBOR_MODEL"] = "", ""
	r := e.arbor("run", "compute two")
	if r.code == 0 || !strings.Contains(r.stderr, "no model configured") || !strings.Contains(r.stderr, "ARBOR_MODEL_BASE_URL") {
		t.Errorf("want a non-zero exit and a message saying how to configure a model:\n%s", r)
	}
	if out := e.git(e.repo, "branch", "--list", "arbor/*"); out != "" {
		t.Errorf("a refused run left a branch behind: %q", out)
	}
}

func TestModelUnreachableFailsTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.vars["ARBOR_MODEL_BASE_URL"] = "http://127.0.0.1:1/v1"
	r := e.arbor("run", "compute two")
	id := sessionID(t, r)
	if r.code == 0 || !strings.Contains(r.stdout, "● failed") || !strings.Contains(r.stdout, "127.0.0.1:1") {
		t.Errorf("want a non-zero exit and the session failed with the endpoint named:\n%s", r)
	}
	if s := e.session(id); s.State != "failed" || !strings.Contains(s.Error, "127.0.0.1:1") {
		t.Errorf("arbor ls --json: state %q error %q, want failed naming the endpoint", s.State, s.Error)
	}
}

func TestModelAnswersGarbage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arbor("run", "garbage in")
	id := sessionID(t, r)
	s := e.session(id)
	if r.code == 0 || s.State != "failed" || s.Error == "" {
		t.Errorf("want a non-zero exit and a failed session with a reason; state %q error %q\n%s", s.State, s.Error, r)
	}
}

func TestCellThatRaisesReachesTheModel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "divide by zero")
	id := sessionID(t, r)
	for _, want := range []string{"ZeroDivisionError", "the cell raised ZeroDivisionError; stopping here", "● idle"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, r)
		}
	}
	evs := parseEvents(t, e.mustArbor("log", id, "--json"))
	var sawError bool
	for _, ev := range evs {
		if ev.Type == "tool_finished" {
			var d struct{ Status, Output string }
			json.Unmarshal(ev.Data, &d)
			sawError = d.Status == "error" && strings.Contains(d.Output, "ZeroDivisionError")
		}
	}
	if !sawError {
		t.Errorf("no tool_finished with status error and the traceback")
	}
	if s := e.session(id); s.State != "idle" {
		t.Errorf("state = %q, want idle: a failing cell does not end the session", s.State)
	}
}

func TestNoPythonWithIPykernel(t *testing.T) {
	t.Parallel()
	pythons := map[string]string{"bin-false": "/bin/false"}
	if p := pythonWithoutIPykernel(); p != "" {
		pythons["path-python3"] = p
	}
	for name, python := range pythons {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.vars["ARBOR_KERNEL_PYTHON"] = python
			r := e.mustArbor("run", "no python here")
			if !regexp.MustCompile(`result \(unavailable\):\n\s+│ the python tool is unavailable: \S`).MatchString(r.stdout) {
				t.Errorf("the tool result does not say the python tool is unavailable, with a reason:\n%s", r)
			}
			if !strings.Contains(r.stdout, "python is unavailable, so I stop") || !strings.Contains(r.stdout, "● idle") {
				t.Errorf("the model did not see the unavailable tool, or the session did not settle:\n%s", r)
			}
		})
	}
}

// pythonWithoutIPykernel finds an interpreter on PATH that cannot import ipykernel (often a
// pyenv or virtualenv python3 first on PATH), resolved to its real executable.
func pythonWithoutIPykernel() string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if _, err := os.Stat(p); err != nil {
			continue
		}
		out, err := exec.Command(p, "-c", "import sys, importlib.util as u; print(sys.executable); sys.exit(3 if u.find_spec('ipykernel') else 0)").Output()
		if err == nil {
			if exe := strings.TrimSpace(string(out)); exe != "" {
				return exe
			}
		}
	}
	return ""
}

func TestSecondDaemonIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startDaemon()
	eventually(t, "the daemon listens", func() bool { _, err := os.Stat(e.sock); return err == nil })

	r := e.arbor("daemon", "--socket", e.sock)
	if r.code == 0 || !strings.Contains(r.stderr, "already running") ||
		!strings.Contains(r.stderr, fmt.Sprintf("pid %d", first.Process.Pid)) {
		t.Errorf("want a refusal naming the running daemon (pid %d):\n%s", first.Process.Pid, r)
	}
	// The first one still serves.
	st := e.mustArbor("daemon", "status")
	if !strings.Contains(st.stdout, fmt.Sprintf(`"pid": %d`, first.Process.Pid)) {
		t.Errorf("arbor daemon status does not name pid %d:\n%s", first.Process.Pid, st)
	}
}

// startDaemon runs `arbor daemon` in the foreground of a child process; the test's cleanup
// stops it, and waits for it so it leaves no zombie.
func (e *env) startDaemon(args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(arborBin, append([]string{"daemon", "--socket", e.sock}, args...)...)
	cmd.Dir, cmd.Env = e.root, e.environ()
	logf, err := os.Create(filepath.Join(e.root, "foreground-daemon.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	logf.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.t.Cleanup(func() { // runs before env.cleanup, which was registered first
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stop := exec.CommandContext(ctx, arborBin, "daemon", "stop")
		stop.Dir, stop.Env = e.root, e.environ()
		stop.Run()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			e.t.Errorf("arbor daemon pid %d did not exit after arbor daemon stop", cmd.Process.Pid)
			cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// TestDaemonStopReturns stops a fresh daemon several times over: `arbor daemon stop` must
// come back every time, and the daemon must be gone.
func TestDaemonStopReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		cmd := exec.Command(arborBin, "daemon", "--socket", e.sock)
		cmd.Dir, cmd.Env = e.root, e.environ()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		eventually(t, "the daemon listens", func() bool { _, err := os.Stat(e.sock); return err == nil })

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		stop := exec.CommandContext(ctx, arborBin, "daemon", "stop")
		stop.Dir, stop.Env = e.root, e.environ()
		out, err := stop.CombinedOutput()
		hung := ctx.Err() != nil
		cancel()
		if hung || err != nil || !strings.Contains(string(out), fmt.Sprintf("daemon pid %d stopped", cmd.Process.Pid)) {
			t.Errorf("round %d: arbor daemon stop: hung=%v err=%v\n%s", i, hung, err, out)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("round %d: the daemon exited with %v", i, err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("round %d: the daemon did not exit", i)
		}
	}
}

// lspClient drives `arbor lsp` over its stdio with LSP's Content-Length framing.
type lspClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan map[string]json.RawMessage
	nextID int
	exited chan struct{} // closed when the process has been waited for
	err    error         // its exit, once exited is closed
}

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

// logOf reads a session's events with `arbor log --json`.
func (e *env) logOf(id string) []jsonEvent {
	e.t.Helper()
	return parseEvents(e.t, e.mustArbor("log", id, "--json"))
}

func hasEvent(evs []jsonEvent, typ, substr string) bool {
	for _, ev := range evs {
		if ev.Type == typ && strings.Contains(string(ev.Data), substr) {
			return true
		}
	}
	return false
}

func TestStopARunningCell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "--detach", "sleep long"))
	eventually(t, "the cell starts", func() bool { return hasEvent(e.logOf(id), "tool_started", "time.sleep(600)") })

	r := e.mustArbor("stop", id[:8])
	if !strings.Contains(r.stdout, "stopped "+id) {
		t.Errorf("arbor stop does not confirm:\n%s", r)
	}
	f := e.mustArbor("log", id, "--follow", "--json")
	if st := states(parseEvents(t, f)); len(st) == 0 || st[len(st)-1] != "stopped" {
		t.Errorf("states = %v, want the last to be stopped", st)
	}
	if s := e.session(id); s.State != "stopped" {
		t.Errorf("arbor ls: state %q, want stopped", s.State)
	}
	// A stopped session is refused more work, with a reason.
	if r := e.arbor("send", id, "more"); r.code == 0 || !strings.Contains(r.stderr, "stopped") {
		t.Errorf("want arbor send to a stopped session refused, saying it is stopped:\n%s", r)
	}
}

func TestFollowUpKeepsTheKernel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "remember a secret"))
	if r := e.mustArbor("send", id, "what did I say?"); !regexp.MustCompile(`^(delivered|queued)\n$`).MatchString(r.stdout) {
		t.Errorf("arbor send says %q, want delivered or queued", r.stdout)
	}
	eventually(t, "the follow-up is answered", func() bool {
		return hasEvent(e.logOf(id), "assistant_message", "you said swordfish")
	})
	evs := e.logOf(id)
	if !hasEvent(evs, "tool_finished", `swordfish`) {
		t.Errorf("the kernel lost the variable of the first turn")
	}
	eventually(t, "the session settles", func() bool { return e.session(id).State == "idle" })
}

// TestSessionsSurviveTheDaemon: stopping the daemon, or killing it, loses nothing; the next
// command starts a new daemon that recovers every session and its log, and leaves no kernel
// of the old daemon behind.
func TestSessionsSurviveTheDaemon(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "kill"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			id := sessionID(t, e.mustArbor("run", "remember a secret"))
			before := e.logOf(id)
			old := e.daemonPID()
			if old == 0 {
				t.Fatal("no daemon pid in the lock file")
			}
			if how == "stop" {
				e.arbor("daemon", "stop") // may report a lost reply; the daemon stops all the same
			} else {
				syscall.Kill(old, syscall.SIGKILL)
			}
			eventually(t, "the old daemon is gone", func() bool { return syscall.Kill(old, 0) != nil })

			s := e.session(id) // starts a new daemon
			if e.daemonPID() == old {
				t.Fatalf("the old daemon still answers")
			}
			if s.State == "" || s.State == "failed" || s.Branch == "" {
				t.Errorf("after the restart: %+v, want the session with its branch, not failed", s)
			}
			after := e.logOf(id)
			if len(after) < len(before) {
				t.Fatalf("the log lost events: %d before, %d after", len(before), len(after))
			}
			for i := range before {
				if after[i].Seq != before[i].Seq || after[i].Type != before[i].Type || string(after[i].Data) != string(before[i].Data) {
					t.Errorf("event %d changed across the restart: %+v → %+v", i, before[i], after[i])
				}
			}
			// The old daemon's kernels do not outlive it.
			kernels := kernelPIDs(before)
			if len(kernels) == 0 {
				t.Fatalf("no kernel started event before the restart")
			}
			eventually(t, fmt.Sprintf("kernels %v of the old daemon are gone", kernels), func() bool {
				for _, pid := range kernels {
					if alive(pid) {
						return false
					}
				}
				return true
			})
			// And the session still works, with what its kernel knew.
			e.mustArbor("send", id, "what did I say?")
			evs := e.waitLog(id, "the follow-up after the restart is answered", func(evs []jsonEvent) bool {
				return hasEvent(evs, "assistant_message", "you said swordfish") || hasEvent(evs, "turn_failed", "")
			})
			if !hasEvent(evs, "assistant_message", "you said swordfish") {
				t.Errorf("after the restart the kernel lost its namespace; last events:\n%v", lastEvents(evs, 6))
			}
		})
	}
}

// waitLog polls the session's log until cond holds; on giving up it shows the last events.
func (e *env) waitLog(id, what string, cond func([]jsonEvent) bool) []jsonEvent {
	e.t.Helper()
	deadline := time.Now().Add(hangGuard / 2)
	for {
		evs := e.logOf(id)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting: %s; last events:\n%s", what, lastEvents(evs, 8))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kernelPIDs lists the pids of the log's kernel started events.
func kernelPIDs(evs []jsonEvent) []int {
	var pids []int
	for _, ev := range evs {
		var d struct {
			Event string
			PID   int
		}
		if ev.Type == "kernel" && json.Unmarshal(ev.Data, &d) == nil && d.Event == "started" && d.PID > 0 {
			pids = append(pids, d.PID)
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !isZombie(st)
}

func lastEvents(evs []jsonEvent, n int) string {
	var b strings.Builder
	for _, ev := range evs[max(0, len(evs)-n):] {
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Type, tail(string(ev.Data), 300))
	}
	return b.String()
}

func TestUnknownModelName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.arbor("run", "--model", "no-such-model", "compute two")
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-model") {
		t.Errorf("want a non-zero exit and a message naming the unknown model:\n%s", r)
	}
}

func TestFakeModelRefusesABrokenScript(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := filepath.Join(e.root, "bad.json")
	writeFile(t, bad, `{"rules":[{"when":{"task":"ok"},"text":"fine"},{"when":{"task":"(unclosed"},"text":"x"}]}`)
	r := e.arborIn(e.root, "fake-model", "--script", bad)
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Base(bad)) || !strings.Contains(r.stderr, "rule 2") {
		t.Errorf("want a refusal naming the file and rule 2:\n%s", r)
	}
}

// TestInterruptedClientLeavesTheSessionRunning: Ctrl-C on `arbor run` ends the client, not
// the session.
func TestInterruptedClientLeavesTheSessionRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command(arborBin, "run", "slow count to three")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("arbor run printed no first line: %v", err)
	}
	id := sessionID(t, result{stdout: first})
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, out); done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		t.Fatal("arbor run did not exit on SIGINT")
	}
	f := e.mustArbor("log", id, "--follow", "--json")
	if st := states(parseEvents(t, f)); len(st) == 0 || st[len(st)-1] != "idle" {
		t.Errorf("states = %v, want the session to finish idle without its client", st)
	}
}

// TestForwarderExitsWhenTheDaemonDies: an editor must notice a dead daemon, not talk to a
// forwarder that hangs on.
func TestForwarderExitsWhenTheDaemonDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.startLSP()
	c.initialize(e.repo)
	var st struct{ PID int }
	json.Unmarshal(c.call("arbor/daemon.status", nil, nil), &st)
	if st.PID == 0 {
		t.Fatal("no daemon pid")
	}
	syscall.Kill(st.PID, syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(hangGuard):
		t.Fatal("arbor lsp did not exit after its daemon died")
	}
}

// TestIdleDaemonExits: with no client and no session, the daemon goes away by itself and
// removes its socket.
func TestIdleDaemonExits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cmd := exec.Command(arborBin, "daemon", "--socket", e.sock, "--idle-timeout", "300ms")
	cmd.Dir, cmd.Env = e.root, e.environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the idle daemon exited with %v", err)
		}
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		<-done
		t.Fatal("the idle daemon did not exit")
	}
	if _, err := os.Stat(e.sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after the daemon left: %v", err)
	}
}

// TestFollowersJoiningABusySession: followers that attach while a session appends events
// quickly each see the whole log, seq 1 to the end, in order, nothing missing.
func TestFollowersJoiningABusySession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "--detach", "burst of cells"))
	var wg sync.WaitGroup
	results := make([]result, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 150 * time.Millisecond) // join at different points
			results[i] = e.arbor("log", id, "--follow", "--json")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("follower %d:\n%s", i, r)
			continue
		}
		evs := parseEvents(t, r)
		for j, ev := range evs {
			if ev.Seq != uint64(j+1) {
				t.Errorf("follower %d: event %d has seq %d, want %d (seqs %v…)", i, j, ev.Seq, j+1, seqs(evs, 12))
				break
			}
		}
		if !hasEvent(evs, "assistant_message", "burst done") {
			t.Errorf("follower %d stopped before the end: %s", i, lastEvents(evs, 3))
		}
	}
}

func seqs(evs []jsonEvent, n int) []uint64 {
	var out []uint64
	for _, ev := range evs[:min(n, len(evs))] {
		out = append(out, ev.Seq)
	}
	return out
}

// TestDaemonStopWaitsForTheDaemon: when `arbor daemon stop` says stopped, the daemon is gone
// (its kernels closed, its lock free), so the next command can start a new one at once.
func TestDaemonStopWaitsForTheDaemon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "remember a secret")) // a live kernel to close
	pid := e.daemonPID()
	r := e.mustArbor("daemon", "stop")
	if !strings.Contains(r.stdout, fmt.Sprintf("daemon pid %d stopped", pid)) {
		t.Errorf("arbor daemon stop does not name pid %d:\n%s", pid, r)
	}
	if alive(pid) {
		t.Errorf("arbor daemon stop returned while daemon pid %d still runs", pid)
	}
	// `arbor daemon stop && arbor run …` works.
	e.mustArbor("run", "compute two")
	if s := e.session(id); s.State == "" {
		t.Errorf("the first session is gone after the restart")
	}
}

// TestBadArguments: each mistake gets a non-zero exit and a message naming what was wrong.
func TestBadArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := sessionID(t, e.mustArbor("run", "hello there"))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", ""}, "task is empty"},
		{[]string{"run", "   "}, "task is empty"},
		{[]string{"run"}, "usage: arbor run"},
		{[]string{"run", "--dir", "/nonexistent", "x"}, "/nonexistent is not a directory"},
		{[]string{"log"}, "usage: arbor log ID"},
		{[]string{"send", id, "hi", "--mode", "weird"}, `"weird"`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"run", "--no-such-flag", "x"}, "no-such-flag"},
	} {
		r := e.arbor(tt.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("want a non-zero exit and %q:\n%s", tt.want, r)
		}
	}
	if out := e.git(e.repo, "branch", "--list", "arbor/*"); strings.Count(out, "\n") != 1 {
		t.Errorf("refused runs left branches behind:\n%s", out)
	}
}

// TestFollowALongSession: `arbor log --follow` of a settled session with more than a
// thousand events, after an earlier turn that also ended idle, prints them all and exits,
// even when its reader is slow (a pager, a terminal scrolled back).
func TestFollowALongSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	writeFile(t, filepath.Join(e.repo, "arbor.json"), `{"maxTurnSteps": 1000}`)
	e.git(e.repo, "add", "arbor.json")
	e.git(e.repo, "commit", "-qm", "allow long turns")
	// A long task makes the first events big enough to fill the stdout pipe of a follower
	// whose reader waits, so the follower is still at the first idle when the rest arrives.
	task := "long burst of cells " + strings.Repeat("padding ", 10000)
	id := sessionID(t, e.mustArbor("run", task))
	e.mustArbor("send", id, "go")
	evs := e.waitLog(id, "the long burst ends", func(evs []jsonEvent) bool {
		st := states(evs)
		return hasEvent(evs, "turn_failed", "") || (hasEvent(evs, "assistant_message", "long burst done") && st[len(st)-1] == "idle")
	})
	if len(evs) < 1040 { // more than the follower queue (1024) after the first idle
		t.Fatalf("only %d events; the burst did not run: %s", len(evs), lastEvents(evs, 4))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, arborBin, "log", id, "--follow", "--json")
	cmd.Dir, cmd.Env = e.repo, e.environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // a slow reader: not a timing assertion
	out, _ := io.ReadAll(stdout)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("arbor log --follow hung on a settled session of %d events (printed %d lines)", len(evs), strings.Count(string(out), "\n"))
	}
	if err != nil {
		t.Fatalf("arbor log --follow: %v", err)
	}
	got := parseEvents(t, result{stdout: string(out)})
	if len(got) != len(evs) {
		t.Errorf("arbor log --follow printed %d events, the log has %d", len(got), len(evs))
	}
}
