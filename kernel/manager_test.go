package kernel

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newTestManager(t *testing.T, cfg ManagerConfig) *Manager {
	t.Helper()
	cfg.Python = testPython(t)
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	cfg.Logger = testLogger(t)
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func managedKernel(t *testing.T, m *Manager) *Kernel {
	t.Helper()
	k, err := m.Start(t.Context(), Options{Dir: t.TempDir(), StateDir: t.TempDir(), Host: &recordingHost{},
		SnapshotDelay: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// waitFile waits for path to exist (the automatic snapshot is asynchronous by design).
func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

func TestManagerRevivesDeadKernel(t *testing.T) {
	for _, fork := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fork"}[fork], func(t *testing.T) {
			m := newTestManager(t, ManagerConfig{Fork: fork})
			if fork && m.fork == nil {
				t.Fatal("fork server did not start")
			}
			k := managedKernel(t, m)
			mustOK(t, k, "x = 41\nimport os\nos.getcwd()")
			waitFile(t, filepath.Join(k.opts.Snapshot, "manifest.json"))
			pid := k.PID()
			syscall.Kill(pid, syscall.SIGKILL)
			<-k.Done()
			res := mustOK(t, k, "x + 1")
			if res.Text != "42\n" || !strings.Contains(res.Notice, "died") || !strings.Contains(res.Notice, "2/2 variables") {
				t.Errorf("after death: %q notice %q", res.Text, res.Notice)
			}
			if k.PID() == pid {
				t.Error("same pid after revival")
			}
			select {
			case <-k.Done():
				t.Error("Done of the revived kernel is closed")
			default:
			}
			if r := mustOK(t, k, "await arbor_ping('bridge')"); !strings.Contains(r.Text, "bridge") {
				t.Errorf("bridge after revival: %q", r.Text)
			}
			k.Close(t.Context())
			if processAlive(k.PID()) {
				t.Error("kernel alive after Close")
			}
		})
	}
}

func TestManagerParksIdleKernels(t *testing.T) {
	m := newTestManager(t, ManagerConfig{MaxLive: 1})
	k1 := managedKernel(t, m)
	mustOK(t, k1, "x = 'kept'")
	k2 := managedKernel(t, m)
	if n := m.Live(); n != 1 {
		t.Fatalf("live kernels = %d, want 1", n)
	}
	mustOK(t, k2, "y = 2")
	res := mustOK(t, k1, "x")
	if res.Text != "'kept'\n" || !strings.Contains(res.Notice, "stopped to free memory") {
		t.Fatalf("parked kernel: %q notice %q", res.Text, res.Notice)
	}
	if n := m.Live(); n != 1 {
		t.Errorf("live kernels after revival = %d, want 1", n)
	}
	// k2 was parked to make room for k1 and comes back with its namespace.
	if res := mustOK(t, k2, "y"); res.Text != "2\n" {
		t.Errorf("k2: %q", res.Text)
	}
}

func TestReapOrphans(t *testing.T) {
	state := t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	orphan, other := start(), start()
	if err := recordProc(state, orphan.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := recordProc(state, other.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// The second record now names a different process start: a reused pid.
	path := filepath.Join(procDir(state), filepath.Base(itoa(other.Process.Pid))+".json")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), `"start":`, `"start":1`, 1)), 0o600)

	killed, err := ReapOrphans(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 1 || killed[0] != orphan.Process.Pid {
		t.Fatalf("killed %v, want [%d]", killed, orphan.Process.Pid)
	}
	orphan.Wait()
	if !processAlive(other.Process.Pid) {
		t.Error("a process with a reused pid was killed")
	}
	if ents, _ := os.ReadDir(procDir(state)); len(ents) != 0 {
		t.Errorf("registry not emptied: %v", ents)
	}
}

func TestManagerPool(t *testing.T) {
	m := newTestManager(t, ManagerConfig{Fork: true, PoolSize: 1})
	// A snapshot to restore into the pooled kernel.
	src := managedKernel(t, m)
	mustOK(t, src, "z = [1, 2, 3]")
	snap := t.TempDir()
	if _, err := src.Snapshot(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ { // wait for the pool to fill (asynchronous by design)
		m.mu.Lock()
		n := len(m.pool)
		m.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	dir := t.TempDir()
	k, err := m.Start(t.Context(), Options{Dir: dir, StateDir: t.TempDir(), Host: &recordingHost{},
		Env: []string{"SESSION_VAR=yes"}, Restore: snap, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if k.Restored() == nil || len(k.Restored().Vars) != 1 {
		t.Errorf("Restored() = %+v", k.Restored())
	}
	res := mustOK(t, k, "import os\nprint(os.getcwd(), os.environ['SESSION_VAR'], z)\nawait arbor_ping('pooled')")
	if !strings.Contains(res.Text, dir+" yes [1, 2, 3]\n'pooled'") {
		t.Errorf("pooled kernel: %q", res.Text)
	}
	if res.ExecutionCount != 1 {
		t.Errorf("execution count %d, want 1 (adoption is silent)", res.ExecutionCount)
	}
}

func TestManagerCloseGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	m, err := NewManager(ManagerConfig{Python: testPython(t), StateDir: t.TempDir(), Fork: true, PoolSize: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Start(t.Context(), Options{Dir: t.TempDir(), StateDir: t.TempDir(), Host: &recordingHost{}})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, k, "x = 1\nawait arbor_ping()")
	pid, server := k.PID(), m.fork.cmd.Process.Pid
	m.Close()
	for _, p := range []int{pid, server} {
		if processAlive(p) {
			t.Errorf("process %d alive after Manager.Close", p)
		}
	}
	if _, err := os.Stat(filepath.Join(k.opts.Snapshot, "manifest.json")); err != nil {
		t.Errorf("no final snapshot at close: %v", err)
	}
	waitGoroutines(t, base)
}

func TestManagerParksAfterIdle(t *testing.T) {
	m := newTestManager(t, ManagerConfig{IdleAfter: 200 * time.Millisecond})
	k := managedKernel(t, m)
	mustOK(t, k, "x = 7")
	for !k.Parked() { // parking is asynchronous by design
		time.Sleep(20 * time.Millisecond)
	}
	if m.Live() != 0 {
		t.Errorf("live = %d after idle parking", m.Live())
	}
	res := mustOK(t, k, "x * 6")
	if res.Text != "42\n" || !strings.Contains(res.Notice, "stopped to free memory") {
		t.Errorf("revived: %q notice %q", res.Text, res.Notice)
	}
}

func TestPark(t *testing.T) {
	k := startKernel(t, Options{Snapshot: filepath.Join(t.TempDir(), "snap")})
	mustOK(t, k, "import math\nr = math.sqrt(16)")
	pid := k.PID()
	if !k.Park(t.Context()) {
		t.Fatal("Park refused an idle kernel")
	}
	if processAlive(pid) {
		t.Error("parked kernel's process alive")
	}
	select {
	case <-k.Done():
		t.Error("Park closed Done")
	default:
	}
	res := mustOK(t, k, "r")
	if res.Text != "4.0\n" || !strings.Contains(res.Notice, "2/2 variables") {
		t.Errorf("after Park: %q notice %q", res.Text, res.Notice)
	}
	if k2 := startKernel(t, Options{}); k2.Park(t.Context()) {
		t.Error("Park without a Snapshot dir succeeded")
	}
}

// When the fork server is gone, kernels still start: plainly.
func TestManagerForkServerFallback(t *testing.T) {
	m := newTestManager(t, ManagerConfig{Fork: true})
	m.fork.close()
	k := managedKernel(t, m)
	if r := mustOK(t, k, "1+1"); r.Text != "2\n" {
		t.Fatalf("text %q", r.Text)
	}
}

// Closing a manager while its pool is booting a forked kernel leaves nothing running.
func TestManagerCloseDuringPoolBoot(t *testing.T) {
	for i := 0; i < 5; i++ {
		m, err := NewManager(ManagerConfig{Python: testPython(t), StateDir: t.TempDir(), Fork: true, PoolSize: 2, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i) * 15 * time.Millisecond)
		m.Close()
		if ents, _ := os.ReadDir(procDir(m.cfg.StateDir)); len(ents) != 0 {
			for _, e := range ents {
				b, _ := os.ReadFile(filepath.Join(procDir(m.cfg.StateDir), e.Name()))
				t.Errorf("still registered after Close: %s", b)
			}
		}
	}
}

// A kernel asked for with another interpreter (a project's venv) runs that interpreter, not
// the fork server's or the pool's.
func TestManagerHonoursAnotherPython(t *testing.T) {
	m := newTestManager(t, ManagerConfig{Fork: true, PoolSize: 1})
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(m.cfg.Python, "-m", "venv", "--without-pip", "--system-site-packages", venv).CombinedOutput(); err != nil {
		missing(t, "cannot make a venv: %v\n%s(install it: apt install python3-venv)", err, out)
	}
	k, err := m.Start(t.Context(), Options{Python: filepath.Join(venv, "bin", "python"), Dir: t.TempDir(), StateDir: t.TempDir(),
		Host: &recordingHost{}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res := mustOK(t, k, "import sys\nprint(sys.prefix)"); strings.TrimSpace(res.Text) != venv {
		t.Errorf("the kernel runs in %q, want the venv %s", strings.TrimSpace(res.Text), venv)
	}
	// The Manager's own interpreter still comes from the fork server.
	if k2 := managedKernel(t, m); !k2.forked {
		t.Error("a kernel with the Manager's interpreter was not forked")
	}
}

// A cell abandoned by its caller that ignores the interrupt does not stay running unseen: the
// ladder stops it before Execute returns, so parking that kernel (whose snapshot would queue
// behind the cell, bounded by parkSnapshotTimeout as a backstop) lets another kernel start.
func TestManagerAbandonedCellDoesNotWedgeParking(t *testing.T) {
	old := parkSnapshotTimeout
	parkSnapshotTimeout = time.Second
	t.Cleanup(func() { parkSnapshotTimeout = old })
	m := newTestManager(t, ManagerConfig{MaxLive: 1})
	a := managedKernel(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	a.Execute(ctx, "import time\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass", ExecOptions{})
	cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := m.Start(t.Context(), Options{Dir: t.TempDir(), StateDir: t.TempDir(), Host: &recordingHost{}, Logger: testLogger(t)})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("second kernel started after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("starting a kernel hung behind the park of a busy one")
	}
	a.Close(context.Background())
}
