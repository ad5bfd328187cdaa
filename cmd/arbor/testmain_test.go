package main

// Helpers for the integration tests: they build the real binary once (with -race), serve the
// scripted model from testdata/script.json through `arbor fake-model`, and give every test its
// own socket, state, XDG directories and git repository, so tests run in parallel and leave
// nothing behind — no daemon, no kernel.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	arborBin string // the binary under test
	modelURL string // base URL of the shared scripted model
)

// hangGuard bounds every command; it only turns a hang into a failure, it measures nothing.
const hangGuard = 2 * time.Minute

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "arbor-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	arborBin = filepath.Join(dir, "arbor")
	// With the test hooks (testhooks_arbortest.go): crash points and a small follow queue.
	build := exec.Command("go", "build", "-race", "-tags", "arbortest", "-o", arborBin, "./cmd/arbor")
	build.Dir = filepath.Join("..", "..") // the module root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build arbor:", err)
		return 1
	}
	fm, url, err := startFakeModel(filepath.Join("testdata", "script.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	modelURL = url
	defer func() {
		fm.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { fm.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			fm.Process.Kill()
			<-done
		}
	}()
	return m.Run()
}

// startFakeModel runs `arbor fake-model` and reads the URL it prints on its first line.
func startFakeModel(script string) (*exec.Cmd, string, error) {
	cmd := exec.Command(arborBin, "fake-model", "--script", script)
	// If the test binary dies (a -timeout panic skips every cleanup), the model goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start fake-model: %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // keep draining so the model never blocks on stdout
		}
	}()
	select {
	case url, ok := <-lines:
		if !ok || !strings.HasPrefix(url, "http://") {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", fmt.Errorf("fake-model printed %q, want its URL", url)
		}
		return cmd, url, nil
	case <-time.After(hangGuard):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", errors.New("fake-model printed no URL")
	}
}

// env is one test's world: its own daemon socket, state, config and repository.
type env struct {
	t       *testing.T
	root    string // everything but the socket
	sockDir string // short, for the 108-byte socket path limit
	sock    string
	repo    string
	vars    map[string]string
	cred    *syscall.Credential // run the binary as this user; nil = as the test
}

// newEnv makes a fresh world with a committed git repository and registers a cleanup that
// stops the daemon and checks that no process of this test survives.
func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	sockDir, err := os.MkdirTemp("", "ab")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, root: root, sockDir: sockDir, sock: filepath.Join(sockDir, "arbor.sock"),
		repo: filepath.Join(root, "repo")}
	e.vars = map[string]string{
		"HOME":                 filepath.Join(root, "home"),
		"ARBOR_SOCKET":         e.sock,
		"ARBOR_STATE_DIR":      filepath.Join(root, "state"),
		"XDG_CONFIG_HOME":      filepath.Join(root, "config"),
		"XDG_STATE_HOME":       filepath.Join(root, "xstate"),
		"XDG_DATA_HOME":        filepath.Join(root, "data"),
		"XDG_RUNTIME_DIR":      filepath.Join(sockDir, "run"),
		"ARBOR_KERNEL_PYTHON":  "/usr/bin/python3",
		"ARBOR_MODEL_BASE_URL": modelURL,
		"ARBOR_MODEL":          "scripted",
		// No git config but the repository's: the identity commits are signed with is the one
		// initRepo sets in the repository, as a user's would be, for the git CLI and the daemon
		// alike. EMAIL is unset because git would take an address from it.
		"GIT_CONFIG_GLOBAL":   "/dev/null",
		"GIT_CONFIG_NOSYSTEM": "1",
		"EMAIL":               "",
		// The race runtime sleeps a second at every exit to let late reports in; a test runs
		// the binary hundreds of times, and a report still prints within 50 ms.
		"GORACE": "atexit_sleep_ms=50",
	}
	os.MkdirAll(e.vars["HOME"], 0o700)
	t.Cleanup(e.cleanup)
	e.initRepo()
	return e
}

// environ is the process environment with every ARBOR_*, XDG_* and GIT_* variable replaced by
// ours.
func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ARBOR_") || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "GIT_") {
			continue
		}
		if _, ours := e.vars[k]; ours {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range e.vars {
		if v != "" { // "" unsets
			out = append(out, k+"="+v)
		}
	}
	return out
}

// The identity initRepo gives the repository.
const (
	testUserName  = "Test User"
	testUserEmail = "test@example.com"
)

// initRepo makes e.repo a repository with one commit on main and its own user.name and
// user.email.
func (e *env) initRepo() {
	e.t.Helper()
	if err := os.MkdirAll(e.repo, 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.git(e.repo, "init", "-q", "-b", "main")
	e.git(e.repo, "config", "user.name", testUserName)
	e.git(e.repo, "config", "user.email", testUserEmail)
	writeFile(e.t, filepath.Join(e.repo, "README.md"), "# test repo\n")
	writeFile(e.t, filepath.Join(e.repo, "calc.py"), "def add(a, b):\n    return a + b\n")
	e.git(e.repo, "add", ".")
	e.git(e.repo, "commit", "-q", "-m", "initial")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// git runs the git CLI and fails the test when it fails.
func (e *env) git(dir string, args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// result is what a user sees of one command.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("arbor %s → exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// arbor runs the binary in the repository.
func (e *env) arbor(args ...string) result { e.t.Helper(); return e.arborIn(e.repo, args...) }

// arborIn runs the binary in dir and waits for it, under the hang guard.
func (e *env) arborIn(dir string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, arborBin, args...)
	cmd.Dir = dir
	cmd.Env = e.environ()
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// An autostarted daemon inherits no pipe of ours (it logs to a file), so Wait returns
	// when the command does; WaitDelay covers a daemon that would keep them anyway.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("arbor %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("arbor %s hung (killed after %v)\n%s", strings.Join(args, " "), hangGuard, r)
	}
	return r
}

// mustArbor runs the binary and fails unless it exits 0.
func (e *env) mustArbor(args ...string) result {
	e.t.Helper()
	r := e.arbor(args...)
	if r.code != 0 {
		e.t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// lsEntry is one object of `arbor ls --json`, as a user's script would read it.
type lsJSON struct {
	ID       string          `json:"id"`
	Parent   *string         `json:"parent"`
	State    string          `json:"state"`
	Error    string          `json:"error"`
	Branch   string          `json:"branch"`
	Worktree string          `json:"worktree"`
	Model    string          `json:"model"`
	Usage    json.RawMessage `json:"usage"`
}

func (e *env) ls() []lsJSON {
	e.t.Helper()
	r := e.mustArbor("ls", "--json")
	var out []lsJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("arbor ls --json is not a JSON array of sessions: %v\n%s", err, r)
	}
	return out
}

func (e *env) session(id string) lsJSON {
	e.t.Helper()
	for _, s := range e.ls() {
		if s.ID == id {
			return s
		}
	}
	e.t.Fatalf("session %s is not in arbor ls --json", id)
	return lsJSON{}
}

// sessionID finds the id `arbor run` prints on its first line: "session ID on branch B".
func sessionID(t *testing.T, r result) string {
	t.Helper()
	line, _, _ := strings.Cut(r.stdout, "\n")
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "session" {
		t.Fatalf("want a first line \"session ID on branch B\":\n%s", r)
	}
	return f[1]
}

// jsonEvent is one line of `arbor log --json`.
type jsonEvent struct {
	Seq  uint64          `json:"seq"`
	TS   *time.Time      `json:"ts"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func parseEvents(t *testing.T, r result) []jsonEvent {
	t.Helper()
	var evs []jsonEvent
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var ev jsonEvent
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("log line is not a {seq,ts,type,data} object: %v\n%s", err, line)
		}
		if ev.TS == nil || ev.Type == "" || ev.Data == nil {
			t.Fatalf("log line lacks ts, type or data: %s", line)
		}
		evs = append(evs, ev)
	}
	return evs
}

// states lists the states of a log's state_changed events, in order.
func states(evs []jsonEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == "state_changed" {
			var d struct{ State string }
			json.Unmarshal(ev.Data, &d)
			out = append(out, d.State)
		}
	}
	return out
}

// daemonPID reads the pid the daemon wrote into its lock file; 0 when there is none.
func (e *env) daemonPID() int {
	data, err := os.ReadFile(e.sock + ".lock")
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// cleanup stops the daemon and fails the test if any process that belongs to it survives.
func (e *env) cleanup() {
	t := e.t
	if _, err := os.Stat(e.sock); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, arborBin, "daemon", "stop")
		cmd.Dir, cmd.Env = e.root, e.environ()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("arbor daemon stop: %v\n%s", err, out)
		}
		cancel()
	}
	// Whatever is left (a daemon that did not stop, its kernels) is killed and reported.
	left := waitGone(e.owned, 20*time.Second)
	for _, p := range left {
		t.Errorf("process left behind: pid %d %s", p.pid, p.cmdline)
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	// The daemons are built with -race: a race they hit is a failure of the test that drove them.
	logs := []string{filepath.Join(e.vars["ARBOR_STATE_DIR"], "daemon.log"), filepath.Join(e.root, "foreground-daemon.log")}
	for _, log := range logs {
		data, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		if i := bytes.Index(data, []byte("WARNING: DATA RACE")); i >= 0 {
			t.Errorf("the daemon hit a data race (%s):\n%s", log, data[i:min(len(data), i+3000)])
		} else if t.Failed() {
			t.Logf("%s:\n%s", log, tail(string(data), 4000))
		}
	}
	os.RemoveAll(e.sockDir)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

type proc struct {
	pid     int
	cmdline string
}

// owned lists the processes whose command line or working directory lies in this test's
// directories: its daemons (--socket), kernels (their files live in the repo) and forwarders.
func (e *env) owned() []proc {
	return procsMatching(func(cmdline, cwd string) bool {
		for _, dir := range []string{e.root, e.sockDir} {
			if strings.Contains(cmdline, dir) || cwd == dir || strings.HasPrefix(cwd, dir+"/") {
				return true
			}
		}
		return false
	})
}

func procsMatching(match func(cmdline, cwd string) bool) []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a zombie
		}
		if st, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat")); err == nil && isZombie(st) {
			continue
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		cwd, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "cwd"))
		if match(cmdline, cwd) {
			out = append(out, proc{pid, cmdline})
		}
	}
	return out
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// waitGone polls until list returns nothing or the hang guard passes; it returns what is left.
func waitGone(list func() []proc, guard time.Duration) []proc {
	deadline := time.Now().Add(guard)
	for {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// daemons lists `arbor daemon` processes serving this test's socket.
func (e *env) daemons() []proc {
	return procsMatching(func(cmdline, _ string) bool {
		return strings.Contains(cmdline, " daemon") && strings.Contains(cmdline, e.sock)
	})
}

// eventually polls cond until it holds, failing after the hang guard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listening reports whether the daemon's socket accepts a connection (the file exists from
// bind(), a moment before listen()).
func (e *env) listening() bool {
	c, err := net.Dial("unix", e.sock)
	if err == nil {
		c.Close()
	}
	return err == nil
}
