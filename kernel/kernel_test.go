package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFindPythonEnv(t *testing.T) {
	testPython(t)
	t.Setenv("ARBOR_KERNEL_PYTHON", "/nonexistent/python")
	py, err := FindPython()
	if err != nil || py == "/nonexistent/python" {
		t.Fatalf("FindPython with a bad env = %q, %v; want a fallback", py, err)
	}
}

func TestFindPythonNone(t *testing.T) {
	old := pythonCandidates
	pythonCandidates = []string{"/nonexistent/python3"}
	t.Cleanup(func() { pythonCandidates = old })
	t.Setenv("ARBOR_KERNEL_PYTHON", "")
	_, err := FindPython()
	if err == nil || !strings.Contains(err.Error(), "python3-ipykernel") {
		t.Fatalf("err = %v, want one naming python3-ipykernel", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"ok", Options{Dir: "/tmp", StateDir: "/tmp/s"}, ""},
		{"no dir", Options{StateDir: "/tmp/s"}, "Dir is empty"},
		{"no state", Options{Dir: "/tmp"}, "StateDir is empty"},
		{"relative state", Options{Dir: "/tmp", StateDir: "s"}, "not absolute"},
		{"bad env", Options{Dir: "/tmp", StateDir: "/tmp/s", Env: []string{"NOEQUALS"}}, "KEY=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// Close leaves no process of the kernel's group behind (a cell's subprocess included), no
// state files, and no goroutines.
func TestCloseNoOrphans(t *testing.T) {
	base := runtime.NumGoroutine()
	py := testPython(t)
	state := t.TempDir()
	k, err := Start(t.Context(), Options{Python: py, Dir: t.TempDir(), StateDir: state, Host: &recordingHost{}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	res := mustOK(t, k, "import subprocess\np = subprocess.Popen(['sleep', '300'])\nprint(p.pid)\nawait arbor_ping(1)")
	child, err := strconv.Atoi(strings.TrimSpace(strings.Split(res.Text, "\n")[0]))
	if err != nil {
		t.Fatalf("child pid from %q: %v", res.Text, err)
	}
	pid := k.PID()
	if err := k.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.Done():
	default:
		t.Error("Done not closed after Close")
	}
	for _, p := range []int{pid, child} {
		if processAlive(p) {
			t.Errorf("process %d still alive after Close", p)
		}
	}
	ents, _ := filepath.Glob(filepath.Join(state, "*"))
	for _, e := range ents {
		if filepath.Base(e) != "runtime" {
			t.Errorf("left behind in the state dir: %s", e)
		}
	}
	if _, err := k.Execute(t.Context(), "1", ExecOptions{}); err == nil {
		t.Error("Execute after Close succeeded")
	}
	if err := k.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	waitGoroutines(t, base)
}

func TestStartFailsClearly(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "python")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'no ipykernel here' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, Options{Python: fake, Dir: dir, StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no ipykernel here") {
		t.Fatalf("Start with a broken python: %v, want the kernel's output in the error", err)
	}
}

func TestStateDirMode(t *testing.T) {
	state := filepath.Join(t.TempDir(), "st")
	k := startKernel(t, Options{StateDir: state, Host: &recordingHost{}})
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode %v, %v", fi.Mode(), err)
	}
	fi, err = os.Stat(k.bridge.path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bridge socket mode %v, %v", fi.Mode(), err)
	}
}

// A key whose variable name looks like nothing (a model's apiKeyEnv: OPENAI_KEY) never reaches
// a kernel, even when the user declared it, in os.environ nor in the process's initial
// environment block; declared names do, and ARBOR_* settings do not. Plain, sandboxed and
// forked kernels alike.
func TestEnvAllowlist(t *testing.T) {
	t.Setenv("OPENAI_KEY", "sk-planted")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-planted")
	t.Setenv("ARBOR_API_KEY_ENV", "OPENAI_KEY")
	t.Setenv("MY_TOOL_HOME", "/opt/tool")
	t.Setenv("UNDECLARED", "x")
	o := Options{Env: []string{"MY_SETTING=1", "OPENAI_KEY=sk-explicit"},
		EnvPass: []string{"MY_TOOL_HOME", "OPENAI_KEY"}, EnvDeny: []string{"OPENAI_KEY"}}
	const code = `import os
initial = open('/proc/self/environ').read()
print([n for n in ('OPENAI_KEY', 'AWS_SECRET_ACCESS_KEY', 'ARBOR_API_KEY_ENV', 'UNDECLARED') if n in os.environ or n + '=' in initial],
      os.environ.get('MY_TOOL_HOME'), os.environ.get('MY_SETTING'), 'ARBOR_BRIDGE' in os.environ)`
	const want = "[] /opt/tool 1 True"
	kernels := map[string]func(t *testing.T) *Kernel{
		"plain": func(t *testing.T) *Kernel { o := o; o.Host = &recordingHost{}; return startKernel(t, o) },
		"sandboxed": func(t *testing.T) *Kernel {
			testBwrap(t)
			o := o
			o.Host, o.Sandbox = &recordingHost{}, "bwrap"
			return startKernel(t, o)
		},
		"forked": func(t *testing.T) *Kernel {
			m := newTestManager(t, ManagerConfig{Fork: true})
			o := o
			o.Dir, o.StateDir, o.Host, o.Logger = t.TempDir(), t.TempDir(), &recordingHost{}, testLogger(t)
			k, err := m.Start(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			if !k.forked {
				t.Fatal("kernel not forked")
			}
			return k
		},
	}
	for name, start := range kernels {
		t.Run(name, func(t *testing.T) {
			k := start(t)
			if res := mustOK(t, k, code); strings.TrimSpace(res.Text) != want {
				t.Errorf("env in the kernel: %q, want %q", res.Text, want)
			}
		})
	}
}

func TestStartMissingDir(t *testing.T) {
	_, err := Start(t.Context(), Options{Python: testPython(t), Dir: filepath.Join(t.TempDir(), "gone"), StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("err = %v", err)
	}
}

// Close does not wait for a running cell: it kills it, and the cell reports ErrDead.
func TestCloseDuringCell(t *testing.T) {
	k := startKernel(t, Options{Snapshot: filepath.Join(t.TempDir(), "snap")})
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := k.Execute(context.Background(), "print('running', flush=True)\nimport time\ntime.sleep(600)",
			ExecOptions{OnOutput: func(Output) { once.Do(func() { close(started) }) }})
		errc <- err
	}()
	<-started
	if err := k.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrDead) {
		t.Errorf("cell during Close: %v, want ErrDead", err)
	}
}

func TestPingWhileCellRuns(t *testing.T) {
	k := startKernel(t, Options{})
	started := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Execute(context.Background(), "print('x', flush=True)\nimport time\ntime.sleep(600)", ExecOptions{OnOutput: func(Output) { once.Do(func() { close(started) }) }})
	}()
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := k.Ping(ctx); err != nil {
		t.Fatalf("Ping during a cell: %v", err)
	}
	select {
	case <-done:
		t.Error("the cell finished before Ping returned: Ping did not overlap it")
	default:
	}
	for { // stop the cell; a SIGINT during the print's flush can be swallowed, so repeat
		k.Interrupt(t.Context())
		select {
		case <-done:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// fakeTB records what missing asks of the test instead of stopping it.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeTB) Skipf(format string, a ...any)  { f.skip = fmt.Sprintf(format, a...) }

// A missing kernel fails the suite under CI or ARBOR_REQUIRE_KERNEL=1 and skips it otherwise, so
// CI cannot pass with no kernel tests run.
func TestMissingKernelFailsWhenRequired(t *testing.T) {
	tests := []struct {
		ci, require string
		fail        bool
	}{
		{"", "", false},
		{"true", "", true},
		{"1", "", true},
		{"false", "", false},
		{"0", "", false},
		{"", "1", true},
		{"", "true", true},
		{"", "0", false},
		{"false", "1", true},
	}
	for _, tc := range tests {
		t.Run("CI="+tc.ci+",ARBOR_REQUIRE_KERNEL="+tc.require, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("ARBOR_REQUIRE_KERNEL", tc.require)
			f := &fakeTB{TB: t}
			missing(f, "no kernel Python: %s", "none found")
			if tc.fail {
				if f.fatal == "" || f.skip != "" || !strings.Contains(f.fatal, "none found") || !strings.Contains(f.fatal, "required") {
					t.Errorf("fatal %q skip %q, want a failure saying why", f.fatal, f.skip)
				}
			} else if f.skip == "" || f.fatal != "" || !strings.Contains(f.skip, "ARBOR_REQUIRE_KERNEL=1") {
				t.Errorf("fatal %q skip %q, want a skip naming ARBOR_REQUIRE_KERNEL", f.fatal, f.skip)
			}
		})
	}
}
