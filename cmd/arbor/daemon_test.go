package main

// The daemon's lifecycle: one per socket, stop, idle exit, and what editors see when it dies.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSecondDaemonIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startDaemon()
	eventually(t, "the daemon listens", e.listening) // the socket file exists before listen()

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
	return e.startDaemonBin(arborBin, args...)
}

// startDaemonBin is startDaemon with another build of arbor.
func (e *env) startDaemonBin(bin string, args ...string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(bin, append([]string{"daemon", "--socket", e.sock}, args...)...)
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
		eventually(t, "the daemon listens", e.listening) // the socket file exists before listen()

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

// TestRunNotesStaleModelSettings: the daemon keeps the model settings it started with; `arbor
// run` from a shell with other ARBOR_MODEL_* values says so and how to apply them, and after
// `arbor daemon stop` the new daemon uses them.
func TestRunNotesStaleModelSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.mustArbor("run", "compute two")
	if strings.Contains(r.stderr, "note:") {
		t.Errorf("a note with matching settings:\n%s", r)
	}
	e.vars["ARBOR_MODEL"] = "another-model"
	r = e.arbor("run", "--detach", "compute two")
	if !strings.Contains(r.stderr, `ARBOR_MODEL="scripted"`) || !strings.Contains(r.stderr, `ARBOR_MODEL="another-model"`) ||
		!strings.Contains(r.stderr, "arbor daemon stop") || strings.Contains(r.stderr, "ARBOR_MODEL_BASE_URL") {
		t.Errorf("no note naming the daemon's and the shell's ARBOR_MODEL:\n%s", r)
	}
	e.mustArbor("daemon", "stop")
	if r := e.arbor("daemon", "status"); r.code == 0 || !strings.Contains(r.stderr, "no arbor daemon") {
		t.Errorf("daemon status with no daemon running:\n%s", r)
	}
	var st struct{ Model string }
	e.mustArbor("run", "--detach", "compute two") // starts a daemon with this shell's settings
	if err := json.Unmarshal([]byte(e.mustArbor("daemon", "status").stdout), &st); err != nil || st.Model != "another-model" {
		t.Errorf("the new daemon's model = %q (%v), want another-model", st.Model, err)
	}
}

// A daemon on its way out (killed, its listening socket not yet closed) accepts a connection
// and hangs up before it answers initialize. The CLI tries again, finds the socket dead and
// starts a daemon, rather than failing with "the arbor daemon closed the connection".
func TestConnectOutlivesADaemonThatHangsUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	hungUp := make(chan struct{})
	go func() {
		defer close(hungUp)
		c, err := l.Accept()
		l.Close() // unlinks the socket, as the dying daemon's exit does
		if err == nil {
			c.Close()
		}
	}()
	r := e.arbor("ls")
	<-hungUp
	if r.code != 0 {
		t.Fatalf("arbor ls after a daemon hung up at initialize:\n%s", r)
	}
	if e.daemonPID() == 0 {
		t.Errorf("no daemon was started after the first one hung up")
	}
}

// The binary users run carries no test hook: no ARBOR_TEST_* variable is read by it, so none can
// make a production daemon kill itself or resize a queue (the tests' binary is built with
// -tags arbortest), and the testing package is not linked into it.
func TestBinaryUsersRunHasNoTestHooks(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "arbor")
	build := exec.Command("go", "build", "-o", bin, "./cmd/arbor")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build arbor: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(data), "ARBOR_TEST_"); i >= 0 {
		end := min(i+40, len(data))
		t.Errorf("the binary users run names a test hook: %q", data[i:end])
	}
	list := exec.Command("go", "list", "-deps", "./cmd/arbor")
	list.Dir = build.Dir
	deps, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Fields(string(deps)) {
		if d == "testing" {
			t.Errorf("the testing package is linked into arbor (go list -deps ./cmd/arbor)")
		}
	}
}
